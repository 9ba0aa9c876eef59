"""Every cross-field rule, broken by a small recipe; messages checked word for word where it matters."""

import importlib.util

import pytest

from rlrun.data.sources import DataError, load_file
from rlrun.errors import RecipeError
from rlrun.recipes import load_recipe


def test_group_estimator_needs_two_samples(write, only_error):
    write("r.yaml", "extends: rloo\ntrainer:\n  prompts_per_step: 128\nrollout:\n  n: 1\n")
    issue = only_error("r.yaml")
    assert issue.code == "group-needs-n"
    text, _, groupless = issue.format().partition("without groups: ")
    assert text == (
        "r.yaml, line 5, column 3, `rollout.n`: the `rloo` advantage compares each response with the other "
        "responses to the same prompt, so it needs at least 2 samples per prompt. Expected rollout.n >= 2. "
        "Found rollout.n: 1. Fix: set `rollout.n: 8` (or choose an estimator "
    )
    # every registered estimator that did not declare needs_groups (plugins of other tests too)
    names = groupless.removesuffix(").").split(", ")
    assert names[0] == "gae" and {"reinforce_plus_plus", "remax"} <= set(names) and "grpo" not in names


def test_a_plugin_estimator_declaring_groups_is_validated_like_a_built_in(
    write, tmp_path, monkeypatch, errors
):
    monkeypatch.syspath_prepend(str(tmp_path))
    write(
        "group_plugin_for_test.py",
        "from rlrun.algorithms.registries import register_advantage\n\n"
        "@register_advantage('test_plugin_grouped', needs_groups=True)\n"
        "def adv(token_level_rewards, response_mask, index=None, *, scale: float = 1.0, **_):\n"
        "    '''A test estimator comparing responses within a group.'''\n",
    )
    plugin = ("algorithm.plugins=[group_plugin_for_test]", "algorithm.advantage=test_plugin_grouped")
    issues = errors("base", (*plugin, "rollout.n=1", "trainer.prompts_per_step=128"))
    assert [i.code for i in issues] == ["group-needs-n"]
    assert "the `test_plugin_grouped` advantage compares each response" in issues[0].message
    load_recipe("base", [*plugin, "algorithm.advantage_kwargs.scale=2.0"])  # its own keyword is accepted
    [issue] = errors("base", (*plugin, "algorithm.advantage_kwargs.scael=2.0"))
    assert issue.code == "unknown-kwarg" and "did you mean 'scale'?" in issue.message
    assert issue.expected == "one of scale"


def test_a_plugin_estimator_declaring_a_critic_needs_one(write, tmp_path, monkeypatch, errors):
    monkeypatch.syspath_prepend(str(tmp_path))
    write(
        "critic_plugin_for_test.py",
        "from rlrun.algorithms.registries import register_advantage\n\n"
        "@register_advantage('test_plugin_valued', needs_critic=True)\n"
        "def adv(token_level_rewards, response_mask, index=None, **_):\n    '''Needs values.'''\n",
    )
    plugin = ("algorithm.plugins=[critic_plugin_for_test]", "algorithm.advantage=test_plugin_valued")
    assert [i.code for i in errors("base", plugin)] == ["gae-needs-critic"]


@pytest.mark.parametrize(
    "advantage", ["grpo", "rloo", "opo", "gpg", "reinforce_plus_plus_baseline", "grpo_passk"]
)
def test_every_group_estimator_needs_two_samples(advantage, errors):
    issues = errors(
        "base", (f"algorithm.advantage={advantage}", "rollout.n=1", "trainer.prompts_per_step=128")
    )
    assert [i.code for i in issues] == ["group-needs-n"]


def test_non_group_estimator_takes_one_sample():
    load_recipe(
        "base", ("algorithm.advantage=reinforce_plus_plus", "rollout.n=1", "trainer.prompts_per_step=128")
    )


def test_dynamic_sampling_needs_two_samples(write, errors):
    write(
        "r.yaml",
        "extends: reinforce_pp\nrollout:\n  n: 1\ntrainer:\n  prompts_per_step: 128\n"
        "algorithm:\n  group_filter:\n    enabled: true\n",
    )
    [issue] = errors("r.yaml")
    assert (issue.code, issue.key, issue.line) == ("group-filter-needs-n", "rollout.n", 3)
    assert "with one sample per prompt every group is dropped" in issue.message


