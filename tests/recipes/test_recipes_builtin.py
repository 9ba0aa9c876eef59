"""The built-in recipes: each valid with no notices, short, commented, and as the spec's table says."""

import re

import pytest
import yaml

from rlrun.recipes import (
    algorithm_summary,
    batch_plan,
    builtin_descriptions,
    builtin_names,
    copy_builtin,
    load_recipe,
)
from rlrun.recipes.builtin import BUILTIN_DIR, builtin_path
from rlrun.recipes.yaml_dump import to_yaml
from rlrun.recipes.yaml_io import RecipeLoader

ALGORITHMS = ["ppo", "grpo", "dapo", "gspo", "opd", "dr_grpo", "rloo", "remax", "reinforce_pp", "opo", "gpg"]


def test_the_expected_recipes_ship():
    top_level = [name for name in builtin_names() if "/" not in name]
    assert top_level == sorted(
        ["base", *ALGORITHMS, "rlhf_grpo", "rlhf_ppo", "agent_calculator", "agent_guess"]
    )


def test_a_subfolder_recipe_is_named_by_its_path_and_follows_the_top_level_ones():
    names = builtin_names()
    assert "gsm8k/grpo_qwen2.5-0.5b" in names
    assert names.index("rloo") < names.index("gsm8k/grpo_qwen2.5-0.5b")
    assert builtin_path("gsm8k/grpo_qwen2.5-0.5b") == BUILTIN_DIR / "gsm8k" / "grpo_qwen2.5-0.5b.yaml"
    for outside in ("../builtin/dapo", "gsm8k/../dapo", "/dapo", "gsm8k/", "gsm8k", ""):
        assert builtin_path(outside) is None, outside


@pytest.mark.parametrize("name", ["base", *ALGORITHMS])
def test_builtin_recipe_is_valid_without_notices(name):
    loaded = load_recipe(name, strict=True)
    assert loaded.notices == []
    assert builtin_descriptions()[name]


@pytest.mark.parametrize("name", ALGORITHMS)
def test_builtin_recipe_extends_base_and_comments_every_setting(name):
    lines = (BUILTIN_DIR / f"{name}.yaml").read_text().splitlines()
    assert lines[0] == "extends: base"
    settings = [line for line in lines[1:] if re.match(r"\s+\w+: \S", line)]
    assert settings, name
    for line in settings:
        assert "#" in line, f"{name}: no comment saying why on {line.strip()!r}"
    assert len(lines) <= 25


def test_spec_recipe_table():
    r = {name: load_recipe(name).recipe for name in ALGORITHMS}
    assert (r["ppo"].algorithm.advantage, r["ppo"].critic.enabled, r["ppo"].actor.policy_loss) == (
        "gae",
        True,
        "vanilla",
    )
    assert r["ppo"].actor.loss_agg_mode == "token-mean"
    grpo = r["grpo"]
    assert (grpo.algorithm.advantage, grpo.algorithm.norm_adv_by_std_in_grpo, grpo.actor.policy_loss) == (
        "grpo",
        True,
        "vanilla",
    )
    assert (grpo.actor.kl_loss.enabled, grpo.actor.kl_loss.estimator, grpo.actor.kl_loss.coef) == (
        True,
        "low_var_kl",
        0.001,
    )
    dr = r["dr_grpo"]
    assert (dr.algorithm.norm_adv_by_std_in_grpo, dr.actor.loss_agg_mode, dr.actor.kl_loss.enabled) == (
        False,
        "seq-mean-token-sum-norm",
        False,
    )
    gspo = r["gspo"]
    assert (gspo.actor.policy_loss, gspo.actor.loss_agg_mode) == ("gspo", "seq-mean-token-mean")
    assert (gspo.actor.clip_ratio_low, gspo.actor.clip_ratio_high, gspo.actor.kl_loss.enabled) == (
        3e-4,
        4e-4,
        False,
    )
    dapo = r["dapo"]
    assert (dapo.actor.clip_ratio_low, dapo.actor.clip_ratio_high, dapo.actor.loss_agg_mode) == (
        0.2,
        0.28,
        "token-mean",
    )
    assert (dapo.algorithm.group_filter.enabled, dapo.algorithm.group_filter.metric) == (True, "acc")
    assert dapo.reward.overlong_shaping.enabled and not dapo.actor.kl_loss.enabled
    assert not dapo.algorithm.kl_in_reward.enabled
    opd = r["opd"]
    assert (opd.distillation.enabled, opd.distillation.use_policy_gradient, opd.distillation.loss) == (
        True,
        True,
        "k3",
    )
    assert opd.distillation.teacher
    for name in ("rloo", "remax", "reinforce_pp", "opo", "gpg"):
        assert r[name].algorithm.advantage == {"reinforce_pp": "reinforce_plus_plus"}.get(name, name)
    assert r["gpg"].actor.policy_loss == "gpg"


@pytest.mark.parametrize("name", ALGORITHMS)
def test_recipes_target_the_tiny_model_and_task(name):
    recipe = load_recipe(name).recipe
    assert recipe.model.path == "rlrun:tiny-base"
    assert recipe.data.source == "rlrun:arithmetic"
    assert recipe.rollout.max_response_tokens == 8
    assert 1e-4 <= recipe.actor.optimizer.lr <= 3e-4
    assert (
        100 <= recipe.trainer.total_steps <= 300
    )  # tuned so each run stays under 5 CPU minutes (benchmarks/README.md)
    assert batch_plan(recipe).samples == 128


def test_batch_plan_and_summary():
    loaded = load_recipe(
        "grpo", ["actor.mini_batch_samples=32", "actor.micro_batch_samples=8", "actor.ppo_epochs=2"]
    )
    plan = batch_plan(loaded.recipe)
    assert (plan.samples, plan.mini_batches, plan.micro_batches_per_mini_batch, plan.optimizer_steps) == (
        128,
        4,
        4,
        8,
    )
    assert algorithm_summary(loaded.recipe) == {
        "advantage": "grpo",
        "policy_loss": "vanilla",
        "kl_placement": "loss",
        "text": "grpo × vanilla × KL in loss (low_var_kl, coef 0.001)",
    }
    assert algorithm_summary(load_recipe("rloo").recipe)["kl_placement"] == "reward"


@pytest.mark.parametrize("name", ["dapo", "opd"])
def test_resolved_yaml_round_trips(name):
    loaded = load_recipe(name)
    text = to_yaml(loaded.data)
    assert yaml.load(text, Loader=RecipeLoader) == loaded.data
    assert yaml.safe_load(text) == loaded.data  # YAML 1.1 readers too (`'off'` is quoted)


def test_copy_refuses_to_overwrite(tmp_path):
    target = copy_builtin("dapo", tmp_path)
    assert target == tmp_path / "dapo.yaml"
    assert load_recipe(target).recipe.algorithm.group_filter.enabled  # `extends: base` still resolves
    with pytest.raises(FileExistsError):
        copy_builtin("dapo", target)
    with pytest.raises(KeyError):
        copy_builtin("nope", tmp_path / "x.yaml")
