"""Turning a recipe's reward name into a callable: ``rlrun:<builtin>`` or ``pkg.module:function``."""

from __future__ import annotations

from collections.abc import Callable

from rlrun.registry import UnknownComponentError
from rlrun.rewards.reward_registry import REWARDS
from rlrun.user_code import ImportPathError, resolve_named


class RewardSpecError(ValueError):
    """A recipe named a reward function that cannot be found."""


def resolve_reward_fn(spec: str) -> Callable[..., object]:
    """The reward function a recipe's ``fn`` names, or a ``RewardSpecError`` saying why not."""
    if spec.startswith("rlrun:"):
        try:
            return REWARDS.get(spec)
        except UnknownComponentError as err:
            raise RewardSpecError(str(err)) from None
    try:
        fn = resolve_named(spec, what="reward", builtins=REWARDS.names())
    except ImportPathError as err:
        raise RewardSpecError(str(err)) from None
    if not callable(fn):
        raise RewardSpecError(
            f"reward {spec!r}: {spec.partition(':')[2]!r} is a {type(fn).__name__}, not a function"
        )
    return fn


def reward_name(spec: str) -> str:
    """The name a reward is logged under: ``rlrun:exact_match`` -> ``exact_match``, ``a.b:f`` -> ``f``."""
    return spec.rpartition(":")[2].rpartition(".")[2]
