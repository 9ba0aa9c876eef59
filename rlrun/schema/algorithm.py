"""`algorithm`: advantage estimation, in-reward KL, group filtering, plugins."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from rlrun.schema.base import Fraction, NonNegativeFloat, NonNegativeInt, PositiveFloat, PositiveInt, Section


class KlInReward(Section):
    enabled: bool = False
    """Subtract a KL penalty to the reference from the token rewards."""
    estimator: str = "kl"
    """KL estimator name (`rlrun components` lists them)."""
    controller: Literal["fixed", "adaptive"] = "fixed"
    """How the KL coefficient moves: fixed | adaptive"""
    coef: NonNegativeFloat = 0.001
    """KL coefficient (the adaptive controller's start value)."""
    target_kl: PositiveFloat = 0.1
    """The adaptive controller's KL target."""
    horizon: PositiveInt = 10000
    """The adaptive controller's horizon in samples."""


class GroupFilter(Section):
    """DAPO dynamic sampling: drop groups whose responses all score the same."""

    enabled: bool = False
    """DAPO dynamic sampling: drop groups whose responses all score the same."""
    metric: Literal["acc", "score"] = "acc"
    """What must vary within a group to keep it: acc | score"""
    max_num_gen_batches: NonNegativeInt = 10
    """Generation batches tried per step before giving up; 0 = unlimited"""
    gen_prompts_per_batch: PositiveInt | None = None
    """Prompts drawn per generation batch (DAPO's gen_batch_size); the kept groups fill the step's
    trainer.prompts_per_step in order, the rest are dropped; null = trainer.prompts_per_step"""


class Algorithm(Section):
    advantage: str = "grpo"
    """Advantage estimator name (`rlrun components` lists them)."""
    advantage_kwargs: dict[str, Any] = Field(default_factory=dict)
    """extra keywords of the chosen estimator (gpg's f_norm, gdpo's reward_weights)"""
    norm_adv_by_std_in_grpo: bool = True
    """GRPO-family estimators divide by the group std (false = Dr.GRPO)."""
    gamma: Fraction = 1.0
    """Discount factor (gae, reinforce_plus_plus)."""
    lam: Fraction = 1.0
    """GAE's lambda."""
    kl_in_reward: KlInReward = KlInReward()
    """KL penalty in the reward."""
    group_filter: GroupFilter = GroupFilter()
    """DAPO dynamic sampling"""
    plugins: list[str] = Field(default_factory=list)
    """modules imported first so their components register"""
