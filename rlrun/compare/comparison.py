"""One comparison of runs: every part of the report, computed once, for the terminal and --json."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from typing import Any

from rlrun.compare.comparability import Incomparability, check_comparability
from rlrun.compare.diff import MISSING, DiffRow, diff_recipes
from rlrun.compare.health import HealthFlag, health_flags
from rlrun.compare.runs import RunRecord
from rlrun.compare.seed_groups import (
    SEED_PATH,
    GroupMetricRow,
    GroupTarget,
    SeedGroup,
    display_name,
    group_metric_rows,
    group_targets,
    seed_groups,
)
from rlrun.compare.stats import MetricRow, Target, TargetHit, first_reaching, metric_rows, select_metrics
from rlrun.records.record import Algorithm, RunMeta, Setup

# Metrics that move with the seed as much as with a change of setting (see docs/compare.md, "Seeds first").
NOISY_METRICS = ("val/", "critic/score/", "critic/rewards/")


@dataclass(frozen=True)
class CompareOptions:
    metrics: Sequence[str] = ()  # globs; empty = the key metrics
    last_k: int = 5
    at_step: int | None = None  # compare the runs as they stood at this step
    targets: Sequence[Target] = ()
    show_all: bool = False  # unchanged config keys too


@dataclass(frozen=True)
class Comparison:
    runs: list[RunRecord]  # the reference first; cut at `options.at_step` if given
    labels: list[str]  # unique display names
    options: CompareOptions
    incomparabilities: list[Incomparability]
    diff: list[DiffRow]
    metrics: list[MetricRow]
    targets: list[tuple[Target, list[TargetHit | None]]]
    health: list[list[HealthFlag]]  # per run
    groups: list[SeedGroup]  # runs that differ only in their seed, the reference's group first
    group_diff: list[DiffRow]  # config diff of the groups (their first runs, seed left out)
    group_metrics: list[GroupMetricRow]
    group_targets: list[tuple[Target, list[GroupTarget]]]
    warnings: list[str]

    @property
    def by_seed(self) -> bool:
        """Whether any setting ran at several seeds: the report is then per group."""
        return any(len(group.members) > 1 for group in self.groups)

    @property
    def group_labels(self) -> list[str]:
        return [group.label for group in self.groups]


def compare(runs: Sequence[RunRecord], options: CompareOptions = CompareOptions()) -> Comparison:
    """Compare `runs` against the first."""
    if not runs:
        raise ValueError("compare needs at least one run")
    if options.at_step is not None:
        runs = [run.until(options.at_step) for run in runs]
    runs = list(runs)
    labels = unique_labels([display_name(run) for run in runs])
    recipes = [run.recipe for run in runs]
    metrics = select_metrics(runs, options.metrics)
    groups = seed_groups(runs, labels)
    by_seed = any(len(group.members) > 1 for group in groups)
    return Comparison(
        runs=runs,
        labels=labels,
        options=options,
        incomparabilities=check_comparability(labels, recipes, [_setup_view(run.meta) for run in runs]),
        diff=diff_recipes(recipes, show_all=options.show_all),
        metrics=metric_rows(runs, metrics, options.last_k),
        targets=[(target, [first_reaching(run, target) for run in runs]) for target in options.targets],
        health=[health_flags(run) for run in runs],
        groups=groups,
        group_diff=diff_recipes(
            [_without_seed(recipes[group.members[0]]) for group in groups], show_all=options.show_all
        )
        if by_seed
        else [],
        group_metrics=group_metric_rows(runs, groups, metrics, options.last_k) if by_seed else [],
        group_targets=[(target, group_targets(runs, groups, target)) for target in options.targets]
        if by_seed
        else [],
        warnings=_seed_warnings(groups, metrics),
    )


def _setup_view(meta: RunMeta | None) -> dict[str, Any] | None:
    """A run's setup as its record holds it (a key an older record lacks stays absent)."""
    if meta is None or meta.setup is None:
        return None
    return meta.setup.model_dump(exclude_unset=True)


def _without_seed(recipe: dict[str, Any] | None) -> dict[str, Any] | None:
    if recipe is None:
        return None
    section, key = SEED_PATH
    return {**recipe, section: {k: v for k, v in (recipe.get(section) or {}).items() if k != key}}


def _seed_warnings(groups: Sequence[SeedGroup], metrics: Sequence[str]) -> list[str]:
    """A warning when settings that ran once are compared on a metric that moves with the seed."""
    noisy = [metric for metric in metrics if metric.startswith(NOISY_METRICS)]
    single = [group.label for group in groups if len(group.members) == 1]
    if len(groups) < 2 or not single or not noisy:
        return []
    which = "each setting ran" if len(single) == len(groups) else f"{', '.join(single)} ran"
    message = (
        f"{which} with one seed: a difference in {', '.join(noisy)} between single runs cannot be told "
        "from seed noise. Run each setting at several seeds (`rlrun sweep` with `seeds: [0, 1, 2]`) and "
        "compare the sweep folder."
    )
    return [message]


def unique_labels(names: Sequence[str]) -> list[str]:
    """Run names, with `#2`, `#3` added to repeats (the same run name in two folders)."""
    seen: dict[str, int] = {}
    labels = []
    for name in names:
        seen[name] = seen.get(name, 0) + 1
        labels.append(name if seen[name] == 1 else f"{name}#{seen[name]}")
    return labels


