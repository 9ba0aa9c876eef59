"""The schema is the contract: its defaults are base.yaml's, unknown keys and coerced types are errors."""

import json

import pytest
from pydantic import ValidationError

from rlrun.recipes.builtin import BUILTIN_DIR
from rlrun.recipes.json_schema import recipe_json_schema
from rlrun.recipes.yaml_io import parse_document
from rlrun.schema import Recipe


def test_schema_defaults_are_base_yaml():
    base, _, issues = parse_document((BUILTIN_DIR / "base.yaml").read_text(), "base.yaml")
    assert not issues
    defaults = Recipe().model_dump(mode="json")
    base["description"] = defaults["description"]
    assert defaults == base


@pytest.mark.parametrize(
    "data",
    [
        {"actor": {"lrr": 1.0}},
        {"trainer": {"eval": {"every": 3}}},
        {"reward": {"functions": [{"fn": "rlrun:exact_match", "wieght": 1.0}]}},
        {"algorithms": {}},
    ],
)
def test_unknown_keys_are_errors(data):
    with pytest.raises(ValidationError, match="Extra inputs are not permitted"):
        Recipe.model_validate(data)


@pytest.mark.parametrize(
    "data",
    [
        {"rollout": {"n": "8"}},
        {"rollout": {"n": 8.5}},
        {"critic": {"enabled": 1}},
        {"actor": {"optimizer": {"lr": "1e-4"}}},
    ],
)
def test_types_are_not_coerced(data):
    with pytest.raises(ValidationError):
        Recipe.model_validate(data)


@pytest.mark.parametrize(
    "data",
    [
        {"actor": {"optimizer": {"lr": -1e-4}}},
        {"rollout": {"temperature": 0}},
        {"rollout": {"top_p": 0}},
        {"rollout": {"top_p": 1.01}},
        {"actor": {"clip_ratio_c": 1.0}},
        {"rollout": {"n": 0}},
        {"reward": {"overlong_shaping": {"buffer_tokens": 0}}},
        {"reward": {"functions": []}},
    ],
)
def test_out_of_range_values_are_errors(data):
    with pytest.raises(ValidationError):
        Recipe.model_validate(data)


def test_an_int_is_accepted_where_a_float_is_expected():
    assert Recipe.model_validate({"rollout": {"temperature": 1}}).rollout.temperature == 1.0


def test_json_schema_describes_recipe_files():
    schema = recipe_json_schema()
    json.dumps(schema)
    assert list(schema["properties"])[:2] == ["extends", "schema_version"]
    assert schema["additionalProperties"] is False
    actor = schema["$defs"]["Actor"]
    assert actor["additionalProperties"] is False
    assert "mini_batch_samples" in actor["properties"]
    # keys are described by their base.yaml comments, for editor hovers
    assert actor["properties"]["mini_batch_samples"]["description"] == "samples per optimizer step"
    rollout = schema["$defs"]["Rollout"]["properties"]
    assert rollout["n"]["description"] == "samples per prompt"
    assert schema["$defs"]["Model"]["properties"]["lora"]["description"].startswith("{r, alpha, dropout")
