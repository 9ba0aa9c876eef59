"""`rlrun compare`: what changed between runs (config) and what it did (metrics, health)."""

from __future__ import annotations

import json
from enum import Enum
from pathlib import Path
from typing import Annotated

import typer

from rlrun.cli._app import app, console, fail, refuse_output_file


class XAxis(str, Enum):
    step = "step"
    samples = "samples"
    wall_time = "wall_time"


@app.command("compare")
def compare_command(
    runs: Annotated[
        list[str],
        typer.Argument(
            help="Run directories, run names under --runs-dir, sweep folders (all their runs), or "
            "wandb:entity/project/run_id. The first is the reference; runs that differ only in their seed "
            "are compared as one setting, with intervals over the seeds.",
            show_default=False,
        ),
    ],
    runs_dir: Annotated[Path, typer.Option(help="Where run names are looked up.")] = Path("runs"),
    metrics: Annotated[
        list[str] | None,
        typer.Option(
            "--metrics",
            "-m",
            help="Metric names or globs, repeatable or comma-separated (e.g. 'actor/*'). "
            "Default: the key metrics.",
            show_default=False,
        ),
    ] = None,
    last_k: Annotated[
        int,
        typer.Option(
            "--last-k",
            "-k",
            min=1,
            help="How many of each run's latest values the table averages (val/*: the latest evaluation).",
        ),
    ] = 5,
    at: Annotated[
        int | None,
        typer.Option(min=0, help="Compare the runs as they stood at this step.", show_default=False),
    ] = None,
    target: Annotated[
        list[str] | None,
        typer.Option(
            help="METRIC=VALUE: add the step, samples and wall time at which each run first reached it. Repeatable.",
            show_default=False,
        ),
    ] = None,
    show_all: Annotated[bool, typer.Option("--all", help="Show unchanged config keys too.")] = False,
    plot: Annotated[
        Path | None,
        typer.Option(
            help="Write overlaid curves to this new PNG (an existing file is not overwritten).",
            show_default=False,
        ),
    ] = None,
    x: Annotated[XAxis, typer.Option(help="The plot's x-axis.")] = XAxis.step,
    smooth: Annotated[
        float, typer.Option(min=0.0, max=0.99, help="Plot smoothing (EMA weight, 0 = raw).")
    ] = 0.0,
    as_json: Annotated[bool, typer.Option("--json", help="Print the comparison as JSON.")] = False,
) -> None:
    """Compare runs: what changed between them (config), and what it did (metrics, health)."""
    from rlrun.compare.comparison import CompareOptions, compare, to_json
    from rlrun.compare.inputs import load_input
    from rlrun.compare.render import render
    from rlrun.compare.runs import RunReadError
    from rlrun.compare.seed_groups import expand_sweep_folders
    from rlrun.compare.stats import TargetError, parse_target

    if plot is not None:
        from rlrun.compare.plot import format_problem

        refuse_output_file(plot, "--plot")
        if (problem := format_problem(plot)) is not None:
            raise fail(f"--plot {plot}: {problem}")
    try:
        options = CompareOptions(
            metrics=[
                pattern.strip() for item in metrics or [] for pattern in item.split(",") if pattern.strip()
            ],
            last_k=last_k,
            at_step=at,
            targets=[parse_target(text) for text in target or []],
            show_all=show_all,
        )
        refs = expand_sweep_folders(runs, runs_dir)
        comparison = compare([load_input(ref, runs_dir) for ref in refs], options)
        if plot is not None:
            from rlrun.compare.plot import plot_comparison  # matplotlib is slow to import, and optional

            plot_comparison(comparison, plot, x=x.value, smoothing=smooth)
    except (RunReadError, TargetError, ImportError) as exc:
        raise fail(str(exc)) from None
    if as_json:
        print(
            json.dumps(
                {**to_json(comparison), "plot": str(plot) if plot else None},
                indent=2,
                allow_nan=False,
                ensure_ascii=False,
            )
        )
        return
    render(comparison, console)
    if plot is not None:
        console.print(f"wrote {plot}")
