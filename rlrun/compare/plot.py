"""Overlaid training curves as a PNG: one panel per metric, one line per run, or per seed group its
mean curve with an interval band."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from rlrun.compare.intervals import summarize
from rlrun.compare.runs import RunReadError, RunRecord
from rlrun.compare.seed_groups import SeedGroup

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from rlrun.compare.comparison import Comparison

XAxis = Literal["step", "samples", "wall_time"]
X_KEYS: dict[str, str] = {"step": "step", "samples": "samples", "wall_time": "wall_time_s"}
X_LABELS: dict[str, str] = {
    "step": "step",
    "samples": "samples (responses trained on)",
    "wall_time": "wall time (s)",
}
PANEL_COLUMNS = 3
PANEL_SIZE_IN = (5.0, 3.4)


def format_problem(out: Path) -> str | None:
    """Why matplotlib cannot write a figure to `out` (it picks the format from the suffix), or None."""
    from matplotlib.backend_bases import FigureCanvasBase

    formats = FigureCanvasBase.get_supported_filetypes()
    if out.suffix.lstrip(".").lower() in formats:
        return None
    return (
        f"`{out.suffix or '(no suffix)'}` is not an image format matplotlib writes; name the file "
        f"with one of {', '.join('.' + name for name in sorted(formats))} (e.g. curves.png)"
    )


def plot_comparison(comparison: Comparison, path: Path, x: XAxis = "step", smoothing: float = 0.0) -> None:
    """`rlrun compare --plot`: the compared metrics' curves, one band per seed group when the runs
    differ only in their seed, else one line per run."""
    names = [row.metric for row in comparison.metrics]
    if not names:
        raise RunReadError("nothing to plot: the runs have recorded no metrics yet")
    if comparison.by_seed:
        plot_groups(comparison.runs, comparison.groups, names, path, x=x, smoothing=smoothing)
    else:
        plot_runs(comparison.runs, comparison.labels, names, path, x=x, smoothing=smoothing)


def plot_runs(
    runs: Sequence[RunRecord],
    labels: Sequence[str],
    metrics: Sequence[str],
    out: Path | str,
    x: XAxis = "step",
    smoothing: float = 0.0,
) -> Figure:
    """Write the curves of `metrics` to `out` (PNG) and return the figure.

    `smoothing` in [0, 1) is an exponential moving average weight (0 = raw), as in
    TensorBoard. A run without a metric has no line in its panel.
    """
    figure, panels = _figure(metrics, x, smoothing)
    colors = [f"C{i % 10}" for i in range(len(runs))]
    for axes, metric in zip(panels, metrics):
        for run, label, color in zip(runs, labels, colors):
            xs, ys = curve(run, metric, x)
            if xs:
                axes.plot(
                    xs, ema(ys, smoothing) if smoothing > 0 else ys, color=color, label=label, linewidth=1.5
                )
    return _finish(figure, panels, labels, colors, out)


def plot_groups(
    runs: Sequence[RunRecord],
    groups: Sequence[SeedGroup],
    metrics: Sequence[str],
    out: Path | str,
    x: XAxis = "step",
    smoothing: float = 0.0,
) -> Figure:
    """Each group's mean curve over its seeds, with the 95 % t-interval of the mean as a band (none
    for a group of one run), to `out` (PNG). The curve has the steps every run of the group logged."""
    figure, panels = _figure(metrics, x, smoothing)
    colors = [f"C{i % 10}" for i in range(len(groups))]
    for axes, metric in zip(panels, metrics):
        for group, color in zip(groups, colors):
            xs, means, lows, highs = mean_curve([runs[i] for i in group.members], metric, x)
            if not xs:
                continue
            smooth = (lambda ys: ema(ys, smoothing)) if smoothing > 0 else list
            axes.plot(xs, smooth(means), color=color, label=group.label, linewidth=1.5)
            if lows:
                axes.fill_between(xs, smooth(lows), smooth(highs), color=color, alpha=0.2, linewidth=0)
    return _finish(figure, panels, [group.label for group in groups], colors, out)


def mean_curve(
    runs: Sequence[RunRecord], metric: str, x: XAxis
) -> tuple[list[float], list[float], list[float], list[float]]:
    """(x, mean, low, high) at each step where every run has the metric and the x coordinate: x is
    the runs' mean x, low/high the t-interval of the mean (empty lists for a single run)."""
    key = X_KEYS[x]
    by_run = [
        {
            int(row["step"]): (row[key], value)
            for row, value in run.series(metric)
            if key in row and math.isfinite(value)
        }
        for run in runs
    ]
    steps = sorted(set.intersection(*(set(points) for points in by_run))) if by_run else []
    xs, means, lows, highs = [], [], [], []
    for step in steps:
        summary = summarize([points[step][1] for points in by_run])
        xs.append(math.fsum(points[step][0] for points in by_run) / len(by_run))
        means.append(summary.mean)
        if summary.low is not None:
            lows.append(summary.low)
            highs.append(summary.high)
    return xs, means, lows, highs


def _figure(metrics: Sequence[str], x: XAxis, smoothing: float) -> tuple[Figure, list[Any]]:
    """An empty figure with one titled panel per metric."""
    try:  # no pyplot: its global state and GUI backends have no place in a CLI
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError as exc:
        raise ImportError("--plot needs matplotlib: pip install 'rlrun[plot]'") from exc
    if not 0.0 <= smoothing < 1.0:
        raise ValueError(f"smoothing must be in [0, 1), got {smoothing}")
    if not metrics:
        raise ValueError("no metrics to plot")
    columns = min(PANEL_COLUMNS, len(metrics))
    rows = math.ceil(len(metrics) / columns)
    figure = Figure(figsize=(PANEL_SIZE_IN[0] * columns, PANEL_SIZE_IN[1] * rows), layout="constrained")
    FigureCanvasAgg(figure)  # attaches itself as the figure's canvas, for savefig
    panels = []
    for index, metric in enumerate(metrics):
        axes = figure.add_subplot(rows, columns, index + 1)
        axes.set_title(metric, fontsize=10)
        axes.set_xlabel(X_LABELS[x], fontsize=8)
        axes.grid(alpha=0.3)
        panels.append(axes)
    return figure, panels


def _finish(
    figure: Figure, panels: list[Any], labels: Sequence[str], colors: Sequence[str], out: Path | str
) -> Figure:
    """Mark empty panels, add the legend, write the PNG."""
    from matplotlib.lines import Line2D

    for axes in panels:
        if not axes.lines:
            axes.text(0.5, 0.5, "no data", ha="center", va="center", transform=axes.transAxes, color="grey")
    handles = [Line2D([], [], color=color, label=label) for label, color in zip(labels, colors)]
    figure.legend(handles=handles, loc="outside upper center", ncols=min(len(handles), 4), fontsize=9)
    figure.savefig(out, dpi=100)
    return figure


def curve(run: RunRecord, metric: str, x: XAxis) -> tuple[list[float], list[float]]:
    """(x, y) of the finite values of `metric`; rows without the x coordinate are skipped."""
    key = X_KEYS[x]
    points = [(row[key], value) for row, value in run.series(metric) if key in row and math.isfinite(value)]
    return [px for px, _ in points], [py for _, py in points]


def ema(values: Sequence[float], weight: float) -> list[float]:
    """Exponential moving average, debiased so the curve starts at the first value."""
    smoothed, average = [], 0.0
    for count, value in enumerate(values, start=1):
        average = weight * average + (1 - weight) * value
        smoothed.append(average / (1 - weight**count))
    return smoothed
