"""Seed groups: which runs form a setting, their statistics, the verdict thresholds, sweep folders,
and the seed-aware report in the terminal, as JSON and as a plot."""

from __future__ import annotations

import json
import math

import pytest
from rich.console import Console

from rlrun.compare.comparison import CompareOptions, compare, to_json
from rlrun.compare.intervals import Difference
from rlrun.compare.render import render
from rlrun.compare.runs import load_run
from rlrun.compare.seed_groups import expand_sweep_folders, seed_groups, verdict
from rlrun.compare.stats import parse_target

# Final val/accuracy of each seed (the latest evaluation): grpo 0.70/0.74/0.78, dapo 0.80/0.84/0.88.
ACCURACY = {"grpo": (0.70, 0.74, 0.78), "dapo": (0.80, 0.84, 0.88), "close": (0.72, 0.76, 0.80)}
SAMPLES = {"grpo": 8, "dapo": 16, "close": 12}  # rollout.n: what makes the settings differ


@pytest.fixture
def sweep(make_run, tmp_path):
    """runs/s/<setting>/seed-<n>, as `rlrun sweep` lays them out (val/accuracy at steps 0, 5, 10)."""

    def make(settings=("grpo", "dapo")):
        for setting in settings:
            for seed, final in enumerate(ACCURACY[setting]):
                rows = [
                    {"step": 0, "val/accuracy": 0.5},
                    {"step": 5, "wall_time_s": 10.0, "val/accuracy": 0.6 + 0.01 * seed},
                    {"step": 10, "wall_time_s": 20.0 + seed, "val/accuracy": final},
                ]
                make_run(
                    f"s/{setting}/seed-{seed}",
                    rows,
                    changes={"trainer.seed": seed, "rollout.n": SAMPLES[setting]},
                    meta={"name": f"seed-{seed}"},
                )
        (tmp_path / "runs" / "s" / "sweep.json").write_text(
            json.dumps({"runs": [{"dir": f"{s}/seed-{n}"} for s in settings for n in range(3)]})
        )
        return tmp_path / "runs" / "s"

    return make


def test_runs_differing_only_in_the_seed_form_one_group(sweep):
    folder = sweep()
    refs = expand_sweep_folders([str(folder)], folder.parent)
    assert [ref.split("/s/")[1] for ref in refs] == [
        f"{s}/seed-{n}" for s in ("grpo", "dapo") for n in range(3)
    ]
    runs = [load_run(ref) for ref in refs]
    groups = seed_groups(runs, [run.name for run in runs])
    assert [(group.label, group.members, group.seeds) for group in groups] == [
        ("grpo", [0, 1, 2], [0, 1, 2]),
        ("dapo", [3, 4, 5], [0, 1, 2]),
    ]


def test_a_run_folder_is_not_expanded_and_a_run_without_recipe_is_alone(make_run, tmp_path):
    run = make_run("a", [{"step": 1}], recipe=False)
    make_run("b", [{"step": 1}], recipe=False)
    assert expand_sweep_folders([str(run), "b"], tmp_path / "runs") == [str(run), "b"]
    runs = [load_run(str(run)), load_run("b", tmp_path / "runs")]
    assert [group.members for group in seed_groups(runs, ["a", "b"])] == [[0], [1]]


