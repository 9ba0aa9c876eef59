"""recipes/gsm8k: the real-model recipes are built-ins named `gsm8k/<recipe>`, validate from any
folder without the model, vLLM or a GPU here, and their default data (a sample shipped beside
them, in the wheel too) is GSM8K-shaped and scorable."""

from __future__ import annotations

import fnmatch
import importlib.util
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from rlrun.cli import app
from rlrun.recipes import builtin_names, load_recipe
from rlrun.recipes.builtin import BUILTIN_DIR, copy_builtin
from rlrun.rewards.scorers import math_answer

GSM8K = BUILTIN_DIR / "gsm8k"
RECIPES = sorted(GSM8K.glob("*.yaml"))
NAMES = [f"gsm8k/{path.stem}" for path in RECIPES]
REPO_ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def away_from_the_repository(tmp_path, monkeypatch):
    """The recipes name their sample data relative to themselves: any working directory works."""
    monkeypatch.chdir(tmp_path)


def test_the_gsm8k_recipes_ship():
    assert [p.name for p in RECIPES] == [
        "dapo_qwen2.5-1.5b.yaml",
        "grpo_qwen2.5-0.5b.yaml",
        "grpo_qwen2.5-7b_8gpu.yaml",
        "ppo_qwen2.5-0.5b.yaml",
    ]


def test_they_are_builtins_named_by_their_folder():
    assert [name for name in builtin_names() if name.startswith("gsm8k/")] == NAMES


@pytest.mark.parametrize("name", NAMES)
def test_recipe_validates_with_vllm_and_math_rewards(name):
    # environment=False: vLLM and the GPU are for the machine that trains, not this check
    recipe = load_recipe(name, strict=True, environment=False).recipe
    assert recipe.rollout.engine == "vllm"
    assert recipe.model.path.startswith("Qwen/Qwen2.5-") and recipe.model.dtype == "bfloat16"
    assert [f.fn for f in recipe.reward.functions] == ["rlrun:math_answer"]
    assert recipe.data.answer_key == "reward_model.ground_truth"
    assert recipe.data.source == recipe.data.val_source == str(GSM8K / "sample.parquet")


@pytest.mark.parametrize("path", RECIPES, ids=lambda p: p.stem)
def test_recipe_states_its_batch_plan_and_memory(path):
    header = path.read_text().split("\nextends:")[0].lower()
    assert "batch plan" in header and "expected memory" in header


def test_the_7b_recipe_trains_on_8_gpus_with_fsdp2():
    recipe = load_recipe("gsm8k/grpo_qwen2.5-7b_8gpu", environment=False).recipe
    assert recipe.trainer.strategy == "fsdp2" and recipe.model.path == "Qwen/Qwen2.5-7B-Instruct"
    assert "--num-processes 8" in (GSM8K / "grpo_qwen2.5-7b_8gpu.yaml").read_text()


def test_sample_data_is_verl_gsm8k_layout_and_its_answers_score():
    rows = pq.read_table(GSM8K / "sample.parquet").to_pylist()
    assert len(rows) == 20
    for row in rows:
        assert row["data_source"] == "openai/gsm8k"  # as verl's gsm8k.py writes it: verl scores it so
        (message,) = row["prompt"]
        assert message["role"] == "user" and '"####"' in message["content"]
        assert row["reward_model"]["ground_truth"].isdigit()
    truths = [row["reward_model"]["ground_truth"] for row in rows]
    right = [f"Step by step... so the answer is\n#### {t}" for t in truths]
    wrong = [f"#### {int(t) + 1}" for t in truths]
    assert math_answer([""] * 20, right, truths) == [1.0] * 20
    assert math_answer([""] * 20, wrong, truths) == [0.0] * 20


def test_the_sample_data_is_package_data():
    """Every file of the built-in recipes matches a package-data pattern, so the wheel has it."""
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    patterns = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["tool"]["setuptools"][
        "package-data"
    ]["*"]
    files = [path for path in BUILTIN_DIR.rglob("*") if path.is_file() and "__pycache__" not in path.parts]
    assert GSM8K / "sample.parquet" in files
    assert [path.name for path in files if not any(fnmatch.fnmatch(path.name, p) for p in patterns)] == []


def test_a_copy_brings_its_sample_data_and_validates(tmp_path):
    (tmp_path / "mine").mkdir()
    target = copy_builtin("gsm8k/ppo_qwen2.5-0.5b", tmp_path / "mine")
    assert (tmp_path / "mine" / "sample.parquet").read_bytes() == (GSM8K / "sample.parquet").read_bytes()
    assert load_recipe(target, environment=False).recipe.data.source == str(
        tmp_path / "mine" / "sample.parquet"
    )


def test_validate_by_name_from_any_folder():
    result = CliRunner().invoke(app, ["validate", "gsm8k/grpo_qwen2.5-0.5b", "--portable"])
    assert result.exit_code == 0, result.output
    assert "is a valid recipe" in result.output


def test_validate_without_pyarrow_is_a_located_exit_2_naming_the_extra(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "pyarrow" else real(name, *a)
    )
    result = CliRunner().invoke(app, ["validate", "gsm8k/grpo_qwen2.5-0.5b"])
    assert result.exit_code == 2
    text = " ".join(result.output.replace("│", " ").split())  # the panel's lines, unwrapped
    assert text.count("`data.source`") == 1
    assert "grpo_qwen2.5-0.5b.yaml, line 29, column 3, `data.source`" in text
    assert "needs the `pyarrow` package" in text and "pip install 'rlrun[data]'" in text
    assert "Traceback" not in result.output
