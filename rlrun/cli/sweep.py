"""`rlrun sweep`: train every run of a sweep file, here or on SLURM. The sweep file, its plan and
the executors live in rlrun.sweep; this command prints the plan, starts the runs and reports how
each ended."""

from __future__ import annotations

from dataclasses import asdict
from enum import Enum
from pathlib import Path
from typing import Annotated, Any

import typer

from rlrun.cli._app import INTERRUPTED, RUN_FAILED, app, console, err_console, fail, user_errors

SLURM = "SLURM (--executor slurm)"
DEFAULT_TIME_MIN = 240


def _slurm_count(help_text: str, minimum: int, *names: str) -> Any:
    """An optional count among the SLURM options (None: not given, the executor's default)."""
    option = typer.Option(*names, min=minimum, help=help_text, rich_help_panel=SLURM, show_default=False)
    return Annotated[int | None, option]


PartitionOpt = Annotated[str | None, typer.Option(help="SLURM partition.", rich_help_panel=SLURM)]
GpusPerRunOpt = _slurm_count("GPUs per node of each run (default: 1, or 0 when the runs train on CPUs).", 0)
NodesPerRunOpt = _slurm_count("Nodes of each run (> 1: one `accelerate launch` per node; default: 1).", 1)
CpusPerRunOpt = _slurm_count(
    "CPU cores per node of each run (default: 8, or all of a node's where it has fewer).", 1
)
TimeOpt = _slurm_count(
    "Time limit of each job in minutes (default: 240); a job stopped at it (or preempted) is requeued and "
    "resumes from its checkpoint.",
    1,
    "--time",
)


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
    partition: PartitionOpt = None,
    gpus_per_run: GpusPerRunOpt = None,
    nodes_per_run: NodesPerRunOpt = None,
    cpus_per_run: CpusPerRunOpt = None,
    time_limit: TimeOpt = None,
) -> None:
    """Train every run of a sweep: each point of the grid and list at each seed, named
    `<output_dir>/<sweep>/<key=value,...>/seed-<n>`. Every run's recipe is validated before any
    starts. Running the same sweep again resumes unfinished runs and skips finished ones."""
    from rlrun.sweep.plan import plan_sweep
    from rlrun.sweep.report import plan_report
    from rlrun.sweep.spec import read_sweep

    slurm_flags = {
        "--partition": partition,
        "--gpus-per-run": gpus_per_run,
        "--nodes-per-run": nodes_per_run,
        "--cpus-per-run": cpus_per_run,
        "--time": time_limit,
    }
    if executor is Executor.slurm:
        if jobs is not None:
            raise fail(
                "--jobs: the runs at once on this machine, which the SLURM executor does not use (it submits "
                "a job per run and SLURM schedules them). Drop --jobs."
            )
        _on_slurm(
            sweep_file,
            dry_run,
            partition=partition,
            gpus_per_run=gpus_per_run,
            nodes_per_run=nodes_per_run or 1,
            cpus_per_run=cpus_per_run,
            time_limit_min=time_limit or DEFAULT_TIME_MIN,
        )
        return
    if given := [flag for flag, value in slurm_flags.items() if value is not None]:
        raise fail(
            f"{', '.join(given)}: SLURM options, which the local executor does not use (it trains the runs "
            "on this machine). Pass --executor slurm to submit them to SLURM, or drop the option."
        )
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