def test_group_statistics_and_verdict(sweep):
    folder = sweep()
    comparison = compare(
        [load_run(ref) for ref in expand_sweep_folders([str(folder)], folder.parent)],
        CompareOptions(metrics=["val/accuracy"], targets=[parse_target("val/accuracy=0.75")]),
    )
    assert comparison.by_seed and comparison.labels[0] == "grpo/seed-0"
    (row,) = comparison.group_metrics
    grpo, dapo = row.groups
    assert grpo.final.mean == pytest.approx(0.74) and grpo.final.std == pytest.approx(0.04)
    assert grpo.best.mean == pytest.approx(0.74)  # every run's best is its last evaluation here
    assert dapo.difference.delta == pytest.approx(0.10)
    assert dapo.difference.low == pytest.approx(0.10 - 0.0906778, abs=1e-6)  # tests/.../intervals: by hand
    assert dapo.verdict == "better"
    (_, (grpo_hits, dapo_hits)) = comparison.group_targets[0]
    assert (grpo_hits.reached, grpo_hits.runs) == (1, 3)  # only seed 2 (0.78) reaches 0.75
    assert grpo_hits.steps.mean == 10 and grpo_hits.steps.low is None
    assert (dapo_hits.reached, dapo_hits.steps.mean, dapo_hits.steps.std) == (3, 10, 0)
    assert dapo_hits.wall_time_s.mean == pytest.approx(21.0)  # 20, 21, 22 s
    assert comparison.warnings == []


def test_a_difference_within_seed_noise_is_called_so(sweep):
    folder = sweep(("grpo", "close"))
    comparison = compare([load_run(ref) for ref in expand_sweep_folders([str(folder)], folder.parent)])
    close = comparison.group_metrics[0].groups[1]
    assert close.difference.delta == pytest.approx(0.02)
    assert close.verdict == "not distinguishable from seed noise at n=3"


@pytest.mark.parametrize(
    ("low", "high", "direction", "expected"),
    [
        (0.01, 0.05, "higher", "better"),
        (0.01, 0.05, "lower", "worse"),
        (-0.05, -0.01, "higher", "worse"),
        (-0.05, -0.01, "lower", "better"),
        (-0.01, 0.05, "higher", "not distinguishable from seed noise at n=3"),
        (0.0, 0.05, "higher", "not distinguishable from seed noise at n=3"),  # 0 inside (at the edge)
        (0.01, 0.05, None, "differs"),
        (-0.01, 0.05, None, "not distinguishable from seed noise at n=3"),
    ],
)
def test_verdict_thresholds(low, high, direction, expected):
    assert verdict(Difference((low + high) / 2, low, high, 4.0), 3, 3, direction) == expected


def test_verdicts_without_interval_or_difference():
    assert (
        verdict(Difference(0.1, None, None, None), 1, 3, "higher")
        == "no interval at n=1 vs 3: seed noise unknown"
    )
    assert verdict(Difference(0.0, 0.0, 0.0, math.inf), 2, 2, "higher") == "same"
    assert verdict(Difference(0.1, 0.1, 0.1, math.inf), 3, 2, "higher") == "better"


def test_single_runs_of_a_noisy_metric_are_warned_about(make_run):
    grpo = make_run("grpo", [{"step": 1, "val/accuracy": 0.5}])
    dapo = make_run("dapo", [{"step": 1, "val/accuracy": 0.6}], changes={"rollout.n": 16})
    comparison = compare([load_run(str(grpo)), load_run(str(dapo))])
    assert not comparison.by_seed
    (warning,) = comparison.warnings
    assert warning.startswith("each setting ran with one seed: a difference in val/accuracy")
    assert compare([load_run(str(grpo))]).warnings == []  # one run alone is not a comparison
    quiet = compare([load_run(str(grpo)), load_run(str(dapo))], CompareOptions(metrics=["actor/entropy"]))
    assert quiet.warnings == []


def test_the_report_shows_intervals_and_verdicts(sweep):
    folder = sweep()
    comparison = compare([load_run(ref) for ref in expand_sweep_folders([str(folder)], folder.parent)])
    console = Console(width=200, record=True, color_system=None)
    render(comparison, console)
    text = console.export_text()
    assert "metrics over seeds" in text and "config diff (seeds aside)" in text
    assert "trainer.seed" not in text and "rollout.n" in text
    grpo_line = next(line for line in text.splitlines() if "│ grpo " in line and "0.74" in line)
    assert "0.74 ± 0.04" in grpo_line and "[0.6406, 0.8394]" in grpo_line  # 0.74 ± 0.0993655
    assert "against grpo" in text and "with Welch's 95% interval" in " ".join(text.split())
    dapo_line = next(line for line in text.splitlines() if "│ dapo " in line and "+0.1" in line)
    assert "+0.1 [+0.0093, +0.19]" in dapo_line and "│ better" in dapo_line

    data = to_json(comparison)
    json.dumps(data, allow_nan=False)
    assert [group["label"] for group in data["groups"]] == ["grpo", "dapo"]
    assert data["groups"][1]["runs"] == ["dapo/seed-0", "dapo/seed-1", "dapo/seed-2"]
    stats = data["group_metrics"][0]["groups"]["dapo"]
    assert stats["verdict"] == "better" and stats["final"]["n"] == 3
    assert stats["difference"]["df"] == pytest.approx(4.0)


