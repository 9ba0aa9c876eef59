"""The numbers in the metric table: last-k mean, best and its step, delta against the
reference with the direction that counts as better, and when a run first reached a target.

NaN/inf values are left out of every statistic here; `health` reports them.
"""

from __future__ import annotations

import fnmatch
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from rlrun.compare.runs import RunRecord

Direction = Literal["higher", "lower"] | None
VALIDATION_PREFIX = "val/"

# The table's default rows (verl names), in display order; absent ones are skipped.
KEY_METRICS = (
    "val/accuracy",
    "critic/score/mean",
    "critic/rewards/mean",
    "response_length/mean",
    "actor/entropy",
    "actor/ppo_kl",
    "actor/kl_loss",
    "actor/pg_clipfrac",
    "actor/grad_norm",
    "perf/throughput",
    # an agent's episodes (rlrun/rollout/responses.py: episode_metrics)
    "episode/turns/mean",
    "episode/tool_calls/mean",
    "episode/tool_errors/mean",
    "episode/truncated_outputs/mean",
    "timing_s/tools",
    "timing_s/environment",
)

# Which way is better, first matching glob wins; unmatched metrics (entropy, KL, length,
# grad norm) have no better direction: a change there is a symptom, not a score.
_BETTER: tuple[tuple[str, Direction], ...] = (
    ("val/*loss*", "lower"),
    ("val/response_length/*", None),  # evaluation's response lengths: a symptom, like training's
    ("val/*", "higher"),
    ("critic/score/*", "higher"),
    ("critic/rewards/*", "higher"),
    ("critic/vf_loss", "lower"),
    ("response_length/clip_ratio", "lower"),
    ("frac_reward_zero_std", "lower"),
    ("train*/skipped_updates", "lower"),
    ("perf/throughput*", "higher"),
    ("episode/tool_errors/*", "lower"),
    ("episode/env_errors/*", "lower"),
    ("episode/truncated_outputs/*", "lower"),
    ("perf/time*", "lower"),
    ("timing_s/*", "lower"),
)


def better_direction(metric: str) -> Direction:
    for pattern, direction in _BETTER:
        if fnmatch.fnmatchcase(metric, pattern):
            return direction
    return None


def select_metrics(runs: Sequence[RunRecord], patterns: Sequence[str] = ()) -> list[str]:
    """Metric names for the table and plot.

    With patterns: every metric any run has that matches a glob, in pattern order; a plain
    name is kept even when no run has it, so asking for it shows that it is missing.
    Without: the key metrics that any run has, else every metric.
    """
    available = sorted({name for run in runs for name in run.metric_names()})
    if not patterns:
        return [name for name in KEY_METRICS if name in available] or available
    chosen: dict[str, None] = {}
    for pattern in patterns:
        if any(char in pattern for char in "*?["):
            chosen.update(dict.fromkeys(fnmatch.filter(available, pattern)))
        else:
            chosen[pattern] = None
    return list(chosen)


@dataclass(frozen=True)
class RunStats:
    """One metric in one run."""

    count: int  # finite values recorded
    last_step: int | None
    mean_last_k: float | None
    best: float | None  # None when the metric has no better direction
    best_step: int | None
    delta: float | None  # mean_last_k minus the reference's
    verdict: Literal["better", "worse", "same"] | None  # of the delta; None when no direction


@dataclass(frozen=True)
class MetricRow:
    metric: str
    direction: Direction
    window: int  # how many of each run's latest values `mean_last_k` averages
    runs: list[RunStats]  # in run order, the reference first


def finite_series(run: RunRecord, metric: str) -> list[tuple[int, float]]:
    """(step, value) for each finite value of `metric` in `run`."""
    return [(int(row["step"]), value) for row, value in run.series(metric) if math.isfinite(value)]


def metric_rows(runs: Sequence[RunRecord], metrics: Sequence[str], last_k: int) -> list[MetricRow]:
    """The metric table: each run's mean of the last k values it recorded for each metric."""
    rows = []
    for metric in metrics:
        direction = better_direction(metric)
        window = averaging_window(metric, last_k)
        series = [finite_series(run, metric) for run in runs]
        means = [_mean([value for _, value in points[-window:]]) for points in series]
        stats = [_run_stats(points, mean, means[0], direction) for points, mean in zip(series, means)]
        rows.append(MetricRow(metric, direction, window, stats))
    return rows


def averaging_window(metric: str, last_k: int) -> int:
    """Validation runs every N steps and already averages over its prompts: its latest value is
    the run's current figure, where a mean of the last k would reach back into early training."""
    return 1 if metric.startswith(VALIDATION_PREFIX) else last_k


def _mean(values: Sequence[float]) -> float | None:
    return math.fsum(values) / len(values) if values else None


def _run_stats(
    points: list[tuple[int, float]], mean: float | None, reference_mean: float | None, direction: Direction
) -> RunStats:
    best = best_step = None
    if points and direction is not None:
        pick = max if direction == "higher" else min
        best_step, best = pick(points, key=lambda point: point[1])  # the earliest on ties
    delta = verdict = None
    if mean is not None and reference_mean is not None:
        delta = mean - reference_mean
        verdict = _verdict(mean, reference_mean, direction)
    return RunStats(len(points), points[-1][0] if points else None, mean, best, best_step, delta, verdict)


def _verdict(
    mean: float, reference_mean: float, direction: Direction
) -> Literal["better", "worse", "same"] | None:
    if math.isclose(mean, reference_mean, rel_tol=1e-9, abs_tol=1e-12):
        return "same"
    if direction is None:
        return None
    return "better" if (mean > reference_mean) == (direction == "higher") else "worse"


class TargetError(ValueError):
    """A `--target` that does not parse."""


@dataclass(frozen=True)
class Target:
    metric: str
    op: Literal[">=", "<="]
    value: float

    def __str__(self) -> str:
        return f"{self.metric} {self.op} {self.value:g}"


def parse_target(text: str) -> Target:
    """`val/accuracy=0.8` (reached in the metric's better direction), or an explicit `>=` / `<=`."""
    match = re.fullmatch(r"\s*(.+?)\s*(>=|<=|=)\s*(\S+)\s*", text)
    try:
        value = float(match.group(3)) if match else math.nan
    except ValueError:
        value = math.nan
    if match is None or not math.isfinite(value):
        raise TargetError(f"--target {text!r}: expected METRIC=VALUE, e.g. val/accuracy=0.8")
    metric, op = match.group(1), match.group(2)
    if op == "=":
        op = "<=" if better_direction(metric) == "lower" else ">="
    return Target(metric, op, value)


@dataclass(frozen=True)
class TargetHit:
    """Where a run first reached a target."""

    step: int
    samples: float | None
    wall_time_s: float | None


def first_reaching(run: RunRecord, target: Target) -> TargetHit | None:
    for row, value in run.series(target.metric):
        if math.isfinite(value) and (value >= target.value if target.op == ">=" else value <= target.value):
            return TargetHit(int(row["step"]), row.get("samples"), row.get("wall_time_s"))
    return None
