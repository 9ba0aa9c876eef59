"""The schema is the contract: its defaults are base.yaml's, unknown keys and coerced types are errors."""

import json

import pytest
from pydantic import ValidationError

from rlrun.recipes.builtin import BUILTIN_DIR
from rlrun.recipes.json_schema import recipe_json_schema
from rlrun.recipes.yaml_io import parse_document
from rlrun.schema import Recipe
from rlrun.schema.base import Section


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
    # keys are described where their fields are declared, for editor hovers
    described = actor["properties"]["mini_batch_samples"]["description"]
    assert described == "samples per optimizer step (the critic's too)"
    assert schema["$defs"]["Model"]["properties"]["lora"]["description"].startswith("{r, alpha, dropout")


def test_json_schema_lists_the_component_names_for_completion():
    schema = recipe_json_schema()
    advantage = schema["$defs"]["Algorithm"]["properties"]["advantage"]
    names, plugin = advantage["anyOf"]
    assert {"grpo", "gae", "optimal_token_baseline"} <= set(names["enum"])
    assert plugin == {"type": "string"}  # a plugin's name is valid too
    assert "vanilla" in schema["$defs"]["Actor"]["properties"]["policy_loss"]["anyOf"][0]["enum"]
    assert "k3" in schema["$defs"]["KlLoss"]["properties"]["estimator"]["anyOf"][0]["enum"]
    assert "forward_kl_topk" in schema["$defs"]["Distillation"]["properties"]["loss"]["anyOf"][0]["enum"]
    fn = schema["$defs"]["RewardFunction"]["properties"]["fn"]["anyOf"]
    assert "rlrun:exact_match" in fn[0]["enum"] and fn[1] == {"type": "string", "minLength": 1}


def sections(model=Recipe, path=()):
    """(key path, model class) of every section, the recipe first."""
    yield path, model
    for name, field in model.model_fields.items():
        for candidate in (field.annotation, *getattr(field.annotation, "__args__", ())):
            if isinstance(candidate, type) and issubclass(candidate, Section):
                yield from sections(candidate, (*path, name))
            for item in getattr(candidate, "__args__", ()):  # list[RewardFunction]
                if isinstance(item, type) and issubclass(item, Section):
                    yield from sections(item, (*path, name))


def test_every_field_is_described_where_it_is_declared():
    missing = [
        ".".join((*path, name))
        for path, model in sections()
        for name, field in model.model_fields.items()
        if not field.description
    ]
    assert missing == []


def test_base_yaml_comments_say_nothing_the_schema_does_not():
    text = (BUILTIN_DIR / "base.yaml").read_text()
    _, marks, _ = parse_document(text, "base.yaml")
    lines = text.splitlines()
    fields = {
        (*path, name): field.description
        for path, model in sections()
        for name, field in model.model_fields.items()
    }
    checked = 0
    for path, mark in marks.items():
        comment = lines[mark.line - 1].partition(" #")[2].strip()
        key = tuple(part for part in path if not isinstance(part, int))
        if comment and key in fields and not isinstance(path[-1], int):  # a list item shares its line
            assert comment in fields[key], (key, comment)
            checked += 1
    assert checked > 30


def test_keep_last_zero_keeps_every_checkpoint_as_the_pruning_does():
    """checkpoint.py prunes only when keep_last > 0; the schema refused the 0 it documents."""
    from rlrun.schema.trainer import Checkpoint

    assert Checkpoint.model_validate({"keep_last": 0}).keep_last == 0