def test_at_80_columns_the_seed_tables_fold_their_cells_and_lose_nothing(make_run):
    # a pipe or a CI log is 80 columns wide; wide cells (a KL of 1e-8 with its interval) once
    # squeezed the metric column to nothing there and every metric name was dropped
    runs = [
        load_run(
            str(
                make_run(
                    f"seed-{seed}",
                    [
                        {
                            "step": step,
                            "val/accuracy": 0.4167 + 0.0123 * seed,
                            "critic/score/mean": 0.4271 - 0.0456 * seed,
                            "actor/ppo_kl": (-1.1e-08, -2.3e-08, -1.2e-08)[seed],
                        }
                        for step in range(1, 7)
                    ],
                    changes={"trainer.seed": seed},
                )
            )
        )
        for seed in range(3)
    ]
    console = Console(width=80, record=True, color_system=None)
    render(compare(runs), console)
    text = console.export_text()
    tables = text[text.index("metrics over seeds") :]
    assert "…" not in tables and max(map(len, tables.splitlines())) <= 80
    rows, row = [], []  # each table row's cells, folded lines joined
    for line in tables.splitlines():
        if line.startswith("│"):
            cells = [cell.strip() for cell in line.split("│")[1:-1]]
            row = [" ".join(filter(None, pair)) for pair in zip(row, cells)] if row else cells
        elif row:
            rows.append(row)
            row = []
    by_metric = {r[0].replace(" ", ""): r for r in rows}
    assert {"val/accuracy↑better", "actor/ppo_kl"} <= set(by_metric)  # folded or whole, never dropped
    # mean -(1.1 + 2.3 + 1.2)e-8 / 3 = -1.5333e-8; std sqrt((0.4333^2 + 0.7667^2 + 0.3333^2) / 2)e-8
    # = 0.66583e-8; t(0.975, 2) = 4.302653, half width 4.302653 * 0.66583e-8 / sqrt(3) = 1.65401e-8
    _, _, n, final, interval, _ = by_metric["actor/ppo_kl"]
    assert (n, final.replace(" ", ""), interval.replace(" ", "")) == (
        "3",
        "-1.533e-08±6.7e-09",
        "[-3.187e-08,1.207e-09]",
    )


def test_the_plot_draws_a_band_per_setting(sweep, tmp_path):
    pytest.importorskip("matplotlib")
    from rlrun.compare.plot import mean_curve, plot_groups

    folder = sweep()
    runs = [load_run(ref) for ref in expand_sweep_folders([str(folder)], folder.parent)]
    xs, means, lows, highs = mean_curve(runs[:3], "val/accuracy", "step")
    assert xs == [0, 5, 10] and means == pytest.approx([0.5, 0.61, 0.74])
    assert highs[2] - lows[2] == pytest.approx(2 * 0.0993655, abs=1e-6)
    assert mean_curve(runs[:3], "val/accuracy", "wall_time")[0] == [10.0, 21.0]  # step 0 has no wall time
    groups = compare(runs).groups
    figure = plot_groups(runs, groups, ["val/accuracy"], tmp_path / "bands.png")
    (axes,) = figure.axes
    assert [line.get_label() for line in axes.lines] == ["grpo", "dapo"]
    assert len(axes.collections) == 2  # one band each
    assert (tmp_path / "bands.png").stat().st_size > 0
