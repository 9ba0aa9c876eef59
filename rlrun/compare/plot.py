"""Overlaid training curves as a PNG: one panel per metric, one line per run."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from rlrun.compare.runs import Run

if TYPE_CHECKING:
    from matplotlib.figure import Figure

XAxis = Literal["step", "samples", "wall_time"]
X_KEYS: dict[str, str] = {"step": "step", "samples": "samples", "wall_time": "wall_time_s"}
X_LABELS: dict[str, str] = {
    "step": "step",
    "samples": "samples (responses trained on)",
    "wall_time": "wall time (s)",
}
PANEL_COLUMNS = 3
PANEL_SIZE_IN = (5.0, 3.4)


def plot_runs(
    runs: Sequence[Run],
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
    try:  # no pyplot: its global state and GUI backends have no place in a CLI
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
        from matplotlib.lines import Line2D
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
    colors = [f"C{i % 10}" for i in range(len(runs))]
    for index, metric in enumerate(metrics):
        axes = figure.add_subplot(rows, columns, index + 1)
        axes.set_title(metric, fontsize=10)
        axes.set_xlabel(X_LABELS[x], fontsize=8)
        axes.grid(alpha=0.3)
        for run, label, color in zip(runs, labels, colors):
            xs, ys = curve(run, metric, x)
            if xs:
                axes.plot(
                    xs, ema(ys, smoothing) if smoothing > 0 else ys, color=color, label=label, linewidth=1.5
                )
        if not axes.lines:
            axes.text(0.5, 0.5, "no data", ha="center", va="center", transform=axes.transAxes, color="grey")
    handles = [Line2D([], [], color=color, label=label) for label, color in zip(labels, colors)]
    figure.legend(handles=handles, loc="outside upper center", ncols=min(len(handles), 4), fontsize=9)
    figure.savefig(out, dpi=100)
    return figure


def curve(run: Run, metric: str, x: XAxis) -> tuple[list[float], list[float]]:
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
