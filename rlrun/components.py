"""Every registered component by kind: what a recipe can name (`rlrun components`)."""

from __future__ import annotations

from rlrun.registry import Registry


def registries() -> dict[str, Registry]:
    """The registries a recipe's names are looked up in, populated (built-ins imported)."""
    import rlrun.algorithms  # noqa: F401  (registers the built-in algorithm components)
    from rlrun.agents import TOOLS
    from rlrun.algorithms.registries import ADVANTAGES, DISTILLATION_LOSSES, KL_ESTIMATORS, POLICY_LOSSES
    from rlrun.rewards import REWARDS

    return {
        "advantage": ADVANTAGES,
        "policy_loss": POLICY_LOSSES,
        "kl_estimator": KL_ESTIMATORS,
        "distillation_loss": DISTILLATION_LOSSES,
        "reward": REWARDS,
        "tool": TOOLS,
    }


def components() -> dict[str, dict[str, str]]:
    """`{kind: {name: one-line description}}`, rollout engines included."""
    from rlrun.rollout import ROLLOUT_ENGINES  # imports transformers: only here, not in validation

    kinds = {kind: registry.describe() for kind, registry in registries().items()}
    return {**kinds, "rollout_engine": ROLLOUT_ENGINES.describe()}