def algorithm_label(algorithm: Algorithm | None) -> str:
    """`grpo × vanilla × KL in loss`: advantage × policy loss × where the KL enters (meta.json's
    `kl_placement`: none, reward, loss or reward+loss)."""
    if algorithm is None:
        return "?"
    placement = algorithm.kl_placement
    kl = None if placement is None else "no KL" if placement == "none" else f"KL in {placement}"
    parts = [algorithm.advantage, algorithm.policy_loss, kl]
    return " × ".join(str(part) for part in parts if part) or "?"


def setup_label(setup: Setup | None) -> str:
    """`1×cpu, float32` or `16×cuda, 2 machines, fsdp2, bfloat16, amp bf16, vllm (vllm 0.32.0 on
    cuda)`: meta.json's `setup` (processes × device, machines, strategy, dtype, Accelerate's mixed
    precision, a rollout engine other than hf); `?` for a run that predates it."""
    if setup is None:
        return "?"
    parts = [
        f"{setup.processes}×{setup.device}",
        f"{setup.machines} machines" if setup.machines > 1 else None,
        None if setup.strategy == "none" else setup.strategy,
        setup.dtype,
        None if setup.mixed_precision == "no" else f"amp {setup.mixed_precision}",
        None if setup.rollout_engine in (None, "hf") else setup.rollout_engine,
    ]
    return ", ".join(part for part in parts if part)


def header(run: RunRecord, label: str) -> dict[str, Any]:
    """The facts of one run shown above the tables."""
    meta = run.meta
    recipe_model = ((run.recipe or {}).get("model") or {}).get("path")
    return {
        "name": label,
        "source": run.source,
        "algorithm": algorithm_label(meta.algorithm if meta else None),
        "model": (meta.model if meta else None) or recipe_model,
        "setup": _setup_view(meta),
        "status": run.status,
        "steps_done": run.last_step,
        "total_steps": meta.total_steps if meta else None,
        "wall_time_s": run.wall_time_s,
        "git_sha": meta.git_sha if meta else None,
        "git_dirty": meta.git_dirty if meta else None,
        "seed": meta.seed if meta else None,
        "last_update": _iso(run.last_update),
        "notes": run.notes,
    }


def to_json(comparison: Comparison) -> dict[str, Any]:
    """The comparison as plain JSON data (non-finite numbers become null)."""
    labels = comparison.labels
    data = {
        "reference": labels[0],
        "at_step": comparison.options.at_step,
        "last_k": comparison.options.last_k,
        "runs": [header(run, label) for run, label in zip(comparison.runs, labels)],
        "not_comparable": [
            {**asdict(item), "message": item.message} for item in comparison.incomparabilities
        ],
        "config_diff": [
            {
                "key": row.key,
                "values": dict(zip(labels, row.values)),
                "changes": dict(zip(labels, row.changes)),
            }
            for row in comparison.diff
        ],
        "metrics": [
            {
                "metric": row.metric,
                "better": row.direction,
                "window": row.window,
                "runs": {label: asdict(stats) for label, stats in zip(labels, row.runs)},
            }
            for row in comparison.metrics
        ],
        "targets": [
            {
                "metric": target.metric,
                "op": target.op,
                "value": target.value,
                "runs": {label: asdict(hit) if hit else None for label, hit in zip(labels, hits)},
            }
            for target, hits in comparison.targets
        ],
        "health": {
            label: [asdict(flag) for flag in flags] for label, flags in zip(labels, comparison.health)
        },
        "warnings": comparison.warnings,
        **_groups_json(comparison),
    }
    return _plain(data)


def _groups_json(comparison: Comparison) -> dict[str, Any]:
    """The seed groups, and (with several seeds of a setting) their statistics: `final`/`best` are
    mean, std, n and the 95 % t-interval (`low`, `high`); `difference` is against the reference
    group with its Welch interval."""
    labels = comparison.group_labels
    return {
        "groups": [
            {
                "label": group.label,
                "runs": [comparison.labels[i] for i in group.members],
                "seeds": group.seeds,
            }
            for group in comparison.groups
        ],
        "group_config_diff": [
            {"key": row.key, "values": dict(zip(labels, row.values))} for row in comparison.group_diff
        ],
        "group_metrics": [
            {
                "metric": row.metric,
                "better": row.direction,
                "window": row.window,
                "groups": {label: asdict(stats) for label, stats in zip(labels, row.groups)},
            }
            for row in comparison.group_metrics
        ],
        "group_targets": [
            {
                "metric": target.metric,
                "op": target.op,
                "value": target.value,
                "groups": {label: asdict(item) for label, item in zip(labels, items)},
            }
            for target, items in comparison.group_targets
        ],
    }


def _plain(value: Any) -> Any:
    """Strict JSON: NaN/inf -> null, absent config values -> null (their change says "added"/"removed")."""
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(item) for item in value]
    # asdict() deep-copies, so an absent value is another instance of MISSING's class
    if isinstance(value, type(MISSING)) or (isinstance(value, float) and not math.isfinite(value)):
        return None
    return value


def _iso(timestamp: float | None) -> str | None:
    return (
        None
        if timestamp is None
        else datetime.fromtimestamp(timestamp, timezone.utc).isoformat(timespec="seconds")
    )
