"""A full learning run: the GRPO recipe as shipped must lift held-out greedy accuracy on the
embedded default by at least 20 points (benchmarks/README.md, the table of built-in recipes)."""

from __future__ import annotations

import json

import pytest

from rlrun.recipes import load_recipe
from rlrun.training.run import RunOptions, train

pytestmark = pytest.mark.slow


def test_grpo_learns_the_embedded_task(tmp_path):
    overrides = ["logging.console.enabled=false"]
    run = train(load_recipe("grpo", overrides), RunOptions(run_dir=tmp_path / "grpo"), overrides=overrides)
    assert run.status == "finished"
    accuracy = [
        r["val/accuracy"]
        for r in map(json.loads, (tmp_path / "grpo" / "metrics.jsonl").open())
        if "val/accuracy" in r
    ]
    assert accuracy[-1] - accuracy[0] >= 0.20, accuracy
