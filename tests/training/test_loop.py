"""The loop serves what components declare: Σπ² for the optimal token baseline, a seeded
generator for a loss that draws random numbers (same draws on resume)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rlrun.recipes import load_recipe
from rlrun.training.run import RunOptions, train

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


@pytest.mark.parametrize(
    ("recipe", "batch"),
    [("grpo", []), ("ppo", ["rollout.n=4"])],  # ppo: a critic
)
def test_padding_free_and_padded_runs_give_the_same_metrics(tmp_path, recipe, batch):
    """Seeded 2-step runs: the same samples, losses, gradient norms and rewards either way, to
    float32 rounding (ppo: the critic's values and update too). Sampled at temperature 1.5
    with room for 16 tokens, the tiny model's responses are ragged enough for some forwards to
    pack (at 3.0 every reward is 0: Adam turns the rounding noise of a zero gradient into
    full-size steps, and the runs part)."""
    rows = {}
    ragged = ["rollout.temperature=1.5", "rollout.max_response_tokens=16"]
    for free in (True, False):
        overrides = [*SMALL, *batch, *ragged, "trainer.total_steps=2", f"actor.padding_free={free}"]
        loaded = load_recipe(recipe, overrides)
        assert (
            train(loaded, RunOptions(run_dir=tmp_path / str(free)), overrides=overrides).status == "finished"
        )
        rows[free] = metrics(tmp_path / str(free))
    assert [set(r) for r in rows[True]] == [set(r) for r in rows[False]]
    for packed, padded in zip(rows[True], rows[False], strict=True):
        # abs 1e-6 for the near-zero differences of log-probs (actor/ppo_kl, pg_loss: seen 6e-8)
        assert packed == pytest.approx(padded, rel=1e-5, abs=1e-6)


def test_the_reference_scores_the_rows_in_the_updates_micro_batches(tmp_path, monkeypatch):
    """Same rows, same shapes: the reference's (and the old policy's) log-probs equal the
    policy's to the bit while the two are equal. In-order chunks (as before) differed from the shuffled micro-batches of the
    update, and on SmolLM2 that left a KL gradient of float noise at step 1."""
    from rlrun.training.stages import scoring, updates

    calls = []

    def recording(model, q, *args, **kwargs):
        calls.append(("update" if "entropy" in kwargs else "score", q.input_ids.tolist()))
        return response_log_probs(model, q, *args, **kwargs)

    response_log_probs = scoring.response_log_probs
    monkeypatch.setattr(scoring, "response_log_probs", recording)
    monkeypatch.setattr(updates, "response_log_probs", recording)
    overrides = [*SMALL, "actor.mini_batch_samples=8", "actor.micro_batch_samples=4", "actor.kl_loss.enabled=true", "trainer.total_steps=1"]  # fmt: skip
    run(tmp_path / "run", overrides)
    scored = [ids for kind, ids in calls if kind == "score"]
    updated = [ids for kind, ids in calls if kind == "update"]
    assert len(updated) == 8  # 4 prompts x 8 responses in micro-batches of 4, one epoch
    assert scored == updated + updated  # the reference, then the old policy (two mini-batches)


@pytest.mark.parametrize(
    ("unit", "frozen", "factors"),
    [
        # 4 prompts x 8 samples in mini-batches of 16: two optimizer steps per training step
        ("training_step", 0, [0.0, 1 / 4, 2 / 4]),
        ("optimizer_step", 0, [0.0, 2 / 4, 4 / 4]),
        # no update in step 1: the schedule starts with the first one (verl's critic warm-up)
        ("training_step", 1, [0.0, 0.0, 1 / 4]),
        ("optimizer_step", 1, [0.0, 0.0, 2 / 4]),
    ],
)
def test_the_lr_schedule_counts_its_unit_from_the_first_update(tmp_path, unit, frozen, factors):
    schedule = f"actor.lr_scheduler={{name: constant, warmup_steps: 4, step_unit: {unit}}}"
    rows = run(tmp_path / "run", [*SMALL, schedule, f"actor.frozen_steps={frozen}", "trainer.total_steps=3"])
    steps = [r for r in rows if r["step"] > 0]
    assert [r["actor/lr"] for r in steps] == pytest.approx([3e-4 * f for f in factors])
    assert ["actor/pg_loss" in r for r in steps] == [step > frozen for step in (1, 2, 3)]
