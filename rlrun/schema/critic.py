"""`critic` (value model for GAE) and `reference` (the KL anchor)."""

from __future__ import annotations

from rlrun.schema.actor import LossAggMode
from rlrun.schema.base import NonNegativeInt, Optimizer, PositiveFloat, Section


class Critic(Section):
    enabled: bool = False
    model_path: str | None = None
    optimizer: Optimizer = Optimizer()
    cliprange_value: PositiveFloat = 0.5
    loss_agg_mode: LossAggMode = "token-mean"
    grad_clip: PositiveFloat | None = 1.0
    warmup_steps: NonNegativeInt = 0


class Reference(Section):
    path: str | None = None
