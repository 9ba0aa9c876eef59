"""Reading recipe YAML: positions of every key, YAML 1.2 scalars, syntax errors located."""

import codecs

import pytest
import yaml

from rlrun.errors import RecipeError
from rlrun.recipes import yaml_io
from rlrun.recipes.yaml_io import Mark, load_yaml, parse_document, parse_value, read_text

TEXT = """\
model:
  path: x
actor:
  optimizer:
    lr: 1e-4
reward:
  functions:
    - fn: rlrun:exact_match
      weight: 2
"""


def test_positions_of_keys_and_list_items():
    data, marks, issues = parse_document(TEXT, "r.yaml")
    assert not issues
    assert data["actor"]["optimizer"]["lr"] == 1e-4
    assert marks[("model", "path")] == Mark(2, 3)
    assert marks[("actor", "optimizer", "lr")] == Mark(5, 5)
    assert marks[("reward", "functions", 0)] == Mark(8, 7)
    assert marks[("reward", "functions", 0, "weight")] == Mark(9, 7)


def test_yaml_1_2_scalars():
    assert parse_value("1e-4") == 1e-4
    assert parse_value("3E5") == 3e5
    assert parse_value("off") == "off"
    assert parse_value("yes") == "yes"
    assert parse_value("true") is True
    assert parse_value("False") is False
    assert parse_value("8") == 8
    assert parse_value("1.5") == 1.5
    assert parse_value("[a, 1]") == ["a", 1]


def test_pyyaml_safe_loader_is_left_alone():
    parse_value("1e-4")
    assert yaml.safe_load("off") is False
    assert yaml.safe_load("1e-4") == "1e-4"


def test_syntax_error_is_located():
    _, _, issues = parse_document("rollout:\n  n: [1, 2\n", "r.yaml")
    [issue] = issues
    assert issue.code == "yaml-syntax"
    assert (issue.line, issue.column) == (3, 1)
    assert issue.format().startswith("r.yaml, line 3, column 1: YAML syntax error")


def test_bad_indentation_is_located():
    _, _, issues = parse_document("rollout:\n  n: 8\n   top_p: 1\n", "r.yaml")
    [issue] = issues
    assert issue.line == 3


def test_duplicate_key_is_an_error():
    _, _, issues = parse_document("rollout:\n  n: 8\n  n: 16\n", "r.yaml")
    [issue] = issues
    assert issue.code == "yaml-duplicate-key"
    assert issue.key == "rollout.n"
    assert (issue.line, issue.column) == (3, 3)
    assert "first at line 2" in issue.message


def test_top_level_must_be_a_mapping():
    _, _, issues = parse_document("- a\n- b\n", "r.yaml")
    assert issues[0].code == "yaml-not-mapping"


def test_empty_file_is_an_empty_recipe():
    assert parse_document("# nothing\n", "r.yaml") == ({}, {}, [])


# --- the one reader every file and string goes through (issue 25)


def test_a_byte_order_mark_is_dropped_and_other_encodings_are_named(tmp_path):
    path = tmp_path / "r.yaml"
    path.write_bytes(codecs.BOM_UTF8 + b"extends: base\n")
    assert read_text(path) == "extends: base\n"
    path.write_bytes("extends: base\n".encode("utf-16"))
    with pytest.raises(RecipeError, match="the sweep file is UTF-16 text, not UTF-8"):
        read_text(path, "sweep file")


def test_a_file_larger_than_the_limit_is_refused_before_it_is_parsed(tmp_path, monkeypatch):
    monkeypatch.setattr(yaml_io, "MAX_TEXT_BYTES", 100)
    path = tmp_path / "r.yaml"
    path.write_text("a: 1\n" * 21)  # 105 bytes
    with pytest.raises(RecipeError) as info:
        read_text(path, "verl config")
    assert info.value.issues[0].code == "verl-unreadable"
    assert "the verl config is larger than" in info.value.issues[0].message
    path.write_text("a: 1\n" * 20)
    assert read_text(path) == "a: 1\n" * 20


def test_load_yaml_locates_errors_in_a_file_or_an_argument():
    with pytest.raises(RecipeError) as info:
        load_yaml("a: [1,\n", file="c.yaml")
    assert info.value.issues[0].where.startswith("c.yaml, line 2")
    with pytest.raises(RecipeError) as info:
        load_yaml("x: &a [*a]", override="--reward x")
    issue = info.value.issues[0]
    assert issue.override == "--reward x" and "the alias *a is inside its own anchor" in issue.message
    assert load_yaml("{model: m, weight: 2}", override="--reward") == {"model": "m", "weight": 2}
