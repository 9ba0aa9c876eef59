"""recipes/gsm8k: the real-model recipes validate without the model, vLLM or a GPU here, and
their default data (a sample shipped beside them) is GSM8K-shaped and scorable."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest

from rlrun.recipes import load_recipe
from rlrun.recipes.builtin import BUILTIN_DIR
from rlrun.rewards.builtin import math_answer

GSM8K = BUILTIN_DIR / "gsm8k"
RECIPES = sorted(GSM8K.glob("*.yaml"))
REPO_ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def at_repo_root(monkeypatch):
    """The recipes name their sample data relative to the repository root."""
    monkeypatch.chdir(REPO_ROOT)


def test_the_gsm8k_recipes_ship():
    assert [p.name for p in RECIPES] == [
        "dapo_qwen2.5-1.5b.yaml",
        "grpo_qwen2.5-0.5b.yaml",
        "grpo_qwen2.5-7b_8gpu.yaml",
        "ppo_qwen2.5-0.5b.yaml",
    ]


@pytest.mark.parametrize("path", RECIPES, ids=lambda p: p.stem)
def test_recipe_validates_with_vllm_and_math_rewards(path):
    # environment=False: vLLM and the GPU are for the machine that trains, not this check
    recipe = load_recipe(str(path.relative_to(REPO_ROOT)), strict=True, environment=False).recipe
    assert recipe.rollout.engine == "vllm"
    assert recipe.model.path.startswith("Qwen/Qwen2.5-") and recipe.model.dtype == "bfloat16"
    assert [f.fn for f in recipe.reward.functions] == ["rlrun:math_answer"]
    assert recipe.data.answer_key == "reward_model.ground_truth"
    assert Path(recipe.data.source).is_file()


@pytest.mark.parametrize("path", RECIPES, ids=lambda p: p.stem)
def test_recipe_states_its_batch_plan_and_memory(path):
    header = path.read_text().split("\nextends:")[0].lower()
    assert "batch plan" in header and "expected memory" in header


def test_the_7b_recipe_trains_on_8_gpus_with_fsdp2():
    recipe = load_recipe("recipes/gsm8k/grpo_qwen2.5-7b_8gpu.yaml", environment=False).recipe
    assert recipe.trainer.strategy == "fsdp2" and recipe.model.path == "Qwen/Qwen2.5-7B-Instruct"
    assert "--num-processes 8" in (GSM8K / "grpo_qwen2.5-7b_8gpu.yaml").read_text()


def test_sample_data_is_verl_gsm8k_layout_and_its_answers_score():
    rows = pq.read_table(GSM8K / "sample.parquet").to_pylist()
    assert len(rows) == 20
    for row in rows:
        (message,) = row["prompt"]
        assert message["role"] == "user" and '"####"' in message["content"]
        assert row["reward_model"]["ground_truth"].isdigit()
    truths = [row["reward_model"]["ground_truth"] for row in rows]
    right = [f"Step by step... so the answer is\n#### {t}" for t in truths]
    wrong = [f"#### {int(t) + 1}" for t in truths]
    assert math_answer([""] * 20, right, truths) == [1.0] * 20
    assert math_answer([""] * 20, wrong, truths) == [0.0] * 20
