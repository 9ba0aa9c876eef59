"""`distillation`: on-policy distillation (OPD) from a teacher that scores the student's tokens."""

from __future__ import annotations

from rlrun.schema.base import NonNegativeFloat, PositiveFloat, PositiveInt, Section


class Distillation(Section):
    enabled: bool = False
    teacher: str | None = "rlrun:tiny-teacher"
    loss: str = "k3"
    topk: PositiveInt = 32
    use_policy_gradient: bool = True
    loss_max_clamp: PositiveFloat = 10.0
    coef: NonNegativeFloat = 1.0
    use_task_rewards: bool = False
