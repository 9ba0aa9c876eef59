"""Rewards: built-ins (``rlrun:exact_match``, ``rlrun:math_answer``), custom functions named
``pkg.module:function``, and their weighted combination (see ``combine`` for the signature)."""

from rlrun.rewards import scorers  # noqa: F401  (registers the built-ins)
from rlrun.rewards.combine import RewardCombiner, RewardError, RewardOutput
from rlrun.rewards.resolve import RewardSpecError, resolve_reward_fn, reward_name
from rlrun.rewards.reward_registry import REWARDS
from rlrun.rewards.styles import TrainerState, TrlContext

__all__ = [
    "REWARDS",
    "RewardCombiner",
    "RewardError",
    "RewardOutput",
    "RewardSpecError",
    "TrainerState",
    "TrlContext",
    "resolve_reward_fn",
    "reward_name",
]
