"""`reward`: the weighted reward functions and DAPO's overlong shaping."""

from __future__ import annotations

from pydantic import Field

from rlrun.schema.base import NonNegativeFloat, PositiveInt, Section


class RewardFunction(Section):
    fn: str = Field(min_length=1)
    """A reward: built-in name or "pkg.module:function" (an importable callable)."""
    weight: float = 1.0
    """Weight of this function in the summed reward."""


class OverlongShaping(Section):
    enabled: bool = False
    """DAPO's soft penalty on responses that run into the length limit."""
    buffer_tokens: PositiveInt = 4
    """Length of the penalty ramp before rollout.max_response_tokens."""
    penalty_factor: NonNegativeFloat = 1.0
    """Penalty at the length limit (the ramp goes from 0 to -penalty_factor)."""


class Reward(Section):
    functions: list[RewardFunction] = Field([RewardFunction(fn="rlrun:exact_match")], min_length=1)
    """The reward functions, summed with their weights."""
    overlong_shaping: OverlongShaping = OverlongShaping()
    """DAPO's overlong reward shaping."""
