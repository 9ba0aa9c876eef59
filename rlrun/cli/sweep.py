"""`rlrun sweep`: train every run of a sweep file, here or on SLURM. The sweep file, its plan and
the executors live in rlrun.sweep; this command prints the plan, starts the runs and reports how
each ended."""

from __future__ import annotations

from dataclasses import asdict
from enum import Enum
from pathlib import Path
from typing import Annotated, Any

import typer

from rlrun.cli._app import INTERRUPTED, RUN_FAILED, app, console, err_console, user_errors

SLURM = "SLURM (--executor slurm)"


class Executor(str, Enum):
    local = "local"
    slurm = "slurm"


@app.command("sweep")
def sweep_command(
    sweep_file: Annotated[
        Path,
        typer.Argument(
            help="The sweep file (YAML): `recipe`, `overrides`, `grid` and/or `list`, `seeds`.",
            show_default=False,
        ),
    ],
    dry_run: Annotated[
        bool,
        typer.Option(
            "--dry-run",
            help="Print the plan (runs, their state, samples, an "
            "estimated time from finished runs) and start nothing.",
        ),
    ] = False,
    executor: Annotated[Executor, typer.Option(help="Where the runs train.")] = Executor.local,
    jobs: Annotated[
        int | None,
        typer.Option(
            "--jobs",
            "-j",
            min=1,
            help="Runs at once on this machine (default: one per GPU, else one per two CPU cores).",
            show_default=False,
        ),
    ] = None,
    partition: Annotated[str | None, typer.Option(help="SLURM partition.", rich_help_panel=SLURM)] = None,
    gpus_per_run: Annotated[
        int | None,
        typer.Option(
            min=0,
            help="GPUs per node of each run (default: 1, or 0 when the runs train on CPUs).",
            rich_help_panel=SLURM,
            show_default=False,
        ),
    ] = None,
    nodes_per_run: Annotated[
        int,
        typer.Option(
            min=1, help="Nodes of each run (> 1: one `accelerate launch` per node).", rich_help_panel=SLURM
        ),
    ] = 1,
    cpus_per_run: Annotated[
        int, typer.Option(min=1, help="CPU cores per node of each run.", rich_help_panel=SLURM)
    ] = 8,
    time_limit: Annotated[
        int,
        typer.Option(
            "--time",
            min=1,
            help="Time limit of each job in minutes; a job "
            "stopped at it (or preempted) is requeued and resumes from its "
            "checkpoint.",
            rich_help_panel=SLURM,
        ),
    ] = 240,
) -> None:
    """Train every run of a sweep: each point of the grid and list at each seed, named
    `<output_dir>/<sweep>/<key=value,...>/seed-<n>`. Every run's recipe is validated before any
    starts. Running the same sweep again resumes unfinished runs and skips finished ones."""
    from rlrun.sweep.plan import plan_sweep
    from rlrun.sweep.report import plan_report
    from rlrun.sweep.spec import read_sweep

    if executor is Executor.slurm:
        _on_slurm(
            sweep_file,
            dry_run,
            partition=partition,
            gpus_per_run=gpus_per_run,
            nodes_per_run=nodes_per_run,
            cpus_per_run=cpus_per_run,
            time_limit_min=time_limit,
        )
        return
    with user_errors():
        plan = plan_sweep(read_sweep(sweep_file))
    from rlrun.sweep.local import machine_slots, run_local

    cpu_only = all(run.loaded.recipe.trainer.device == "cpu" for run in plan.runs)
    slots = machine_slots(len(plan.to_do()), jobs, use_gpus=not cpu_only)
    settings = {"kind": "local", **asdict(slots)}
    console.print(plan_report(plan, settings, slots.concurrent), soft_wrap=True)
    if dry_run or not plan.to_do():
        return
    plan.write_manifest(settings)
    codes = run_local(plan.to_do(), slots, say=lambda text: err_console.print(text, soft_wrap=True))
    failed = [name for name, code in codes.items() if code not in (0, None, INTERRUPTED)]
    stopped = [name for name, code in codes.items() if code in (None, INTERRUPTED)]
    console.print(
        f"sweep {plan.sweep.name}: {len(codes) - len(failed) - len(stopped)} run(s) finished, "
        f"{len(failed)} failed, {len(stopped)} not finished; compare them with `rlrun compare {plan.dir}`",
        soft_wrap=True,
    )
    if failed:
        raise typer.Exit(RUN_FAILED)
    if stopped:
        raise typer.Exit(INTERRUPTED)


def _on_slurm(sweep_file: Path, dry_run: bool, **request: Any) -> None:
    """Plan the sweep with the cluster (sinfo, squeue; `request`: plan_on_cluster's keywords),
    print the plan, and submit a job per run to do."""
    from rlrun.sweep.report import plan_report
    from rlrun.sweep.slurm import plan_on_cluster, submit
    from rlrun.sweep.spec import read_sweep

    with user_errors():
        plan, slurm = plan_on_cluster(read_sweep(sweep_file), **request)
    console.print(plan_report(plan, slurm.to_json(), len(plan.to_do())), soft_wrap=True)
    if dry_run or not plan.to_do():
        return
    plan.write_manifest(slurm.to_json())
    for name, job in submit(plan, slurm).items():
        console.print(f"{name}: SLURM job {job.job_id} (log: {job.paths.stdout})", soft_wrap=True)
