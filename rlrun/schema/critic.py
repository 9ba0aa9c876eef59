"""`critic` (value model for GAE) and `reference` (the KL anchor)."""

from __future__ import annotations

from rlrun.schema.actor import LossAggMode
from rlrun.schema.base import Optimizer, PositiveFloat, Section


class Critic(Section):
    """The value model. It follows the actor's `ppo_epochs`, `mini_batch_samples` and
    `micro_batch_samples` (the same mini-batch plan, shuffled by its own seed) and keeps a
    constant learning rate."""

    enabled: bool = False
    """Train a value model next to the policy."""
    model_path: str | None = None
    """null = the policy's model with a fresh value head"""
    optimizer: Optimizer = Optimizer()
    """AdamW settings of the critic (constant learning rate: no schedule)."""
    cliprange_value: PositiveFloat = 0.5
    """Clip range of the value update around the rollout's values."""
    loss_agg_mode: LossAggMode = "token-mean"
    """How token value losses become one number (see actor.loss_agg_mode)."""
    grad_clip: PositiveFloat | None = 1.0
    """Max global grad norm of the critic; null = no clipping"""


class Reference(Section):
    path: str | None = None
    """The reference model; null = the initial policy"""
