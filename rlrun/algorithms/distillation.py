"""On-policy distillation (OPD): per-token losses of the student against a teacher, and their use.

Follows verl's `trainer/distillation`: the student samples, the teacher scores its tokens.
Per-token losses (registered in `DISTILLATION_LOSSES`):
- `forward_kl_topk`: `Σ_{k ∈ teacher top-k} p_t·(log p_t - log q_s)` with the student's
  log-softmax gathered at the teacher's top-k ids, not renormalised, clamped at 0 (the top-k
  masses do not sum to 1, so the sum can go negative);
- single-sample estimators of the reverse KL on the sampled token, `kl_penalty(student, teacher)`:
  k1/kl, abs, k2/mse, k3/low_var_kl.
`distillation_loss` clamps the per-token loss to ±loss_max_clamp, then either uses it as a reward
(policy-gradient form, Thinking Machines' OPD: vanilla PPO with advantages = -sg(loss)) or
back-propagates `agg_loss(loss)` directly (GKD); k1 in the direct form is an error, its gradient
does not depend on the teacher. Combining with a task loss (`+ coef·distillation`) is the
training loop's job.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from rlrun.algorithms.aggregation import agg_loss
from rlrun.algorithms.kl import kl_penalty
from rlrun.algorithms.masked import as_bool
from rlrun.algorithms.policy_losses import vanilla
from rlrun.algorithms.registries import DISTILLATION_LOSSES, register_distillation_loss

PerTokenLoss = Callable[..., torch.Tensor]


def _floor(log_probs: torch.Tensor, log_prob_min_clamp: float | None) -> torch.Tensor:
    return log_probs if log_prob_min_clamp is None else log_probs.clamp_min(log_prob_min_clamp)


@register_distillation_loss("forward_kl_topk", needs_teacher_topk=True)
def forward_kl_topk(
    *,
    student_logits: torch.Tensor,
    teacher_topk_log_probs: torch.Tensor,
    teacher_topk_ids: torch.Tensor,
    log_prob_min_clamp: float | None = None,
    **_: Any,
) -> torch.Tensor:
    """Forward KL(teacher‖student) over the teacher's top-k tokens, (B, T), clamped at 0."""
    logits = student_logits.float()  # log-softmax in float32 whatever the model dtype
    student = logits.gather(-1, teacher_topk_ids) - torch.logsumexp(logits, dim=-1, keepdim=True)
    teacher = teacher_topk_log_probs.float()
    student, teacher = _floor(student, log_prob_min_clamp), _floor(teacher, log_prob_min_clamp)
    return (teacher.exp() * (teacher - student)).sum(dim=-1).clamp_min(0.0)


def _sampled_token_estimator(estimator: str) -> PerTokenLoss:
    def per_token(
        *,
        student_log_probs: torch.Tensor,
        teacher_log_probs: torch.Tensor,
        log_prob_min_clamp: float | None = None,
        **_: Any,
    ) -> torch.Tensor:
        student = _floor(student_log_probs, log_prob_min_clamp)
        return kl_penalty(student, _floor(teacher_log_probs, log_prob_min_clamp), estimator)

    per_token.__doc__ = (
        f"Reverse KL on the sampled token, {estimator} estimator of kl_penalty(student, teacher)."
    )
    per_token.__name__ = per_token.__qualname__ = f"{estimator}_distillation"
    return per_token


def _register_estimators() -> None:
    for names in (("k1", "kl"), ("abs",), ("k2", "mse"), ("k3", "low_var_kl")):
        teacher_free_gradient = names[0] == "k1"  # d/dθ (log p_θ - log p_teacher) = d/dθ log p_θ
        register_distillation_loss(*names, needs_policy_gradient=teacher_free_gradient)(
            _sampled_token_estimator(names[0])
        )


_register_estimators()


def distillation_loss(
    loss_mode: str,
    log_prob: torch.Tensor,
    response_mask: torch.Tensor,
    *,
    teacher_log_probs: torch.Tensor | None = None,
    student_logits: torch.Tensor | None = None,
    teacher_topk_log_probs: torch.Tensor | None = None,
    teacher_topk_ids: torch.Tensor | None = None,
    old_log_prob: torch.Tensor | None = None,
    use_policy_gradient: bool = True,
    loss_agg_mode: str = "token-mean",
    loss_max_clamp: float | None = None,
    log_prob_min_clamp: float | None = None,
    agg_kwargs: dict[str, Any] | None = None,
    **ppo_kwargs: Any,
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """The OPD loss: per-token `loss_mode`, clamped, in policy-gradient or direct form.

    `log_prob` is the student's current log-prob of each sampled token (with grad). The PG form
    needs `old_log_prob` and takes PPO keywords (clip ratios, rollout_is_weights) in
    `ppo_kwargs`; its metrics are renamed `distillation/*`. Metrics are detached 0-d tensors.
    """
    if loss_mode in ("k1", "kl") and not use_policy_gradient:
        raise ValueError(
            "distillation loss k1 needs use_policy_gradient: back-propagated directly its gradient ignores the teacher"
        )
    per_token = DISTILLATION_LOSSES.get(loss_mode)(
        student_log_probs=log_prob,
        teacher_log_probs=teacher_log_probs,
        student_logits=student_logits,
        teacher_topk_log_probs=teacher_topk_log_probs,
        teacher_topk_ids=teacher_topk_ids,
        log_prob_min_clamp=log_prob_min_clamp,
    )
    valid = as_bool(response_mask)
    metrics = {
        "distillation/loss_min": torch.where(valid, per_token, torch.inf).amin().detach(),
        "distillation/loss_max": torch.where(valid, per_token, -torch.inf).amax().detach(),
    }
    if loss_max_clamp is not None:  # both sides: k1 can be very negative
        per_token = per_token.clamp(min=-loss_max_clamp, max=loss_max_clamp)
    if not use_policy_gradient:
        return agg_loss(per_token, response_mask, loss_agg_mode, **(agg_kwargs or {})), metrics
    if old_log_prob is None:
        raise ValueError("the policy-gradient form of the distillation loss needs old_log_prob")
    loss, pg_metrics = vanilla(
        old_log_prob,
        log_prob,
        -per_token.detach(),
        response_mask,
        loss_agg_mode,
        agg_kwargs=agg_kwargs,
        **ppo_kwargs,
    )
    metrics.update({name.replace("actor/", "distillation/", 1): value for name, value in pg_metrics.items()})
    return loss, metrics
