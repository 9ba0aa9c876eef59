"""load_recipe on a generated recipe with thousands of mistakes: every kind is found, and the work
grows linearly with the file (counted in function calls, not timed)."""

import sys
from pathlib import Path

import pytest

from rlrun.errors import RecipeError, issue_kinds
from rlrun.recipes import load_recipe


def generated(folder: Path, entries: int) -> Path:
    """`entries` reward entries and `entries` actor keys, each with a mistake, and one more
    mistake at the end."""
    lines = ["extends: grpo", "reward:", "  functions:"]
    lines += ["    - {fn: 'rlrun:exact_match', wieght: 1}"] * entries
    lines += ["actor:", *(f"  k{i}: 1" for i in range(entries)), "trainer:", "  total_stepz: 5"]
    path = folder / f"generated_{entries}.yaml"
    path.write_text("\n".join(lines) + "\n")
    return path


def calls_to_load(path: Path) -> tuple[int, list[RecipeError]]:
    """Python and C function calls made while loading `path` (and grouping its errors)."""
    count, raised = 0, []

    def counted(frame, event, arg):
        nonlocal count
        count += event in ("call", "c_call")

    sys.setprofile(counted)
    try:
        load_recipe(path)
    except RecipeError as exc:
        issue_kinds(exc.issues)
        raised.append(exc)
    finally:
        sys.setprofile(None)
    return count, raised


def test_a_recipe_with_thousands_of_mistakes_reports_each_kind(tmp_path):
    with pytest.raises(RecipeError) as caught:
        load_recipe(generated(tmp_path, 1000))
    kinds = issue_kinds(caught.value.issues)
    assert [(len(kind), kind[0].key) for kind in kinds] == [
        (1000, "reward.functions.0.wieght"),
        (1000, "actor.k0"),
        (1, "trainer.total_stepz"),
    ]


def test_the_work_grows_linearly_with_the_recipe(tmp_path):
    calls_to_load(generated(tmp_path, 20))  # caches filled, modules imported
    counts = [calls_to_load(generated(tmp_path, entries))[0] for entries in (100, 200, 400)]
    first, second = counts[1] - counts[0], counts[2] - counts[1]
    assert first > 0 and second <= 2.1 * first, counts  # quadratic work would be 4 times


def score(prompts, completions, ground_truths, **extra):
    """A reward function given from Python (importable: this test module)."""
    return [float(len(c) < 5) for c in completions]


def test_a_mapping_with_python_overrides_loads_as_its_yaml_with_command_line_overrides(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "r.yaml").write_text("extends: grpo\ntrainer:\n  total_steps: 7\n")
    from_file = load_recipe("r.yaml", ["actor.optimizer.lr=2e-05", "rollout.n=16"])
    given = load_recipe(
        {"extends": "grpo", "trainer": {"total_steps": 7}}, {"actor.optimizer.lr": 2e-5, "rollout.n": 16}
    )
    assert given.data == from_file.data
    assert given.overrides == ["actor.optimizer.lr=2.0e-05", "rollout.n=16"]
    assert given.source_text == "extends: grpo\ntrainer:\n  total_steps: 7\n"
    assert given.provenance.of(("rollout", "n")).describe() == "override overrides from Python"
    assert given.provenance.of(("trainer", "total_steps")).describe() == "file recipe from Python"


def test_problems_of_a_recipe_from_python_are_located_there(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(RecipeError) as info:
        load_recipe(
            {"extends": "grpo", "trainer": {"total_stepz": 3}}, {"rollout.n": "four", "reward.x.y": 1}
        )
    places = sorted(issue.place for issue in info.value.issues)
    assert places == [
        "overrides from Python, `reward.x`",
        "overrides from Python, `rollout.n`",
        "recipe from Python, `trainer.total_stepz`",
    ]
    with pytest.raises(
        RecipeError, match="recipe from Python, `extends`: there is no built-in recipe 'grpp'"
    ):
        load_recipe({"extends": "grpp"})


def test_a_reward_object_is_named_and_resolved_while_loading(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    by_path = load_recipe("grpo", {"reward.functions": [score]})
    assert by_path.data["reward"]["functions"][0]["fn"] == f"{__name__}:score"
    closure = lambda prompts, completions, ground_truths: [0.0] * len(completions)
    live = load_recipe("grpo", {"reward.functions": [{"fn": closure, "weight": 2.0}]})
    assert live.data["reward"]["functions"][0] == {
        "fn": "python-object:<lambda>",
        "weight": 2.0,
        "style": "auto",
        "kwargs": {},
    }
    assert live.live_table() == {"python-object:<lambda>": closure}
    assert "python-object:<lambda>" in live.overrides[0]


def test_to_yaml_writes_a_file_that_loads_back_as_the_recipe_and_never_overwrites(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    closure = lambda prompts, completions, ground_truths: [0.0] * len(completions)
    loaded = load_recipe({"extends": "dapo", "trainer": {"total_steps": 5}}, {"reward.functions": [closure]})
    written = loaded.to_yaml(tmp_path / "out.yaml")
    assert written.read_text().startswith("# python-object:<lambda>: `")  # what the file cannot hold
    with pytest.raises(
        RecipeError, match=r"out.yaml, line \d+, column \d+, `reward.functions.0.fn`.*pass the object again"
    ):
        load_recipe(written)
    assert load_recipe(written, {"reward.functions.0.fn": closure}).data == loaded.data
    with pytest.raises(FileExistsError):
        loaded.to_yaml(written)
    plain = load_recipe("grpo", ["trainer.total_steps=9"])
    assert load_recipe(plain.to_yaml(tmp_path / "again.yaml")).data == plain.data


def test_rows_given_as_data_are_checked_like_a_file_s_first_record(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    rows = [{"prompt": "1+1=", "answer": "2"}]
    loaded = load_recipe("grpo", {"data.source": rows, "data.val_source": rows})
    assert loaded.data["data"]["source"].startswith("python-object:data-")  # not made a path
    assert loaded.data["data"]["val_source"] == loaded.data["data"]["source"]
    with pytest.raises(RecipeError) as info:
        load_recipe("grpo", {"data.source": [{"question": "1+1="}]})
    (issue,) = info.value.issues
    assert (issue.place, issue.code) == ("overrides from Python, `data.source`", "data-unusable")
    assert "the first record has no 'prompt' (keys: question)" in issue.message


def test_a_model_given_from_python_needs_its_tokenizer_named(tmp_path, monkeypatch):
    from transformers import AutoModelForCausalLM

    from rlrun.embedded import resolve_model_path

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("RLRUN_CACHE", str(tmp_path / "cache"))
    model = AutoModelForCausalLM.from_pretrained(resolve_model_path("rlrun:tiny-base"))
    with pytest.raises(RecipeError) as info:
        load_recipe("grpo", {"model.path": model})
    (issue,) = info.value.issues
    assert issue.place == "overrides from Python, `model.path`" and "without a tokenizer" in issue.message
    loaded = load_recipe("grpo", {"model.path": model, "model.tokenizer": "rlrun:tiny-base"})
    assert loaded.data["model"]["path"].startswith(str(tmp_path / "cache" / "python-objects" / "model-"))
