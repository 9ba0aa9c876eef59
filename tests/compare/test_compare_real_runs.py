"""`rlrun compare` on real short runs of the embedded default: GRPO, DAPO, and GRPO with another
learning rate, two steps each, trained through `rlrun train`."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from PIL import Image
from typer.testing import CliRunner

from rlrun.cli import app
from rlrun.compare.plot import plot_runs
from rlrun.compare.runs import load_run

pytestmark = pytest.mark.slow

# Small enough for CPU in seconds; the same for every run, so only the recipe's own choices differ.
SHORT = [
    "trainer.total_steps=2",
    "trainer.prompts_per_step=4",
    "rollout.n=4",
    "actor.mini_batch_samples=16",
    "actor.micro_batch_samples=16",
    "trainer.eval.prompts=16",
    "trainer.device=cpu",
    "logging.wandb.enabled=false",
]
RUNS = {"grpo": ["grpo"], "dapo": ["dapo"], "grpo-lr1e-4": ["grpo", "actor.optimizer.lr=1e-4"]}


@pytest.fixture(scope="module")
def runs_dir(tmp_path_factory) -> Path:
    runs = tmp_path_factory.mktemp("real") / "runs"
    for name, (recipe, *overrides) in RUNS.items():
        result = CliRunner().invoke(
            app, ["train", recipe, *SHORT, *overrides, f"trainer.output_dir={runs}", "--name", name]
        )
        assert result.exit_code == 0, result.output
    return runs


def _compare(runs_dir: Path, *args: str) -> dict:
    result = CliRunner().invoke(app, ["compare", "--runs-dir", str(runs_dir), *RUNS, "--json", *args])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def _metrics_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_header_and_config_diff(runs_dir):
    data = _compare(runs_dir)
    assert [run["name"] for run in data["runs"]] == list(RUNS)
    assert all(
        run["status"] == "finished" and run["steps_done"] == run["total_steps"] == 2 for run in data["runs"]
    )
    changed = {row["key"]: row["changes"] for row in data["config_diff"]}
    # the learning-rate run differs in exactly that key
    assert [key for key, changes in changed.items() if changes["grpo-lr1e-4"] != "same"] == [
        "actor.optimizer.lr"
    ]
    # DAPO is GRPO plus clip-higher, dynamic sampling and overlong shaping: some of it shows
    assert any(changes["dapo"] != "same" for changes in changed.values())
    # every warning names keys the diff shows
    for warning in data["not_comparable"]:
        assert set(warning["differences"]) <= set(changed)
        assert "grpo-lr1e-4" not in warning["runs"]


def test_table_values_match_metrics_jsonl(runs_dir):
    data = _compare(runs_dir, "--last-k", "2")
    assert data["metrics"], "the runs recorded none of the key metrics"
    for row in data["metrics"]:
        for name, stats in row["runs"].items():
            values = [
                r[row["metric"]]
                for r in _metrics_jsonl(runs_dir / name / "metrics.jsonl")
                if row["metric"] in r and math.isfinite(r[row["metric"]])
            ]
            window = values[-row["window"] :]  # the last 2, or the latest evaluation for val/*
            if values:
                assert stats["mean_last_k"] == pytest.approx(sum(window) / len(window))
            reference = row["runs"]["grpo"]["mean_last_k"]
            if stats["mean_last_k"] is not None and reference is not None:
                assert stats["delta"] == pytest.approx(stats["mean_last_k"] - reference)
    assert set(data["health"]) == set(RUNS)


def test_plot_of_real_runs(runs_dir, tmp_path):
    out = tmp_path / "curves.png"
    data = _compare(runs_dir, "--plot", str(out), "--x", "samples")
    assert data["plot"] == str(out)
    with Image.open(out) as image:
        assert image.format == "PNG"
    runs = [load_run(name, runs_dir) for name in RUNS]
    metrics = [row["metric"] for row in data["metrics"]]
    figure = plot_runs(runs, list(RUNS), metrics, tmp_path / "again.png", x="samples")
    assert [axes.get_title() for axes in figure.axes] == metrics
    for axes in figure.axes:  # one line per run that recorded the metric (DAPO logs no KL loss)
        recorded = [
            name
            for name in RUNS
            if any(axes.get_title() in row for row in _metrics_jsonl(runs_dir / name / "metrics.jsonl"))
        ]
        assert [line.get_label() for line in axes.lines] == recorded
    assert len(figure.axes[0].lines) == len(RUNS)  # val/accuracy: every run evaluates
