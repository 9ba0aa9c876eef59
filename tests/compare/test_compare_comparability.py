""" "Not comparable" warnings: model/tokenizer, dataset, reward functions, response cap, batch units."""

from __future__ import annotations

import copy

import pytest

from rlrun.compare.comparability import check_comparability


def _with(recipe, **changes):
    changed = copy.deepcopy(recipe)
    for key, value in changes.items():
        *parents, leaf = key.split("__")
        node = changed
        for part in parents:
            node = node[part]
        node[leaf] = value
    return changed


@pytest.mark.parametrize(
    ("changes", "aspect", "keys"),
    [
        ({"model__path": "Qwen/Qwen2.5-0.5B"}, "model or tokenizer", ["model.path", "model.tokenizer"]),
        ({"model__tokenizer": "other-tokenizer"}, "model or tokenizer", ["model.tokenizer"]),
        ({"data__arithmetic__digits": 3}, "dataset", ["data.arithmetic.digits"]),
        ({"data__source": "data/gsm8k.parquet"}, "dataset", ["data.source"]),
        (
            {"reward__functions": [{"fn": "rlrun:math_answer", "weight": 1.0}]},
            "reward functions",
            ["reward.functions[0].fn"],
        ),
        ({"rollout__max_response_tokens": 16}, "response length limits", ["rollout.max_response_tokens"]),
        ({"rollout__min_response_tokens": 4}, "response length limits", ["rollout.min_response_tokens"]),
        ({"trainer__prompts_per_step": 32}, "batch units", ["trainer.prompts_per_step"]),
        ({"rollout__n": 4}, "batch units", ["rollout.n"]),
    ],
)
def test_each_aspect_warns_with_the_keys_that_differ(base_recipe, changes, aspect, keys):
    warnings = check_comparability(["ref", "other"], [base_recipe, _with(base_recipe, **changes)])
    assert [(w.aspect, list(w.differences), w.runs) for w in warnings] == [(aspect, keys, ["other"])]
    assert warnings[0].message.startswith(f"different {aspect} in other")


@pytest.mark.parametrize(
    "changes",
    [
        {"actor__optimizer__lr": 3e-4},  # what a comparison is for
        {"model__tokenizer": "rlrun:tiny-base"},  # null tokenizer = the model's own
        {"data__seed": 7, "data__shuffle": False},  # same data, other order
        {"actor__policy_loss": "clip_cov", "algorithm__advantage": "rloo"},
    ],
)
def test_algorithm_and_optimizer_changes_are_comparable(base_recipe, changes):
    assert check_comparability(["ref", "other"], [base_recipe, _with(base_recipe, **changes)]) == []


def test_generator_settings_do_not_matter_for_a_file_dataset(base_recipe):
    ref = _with(base_recipe, data__source="train.jsonl")
    other = _with(ref, data__arithmetic__digits=5, data__guess_number__high=31)
    assert check_comparability(["ref", "other"], [ref, other]) == []


def test_each_generator_s_settings_matter_when_it_is_the_source(base_recipe):
    ref = _with(base_recipe, data__source="rlrun:guess_number")
    other = _with(ref, data__arithmetic__digits=5, data__guess_number__high=31)
    [warning] = check_comparability(["ref", "other"], [ref, other])
    assert (warning.aspect, list(warning.differences)) == ("dataset", ["data.guess_number.high"])


def test_values_per_run_and_runs_without_recipes(base_recipe):
    long = _with(base_recipe, rollout__max_response_tokens=32)
    [warning] = check_comparability(["a", "b", "c", "d"], [base_recipe, None, long, base_recipe])
    assert warning.runs == ["c"]
    assert warning.differences["rollout.max_response_tokens"][2:] == [32, 8]
    assert check_comparability(["a", "b"], [None, long]) == []


SETUP = {
    "processes": 1,
    "machines": 1,
    "strategy": "none",
    "device": "cpu",
    "device_name": "AMD EPYC",
    "dtype": "float32",
    "mixed_precision": "no",
}


def test_a_different_compute_setup_warns_with_its_keys(base_recipe):
    wider = {**SETUP, "processes": 8, "strategy": "fsdp2", "device": "cuda", "device_name": "NVIDIA H100"}
    warnings = check_comparability(["a", "b", "c"], [base_recipe] * 3, [SETUP, SETUP, wider])
    assert [(w.aspect, w.runs) for w in warnings] == [("compute setup", ["c"])]
    assert warnings[0].differences == {
        "setup.processes": [1, 1, 8],
        "setup.strategy": ["none", "none", "fsdp2"],
        "setup.device": ["cpu", "cpu", "cuda"],
        "setup.device_name": ["AMD EPYC", "AMD EPYC", "NVIDIA H100"],
    }
    assert "wall times and throughput are not comparable" in warnings[0].message


def test_runs_that_predate_the_setup_record_are_not_flagged(base_recipe):
    bf16 = {**SETUP, "dtype": "bfloat16"}
    assert check_comparability(["a", "b"], [base_recipe] * 2, [SETUP, None]) == []
    assert check_comparability(["a", "b"], [base_recipe] * 2, [None, bf16]) == []
    [warning] = check_comparability(["a", "b"], [None, None], [SETUP, bf16])  # no recipes, still the setup
    assert warning.differences == {"setup.dtype": ["float32", "bfloat16"]}
