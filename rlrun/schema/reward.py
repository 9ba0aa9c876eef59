"""`reward`: the weighted reward functions and DAPO's overlong shaping."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from rlrun.schema.base import NonNegativeFloat, PositiveInt, Section

# How a reward function is called (rlrun.rewards.styles): rlrun's batch contract, verl's
# per-sample compute_score, TRL's keyword batch; auto reads it from the signature.
RewardStyle = Literal["auto", "rlrun", "verl", "trl"]


class RewardFunction(Section):
    fn: str = Field(min_length=1)
    weight: float = 1.0
    style: RewardStyle = "auto"
    kwargs: dict[str, Any] = Field(default_factory=dict)


class OverlongShaping(Section):
    enabled: bool = False
    buffer_tokens: PositiveInt = 4
    penalty_factor: NonNegativeFloat = 1.0


class Reward(Section):
    functions: list[RewardFunction] = Field([RewardFunction(fn="rlrun:exact_match")], min_length=1)
    overlong_shaping: OverlongShaping = OverlongShaping()
