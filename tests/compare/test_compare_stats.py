"""Metric table values, hand-computed from crafted metrics.jsonl files."""

from __future__ import annotations

import math

import pytest

from rlrun.compare.comparison import CompareOptions, compare
from rlrun.compare.runs import load_run
from rlrun.compare.stats import (
    KEY_METRICS,
    TargetError,
    better_direction,
    metric_rows,
    parse_target,
    select_metrics,
)

# reference: score 0.1 * step; other: 0.1 higher, peaking at step 5 and dipping at 6
REF_SCORE = {s: 0.1 * s for s in range(1, 7)}
OTHER_SCORE = {1: 0.3, 2: 0.4, 3: 0.5, 4: 0.6, 5: 0.9, 6: 0.2}


@pytest.fixture
def two_runs(make_run, steps):
    ref = make_run(
        "ref",
        steps(
            6,
            {
                "critic/score/mean": REF_SCORE.get,
                "actor/entropy": 1.0,
                "response_length/clip_ratio": lambda s: 0.5 - 0.05 * s,
            },
        ),
    )
    other = make_run(
        "other",
        steps(
            6, {"critic/score/mean": OTHER_SCORE.get, "actor/entropy": 0.5, "response_length/clip_ratio": 0.1}
        ),
    )
    return load_run(str(ref)), load_run(str(other))


def test_last_k_mean_best_and_delta(two_runs):
    [score] = metric_rows(two_runs, ["critic/score/mean"], last_k=3)
    ref, other = score.runs
    assert score.direction == "higher"
    assert ref.mean_last_k == pytest.approx((0.4 + 0.5 + 0.6) / 3)
    assert other.mean_last_k == pytest.approx((0.6 + 0.9 + 0.2) / 3)
    assert (ref.best, ref.best_step) == (pytest.approx(0.6), 6)
    assert (other.best, other.best_step) == (0.9, 5)
    assert other.delta == pytest.approx(1.7 / 3 - 0.5)
    assert (ref.verdict, other.verdict) == ("same", "better")
    assert other.count == 6 and other.last_step == 6


def test_lower_is_better_and_no_direction(two_runs):
    clip, entropy = metric_rows(two_runs, ["response_length/clip_ratio", "actor/entropy"], last_k=2)
    assert clip.direction == "lower"
    assert clip.runs[0].mean_last_k == pytest.approx((0.25 + 0.2) / 2)
    assert clip.runs[0].best == pytest.approx(0.2) and clip.runs[0].best_step == 6
    assert clip.runs[1].verdict == "better"  # 0.1 is lower than 0.225
    assert entropy.direction is None and entropy.runs[1].verdict is None
    assert entropy.runs[1].delta == -0.5 and entropy.runs[1].best is None


def test_at_step_compares_the_runs_as_they_were(two_runs):
    comparison = compare(two_runs, CompareOptions(metrics=["critic/score/mean"], last_k=2, at_step=4))
    ref, other = comparison.metrics[0].runs
    assert ref.mean_last_k == pytest.approx(0.35) and other.mean_last_k == pytest.approx(0.55)
    assert (other.best, other.best_step, other.last_step) == (0.6, 4, 4)
    assert [run.last_step for run in comparison.runs] == [4, 4]


def test_non_finite_values_are_left_out_of_the_statistics(make_run, steps):
    run = load_run(str(make_run("nan", steps(4, {"actor/grad_norm": lambda s: math.nan if s == 4 else s}))))
    [grad] = metric_rows([run], ["actor/grad_norm"], last_k=2)
    assert grad.runs[0].mean_last_k == 2.5 and grad.runs[0].count == 3


def test_validation_metrics_show_the_latest_evaluation(make_run, steps):
    rows = steps(10, {"critic/score/mean": 0.0})
    for row in rows:
        if row["step"] % 5 == 0:
            row["val/accuracy"] = row["step"] / 20  # 0.25 at 5, 0.5 at 10
    acc, score = metric_rows([load_run(str(make_run("val", rows)))], ["val/accuracy", "critic/score/mean"], 5)
    assert acc.runs[0].mean_last_k == 0.5 and acc.runs[0].count == 2 and acc.window == 1
    assert score.window == 5


def test_targets(two_runs):
    target = parse_target("critic/score/mean=0.55")
    assert (target.metric, target.op, target.value) == ("critic/score/mean", ">=", 0.55)
    comparison = compare(two_runs, CompareOptions(targets=[target]))
    [(_, (ref_hit, other_hit))] = comparison.targets
    assert (ref_hit.step, ref_hit.samples, ref_hit.wall_time_s) == (6, 768, 12.0)
    assert (other_hit.step, other_hit.samples, other_hit.wall_time_s) == (4, 512, 8.0)
    assert parse_target("response_length/clip_ratio=0.1").op == "<="  # lower is better
    assert parse_target("actor/entropy<=0.1").op == "<="
    missed = compare(two_runs, CompareOptions(targets=[parse_target("critic/score/mean=2")]))
    assert missed.targets[0][1] == [None, None]
    with pytest.raises(TargetError, match="METRIC=VALUE"):
        parse_target("val/accuracy")


def test_metric_selection_by_glob(two_runs):
    assert select_metrics(two_runs) == ["critic/score/mean", "actor/entropy"]  # key metrics, in table order
    assert select_metrics(two_runs, ["actor/*", "critic/*"]) == ["actor/entropy", "critic/score/mean"]
    assert select_metrics(two_runs, ["response_length/*", "val/accuracy"]) == [
        "response_length/clip_ratio",
        "val/accuracy",
    ]  # a plain name is kept, to show it is missing
    assert set(KEY_METRICS) >= {"val/accuracy", "actor/grad_norm", "perf/throughput"}


def test_an_agents_episode_metrics_are_shown_by_default(make_run, steps):
    """A run of episodes shows what they did beside the usual rows; single-turn runs lack them."""
    agent = make_run(
        "agent",
        steps(
            3,
            {
                "critic/score/mean": 0.5,
                "episode/turns/mean": 1.5,
                "episode/tool_errors/mean": 0.1,
                "timing_s/tools": 0.2,
            },
        ),
    )
    assert select_metrics([load_run(str(agent))]) == [
        "critic/score/mean",
        "episode/turns/mean",
        "episode/tool_errors/mean",
        "timing_s/tools",
    ]


@pytest.mark.parametrize(
    ("metric", "direction"),
    [
        ("val/accuracy", "higher"),
        ("val/pass@4", "higher"),
        ("critic/rewards/mean", "higher"),
        ("perf/throughput", "higher"),
        ("frac_reward_zero_std", "lower"),
        ("train/skipped_updates", "lower"),
        ("training/skipped_updates", "lower"),
        ("timing_s/step", "lower"),
        ("actor/entropy", None),
        ("actor/ppo_kl", None),
        ("actor/grad_norm", None),
        ("response_length/mean", None),
        ("val/response_length/mean", None),
        ("val/reward/tiny-reward/mean", "higher"),
        ("episode/tool_errors/mean", "lower"),
        ("episode/tool_errors/bad_json", "lower"),
        ("episode/env_errors/step", "lower"),
        ("episode/turns/mean", None),
    ],
)
def test_better_direction(metric, direction):
    assert better_direction(metric) == direction
