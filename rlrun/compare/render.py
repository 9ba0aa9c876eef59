"""The comparison in the terminal: Rich tables, arrows coloured by which way is better,
and Unicode sparklines on one scale per metric."""

from __future__ import annotations

import json
import math
import time
from collections.abc import Iterable
from typing import Any

from rich.console import Console, Group, JustifyMethod, RenderableType
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from rlrun.compare.comparison import Comparison, header, setup_label
from rlrun.compare.diff import MISSING, DiffRow
from rlrun.compare.intervals import CONFIDENCE, Summary
from rlrun.compare.seed_groups import GroupStats
from rlrun.compare.sparkline import sparkline
from rlrun.compare.stats import MetricRow, RunStats, finite_series

STATUS_STYLE = {
    "running": "cyan",
    "finished": "green",
    "failed": "bold red",
    "interrupted": "yellow",
    "crashed": "bold red",  # meta.json says running, but its process is gone (runs.live_status)
    "stale": "yellow",  # running on another machine, no heartbeat for a long while
}
CHANGE_STYLE = {
    "ref": "",
    "same": "dim",
    "changed": "bold yellow",
    "added": "green",
    "removed": "red",
    "unknown": "dim",
}
VERDICT_STYLE = {"better": "bold green", "worse": "bold red", "same": "dim", None: "blue"}
GROUP_VERDICT_STYLE = {"better": "bold green", "worse": "bold red", "same": "dim", "differs": "blue"}
SPARK_WIDTH = (8, 24)
METRIC_COLUMNS_WIDTH = 90  # the metric table without its curve column, roughly
BETTER_HINT = {"higher": "↑ better", "lower": "↓ better", None: ""}


def render(comparison: Comparison, console: Console, spark_width: int | None = None) -> None:
    """Print the whole comparison: header, warnings, config diff, metrics, targets, health.

    Sparklines take what the console has left beside the other columns (8 to 24 characters).
    """
    if spark_width is None:
        spark_width = max(SPARK_WIDTH[0], min(SPARK_WIDTH[1], console.width - METRIC_COLUMNS_WIDTH))
    if comparison.by_seed:
        parts = (
            _diff_table(comparison.group_diff, comparison.group_labels, "config diff (seeds aside)"),
            _group_metric_table(comparison),
            _verdict_table(comparison),
            _group_target_table(comparison),
        )
    else:
        parts = (
            _diff_table(comparison.diff, comparison.labels, "config diff (resolved recipes)"),
            _metric_table(comparison, spark_width),
            _target_table(comparison),
        )
    for part in (
        _header_table(comparison),
        _notes(comparison),
        _warnings(comparison),
        _seed_warnings(comparison),
        *parts,
        _health(comparison),
    ):
        if part is not None:
            console.print(part)


def format_duration(seconds: float | None) -> str:
    """`1h02m`, `3m05s`, `12s`."""
    if seconds is None or not math.isfinite(seconds):
        return "—"
    hours, rest = divmod(round(seconds), 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes:02d}m"
    return f"{minutes}m{secs:02d}s" if minutes else f"{secs}s"


def format_number(value: float | None) -> str:
    if value is None:
        return "—"
    if not math.isfinite(value):
        return str(value)
    return f"{value:,.0f}" if abs(value) >= 10_000 else f"{value:.4g}"


def _header_table(comparison: Comparison) -> Table:
    at = f" at step {comparison.options.at_step}" if comparison.options.at_step is not None else ""
    table = Table(
        title=f"rlrun compare: {len(comparison.runs)} run(s) against {comparison.labels[0]}{at}",
        title_justify="left",
    )
    _add_columns(table, ("run", "algorithm", "model", "setup", "status", "steps", "wall time", "git", "seed"))
    for index, (run, label) in enumerate(zip(comparison.runs, comparison.labels)):
        facts = header(run, label)
        status = Text(facts["status"], style=STATUS_STYLE.get(facts["status"], ""))
        if facts["status"] == "running" and run.last_update is not None:
            status.append(f" ({format_duration(time.time() - run.last_update)} ago)", style="dim")
        sha = (facts["git_sha"] or "—")[:8] + ("-dirty" if facts["git_dirty"] else "")
        table.add_row(
            Text(label + (" (ref)" if index == 0 else ""), style="bold"),
            facts["algorithm"],
            str(facts["model"] or "—"),
            setup_label(run.meta.setup if run.meta else None),
            status,
            f"{_or_dash(facts['steps_done'])}/{_or_dash(facts['total_steps'])}",
            format_duration(facts["wall_time_s"]),
            sha,
            _or_dash(facts["seed"]),
        )
    return table


def _notes(comparison: Comparison) -> RenderableType | None:
    lines = [
        Text(f"{label}: {note}", style="dim")
        for run, label in zip(comparison.runs, comparison.labels)
        for note in run.notes
    ]
    return Group(*lines) if lines else None


