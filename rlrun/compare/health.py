"""Health flags: the signs that a run went wrong, whatever its score says.

Each check reads one run's metrics and returns a flag or nothing. Trends compare the mean
of a metric's first few values with its last few, so a single noisy step does not trip them.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from rlrun.compare.runs import RunRecord
from rlrun.compare.stats import finite_series
from rlrun.records.stalls import find_stalls

WINDOW = 5  # values averaged at each end of a trend
MIN_TREND_POINTS = 4  # fewer values than this make no trend
ENTROPY_COLLAPSE_RATIO = 0.1  # late entropy below this fraction of the early entropy
ENTROPY_FLOOR = 0.01  # nats per token: a near-deterministic policy explores nothing
CLIP_RATIO_RISE = 0.1  # absolute rise of the fraction of responses cut at max length
ZERO_STD_HIGH = 0.5  # fraction of prompt groups whose rewards were all equal
GRAD_SPIKE_FACTOR = 10.0  # a grad norm this many times the median of the recent ones before it
GRAD_SPIKE_HISTORY = (3, 20)
# the cumulative count of skipped non-finite updates: as `rlrun train` logs it, and as verl-style
# loggers name it
SKIPPED_UPDATES = (
    "training/skipped_updates",
    "train/skipped_updates",
)  # (fewest, most) preceding values the median is taken over


@dataclass(frozen=True)
class HealthFlag:
    check: str  # stable identifier, for --json and tests
    severity: Literal["error", "warning"]
    message: str
    step: int | None  # where it first showed


def health_flags(run: RunRecord) -> list[HealthFlag]:
    """Every flag `run` raises, in check order."""
    return [flag for check in CHECKS if (flag := check(run)) is not None] + training_stalls(run)


def non_finite(run: RunRecord) -> HealthFlag | None:
    bad: dict[str, list[int]] = {}
    for row in run.rows:
        for metric, value in row.items():
            if not math.isfinite(value):
                bad.setdefault(metric, []).append(int(row["step"]))
    if not bad:
        return None
    first = min(steps[0] for steps in bad.values())
    listed = ", ".join(f"{metric} ({len(steps)}×)" for metric, steps in sorted(bad.items()))
    return HealthFlag("non-finite", "error", f"NaN/inf values from step {first}: {listed}", first)


def entropy_collapse(run: RunRecord) -> HealthFlag | None:
    trend = _trend(run, "actor/entropy")
    if trend is None:
        return None
    early, late, step = trend
    if late >= max(ENTROPY_FLOOR, ENTROPY_COLLAPSE_RATIO * early):
        return None
    return HealthFlag(
        "entropy-collapse",
        "warning",
        f"entropy collapsed from {early:.3g} to {late:.3g}: the policy has stopped exploring",
        step,
    )


def rising_clip_ratio(run: RunRecord) -> HealthFlag | None:
    trend = _trend(run, "response_length/clip_ratio")
    if trend is None:
        return None
    early, late, step = trend
    if late - early < CLIP_RATIO_RISE:
        return None
    return HealthFlag(
        "rising-clip-ratio",
        "warning",
        f"response clip ratio rose from {early:.0%} to {late:.0%}: responses increasingly hit "
        "rollout.max_response_tokens",
        step,
    )


def zero_std_groups(run: RunRecord) -> HealthFlag | None:
    points = finite_series(run, "frac_reward_zero_std")[-WINDOW:]
    if not points:
        return None
    late = statistics.fmean(value for _, value in points)
    if late < ZERO_STD_HIGH:
        return None
    return HealthFlag(
        "zero-std-groups",
        "warning",
        f"{late:.0%} of prompt groups got identical rewards (last {len(points)} steps): "
        "they give GRPO-style advantages no signal",
        points[0][0],
    )


def grad_norm_spikes(run: RunRecord) -> HealthFlag | None:
    # A step in which every prompt group's rewards were equal has no policy-gradient signal: its
    # norm is the KL term's alone (~0 near the reference), no baseline for a step that learns.
    silent = {step for step, share in finite_series(run, "frac_reward_zero_std") if share >= 1.0}
    points = finite_series(run, "actor/grad_norm")
    spikes = []
    fewest, most = GRAD_SPIKE_HISTORY
    for index in range(fewest, len(points)):
        step, value = points[index]
        history = [v for s, v in points[max(0, index - most) : index] if s not in silent]
        if len(history) < fewest:
            continue
        baseline = statistics.median(history)
        if baseline > 0 and value > GRAD_SPIKE_FACTOR * baseline:
            spikes.append((step, value / baseline))
    if not spikes:
        return None
    worst_step, worst = max(spikes, key=lambda spike: spike[1])
    return HealthFlag(
        "grad-norm-spikes",
        "warning",
        f"{len(spikes)} grad-norm spike(s) over {GRAD_SPIKE_FACTOR:g}× the recent median "
        f"(worst {worst:.0f}× at step {worst_step})",
        spikes[0][0],
    )


def skipped_updates(run: RunRecord) -> HealthFlag | None:
    points = next((p for name in SKIPPED_UPDATES if (p := finite_series(run, name))), [])  # cumulative
    if not points or points[-1][1] <= 0:
        return None
    first = next(step for step, value in points if value > 0)
    return HealthFlag(
        "skipped-updates",
        "warning",
        f"{points[-1][1]:.0f} update(s) skipped for non-finite loss or gradients, first at step {first}",
        first,
    )


def training_stalls(run: RunRecord) -> list[HealthFlag]:
    """The stalls `rlrun train` warns about (most responses cut, all-zero rewards): why a run did not learn."""
    return [HealthFlag(stall.check, "warning", stall.message, stall.step) for stall in find_stalls(run.rows)]


def _trend(run: RunRecord, metric: str) -> tuple[float, float, int] | None:
    """(mean of the first values, mean of the last values, first step of the last values)."""
    points = finite_series(run, metric)
    if len(points) < MIN_TREND_POINTS:
        return None
    window = min(WINDOW, len(points) // 2)
    early = statistics.fmean(value for _, value in points[:window])
    late = statistics.fmean(value for _, value in points[-window:])
    return early, late, points[-window][0]


OVEROPTIMISATION_ACC_DROP = 0.05  # accuracy below its best window by this much (absolute)...
# ...while the reward stayed at least where it was then: the two have come apart.


def reward_up_accuracy_down(run: RunRecord) -> HealthFlag | None:
    """Over-optimisation: the training reward (`critic/score/mean`, e.g. a learned reward
    model's score) holds or rises while the accuracy (`reward/acc/mean`, the rule's) falls from
    its best. When the reward is the accuracy (a rule reward alone) the two cannot part."""
    score, acc = dict(finite_series(run, "critic/score/mean")), dict(finite_series(run, "reward/acc/mean"))
    both = [step for step in acc if step in score]
    if len(both) < 2 * WINDOW:
        return None

    def window_mean(series: dict[int, float], end: int) -> float:
        return statistics.fmean(series[step] for step in both[end - WINDOW : end])

    best_end = max(range(WINDOW, len(both) + 1), key=lambda end: window_mean(acc, end))
    acc_best, acc_late = window_mean(acc, best_end), window_mean(acc, len(both))
    score_then, score_late = window_mean(score, best_end), window_mean(score, len(both))
    if acc_best - acc_late < OVEROPTIMISATION_ACC_DROP or score_late < score_then:
        return None
    return HealthFlag(
        "reward-up-accuracy-down",
        "warning",
        f"the reward rose from {score_then:.3g} to {score_late:.3g} while accuracy fell from its best "
        f"{acc_best:.0%} (steps {both[best_end - WINDOW]}-{both[best_end - 1]}) to {acc_late:.0%}: "
        "the policy is pleasing the reward, not solving the task (over-optimisation)",
        both[best_end] if best_end < len(both) else both[-1],
    )


CHECKS: tuple[Callable[[RunRecord], HealthFlag | None], ...] = (
    non_finite,
    entropy_collapse,
    rising_clip_ratio,
    zero_std_groups,
    grad_norm_spikes,
    skipped_updates,
    reward_up_accuracy_down,
)
