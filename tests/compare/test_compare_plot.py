"""The PNG: one panel per requested metric, one line per run, read back from the file."""

from __future__ import annotations

import pytest
from PIL import Image

from rlrun.compare.plot import PANEL_SIZE_IN, ema, plot_runs
from rlrun.compare.runs import load_run

METRICS = ["critic/score/mean", "actor/entropy", "val/accuracy", "actor/grad_norm"]


@pytest.fixture
def runs(make_run, steps):
    a = make_run(
        "a", steps(10, {"critic/score/mean": lambda s: 0.1 * s, "actor/entropy": 1.0, "actor/grad_norm": 1.0})
    )
    b = make_run("b", steps(6, {"critic/score/mean": lambda s: 0.2 * s, "actor/entropy": 0.5}))
    c = make_run("c", steps(8, {"critic/score/mean": 0.3, "actor/entropy": lambda s: 1 / s}))
    return [load_run(str(path)) for path in (a, b, c)]


def test_one_panel_per_metric_and_one_line_per_run(runs, tmp_path):
    out = tmp_path / "curves.png"
    figure = plot_runs(runs, ["a", "b", "c"], METRICS, out)
    assert [axes.get_title() for axes in figure.axes] == METRICS
    lines = {axes.get_title(): [line.get_label() for line in axes.lines] for axes in figure.axes}
    assert lines == {
        "critic/score/mean": ["a", "b", "c"],
        "actor/entropy": ["a", "b", "c"],
        "val/accuracy": [],  # requested but never recorded: an empty panel that says so
        "actor/grad_norm": ["a"],
    }
    assert [text.get_text() for text in figure.axes[2].texts] == ["no data"]
    score_a = figure.axes[0].lines[0]
    assert list(score_a.get_xdata()) == list(range(1, 11))
    assert list(score_a.get_ydata()) == pytest.approx([0.1 * s for s in range(1, 11)])
    assert [text.get_text() for text in figure.legends[0].get_texts()] == ["a", "b", "c"]
    with Image.open(out) as image:  # 3 columns x 2 rows of panels at 100 dpi
        assert image.format == "PNG"
        assert image.size == (round(3 * PANEL_SIZE_IN[0] * 100), round(2 * PANEL_SIZE_IN[1] * 100))


def test_x_axis_by_samples_or_wall_time_and_smoothing(runs, tmp_path):
    figure = plot_runs(
        runs[:2], ["a", "b"], ["critic/score/mean"], tmp_path / "s.png", x="samples", smoothing=0.5
    )
    [axes] = figure.axes
    assert list(axes.lines[1].get_xdata()) == [128 * s for s in range(1, 7)]
    assert list(axes.lines[1].get_ydata()) == pytest.approx(ema([0.2 * s for s in range(1, 7)], 0.5))
    assert axes.get_xlabel().startswith("samples")
    wall = plot_runs(runs[:1], ["a"], ["actor/entropy"], tmp_path / "w.png", x="wall_time").axes[0]
    assert list(wall.lines[0].get_xdata()) == [2.0 * s for s in range(1, 11)]
    with Image.open(tmp_path / "s.png") as image:
        assert image.size == (round(PANEL_SIZE_IN[0] * 100), round(PANEL_SIZE_IN[1] * 100))


def test_ema_starts_at_the_first_value():
    assert ema([1.0, 1.0, 1.0], 0.9) == pytest.approx([1.0, 1.0, 1.0])
    assert ema([0.0, 1.0], 0.5) == pytest.approx([0.0, 0.5 / 0.75])
