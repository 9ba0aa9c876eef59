from rlrun import algorithms
from rlrun.algorithms import ADVANTAGES, DISTILLATION_LOSSES, KL_ESTIMATORS, POLICY_LOSSES, register_advantage

ESTIMATORS = {
    "gae",
    "grpo",
    "rloo",
    "remax",
    "reinforce_plus_plus",
    "reinforce_plus_plus_baseline",
    "opo",
    "gpg",
    "grpo_passk",
    "gdpo",
}
LOSSES = {
    "vanilla",
    "gspo",
    "gpg",
    "cispo",
    "sapo",
    "geo_mean",
    "clip_cov",
    "kl_cov",
    "dro",
    "dppo_tv",
    "dppo_kl",
    "bypass_mode",
}


def test_importing_the_package_registers_every_component():
    assert ESTIMATORS <= set(ADVANTAGES.names())
    assert LOSSES <= set(POLICY_LOSSES.names())
    assert {"k1", "k3+", "low_var_kl"} <= set(KL_ESTIMATORS.names())
    assert {"forward_kl_topk", "k3"} <= set(DISTILLATION_LOSSES.names())


def test_every_component_has_a_one_line_description():
    for registry in (ADVANTAGES, POLICY_LOSSES, KL_ESTIMATORS, DISTILLATION_LOSSES):
        for name, line in registry.describe().items():
            assert line and "\n" not in line, (registry.kind, name)


def test_user_plugins_register_the_same_way():
    @register_advantage("test_plugin_constant")
    def constant(token_level_rewards, response_mask, index=None, **_):
        """Every token gets advantage 1."""
        return response_mask.float(), response_mask.float()

    assert ADVANTAGES.get("test_plugin_constant") is constant
    assert ADVANTAGES.describe()["test_plugin_constant"] == "Every token gets advantage 1."


def test_public_api():
    for name in algorithms.__all__:
        assert hasattr(algorithms, name), name
