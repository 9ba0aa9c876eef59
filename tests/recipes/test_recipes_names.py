"""Component names checked against the registries; plugins imported first; reward paths resolved."""

from rlrun.components import components, registries
from rlrun.recipes import load_recipe


def test_unknown_advantage_lists_the_valid_ones(write, only_error):
    write("r.yaml", "extends: base\nalgorithm:\n  advantage: grop\n")
    issue = only_error("r.yaml")
    assert (issue.code, issue.line, issue.column) == ("unknown-name", 3, 3)
    assert issue.message == "unknown advantage estimator; did you mean 'grpo'?"
    assert issue.expected.startswith("one of gae, ")
    for name in ("grpo", "rloo", "opo", "gpg", "remax", "reinforce_plus_plus", "grpo_passk"):
        assert name in issue.expected


def test_every_named_key_is_checked(errors):
    overrides = (
        "actor.policy_loss=nope",
        "algorithm.kl_in_reward.estimator=nope",
        "actor.kl_loss.estimator=nope",
        "distillation.loss=nope",
    )
    issues = errors("base", overrides)
    assert [(i.key, i.message.split(";")[0]) for i in issues] == [
        ("actor.policy_loss", "unknown policy loss"),
        ("algorithm.kl_in_reward.estimator", "unknown KL estimator"),
        ("actor.kl_loss.estimator", "unknown KL estimator"),
        ("distillation.loss", "unknown distillation loss"),
    ]


def test_plugins_register_components_before_names_are_checked(write, tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(tmp_path))
    write(
        "my_algos_for_test.py",
        "from rlrun.algorithms.registries import register_advantage\n\n"
        "@register_advantage('test_plugin_adv')\n"
        "def adv(*args, **kwargs):\n    '''A test estimator.'''\n",
    )
    write(
        "r.yaml", "extends: base\nalgorithm:\n  advantage: test_plugin_adv\n  plugins: [my_algos_for_test]\n"
    )
    assert load_recipe("r.yaml").recipe.algorithm.advantage == "test_plugin_adv"
    assert components()["advantage"]["test_plugin_adv"] == "A test estimator."


def test_plugin_that_fails_to_import(write, only_error):
    write("r.yaml", "extends: base\nalgorithm:\n  plugins:\n    - no_such_plugin_module\n")
    issue = only_error("r.yaml")
    assert (issue.code, issue.key, issue.line) == ("plugin-import", "algorithm.plugins.0", 4)
    assert "No module named 'no_such_plugin_module'" in issue.message


def test_reward_import_paths(write, errors, tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(tmp_path))
    write(
        "my_rewards_for_test.py",
        "def score(prompts, completions, ground_truths, **kw):\n    return [0.0]\nNOT_CALLABLE = 3\n",
    )
    write("ok.yaml", "extends: base\nreward:\n  functions:\n    - fn: my_rewards_for_test:score\n")
    load_recipe("ok.yaml")
    write(
        "bad.yaml",
        "extends: base\nreward:\n  functions:\n"
        "    - fn: my_rewards_for_test:NOT_CALLABLE\n"
        "    - fn: my_rewards_for_test:nothing\n"
        "    - fn: no_such_module_xyz:score\n"
        "    - fn: rlrun:exact_mach\n"
        "    - fn: score\n",
    )
    issues = errors("bad.yaml")
    assert [(i.code, i.line) for i in issues] == [
        ("reward-import", 4),
        ("reward-import", 5),
        ("reward-import", 6),
        ("unknown-name", 7),
        ("unknown-name", 8),
    ]
    assert "is a int, not a function" in issues[0].message
    assert "has no attribute 'nothing'" in issues[1].message
    assert "did you mean 'rlrun:exact_match'?" in issues[3].message
    assert issues[4].expected.endswith("or a `pkg.module:function` import path")


def test_components_lists_every_kind():
    kinds = components()
    assert set(kinds) == {*registries(), "rollout_engine"}
    assert {"hf", "vllm"} <= set(kinds["rollout_engine"])
    assert {"rlrun:exact_match", "rlrun:math_answer"} <= set(kinds["reward"])
    assert {"vanilla", "gspo", "gpg"} <= set(kinds["policy_loss"])


def test_loss_kwargs_are_checked_against_the_loss_signature(errors):
    [issue] = errors("base", ("actor.policy_loss=clip_cov", "actor.loss_kwargs.clip_cov_ratoi=0.001"))
    assert (issue.code, issue.key) == ("unknown-kwarg", "actor.loss_kwargs.clip_cov_ratoi")
    assert (
        issue.message
        == "`clip_cov_ratoi` is not a keyword of the policy loss `clip_cov`; did you mean 'clip_cov_ratio'?"
    )
    assert issue.expected == "one of clip_cov_ratio, clip_cov_lb, clip_cov_ub"


def test_kwargs_with_their_own_key_or_set_by_the_trainer_are_refused(errors):
    issues = errors("base", ("actor.loss_kwargs.clip_ratio=0.3", "algorithm.advantage_kwargs.values=1"))
    issues = sorted(issues, key=lambda i: i.key.startswith("algorithm"))
    assert [(i.code, i.key) for i in issues] == [
        ("kwarg-has-key", "actor.loss_kwargs.clip_ratio"),
        ("unknown-kwarg", "algorithm.advantage_kwargs.values"),
    ]
    assert "set `actor.clip_ratio` instead" in issues[0].fix
    assert issues[1].message == "`values` is an input the trainer passes to `grpo`"


def test_estimator_and_loss_keywords_are_reachable_from_a_recipe():
    loaded = load_recipe(
        "base",
        [
            "algorithm.advantage=gdpo",
            "algorithm.advantage_kwargs.reward_weights=[1.0]",
            "actor.policy_loss=dro",
            "actor.loss_kwargs.dro_beta=0.05",
        ],
    )
    assert loaded.recipe.algorithm.advantage_kwargs == {"reward_weights": [1.0]}
    assert loaded.recipe.actor.loss_kwargs == {"dro_beta": 0.05}
    load_recipe("base", ["algorithm.advantage=gpg", "algorithm.advantage_kwargs.f_norm=2.0"])


def test_kwarg_values_are_checked_against_the_declared_types(errors):
    [issue] = errors("base", ("actor.policy_loss=dro", "actor.loss_kwargs.dro_beta=null"))
    assert (issue.code, issue.key, issue.expected) == ("kwarg-type", "actor.loss_kwargs.dro_beta", "float")
    assert issue.message == "`dro_beta` of `dro` should be a valid number"
    [issue] = errors("base", ("algorithm.advantage=gpg", "algorithm.advantage_kwargs.f_norm='2'"))
    assert issue.code == "kwarg-type"  # strict, as the schema: a string is not a number
