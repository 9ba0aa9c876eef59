"""Paths in recipes: `~` and $VARIABLES expand; a relative path starts at the file that wrote
it (each file of an `extends` chain its own), and an override's at the working directory."""

import os
from pathlib import Path

import pytest
import yaml

from rlrun.errors import RecipeError
from rlrun.recipes import load_recipe
from rlrun.recipes.paths import data_path, model_path


def _touch(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text('{"prompt": "1+1=", "answer": "2"}\n')
    return path


def test_a_recipes_data_path_is_relative_to_the_recipe_not_the_working_directory(
    write, tmp_path, monkeypatch
):
    data = _touch(tmp_path / "exp" / "data" / "train.jsonl")
    recipe = write("exp/my.yaml", "extends: grpo\ndata:\n  source: data/train.jsonl\n")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    assert load_recipe(recipe).recipe.data.source == str(data)


def test_in_an_extends_chain_each_path_is_relative_to_the_file_that_wrote_it(write, tmp_path):
    train = _touch(tmp_path / "lib" / "train.jsonl")
    val = _touch(tmp_path / "exp" / "val.jsonl")
    write("lib/base.yaml", "extends: grpo\ndata:\n  source: train.jsonl\n  val_source: train.jsonl\n")
    child = write("exp/child.yaml", "extends: ../lib/base.yaml\ndata:\n  val_source: ./val.jsonl\n")
    data = load_recipe(child).recipe.data
    assert (data.source, data.val_source) == (str(train), str(val))


def test_an_override_is_relative_to_the_working_directory(write, tmp_path):
    here = _touch(tmp_path / "here.jsonl")
    _touch(tmp_path / "exp" / "here.jsonl")  # the recipe's folder has one too: not taken
    recipe = write("exp/my.yaml", "extends: grpo\n")
    assert load_recipe(recipe, ["data.source=here.jsonl"]).recipe.data.source == str(here)
    # a whole mapping set on the command line counts as an override too
    assert load_recipe(recipe, ["data={source: here.jsonl}"]).recipe.data.source == str(here)


def test_home_and_environment_variables_expand_in_recipes_and_overrides(write, tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("GSM8K_DIR", str(tmp_path / "gsm8k"))
    train = _touch(tmp_path / "home" / "data" / "gsm8k" / "train.jsonl")
    test = _touch(tmp_path / "gsm8k" / "test.jsonl")
    recipe = write(
        "my.yaml",
        "extends: grpo\ndata:\n  source: ~/data/gsm8k/train.jsonl\n  val_source: ${GSM8K_DIR}/test.jsonl\n",
    )
    data = load_recipe(recipe).recipe.data
    assert (data.source, data.val_source) == (str(train), str(test))
    data = load_recipe(
        "grpo", ["data.source=$GSM8K_DIR/test.jsonl", "data.val_source=~/data/gsm8k/train.jsonl"]
    ).recipe.data
    assert (data.source, data.val_source) == (str(test), str(train))


def test_a_missing_data_file_is_reported_where_written_with_the_path_looked_at(write, tmp_path, only_error):
    recipe = write("exp/my.yaml", "extends: grpo\ndata:\n  source: nothere.jsonl\n")
    issue = only_error(recipe)
    assert (issue.code, issue.key, issue.file, issue.line) == (
        "data-missing",
        "data.source",
        "exp/my.yaml",
        3,
    )
    assert str(tmp_path / "exp" / "nothere.jsonl") in issue.found
    assert "folder of the recipe" in issue.message


def test_sources_that_are_not_files_are_left_alone(tmp_path):
    for source in ("rlrun:arithmetic", "hf:openai/gsm8k:main"):
        assert data_path(source, tmp_path) == source
    assert data_path("/abs/train.parquet", tmp_path) == "/abs/train.parquet"
    assert data_path("../d/train.parquet", tmp_path / "exp") == str(tmp_path / "d" / "train.parquet")


def test_model_paths_are_local_folders_when_they_say_so_or_exist_and_hub_ids_otherwise(tmp_path, monkeypatch):
    (tmp_path / "exp" / "ckpt").mkdir(parents=True)
    base = tmp_path / "exp"
    assert model_path("Qwen/Qwen2.5-0.5B-Instruct", base) == "Qwen/Qwen2.5-0.5B-Instruct"
    assert model_path("rlrun:tiny-base", base) == "rlrun:tiny-base"
    assert model_path("ckpt", base) == str(base / "ckpt")  # exists beside the recipe
    assert model_path("./not-yet", base) == str(base / "not-yet")  # explicitly local
    monkeypatch.setenv("MODELS", "/models")
    assert model_path("$MODELS/qwen", base) == "/models/qwen"


def test_model_path_in_a_recipe_resolves_against_the_recipe(write, tmp_path):
    recipe = write(
        "exp/my.yaml", "extends: grpo\nmodel:\n  path: ./my-model\nreference:\n  path: ./my-model\n"
    )
    loaded = load_recipe(recipe, environment=False)
    assert loaded.recipe.model.path == loaded.recipe.reference.path == str(tmp_path / "exp" / "my-model")


def test_the_resolved_recipe_loads_again_from_anywhere_with_the_same_paths(write, tmp_path, monkeypatch):
    _touch(tmp_path / "exp" / "train.jsonl")
    loaded = load_recipe(write("exp/my.yaml", "extends: grpo\ndata:\n  source: train.jsonl\n"))
    resolved = tmp_path / "run" / "resolved.yaml"  # what a run directory keeps, and resume reads
    resolved.parent.mkdir()
    resolved.write_text(yaml.safe_dump(loaded.data))
    monkeypatch.chdir(tmp_path / "run")
    assert load_recipe(resolved).data == loaded.data


@pytest.mark.skipif(os.name != "posix", reason="POSIX paths")
def test_an_unset_variable_is_an_error_naming_the_key_and_the_variable(write, only_error, monkeypatch):
    monkeypatch.delenv("NO_SUCH_RLRUN_VAR", raising=False)
    issue = only_error(write("my.yaml", "extends: grpo\ndata:\n  source: $NO_SUCH_RLRUN_VAR/train.jsonl\n"))
    assert (issue.code, issue.key, issue.line) == ("path-variable-unset", "data.source", 3)
    assert "$NO_SUCH_RLRUN_VAR, which is not set" in issue.message  # not also a missing file


# Every key that holds a path, with a value naming an unset variable (each its own kind of path).
PATH_SETTINGS = [
    "data.source=${NO_SUCH_RLRUN_VAR}/train.jsonl",
    "data.val_source=[a.jsonl, $NO_SUCH_RLRUN_VAR/b.jsonl]",
    "model.path=${NO_SUCH_RLRUN_VAR}/policy",
    "model.tokenizer=$NO_SUCH_RLRUN_VAR/tok",
    "reference.path=$NO_SUCH_RLRUN_VAR/ref",
    "critic.model_path=$NO_SUCH_RLRUN_VAR/critic",
    "distillation.teacher=$NO_SUCH_RLRUN_VAR/teacher",
    "reward.functions=[{model: $NO_SUCH_RLRUN_VAR/rm}]",
    "trainer.output_dir=${NO_SUCH_RLRUN_VAR}/runs",
]
UNSET_AT = ["data.source", "data.val_source.1", "model.path", "model.tokenizer", "reference.path",
            "critic.model_path", "distillation.teacher", "reward.functions.0.model", "trainer.output_dir"]  # fmt: skip


@pytest.mark.parametrize(("setting", "key"), zip(PATH_SETTINGS, UNSET_AT, strict=True))
def test_every_path_key_refuses_an_unset_variable(tmp_path, monkeypatch, setting, key):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("NO_SUCH_RLRUN_VAR", raising=False)
    with pytest.raises(RecipeError) as caught:
        load_recipe("grpo", [setting], environment=False, import_modules=False)
    unset = [issue for issue in caught.value.issues if issue.code == "path-variable-unset"]
    assert [(issue.key, issue.override) for issue in unset] == [(key, setting)]
    assert "$NO_SUCH_RLRUN_VAR, which is not set" in unset[0].message


def test_the_output_folder_expands_home_and_variables_and_stays_relative_to_the_working_directory(
    write, tmp_path, monkeypatch
):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("RUNS", str(tmp_path / "elsewhere"))
    recipe = write("exp/my.yaml", "extends: grpo\ntrainer:\n  output_dir: ~/runs\n")
    assert load_recipe(recipe).recipe.trainer.output_dir == str(tmp_path / "home" / "runs")
    assert load_recipe("grpo", ["trainer.output_dir=$RUNS/x"]).recipe.trainer.output_dir == str(
        tmp_path / "elsewhere" / "x"
    )
    assert load_recipe(write("exp/rel.yaml", "extends: grpo\n")).recipe.trainer.output_dir == "runs"


def test_extends_expands_home_and_variables_and_refuses_an_unset_one(
    write, tmp_path, monkeypatch, only_error
):
    monkeypatch.setenv("RECIPES", str(tmp_path / "lib"))
    monkeypatch.delenv("NO_SUCH_RLRUN_VAR", raising=False)
    write("lib/base.yaml", "extends: grpo\ntrainer:\n  total_steps: 7\n")
    child = write("exp/child.yaml", "extends: $RECIPES/base.yaml\n")
    assert load_recipe(child).recipe.trainer.total_steps == 7
    issue = only_error(write("exp/bad.yaml", "extends: ${NO_SUCH_RLRUN_VAR}/base.yaml\n"))
    assert (issue.key, issue.code, issue.line) == ("extends", "path-variable-unset", 1)


def test_a_reward_model_path_resolves_against_the_recipe_and_an_override_against_the_cwd(write, tmp_path):
    for folder in (tmp_path / "exp" / "rm", tmp_path / "rm2"):  # a one-output classifier's config
        folder.mkdir(parents=True)
        (folder / "config.json").write_text(
            '{"architectures": ["Qwen2ForSequenceClassification"], "num_labels": 1}'
        )
    recipe = write(
        "exp/my.yaml", "extends: grpo\nreward:\n  functions:\n    - model: rm\n      weight: 1.0\n"
    )
    data = load_recipe(recipe, environment=False, import_modules=False).data
    assert data["reward"]["functions"][0]["model"] == str(tmp_path / "exp" / "rm")
    data = load_recipe(recipe, ["reward.functions.0.model=rm2"], environment=False, import_modules=False).data
    assert data["reward"]["functions"][0]["model"] == str(tmp_path / "rm2")


@pytest.mark.slow
def test_on_the_command_line_an_unset_variable_is_refused_and_home_is_where_runs_go(tmp_path, monkeypatch):
    """`~/runs` trains into the home folder, not a folder named `~` here; `${UNSET}/runs` is
    refused before anything is made."""
    from typer.testing import CliRunner

    from rlrun.cli import app

    runner = CliRunner()
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("NO_SUCH_RLRUN_VAR", raising=False)
    for command in (["validate", "grpo", "model.path=${NO_SUCH_RLRUN_VAR}/policy"],
                    ["train", "grpo", "trainer.output_dir=${NO_SUCH_RLRUN_VAR}/runs"]):  # fmt: skip
        result = runner.invoke(app, command)
        assert result.exit_code == 2, result.output
        assert "$NO_SUCH_RLRUN_VAR, which is not set" in " ".join(result.output.replace("│", "").split())
    assert list(tmp_path.iterdir()) == []
    tiny = [
        "trainer.total_steps=1",
        "trainer.prompts_per_step=2",
        "rollout.n=2",
        "actor.mini_batch_samples=4",
    ]
    tiny += ["actor.micro_batch_samples=4", "trainer.eval.prompts=2", "logging.console.enabled=false"]
    result = runner.invoke(app, ["train", "grpo", *tiny, "trainer.output_dir=~/runs", "--name", "r"])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "home" / "runs" / "r" / "meta.json").is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["home"]