def _warnings(comparison: Comparison) -> Panel | None:
    if not comparison.incomparabilities:
        return None
    lines = []
    for item in comparison.incomparabilities:
        lines.append(Text(f"⚠ {item.message}", style="yellow"))
        for key, values in item.differences.items():
            shown = ", ".join(f"{label}={_show(value)}" for label, value in zip(comparison.labels, values))
            lines.append(Text(f"    {key}: {shown}", style="dim"))
    return Panel(Group(*lines), title="not comparable", title_align="left", border_style="yellow")


def _diff_table(rows: list[DiffRow], labels: list[str], title: str) -> RenderableType:
    if not rows:
        return Text("config: no differences in the resolved recipes", style="dim")
    table = Table(title=title, title_justify="left")
    table.add_column("key", no_wrap=True)  # keys are what the reader scans for
    _add_columns(table, labels)
    for row in rows:
        cells = [
            Text(_show(value) if change != "unknown" else "?", style=CHANGE_STYLE[change])
            for value, change in zip(row.values, row.changes)
        ]
        table.add_row(row.key, *cells)
    return table


def _seed_warnings(comparison: Comparison) -> RenderableType | None:
    if not comparison.warnings:
        return None
    lines = [Text(f"⚠ {warning}", style="yellow") for warning in comparison.warnings]
    return Panel(Group(*lines), title="seed noise", title_align="left", border_style="yellow")


def _group_metric_table(comparison: Comparison) -> RenderableType:
    if not comparison.group_metrics:
        return Text("metrics: none recorded yet", style="dim")
    k = comparison.options.last_k
    percent = f"{CONFIDENCE:.0%}"
    caption = (
        f"final: each run's mean of its last {k} values (val/*: its latest evaluation); mean ± std over "
        f"the seeds, and the {percent} t-interval of that mean. best: each run's best value, mean ± std."
    )
    table = Table(title="metrics over seeds", title_justify="left", caption=caption, caption_justify="left")
    _add_columns(
        table,
        (
            "metric",
            "setting",
            ("n", "right"),
            ("final", "right"),
            (f"{percent} interval", "right"),
            ("best", "right"),
        ),
    )
    for row in comparison.group_metrics:
        for index, (label, stats) in enumerate(zip(comparison.group_labels, row.groups)):
            table.add_row(
                _metric_name(row.metric, row.direction) if index == 0 else "",
                label,
                str(stats.final.n) if stats.final else "0",
                _mean_std(stats.final),
                _interval(stats.final),
                _mean_std(stats.best),
                end_section=index == len(row.groups) - 1,
            )
    return table


def _verdict_table(comparison: Comparison) -> RenderableType | None:
    """Each setting against the reference setting: the difference of the final values, its Welch
    interval, and what it means."""
    rows = [
        (row, label, stats)
        for row in comparison.group_metrics
        for label, stats in list(zip(comparison.group_labels, row.groups))[1:]
    ]
    if not rows:
        return None
    caption = f"Δ final: the difference of the mean final values, with Welch's {CONFIDENCE:.0%} interval"
    table = Table(
        title=f"against {comparison.group_labels[0]}",
        title_justify="left",
        caption=caption,
        caption_justify="left",
    )
    _add_columns(table, ("metric", "setting", ("Δ final", "right"), "verdict"))
    for row, label, stats in rows:
        table.add_row(_metric_name(row.metric, row.direction), label, _group_delta(stats), _verdict(stats))
    return table


def _add_columns(table: Table, columns: Iterable[str | tuple[str, JustifyMethod]]) -> None:
    """Columns (a name, left-justified, or (name, justify)) that lose nothing in a narrow terminal
    (80 columns in a pipe or a CI log): a cell too wide folds onto more lines, never cut with an
    ellipsis. (Unwrappable columns beside one foldable column once let rich shrink that one to
    nothing, dropping every metric name.)"""
    for column in columns:
        name, justify = (column, "left") if isinstance(column, str) else column
        table.add_column(name, justify=justify, overflow="fold")


def _metric_name(metric: str, direction: str | None) -> Text:
    return Text(metric, style="bold") + Text(f" {BETTER_HINT[direction]}", style="dim")


def _mean_std(summary: Summary | None) -> str:
    if summary is None:
        return "—"
    return format_number(summary.mean) + ("" if summary.std is None else f" ± {summary.std:.2g}")


def _interval(summary: Summary | None) -> str:
    if summary is None or summary.low is None or summary.high is None:
        return "—"
    return f"[{format_number(summary.low)}, {format_number(summary.high)}]"


def _group_delta(stats: GroupStats) -> Text:
    difference = stats.difference
    if difference is None:
        return Text("—", style="dim")
    text = f"{difference.delta:+.3g}"
    if difference.low is not None and difference.high is not None:
        text += f" [{difference.low:+.2g}, {difference.high:+.2g}]"
    return Text(text, style=GROUP_VERDICT_STYLE.get(stats.verdict or "", "yellow"))


