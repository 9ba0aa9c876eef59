"""`algorithm`: advantage estimation, in-reward KL, group filtering, plugins."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from rlrun.schema.base import Fraction, NonNegativeFloat, NonNegativeInt, PositiveFloat, PositiveInt, Section


class KlInReward(Section):
    enabled: bool = False
    estimator: str = "kl"
    controller: Literal["fixed", "adaptive"] = "fixed"
    coef: NonNegativeFloat = 0.001
    target_kl: PositiveFloat = 0.1
    horizon: PositiveInt = 10000


class GroupFilter(Section):
    """DAPO dynamic sampling: drop groups whose responses all score the same."""

    enabled: bool = False
    metric: Literal["acc", "score"] = "acc"
    max_num_gen_batches: NonNegativeInt = 10


class Algorithm(Section):
    advantage: str = "grpo"
    advantage_kwargs: dict[str, Any] = Field(default_factory=dict)
    norm_adv_by_std_in_grpo: bool = True
    gamma: Fraction = 1.0
    lam: Fraction = 1.0
    kl_in_reward: KlInReward = KlInReward()
    group_filter: GroupFilter = GroupFilter()
    plugins: list[str] = Field(default_factory=list)
