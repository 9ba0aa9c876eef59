"""The RL numerics: advantage estimators, policy losses, KL, aggregation (verl 0.9.1 semantics, vectorized).

Importing this package registers every built-in component in the registries below. Estimators
and losses are reached by name (`ADVANTAGES.get("grpo")`, `POLICY_LOSSES.get("gspo")`) or through
their modules (`advantages.grpo`, `policy_losses.gpg`): the two `gpg`s share a name.
"""

from rlrun.algorithms import (
    advantages,
    aggregation,
    distillation,
    groups,
    importance_sampling,
    kl,
    masked,
    policy_losses,
    reward_shaping,
    value_loss,
)
from rlrun.algorithms.aggregation import LOSS_AGG_MODES, agg_loss
from rlrun.algorithms.distillation import distillation_loss
from rlrun.algorithms.groups import Groups, dense_group_ids
from rlrun.algorithms.importance_sampling import IS_LEVELS, truncated_is_weights
from rlrun.algorithms.kl import (
    AdaptiveKLController,
    FixedKLController,
    KLController,
    apply_kl_penalty,
    kl_penalty,
)
from rlrun.algorithms.masked import entropy_from_logits, masked_mean, masked_sum, masked_var, masked_whiten
from rlrun.algorithms.registries import (
    ADVANTAGES,
    DISTILLATION_LOSSES,
    KL_ESTIMATORS,
    POLICY_LOSSES,
    register_advantage,
    register_distillation_loss,
    register_kl_estimator,
    register_policy_loss,
)
from rlrun.algorithms.reward_shaping import group_filter, overlong_penalty
from rlrun.algorithms.value_loss import compute_value_loss

__all__ = [
    "ADVANTAGES",
    "DISTILLATION_LOSSES",
    "IS_LEVELS",
    "KL_ESTIMATORS",
    "LOSS_AGG_MODES",
    "POLICY_LOSSES",
    "AdaptiveKLController",
    "FixedKLController",
    "Groups",
    "KLController",
    "advantages",
    "agg_loss",
    "aggregation",
    "apply_kl_penalty",
    "compute_value_loss",
    "dense_group_ids",
    "distillation",
    "distillation_loss",
    "entropy_from_logits",
    "group_filter",
    "groups",
    "importance_sampling",
    "kl",
    "kl_penalty",
    "masked",
    "masked_mean",
    "masked_sum",
    "masked_var",
    "masked_whiten",
    "overlong_penalty",
    "policy_losses",
    "register_advantage",
    "register_distillation_loss",
    "register_kl_estimator",
    "register_policy_loss",
    "reward_shaping",
    "truncated_is_weights",
    "value_loss",
]