def _verdict(stats: GroupStats) -> Text:
    return Text(stats.verdict or "—", style=GROUP_VERDICT_STYLE.get(stats.verdict or "", "yellow"))


def _group_target_table(comparison: Comparison) -> Table | None:
    if not comparison.group_targets:
        return None
    table = Table(title="time to target over seeds", title_justify="left")
    _add_columns(table, ("target", "setting", "reached", "step", f"{CONFIDENCE:.0%} interval", "wall time"))
    for target, items in comparison.group_targets:
        for index, (label, item) in enumerate(zip(comparison.group_labels, items)):
            wall = item.wall_time_s
            table.add_row(
                str(target) if index == 0 else "",
                label,
                f"{item.reached}/{item.runs}",
                _mean_std(item.steps),
                _interval(item.steps),
                format_duration(wall.mean) if wall else "—",
                end_section=index == len(items) - 1,
            )
    return table


def _metric_table(comparison: Comparison, spark_width: int) -> RenderableType:
    if not comparison.metrics:
        return Text("metrics: none recorded yet", style="dim")
    k = comparison.options.last_k
    latest_only = [row.metric for row in comparison.metrics if row.window < k]
    caption = f"{', '.join(latest_only)}: the latest evaluation, not a mean" if latest_only else None
    table = Table(title="metrics", title_justify="left", caption=caption, caption_justify="left")
    _add_columns(
        table,
        (
            "metric",
            "run",
            (f"last-{k} mean", "right"),
            ("Δ vs ref", "right"),
            ("best @ step", "right"),
            "curve",
        ),
    )
    table.columns[-1].no_wrap = True  # a wrapped sparkline reads as two curves: crop it instead
    table.columns[-1].overflow = "crop"
    for row in comparison.metrics:
        curves = _curves(comparison, row, spark_width)
        for index, (label, stats, curve) in enumerate(zip(comparison.labels, row.runs, curves)):
            table.add_row(
                _metric_name(row.metric, row.direction) if index == 0 else "",
                label,
                format_number(stats.mean_last_k),
                Text("ref", style="dim") if index == 0 else _delta(stats, row.runs[0]),
                "—" if stats.best is None else f"{format_number(stats.best)} @ {stats.best_step}",
                curve,
                end_section=index == len(row.runs) - 1,
            )
    return table


def _curves(comparison: Comparison, row: MetricRow, width: int) -> list[str]:
    """Sparklines of every run on the metric's common scale."""
    series = [[value for _, value in finite_series(run, row.metric)] for run in comparison.runs]
    values = [value for points in series for value in points]
    if not values:
        return ["" for _ in series]
    return [sparkline(points, width, min(values), max(values)) for points in series]


def _delta(stats: RunStats, reference: RunStats) -> Text:
    if stats.delta is None:
        return Text("—", style="dim")
    if stats.verdict == "same":
        return Text("= 0", style="dim")
    arrow = "↑" if stats.delta > 0 else "↓"
    text = f"{arrow} {stats.delta:+.3g}"
    if reference.mean_last_k:
        text += f" ({stats.delta / abs(reference.mean_last_k):+.1%})"
    return Text(text, style=VERDICT_STYLE[stats.verdict])


def _target_table(comparison: Comparison) -> Table | None:
    if not comparison.targets:
        return None
    table = Table(title="time to target", title_justify="left")
    _add_columns(table, ("target", "run", "step", "samples", "wall time"))
    for target, hits in comparison.targets:
        for index, (label, hit) in enumerate(zip(comparison.labels, hits)):
            cells = (
                ["not reached", "", ""]
                if hit is None
                else [str(hit.step), format_number(hit.samples), format_duration(hit.wall_time_s)]
            )
            table.add_row(
                str(target) if index == 0 else "", label, *cells, end_section=index == len(hits) - 1
            )
    return table


def _health(comparison: Comparison) -> Group:
    lines = [Text("health", style="bold italic")]
    for run, label, flags in zip(comparison.runs, comparison.labels, comparison.health):
        if not run.rows:
            lines.append(Text(f"· {label}: no metrics to check yet", style="dim"))
        elif not flags:
            lines.append(Text(f"✓ {label}: no problems found", style="green"))
        for flag in flags:
            mark, style = ("✗", "red") if flag.severity == "error" else ("⚠", "yellow")
            lines.append(Text(f"{mark} {label}: {flag.message}", style=style))
    return Group(*lines)


def _show(value: Any) -> str:
    """A config value as YAML would spell it."""
    if value is MISSING:
        return "(absent)"
    return value if isinstance(value, str) else json.dumps(value, default=str)


def _or_dash(value: Any) -> str:
    return "—" if value is None else str(value)
