import pytest

from rlrun import algorithms
from rlrun.algorithms import ADVANTAGES, DISTILLATION_LOSSES, KL_ESTIMATORS, POLICY_LOSSES, register_advantage
from rlrun.registry import ComponentNeeds

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
    "grpo_vectorized",
    "rloo_vectorized",
    "optimal_token_baseline",
    "tir_optimal_token_baseline",
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
    "reinforce",
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


def test_components_declare_their_needs_where_they_register():
    assert ADVANTAGES.needs("grpo").needs_groups and not ADVANTAGES.needs("grpo").needs_critic
    assert ADVANTAGES.needs("gae").needs_critic and not ADVANTAGES.needs("gae").needs_groups
    assert ADVANTAGES.needs("remax").needs_greedy_baseline
    otb = ADVANTAGES.needs("optimal_token_baseline")
    assert otb.needs_groups and otb.needs_old_log_probs and otb.needs_sum_pi_squared
    assert POLICY_LOSSES.needs("clip_cov").draws_random
    assert not POLICY_LOSSES.needs("kl_cov").draws_random  # top-k: deterministic
    assert ADVANTAGES.needs("no_such_estimator") == ComponentNeeds()
    groupless = ADVANTAGES.names_where(lambda needs: not needs.needs_groups)
    assert {"gae", "reinforce_plus_plus", "remax"} <= set(groupless) and "grpo" not in groupless


def test_an_unknown_need_fails_at_registration():
    with pytest.raises(TypeError, match="needs_telepathy"):
        register_advantage("test_plugin_bad_need", needs_telepathy=True)


def test_keywords_are_the_parameters_a_component_takes_by_name():
    assert ADVANTAGES.keywords("gpg") == ["token_level_rewards", "response_mask", "index", "f_norm"]
    assert "dro_beta" in POLICY_LOSSES.keywords("dro")
