"""The stages from scores to advantages: token-level rewards (less an in-reward KL), the
importance weights of a rollout/trainer mismatch, and the advantage estimator over all
processes' rows."""

from __future__ import annotations

from typing import Any

import torch

from rlrun.algorithms.importance_sampling import truncated_is_weights
from rlrun.algorithms.kl import apply_kl_penalty
from rlrun.training.context import StepContext
from rlrun.training.distributed import global_advantages
from rlrun.training.experience import Experience
from rlrun.training.stages.base import register_stage


def scores_at_last_token(scores: torch.Tensor, response_mask: torch.Tensor) -> torch.Tensor:
    """(N, T) token-level scores: each response's score on its last sampled token (an episode's
    last model turn's), 0 elsewhere."""
    width = response_mask.shape[1]
    last = width - 1 - response_mask.flip(-1).argmax(-1)  # the last 1 of each row (0 for none)
    out = torch.zeros_like(response_mask, dtype=torch.float32)
    return out.scatter_(1, last.unsqueeze(1), scores.float().unsqueeze(1)) * response_mask


def token_scores(exp: Experience) -> torch.Tensor:
    """(N, T) the step's token-level scores: each response's score on its last sampled token,
    plus a step environment's per-turn rewards on each turn's last token (GAE and REINFORCE++
    credit them where they fell; estimators that score a whole response, GRPO's kind, see
    their sum: the episode's return)."""
    mask = exp.seq.response_mask
    scores = scores_at_last_token(exp.scores, mask)
    if exp.episodes is None:
        return scores
    return scores + exp.episodes.token_rewards(mask.shape[1]).to(scores.device)


def _kl_in_reward(recipe: Any, needs: Any) -> bool:
    return recipe.algorithm.kl_in_reward.enabled


@register_stage(
    "token_rewards",
    reads=("experience",),
    writes=("token_level_scores", "token_level_rewards"),
    when=lambda r, needs: not _kl_in_reward(r, needs),
    phase="adv",
)
def token_rewards(ctx: StepContext, b: Any) -> None:
    """The token-level scores (`token_scores`) are the token-level rewards."""
    b.token_level_scores = b.token_level_rewards = token_scores(b.experience)


@register_stage(
    "kl_rewards",
    reads=("experience", "old_log_probs", "ref_log_probs"),
    writes=("token_level_scores", "token_level_rewards"),
    when=_kl_in_reward,
    phase="adv",
)
def kl_rewards(ctx: StepContext, b: Any) -> None:
    """The token-level scores (`token_scores`), less β·KL(old‖ref) at every sampled token
    (in-reward KL; β from the fixed or adaptive controller)."""
    exp, kl = b.experience, ctx.recipe.algorithm.kl_in_reward
    mask = exp.seq.response_mask
    b.token_level_scores = token_scores(exp)
    b.token_level_rewards, metrics = apply_kl_penalty(
        b.token_level_scores, b.old_log_probs, b.ref_log_probs, mask, ctx.components.kl_ctrl, kl.estimator
    )
    b.metrics |= metrics


@register_stage(
    "is_weights",
    reads=("experience", "old_log_probs"),
    writes=("is_weights",),
    when=lambda r, needs: r.rollout.importance_sampling.level != "off",
    phase="adv",
)
def is_weights(ctx: StepContext, b: Any) -> None:
    """Truncated importance weights of the trainer's old log-probs over the sampler's."""
    exp, s = b.experience, ctx.recipe.rollout.importance_sampling
    b.is_weights, metrics = truncated_is_weights(
        b.old_log_probs, exp.rollout_log_probs, exp.seq.response_mask, s.level, s.cap, s.mode
    )
    b.metrics |= metrics


@register_stage(
    "advantages",
    reads=("experience", "token_level_rewards"),
    uses=("old_log_probs", "values", "baselines", "sum_pi_squared", "is_weights"),
    writes=("advantages", "returns"),
    phase="adv",
)
def advantages(ctx: StepContext, b: Any) -> None:
    """The recipe's estimator over every process's rows (batch whitening sees the whole batch),
    given the greedy baselines, values, Σπ², old log-probs and importance weights where it runs
    with them, and `algorithm.advantage_kwargs`."""
    r, c, exp = ctx.recipe, ctx.components, b.experience
    mask = exp.seq.response_mask
    token_inputs = {}  # what the estimator declared it needs beyond the usual inputs
    if c.advantage_needs.needs_sum_pi_squared:
        token_inputs["sum_pi_squared"] = b.sum_pi_squared
    if c.advantage_needs.needs_old_log_probs:
        token_inputs["old_log_probs"] = b.old_log_probs
        if b.is_weights is not None:
            token_inputs["rollout_is_weights"] = b.is_weights
    b.advantages, b.returns = global_advantages(
        ctx.group.accelerator,
        c.advantage_fn,
        b.token_level_rewards,
        mask,
        exp.index,
        values=b.values,
        reward_baselines=b.baselines,
        gamma=r.algorithm.gamma,
        lam=r.algorithm.lam,
        norm_adv_by_std_in_grpo=r.algorithm.norm_adv_by_std_in_grpo,
        reward_components={k: v.to(mask.device) for k, v in exp.reward.components.items()},
        token_inputs=token_inputs,
        **r.algorithm.advantage_kwargs,
    )