def test_gae_needs_a_critic(write, only_error):
    write("r.yaml", "extends: ppo\ncritic:\n  enabled: false\n")
    issue = only_error("r.yaml")
    assert issue.code == "gae-needs-critic"
    assert issue.format().startswith(
        "r.yaml, line 3, column 3, `critic.enabled`: the `gae` advantage needs value estimates, which come from a critic. "
        "Expected critic.enabled: true. Found critic.enabled: false."
    )


def test_gae_error_points_at_the_users_line(write, only_error):
    write("r.yaml", "extends: base\nalgorithm:\n  advantage: gae\n")
    issue = only_error("r.yaml")
    assert (issue.code, issue.line, issue.column) == ("gae-needs-critic", 3, 3)


def test_distillation_needs_a_teacher(write, only_error):
    write("r.yaml", "extends: opd\ndistillation:\n  teacher: null\n")
    issue = only_error("r.yaml")
    assert issue.format() == (
        "r.yaml, line 3, column 3, `distillation.teacher`: on-policy distillation needs a teacher to score the "
        "student's tokens. Expected a model (`rlrun:tiny-teacher`, a local folder or a hub id). Found null. "
        "Fix: set `distillation.teacher`, or `distillation.enabled: false`."
    )


def test_lora_reference_is_the_base_model(write, only_error):
    write("r.yaml", "extends: grpo\nmodel:\n  lora: {r: 4}\nreference:\n  path: rlrun:tiny-teacher\n")
    issue = only_error("r.yaml")
    assert (issue.code, issue.line) == ("lora-reference", 5)
    load_recipe("grpo", ["model.lora={r: 4}", "reference.path=rlrun:tiny-base"])  # the base itself is fine


def test_direct_distillation_with_k1_is_an_error(write, only_error):
    write("r.yaml", "extends: opd\ndistillation:\n  use_policy_gradient: false\n  loss: k1\n")
    issue = only_error("r.yaml")
    assert (issue.code, issue.key, issue.line) == ("distillation-direct-k1", "distillation.loss", 4)
    assert "does not depend on the teacher" in issue.message
    load_recipe("r.yaml", ("distillation.loss=k3",))  # k3 direct is fine
    load_recipe("r.yaml", ("distillation.use_policy_gradient=true",))  # k1 as policy gradient is fine


def test_clip_ratio_c_must_exceed_one(write, only_error):
    write("r.yaml", "extends: base\nactor:\n  clip_ratio_c: 1.0\n")
    assert only_error("r.yaml").format() == (
        "r.yaml, line 3, column 3, `actor.clip_ratio_c`: value out of range. Expected a number greater than 1. "
        "Found 1.0. Fix: set `actor.clip_ratio_c` to a number greater than 1."
    )


def test_overlong_buffer_must_fit_the_response(write, only_error):
    write("r.yaml", "extends: dapo\nrollout:\n  max_response_tokens: 3\n")
    issue = only_error("r.yaml")
    assert issue.code == "overlong-buffer"
    assert issue.expected == "0 < buffer_tokens <= rollout.max_response_tokens (3)"
    assert issue.found == "buffer_tokens: 4"
    write("zero.yaml", "extends: dapo\nreward:\n  overlong_shaping:\n    buffer_tokens: 0\n")
    issue = only_error("zero.yaml")
    assert (issue.code, issue.line) == ("out-of-range", 4)


def test_min_response_tokens_must_not_exceed_the_maximum(write, only_error):
    write("r.yaml", "extends: grpo\nrollout:\n  min_response_tokens: 9\n")
    issue = only_error("r.yaml")
    assert (issue.code, issue.line) == ("min-above-max-response", 3)
    assert issue.expected == "min_response_tokens <= rollout.max_response_tokens (8)"
    load_recipe("grpo", ("rollout.min_response_tokens=8",))


@pytest.mark.parametrize(("temperature", "line"), [(2.5, 4), (0.005, 4)])
def test_vllm_samples_only_within_its_temperature_range(write, temperature, line):
    write("r.yaml", f"extends: grpo\nrollout:\n  engine: vllm\n  temperature: {temperature}\n")
    with pytest.raises(RecipeError) as caught:
        load_recipe("r.yaml", environment=False)  # an error of the recipe itself, on any machine
    [issue] = caught.value.issues
    assert (issue.code, issue.key, issue.line) == ("temperature-outside-engine", "rollout.temperature", line)
    assert issue.expected == "0.01 <= rollout.temperature <= 2 with rollout.engine: vllm"
    assert issue.found == f"rollout.temperature: {temperature:g}"
    for fine in ("rollout.temperature=2.0", "rollout.temperature=0.01"):
        load_recipe("r.yaml", [fine], environment=False)
    assert load_recipe("r.yaml", ["rollout.engine=hf"]).recipe.rollout.temperature == temperature


