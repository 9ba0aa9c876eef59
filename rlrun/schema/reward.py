"""`reward`: the weighted reward functions and DAPO's overlong shaping."""

from __future__ import annotations

from pydantic import Field

from rlrun.schema.base import NonNegativeFloat, PositiveInt, Section


class RewardFunction(Section):
    fn: str = Field(min_length=1)
    weight: float = 1.0


class OverlongShaping(Section):
    enabled: bool = False
    buffer_tokens: PositiveInt = 4
    penalty_factor: NonNegativeFloat = 1.0


class Reward(Section):
    functions: list[RewardFunction] = Field([RewardFunction(fn="rlrun:exact_match")], min_length=1)
    overlong_shaping: OverlongShaping = OverlongShaping()
