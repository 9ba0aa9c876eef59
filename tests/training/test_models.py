"""training/models.py: loading a model in the dtype a recipe names; a model that cannot be loaded
is a located error (exit code 2), not a traceback."""

import shutil
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from rlrun.cli import app
from rlrun.embedded import resolve_model_path
from rlrun.errors import RecipeError
from rlrun.training.models import load_causal_lm

runner = CliRunner()


def test_the_embedded_model_loads_in_the_asked_dtype():
    assert load_causal_lm("rlrun:tiny-base", dtype="bfloat16", trainable=False).dtype == torch.bfloat16


@pytest.fixture
def cut_model(tmp_path: Path) -> Path:
    """A copy of the tiny model whose weights file was cut off half way (a copy interrupted)."""
    folder = tmp_path / "cut"
    shutil.copytree(resolve_model_path("rlrun:tiny-base"), folder)
    weights = folder / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    return folder


def test_a_cut_off_weights_file_is_named_as_damaged(cut_model):
    with pytest.raises(RecipeError) as caught:
        load_causal_lm(str(cut_model))
    [issue] = caught.value.issues
    assert (issue.code, issue.file) == ("model-damaged", str(cut_model / "model.safetensors"))
    assert "damaged (cut off or corrupted)" in issue.message


@pytest.mark.parametrize(
    "command", [["eval", "{model}", "--prompts", "2"], ["train", "grpo", "model.path={model}", "--dry-run"]]
)
def test_eval_and_the_dry_run_of_a_damaged_model_exit_2_naming_the_file(cut_model, command):
    result = runner.invoke(app, [part.format(model=cut_model) for part in command])
    assert result.exit_code == 2, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    text = "".join(result.output.replace("│", "").split())
    assert f"{cut_model}/model.safetensors:thisweightsfileofthemodelisdamaged(cutofforcorrupted)" in text
    assert "Traceback" not in result.output