def test_samples_must_split_into_mini_batches(write, only_error):
    write("r.yaml", "extends: grpo\ntrainer:\n  prompts_per_step: 12\n")
    assert only_error("r.yaml").format() == (
        "r.yaml, line 3, column 3, `trainer.prompts_per_step`: each step trains on trainer.prompts_per_step × "
        "rollout.n = 12 × 8 = 96 samples, which do not split into mini-batches of 128. Expected "
        "actor.mini_batch_samples dividing 96. Found 96 % 128 = 96. Fix: set `actor.mini_batch_samples: 96` and "
        "`actor.micro_batch_samples` to a divisor of it, or change the prompts per step or n."
    )


def test_mini_batch_suggestions_respect_the_micro_batch(write, only_error):
    write("r.yaml", "extends: grpo\nactor:\n  mini_batch_samples: 48\n  micro_batch_samples: 16\n")
    issue = only_error("r.yaml")
    assert (issue.key, issue.line) == ("actor.mini_batch_samples", 3)
    assert issue.fix.startswith("set `actor.mini_batch_samples` to one of 16, 32, 64, 128")


def test_mini_batch_must_split_into_micro_batches(write, only_error):
    write("r.yaml", "extends: grpo\nactor:\n  micro_batch_samples: 48\n")
    assert only_error("r.yaml").format() == (
        "r.yaml, line 3, column 3, `actor.micro_batch_samples`: a mini-batch of 128 samples does not split into "
        "micro-batches of 48. Expected actor.micro_batch_samples dividing 128. Found 128 % 48 = 32. Fix: set "
        "`actor.micro_batch_samples` to a divisor of `actor.mini_batch_samples`."
    )


def test_a_token_budget_must_hold_the_longest_row_and_replaces_the_sample_count(write, only_error):
    write("r.yaml", "extends: grpo\nactor:\n  micro_batch_tokens: 71\n")
    issue = only_error("r.yaml")  # data.max_prompt_tokens 64 + rollout.max_response_tokens 8 = 72
    assert (issue.key, issue.line, issue.expected) == (
        "actor.micro_batch_tokens",
        3,
        "actor.micro_batch_tokens >= 72",
    )
    write("ok.yaml", "extends: grpo\nactor:\n  micro_batch_samples: 48\n  micro_batch_tokens: 72\n")
    # 128 % 48 no longer matters: micro-batches are cut by tokens
    assert load_recipe("ok.yaml").recipe.actor.micro_batch_tokens == 72


def test_data_files_must_exist(write, errors):
    write("train.jsonl", '{"prompt": "1+1=", "answer": "2"}\n')
    write("r.yaml", "extends: grpo\ndata:\n  source: train.jsonl\n  val_source: missing.parquet\n")
    [issue] = errors("r.yaml")
    assert (issue.code, issue.key, issue.line) == ("data-missing", "data.val_source", 4)
    assert issue.found.endswith('/missing.parquet"')  # where it looked: beside the recipe
    write("s.yaml", "extends: grpo\ndata:\n  source: train.csv\n")
    [issue] = errors("s.yaml")
    assert (issue.code, issue.line) == ("data-source", 3)


def test_the_guessing_game_needs_a_range_with_two_splits(write, errors):
    write(
        "r.yaml",
        "extends: grpo\ndata:\n  source: rlrun:guess_number\n  guess_number:\n    low: 7\n    high: 7\n",
    )
    [issue] = errors("r.yaml")
    assert (issue.code, issue.key, issue.found) == (
        "guess-number-range",
        "data.guess_number.high",
        "low: 7, high: 7",
    )
    assert "0 <= low < high" in issue.message
    write("s.yaml", "extends: grpo\ndata:\n  guess_number:\n    low: 7\n    high: 7\n")
    assert load_recipe("s.yaml").recipe.data.guess_number.high == 7  # not the source: not used
    write("t.yaml", "extends: grpo\ndata:\n  source: rlrun:guess_number\n")
    assert load_recipe("t.yaml").recipe.data.source == "rlrun:guess_number"


