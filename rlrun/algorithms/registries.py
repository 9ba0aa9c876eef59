"""The registries of the algorithm components a recipe can name."""

from rlrun.registry import Registry

ADVANTAGES = Registry("advantage estimator")
POLICY_LOSSES = Registry("policy loss")
KL_ESTIMATORS = Registry("KL estimator")
DISTILLATION_LOSSES = Registry("distillation loss")

register_advantage = ADVANTAGES.register
register_policy_loss = POLICY_LOSSES.register
register_kl_estimator = KL_ESTIMATORS.register
register_distillation_loss = DISTILLATION_LOSSES.register
