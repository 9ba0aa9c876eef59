"""KL estimators, KL coefficient controllers and the in-reward KL penalty (verl semantics).

Single-sample estimators of KL(π‖π_ref) from the log-probs of the sampled tokens (Schulman,
"Approximating KL divergence"): k1 = logp - ref; abs; k2 = ½(logp - ref)²; k3 = e^x - x - 1
with x = clamp(ref - logp, ±20), clamped to ±10 (`k3_unclamped`: TRL's, neither). A `+` suffix (`k1+`, `k3+`, ...) keeps the
base estimator's value but takes k2's gradient (`k2 - sg(k2) + sg(base)`), which is the unbiased
gradient of KL; every `+` name is registered, so recipe names validate against the registry.

The adaptive controller is Ziegler et al. (2019): β ← β·(1 + clip(kl/target - 1, ±0.2)·n/horizon).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from rlrun.algorithms.masked import masked_mean, zero_outside
from rlrun.algorithms.registries import KL_ESTIMATORS, register_kl_estimator

KLEstimator = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]

EXP_CLAMP = 20.0
K3_CLAMP = 10.0


@register_kl_estimator("k1", "kl")
def k1(logprob: torch.Tensor, ref_logprob: torch.Tensor) -> torch.Tensor:
    """k1 = logp - ref: unbiased KL value, can be negative per token."""
    return logprob - ref_logprob


@register_kl_estimator("abs")
def abs_kl(logprob: torch.Tensor, ref_logprob: torch.Tensor) -> torch.Tensor:
    """|logp - ref|."""
    return (logprob - ref_logprob).abs()


@register_kl_estimator("k2", "mse")
def k2(logprob: torch.Tensor, ref_logprob: torch.Tensor) -> torch.Tensor:
    """k2 = ½(logp - ref)²: low variance; its gradient is the unbiased KL gradient."""
    return 0.5 * (logprob - ref_logprob).square()


@register_kl_estimator("k3", "low_var_kl")
def k3(logprob: torch.Tensor, ref_logprob: torch.Tensor) -> torch.Tensor:
    """k3 = e^x - x - 1, x = ref - logp (clamped ±20, result clamped ±10): unbiased, non-negative."""
    x = torch.clamp(ref_logprob - logprob, min=-EXP_CLAMP, max=EXP_CLAMP)
    return torch.clamp(torch.exp(x) - x - 1, min=-K3_CLAMP, max=K3_CLAMP)


@register_kl_estimator("k3_unclamped")
def k3_unclamped(logprob: torch.Tensor, ref_logprob: torch.Tensor) -> torch.Tensor:
    """k3 = e^x - x - 1, x = ref - logp, without rlrun's clamps: TRL's GRPO KL."""
    x = ref_logprob - logprob
    return torch.exp(x) - x - 1


def _straight_through(base: KLEstimator, name: str) -> KLEstimator:
    def estimator(logprob: torch.Tensor, ref_logprob: torch.Tensor) -> torch.Tensor:
        backward = k2(logprob, ref_logprob)
        return backward - backward.detach() + base(logprob, ref_logprob).detach()

    estimator.__doc__ = f"Value of {name}, gradient of k2 (straight-through)."
    estimator.__name__ = estimator.__qualname__ = f"{base.__name__}_straight_through"
    return estimator


def _register_straight_through_forms() -> None:
    for base, names in (
        (k1, ("k1", "kl")),
        (abs_kl, ("abs",)),
        (k2, ("k2", "mse")),
        (k3, ("k3", "low_var_kl")),
    ):
        register_kl_estimator(*(f"{name}+" for name in names))(_straight_through(base, names[0]))


_register_straight_through_forms()


def kl_penalty(logprob: torch.Tensor, ref_logprob: torch.Tensor, kl_penalty: str) -> torch.Tensor:
    """Per-token KL estimate with the named estimator (any name in `KL_ESTIMATORS`)."""
    return KL_ESTIMATORS.get(kl_penalty)(logprob, ref_logprob)


class FixedKLController:
    """A constant KL coefficient."""

    def __init__(self, kl_coef: float = 0.001):
        self.value = float(kl_coef)

    def update(self, current_kl: float, n_steps: int) -> None:
        """Nothing to adapt."""

    def state_dict(self) -> dict[str, Any]:
        return {"value": self.value}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.value = float(state["value"])


class AdaptiveKLController:
    """A KL coefficient steered towards a target KL (Ziegler et al., 2019)."""

    def __init__(self, init_kl_coef: float = 0.001, target_kl: float = 0.1, horizon: int = 10000):
        if horizon <= 0:
            raise ValueError(f"horizon must be > 0, got {horizon}")
        self.value = float(init_kl_coef)
        self.target = float(target_kl)
        self.horizon = horizon

    def update(self, current_kl: float, n_steps: int) -> None:
        """β ← β·(1 + clip(kl/target - 1, -0.2, 0.2)·n_steps/horizon)."""
        error = min(max(float(current_kl) / self.target - 1.0, -0.2), 0.2)
        self.value *= 1.0 + error * n_steps / self.horizon

    def state_dict(self) -> dict[str, Any]:
        return {"value": self.value, "target": self.target, "horizon": self.horizon}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.value = float(state["value"])
        self.target = float(state["target"])
        self.horizon = int(state["horizon"])


KLController = FixedKLController | AdaptiveKLController


def apply_kl_penalty(
    token_level_scores: torch.Tensor,
    old_log_prob: torch.Tensor,
    ref_log_prob: torch.Tensor,
    response_mask: torch.Tensor,
    kl_ctrl: KLController,
    kl_penalty_type: str = "kl",
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """In-reward KL: `rewards = scores - β·kl·m` with β before the controller's update.

    `current_kl` is the mean over rows of each row's token-mean KL; the controller then updates
    with `n_steps` = batch size. Metrics (0-d tensors): `actor/reward_kl_penalty` (current KL)
    and `actor/reward_kl_penalty_coeff` (the β used).
    """
    kld = zero_outside(kl_penalty(old_log_prob, ref_log_prob, kl_penalty_type), response_mask)
    beta = kl_ctrl.value
    token_level_rewards = token_level_scores - beta * kld
    current_kl = masked_mean(kld, response_mask, dim=-1).mean()
    kl_ctrl.update(current_kl=current_kl.item(), n_steps=token_level_scores.shape[0])
    metrics = {
        "actor/reward_kl_penalty": current_kl.detach(),
        "actor/reward_kl_penalty_coeff": torch.tensor(beta),
    }
    return token_level_rewards, metrics
