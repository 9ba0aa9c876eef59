"""`distillation`: on-policy distillation (OPD) from a teacher that scores the student's tokens."""

from __future__ import annotations

from rlrun.schema.base import NonNegativeFloat, PositiveFloat, PositiveInt, Section


class Distillation(Section):
    enabled: bool = False
    """Distil from a teacher that scores the student's sampled tokens."""
    teacher: str | None = "rlrun:tiny-teacher"
    """used when enabled; rlrun:<name>, a local HF dir or a hub id"""
    loss: str = "k3"
    """Per-token distillation loss: forward_kl_topk | k1 | k2 | k3 | abs | mse"""
    topk: PositiveInt = 32
    """Teacher tokens per position for forward_kl_topk."""
    use_policy_gradient: bool = True
    """Train on -loss as a PPO advantage (true) or back-propagate the loss directly."""
    loss_max_clamp: PositiveFloat = 10.0
    """Per-token losses are clamped to plus/minus this."""
    coef: NonNegativeFloat = 1.0
    """Weight of the distillation loss next to the task loss (with use_task_rewards)."""
    use_task_rewards: bool = False
    """Also train on the task rewards (PPO loss + coef times the distillation loss)."""
