"""Runs that differ only in their seed, taken together: per setting the mean, spread and interval
of each metric's final and best value and of the time to a target, and per setting against the
reference setting the difference, its Welch interval and a plain verdict.

A sweep folder (`rlrun compare runs/my-sweep`) stands for all of its runs.
"""

from __future__ import annotations

import copy
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rlrun.compare.intervals import Difference, Summary, summarize, welch
from rlrun.compare.runs import RunRecord
from rlrun.compare.stats import (
    Direction,
    Target,
    averaging_window,
    better_direction,
    finite_series,
    first_reaching,
)
from rlrun.records.rundir import META, looks_like_run

SEED_PATH = ("trainer", "seed")
SWEEP_MANIFEST = "sweep.json"  # rlrun.sweep.plan.MANIFEST (compare does not import the sweep package)


@dataclass(frozen=True)
class SeedGroup:
    """Runs whose resolved recipes are the same but for `trainer.seed` (the reference group first)."""

    label: str
    members: list[int]  # indices into the comparison's runs
    seeds: list[Any]


@dataclass(frozen=True)
class GroupStats:
    """One metric in one group."""

    final: Summary | None  # of each run's final value (last-k mean; val/*: the latest evaluation)
    best: Summary | None  # of each run's best value (None when the metric has no better direction)
    difference: Difference | None  # final vs the reference group's final
    verdict: str | None  # "better", "worse", "same", "not distinguishable from seed noise at n=3", ...


@dataclass(frozen=True)
class GroupMetricRow:
    metric: str
    direction: Direction
    window: int
    groups: list[GroupStats]  # in group order, the reference first


@dataclass(frozen=True)
class GroupTarget:
    reached: int  # runs of the group that reached the target
    runs: int
    steps: Summary | None  # over the runs that reached it
    wall_time_s: Summary | None


def expand_sweep_folders(refs: Sequence[str], runs_dir: Path) -> list[str]:
    """Each ref as given, except a folder that holds runs without being one (a sweep): its runs,
    in the sweep manifest's order when there is one, else in path order."""
    expanded: list[str] = []
    for ref in refs:
        folder = Path(ref) if Path(ref).is_dir() else runs_dir / ref
        if not folder.is_dir() or looks_like_run(folder):
            expanded.append(ref)
            continue
        found = sorted(meta.parent for meta in folder.rglob(META))
        order = {path: index for index, path in enumerate(_manifest_dirs(folder))}
        found.sort(key=lambda path: order.get(path, len(order)))
        expanded += [str(path) for path in found] or [ref]
    return expanded


def _manifest_dirs(folder: Path) -> list[Path]:
    try:
        manifest = json.loads((folder / SWEEP_MANIFEST).read_text())
        return [folder / run["dir"] for run in manifest["runs"]]
    except (OSError, ValueError, KeyError, TypeError):
        return []


def display_name(run: RunRecord) -> str:
    """A run's name, with its sweep point for a run of a sweep (`recipe=dapo/seed-0`, not `seed-0`)."""
    path = Path(run.source)
    if run.name == path.name and path.name.startswith("seed-"):
        return f"{path.parent.name}/{run.name}"
    return run.name


def seed_groups(runs: Sequence[RunRecord], labels: Sequence[str]) -> list[SeedGroup]:
    """Group the runs by their resolved recipe without its seed, in order of first appearance. A run
    without a resolved recipe is a group of its own."""
    keys: dict[str, list[int]] = {}
    for index, run in enumerate(runs):
        keys.setdefault(_without_seed(run.recipe) if run.recipe is not None else f"#{index}", []).append(
            index
        )
    return [
        SeedGroup(
            _group_label([runs[i] for i in members], [labels[i] for i in members]),
            members,
            _seeds(runs, members),
        )
        for members in keys.values()
    ]


def _without_seed(recipe: dict[str, Any]) -> str:
    data = copy.deepcopy(recipe)
    data.get(SEED_PATH[0], {}).pop(SEED_PATH[1], None)
    return json.dumps(data, sort_keys=True, default=str)


def _seeds(runs: Sequence[RunRecord], members: list[int]) -> list[Any]:
    return [
        ((runs[i].recipe or {}).get("trainer") or {}).get("seed", runs[i].meta.seed if runs[i].meta else None)
        for i in members
    ]


def _group_label(runs: list[RunRecord], labels: list[str]) -> str:
    """A sweep point's folder name (`recipe=dapo`), else the run's label (one run), else the first
    label and how many more."""
    if len(runs) == 1:
        return labels[0]
    parents = {Path(run.source).parent for run in runs}
    if len(parents) == 1 and all(Path(run.source).name.startswith("seed-") for run in runs):
        return parents.pop().name
    return f"{labels[0]} +{len(runs) - 1}"


def group_metric_rows(
    runs: Sequence[RunRecord], groups: Sequence[SeedGroup], metrics: Sequence[str], last_k: int
) -> list[GroupMetricRow]:
    rows = []
    for metric in metrics:
        direction = better_direction(metric)
        window = averaging_window(metric, last_k)
        finals, bests = [], []
        for group in groups:
            series = [finite_series(runs[i], metric) for i in group.members]
            finals.append(summarize([_mean([v for _, v in points[-window:]]) for points in series if points]))
            pick = max if direction == "higher" else min
            best = [pick(v for _, v in points) for points in series if points] if direction else []
            bests.append(summarize(best))
        stats = [
            GroupStats(final, best, *_against(final, finals[0], direction))
            for final, best in zip(finals, bests)
        ]
        rows.append(GroupMetricRow(metric, direction, window, stats))
    return rows


def _mean(values: list[float]) -> float:
    return math.fsum(values) / len(values)


def _against(
    final: Summary | None, reference: Summary | None, direction: Direction
) -> tuple[Difference | None, str | None]:
    if final is None or reference is None:
        return None, None
    difference = welch(final, reference)
    return difference, verdict(difference, final.n, reference.n, direction)


def verdict(difference: Difference, n: int, reference_n: int, direction: Direction) -> str | None:
    """`better`/`worse` when the 95 % interval of the difference excludes 0 (in the metric's better
    direction; `differs` without one); `same` when every seed gave the same value on both sides;
    else not distinguishable from seed noise. With a single run on either side there is no
    interval, and the verdict says so."""
    sizes = f"n={n}" if n == reference_n else f"n={n} vs {reference_n}"
    if difference.low is None:
        return f"no interval at {sizes}: seed noise unknown"
    if difference.delta == 0 and difference.low == difference.high:
        return "same"
    if difference.excludes_zero:
        if direction is None:
            return "differs"
        return "better" if (difference.delta > 0) == (direction == "higher") else "worse"
    return f"not distinguishable from seed noise at {sizes}"


def group_targets(
    runs: Sequence[RunRecord], groups: Sequence[SeedGroup], target: Target
) -> list[GroupTarget]:
    result = []
    for group in groups:
        hits = [hit for i in group.members if (hit := first_reaching(runs[i], target)) is not None]
        walls = [hit.wall_time_s for hit in hits if hit.wall_time_s is not None]
        result.append(
            GroupTarget(
                len(hits), len(group.members), summarize([hit.step for hit in hits]), summarize(walls)
            )
        )
    return result