def test_each_file_of_a_data_list_must_exist(write, errors):
    write("train.jsonl", '{"prompt": "1+1=", "answer": "2"}\n')
    write(
        "r.yaml", "extends: grpo\ndata:\n  source: [train.jsonl, gone.jsonl]\n  val_source: [train.jsonl]\n"
    )
    [issue] = errors("r.yaml")
    assert (issue.code, issue.key) == ("data-missing", "data.source.1")
    assert issue.found.endswith('/gone.jsonl"')  # relative to the recipe, as a single file is


@pytest.fixture
def without_data_packages(monkeypatch):
    """This machine as if pyarrow and datasets were not installed."""
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name in ("pyarrow", "datasets") else real(name, *a),
    )


def test_a_missing_reader_package_is_a_located_error_naming_the_extra(write, errors, without_data_packages):
    write("train.parquet", "")
    write("r.yaml", "extends: grpo\ndata:\n  source: train.parquet\n  val_source: hf:openai/gsm8k:main\n")
    issues = errors("r.yaml")
    assert [(i.code, i.key, i.line) for i in issues] == [
        ("data-reader-missing", "data.source", 3),
        ("data-reader-missing", "data.val_source", 4),
    ]
    assert "`pyarrow`" in issues[0].message and "`datasets`" in issues[1].message
    assert all("pip install 'rlrun[data]'" in i.fix for i in issues)
    # a recipe for another machine is checked alone
    assert load_recipe("r.yaml", environment=False).recipe.data.val_source == "hf:openai/gsm8k:main"
    with pytest.raises(
        DataError,
        match=r"train.parquet.*reading parquet needs the `pyarrow` package \(pip install 'rlrun\[data\]'\)",
    ):
        load_file("train.parquet")


def test_embedded_model_names_are_checked(write, errors):
    write("r.yaml", "extends: opd\nmodel:\n  path: rlrun:tiny-bse\ndistillation:\n  teacher: rlrun:nope\n")
    issues = errors("r.yaml")
    assert [(i.code, i.key, i.line) for i in issues] == [
        ("unknown-model", "model.path", 3),
        ("unknown-model", "distillation.teacher", 5),
    ]
    assert issues[0].found == '"rlrun:tiny-bse"'
    assert issues[0].fix == "name a shipped model, a local Hugging Face folder, a .gguf file or a hub id"


@pytest.mark.parametrize(
    "yaml_text, key, expected",
    [
        ("actor:\n  optimizer:\n    lr: -1.0e-4\n", "actor.optimizer.lr", "a number greater than 0"),
        ("rollout:\n  temperature: 0\n", "rollout.temperature", "a number greater than 0"),
        ("rollout:\n  top_p: 0\n", "rollout.top_p", "a number greater than 0"),
        ("rollout:\n  top_p: 1.5\n", "rollout.top_p", "a number at most 1"),
        ("rollout:\n  n: 0\n", "rollout.n", "an integer greater than 0"),
    ],
)
def test_out_of_range_values(write, only_error, yaml_text, key, expected):
    write("r.yaml", "extends: base\n" + yaml_text)
    issue = only_error("r.yaml")
    assert (issue.code, issue.key, issue.expected, issue.line) == (
        "out-of-range",
        key,
        expected,
        yaml_text.count("\n") + 1,
    )


def test_wrong_types(write, errors):
    write("r.yaml", 'extends: base\nrollout:\n  n: "8"\ncritic:\n  enabled: yes\nactor: 3\n')
    issues = errors("r.yaml")
    assert [(i.code, i.key, i.line) for i in issues] == [
        ("wrong-type", "rollout.n", 3),
        ("wrong-type", "critic.enabled", 5),
        ("wrong-type", "actor", 6),
    ]
    assert issues[0].format() == (
        'r.yaml, line 3, column 3, `rollout.n`: wrong type. Expected an integer. Found the string "8". '
        "Fix: write an integer without quotes (a quoted value is a string)."
    )
    assert issues[1].format() == (
        "r.yaml, line 5, column 3, `critic.enabled`: wrong type. Expected true or false. "
        'Found the string "yes". Fix: write true or false.'
    )
    assert issues[2].expected == "a mapping (indented `key: value` lines)"
    assert issues[2].found == "the integer 3"


