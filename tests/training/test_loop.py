"""The loop serves what components declare: Σπ² for the optimal token baseline, a seeded
generator for a loss that draws random numbers (same draws on resume)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rlrun.recipes import load_recipe
from rlrun.training.loop import train
from rlrun.training.run import RunOptions

pytestmark = pytest.mark.slow

# Quantities of the clock, and the evaluation a run makes at its last step (the first part of a
# resumed run ends at step 2)
SKIPPED_KEYS = ("wall_time_s", "timing_s/", "perf/", "val/")
SMALL = [
    "trainer.prompts_per_step=4",
    "actor.mini_batch_samples=16",
    "actor.micro_batch_samples=8",
    "trainer.eval.prompts=16",
    "trainer.eval.every_steps=0",
    "trainer.checkpoint.every_steps=2",
    "logging.console.enabled=False",
]


def metrics(run_dir: Path) -> list[dict]:
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return [{k: v for k, v in row.items() if not k.startswith(SKIPPED_KEYS)} for row in rows]


def run(run_dir: Path, overrides: list[str], resume: bool = False) -> list[dict]:
    status = train(
        load_recipe("grpo", overrides), RunOptions(run_dir=run_dir, resume=resume), overrides=overrides
    )
    assert status.status == "finished"
    return metrics(run_dir)


def test_the_optimal_token_baseline_trains_with_the_trainers_sum_pi_squared(tmp_path):
    rows = run(
        tmp_path / "otb", [*SMALL, "trainer.total_steps=2", "algorithm.advantage=optimal_token_baseline"]
    )
    assert [r["step"] for r in rows] == [0, 1, 2]
    assert all(r["critic/advantages/max"] != 0 for r in rows[1:])


def test_clip_cov_draws_from_a_seeded_stream_and_resumes_exactly(tmp_path):
    # a wide covariance window and ratio: many tokens are candidates, so the draw matters
    cut = ["actor.policy_loss=clip_cov", "actor.loss_kwargs={clip_cov_ratio: 0.3, clip_cov_lb: -100.0}"]
    straight = run(tmp_path / "straight", [*SMALL, *cut, "trainer.total_steps=3"])
    assert all(r["actor/pg_clipfrac"] > 0 for r in straight[1:])
    run(tmp_path / "resumed", [*SMALL, *cut, "trainer.total_steps=2"])
    resumed = run(tmp_path / "resumed", [*SMALL, *cut, "trainer.total_steps=3"], resume=True)
    assert resumed == straight
