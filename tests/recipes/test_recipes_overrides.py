"""Command-line overrides: dotted keys, YAML values, `~key` deletes, unknown keys suggested."""

import pytest

from rlrun.recipes import load_recipe
from rlrun.schema import Recipe


def test_values_are_read_as_yaml():
    recipe = load_recipe(
        "grpo",
        [
            "actor.optimizer.lr=3e-6",
            "rollout.n=4",
            "actor.mini_batch_samples=64",
            "actor.micro_batch_samples=64",
            "model.lora={r: 4, target_modules: [q, v]}",
            "trainer.eval.greedy=false",
            "logging.wandb.entity=team",
        ],
    ).recipe
    assert recipe.actor.optimizer.lr == 3e-6
    assert recipe.rollout.n == 4
    assert recipe.model.lora.r == 4 and recipe.model.lora.target_modules == ["q", "v"]
    assert recipe.trainer.eval.greedy is False
    assert recipe.logging.wandb.entity == "team"


def test_overrides_apply_in_order_and_reach_into_lists():
    recipe = load_recipe("base", ["rollout.n=2", "rollout.n=16", "reward.functions.0.weight=2.5"]).recipe
    assert recipe.rollout.n == 16
    assert recipe.reward.functions[0].weight == 2.5


def test_tilde_deletes_back_to_the_default(write):
    path = write("my.yaml", "extends: dapo\n")
    loaded = load_recipe(path, ["~actor.clip_ratio_high", "~actor.optimizer"])
    assert loaded.recipe.actor.clip_ratio_high is None
    assert loaded.recipe.actor.optimizer == Recipe().actor.optimizer
    assert loaded.provenance.of(("actor", "clip_ratio_high")).kind == "default"


def test_deleting_an_unset_but_known_key_is_a_no_op():
    assert load_recipe("base", ["~model.lora.r"]).recipe.model.lora is None


def test_unknown_override_key_suggests_where_it_lives(only_error):
    issue = only_error("base", ("actor.lr=3e-6",))
    assert issue.format() == (
        "command-line override `actor.lr=3e-6`, `actor.lr`: unknown key; did you mean `actor.optimizer.lr` or "
        "`critic.optimizer.lr`? Fix: rename or remove it (`rlrun schema` lists every key)."
    )


def test_deleting_an_unknown_key_suggests_a_close_one(only_error):
    issue = only_error("base", ("~rollout.temprature",))
    assert "did you mean `rollout.temperature`?" in issue.message


@pytest.mark.parametrize(
    "override, text",
    [
        ("rollout.n", "an override is `key=value` (set) or `~key` (delete)"),
        ("~rollout.n=3", "an override is `key=value` (set) or `~key` (delete)"),
        ("rollout..n=3", "the key is empty or has an empty part"),
        ("rollout.n.x=3", "`rollout.n` is a value, not a section"),
        ("reward.functions.3.weight=1", "`reward.functions` is a list of 1 items; 3 is not an index of it"),
        ("rollout.n=[1, 2", "the value is not valid YAML"),
    ],
)
def test_malformed_overrides(only_error, override, text):
    issue = only_error("base", (override,))
    assert issue.override == override
    assert text in issue.message


def test_override_errors_come_after_file_errors(write, errors):
    path = write("my.yaml", "rollout:\n  top_p: 3.0\n")
    issues = errors(path, ("rollout.temperature=0",))
    assert [(i.key, i.line, i.override) for i in issues] == [
        ("rollout.top_p", 2, None),
        ("rollout.temperature", None, "rollout.temperature=0"),
    ]