def test_other_invalid_values(write, errors):
    write("r.yaml", "extends: base\nmodel:\n  path: ''\nreward:\n  functions: []\n")
    issues = errors("r.yaml")
    assert [(i.code, i.key, i.line, i.expected) for i in issues] == [
        ("invalid-value", "model.path", 3, "at least 1 character"),
        ("no-reward", "reward.functions", 5, None),  # nothing scores the responses
    ]


def test_unknown_keys_suggest_the_right_one(write, errors):
    write(
        "r.yaml", "extends: base\nrollout:\n  temprature: 0.7\nalgorithm:\n  kl_in_reward:\n    coeff: 0.1\n"
    )
    issues = errors("r.yaml")
    assert [i.format() for i in issues] == [
        (
            "r.yaml, line 3, column 3, `rollout.temprature`: unknown key; did you mean `rollout.temperature`? "
            "Fix: rename or remove it (`rlrun schema` lists every key)."
        ),
        (
            "r.yaml, line 6, column 5, `algorithm.kl_in_reward.coeff`: unknown key; did you mean "
            "`algorithm.kl_in_reward.coef`? Fix: rename or remove it (`rlrun schema` lists every key)."
        ),
    ]


def test_unknown_key_without_a_close_match_lists_the_section(write, only_error):
    write("r.yaml", "extends: base\nreference:\n  zzz: 1\n")
    assert only_error("r.yaml").expected == "one of path"


def test_invalid_choice_suggests_the_close_one(write, only_error):
    write("r.yaml", "extends: base\nactor:\n  loss_agg_mode: seq-mean-token-sum-nrm\n")
    issue = only_error("r.yaml")
    assert issue.code == "invalid-choice"
    assert "did you mean 'seq-mean-token-sum-norm'?" in issue.message
    assert issue.line == 3


def test_all_errors_at_once_including_rules_next_to_schema_errors(write, errors):
    write(
        "r.yaml",
        "extends: grpo\nrollout:\n  n: 1\n  top_p: 2.0\nalgorithm:\n  advantage: grpoo\n"
        "actor:\n  policy_loss: gspoo\n",
    )
    issues = errors("r.yaml")
    assert [(i.code, i.line) for i in issues] == [
        ("batch-divisibility", 3),
        ("out-of-range", 4),
        ("unknown-name", 6),
        ("unknown-name", 8),
    ]


# --- notices ------------------------------------------------------------------------------


def notice_codes(path, overrides=()):
    return [n.code for n in load_recipe(path, overrides).notices]


def test_kl_in_reward_and_kl_loss_together(write):
    write("r.yaml", "extends: grpo\nalgorithm:\n  kl_in_reward:\n    enabled: true\n")
    [notice] = load_recipe("r.yaml").notices
    assert notice.code == "kl-twice"
    text = notice.format()
    assert "applied twice: once through the reward (and so the advantage)" in text
    assert "`algorithm.kl_in_reward.enabled: true`" in text and "`actor.kl_loss.enabled: true`" in text
    assert "Fix: keep one: set `algorithm.kl_in_reward.enabled: false` (GRPO style) or " in text


def test_gspo_with_token_summed_aggregation(write):
    write("r.yaml", "extends: gspo\nactor:\n  loss_agg_mode: seq-mean-token-sum\n")
    [notice] = load_recipe("r.yaml").notices
    assert (notice.code, notice.line) == ("gspo-length-weighted", 3)
    assert "so long sequences silently weigh more" in notice.message


def test_a_plugin_loss_declaring_its_aggregation_gets_the_same_advice(write, tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(tmp_path))
    write(
        "seq_loss_plugin_for_test.py",
        "from rlrun.algorithms.registries import register_policy_loss\n\n"
        "@register_policy_loss('test_plugin_seq', loss_agg_mode='seq-mean-token-mean')\n"
        "def loss(old_log_prob, log_prob, advantages, response_mask, **_):\n    'Per sequence.'\n",
    )
    plugin = ["algorithm.plugins=[seq_loss_plugin_for_test]", "actor.policy_loss=test_plugin_seq"]
    [notice] = load_recipe("grpo", [*plugin, "actor.loss_agg_mode=token-mean"]).notices
    assert notice.code == "gspo-length-weighted"
    assert notice.expected == "actor.loss_agg_mode: seq-mean-token-mean"
    assert load_recipe("grpo", [*plugin, "actor.loss_agg_mode=seq-mean-token-mean"]).notices == []


def test_entropy_bonus_with_a_group_estimator(write):
    write("r.yaml", "extends: grpo\nactor:\n  entropy_coef: 0.01\n")
    assert notice_codes("r.yaml") == ["entropy-with-groups"]
    assert notice_codes("ppo", ("actor.entropy_coef=0.01",)) == []


def test_dr_grpo_half_applied(write):
    write("std_only.yaml", "extends: grpo\nalgorithm:\n  norm_adv_by_std_in_grpo: false\n")
    [notice] = load_recipe("std_only.yaml").notices
    assert (notice.code, notice.key, notice.line) == ("dr-grpo-half", "algorithm.norm_adv_by_std_in_grpo", 3)
    write("agg_only.yaml", "extends: grpo\nactor:\n  loss_agg_mode: seq-mean-token-sum-norm\n")
    [notice] = load_recipe("agg_only.yaml").notices
    assert (notice.code, notice.key, notice.line) == ("dr-grpo-half", "actor.loss_agg_mode", 3)
    assert "this recipe has only one of them" in notice.message


def test_dynamic_sampling_with_few_samples(write):
    write("r.yaml", "extends: dapo\nrollout:\n  n: 2\ntrainer:\n  prompts_per_step: 64\n")
    [notice] = load_recipe("r.yaml").notices
    assert (notice.code, notice.line) == ("group-filter-small-n", 3)


def test_kl_coefficient_without_its_switch(write):
    write("r.yaml", "extends: dapo\nactor:\n  kl_loss:\n    coef: 0.01\n")
    [notice] = load_recipe("r.yaml").notices
    assert (notice.code, notice.key, notice.line) == ("kl-coef-unused", "actor.kl_loss.coef", 4)
    assert (
        notice.message
        == "the KL coefficient is set, but `actor.kl_loss.enabled` is false, so it has no effect"
    )


def test_kl_switch_without_a_coefficient():
    assert notice_codes("rloo", ("algorithm.kl_in_reward.coef=0",)) == ["kl-coef-zero"]


def test_strict_makes_notices_errors():
    with pytest.raises(RecipeError) as info:
        load_recipe("grpo", ("actor.entropy_coef=0.01",), strict=True)
    assert [i.code for i in info.value.issues] == ["entropy-with-groups"]
    assert info.value.notices == []  # reported once, as an error


def test_a_value_fitting_no_form_of_a_union_is_one_issue(write, errors):
    write(
        "r.yaml",
        "extends: base\nmodel:\n  lora:\n    target_modules: [1]\ndata:\n  apply_chat_template: maybe\n",
    )
    assert [i.format() for i in errors("r.yaml")] == [
        (
            "r.yaml, line 4, column 5, `model.lora.target_modules`: wrong type. Expected a list of strings or "
            "`all-linear`. Found the list [1]. Fix: write a list of strings or `all-linear`."
        ),
        (
            "r.yaml, line 6, column 3, `data.apply_chat_template`: not one of the allowed values. Expected "
            'one of auto, messages, true, false. Found "maybe". Fix: use one of the allowed values.'
        ),
    ]


def test_lora_under_fsdp2_is_refused_at_any_process_count(write, only_error):
    """FSDP2 needs several processes (one is refused at launch) and never runs a LoRA policy:
    `validate` refuses the pair, as `train` would."""
    write("r.yaml", "extends: grpo\ntrainer:\n  strategy: fsdp2\nmodel:\n  lora: {r: 4}\n")
    issue = only_error("r.yaml")
    assert (issue.key, issue.code, issue.line) == ("trainer.strategy", "strategy-unsupported", 3)
    assert load_recipe("grpo", ["trainer.strategy=ddp", "model.lora={r: 4}"]).recipe.model.lora.r == 4


def test_reward_functions_the_schema_refused_are_not_reported_as_none(write, errors):
    """A list whose every entry is invalid is one mistake per entry, not also an empty list."""
    write("r.yaml", "extends: grpo\nreward:\n  functions:\n    - {fn: 'rlrun:exact_match', wieght: 1}\n")
    assert [(i.code, i.key) for i in errors("r.yaml")] == [("unknown-key", "reward.functions.0.wieght")]
