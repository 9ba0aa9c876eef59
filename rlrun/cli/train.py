"""Commands that train or write a model: `train`, `resume` and `export`. The loop, run directory,
checkpoints and logging live below (rlrun.training, rlrun.records); these parse options, map
errors to exit codes and print the outcome."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from rlrun import interrupt
from rlrun.cli._app import (
    INTERRUPTED,
    RUN_FAILED,
    OverridesArg,
    RecipeArg,
    app,
    console,
    err_console,
    fail,
    print_issues,
    user_errors,
)
from rlrun.recipes import LoadedRecipe, load_recipe

if TYPE_CHECKING:
    from rlrun.training.run import RunOptions

# Scale-out options, shared by `train` and `resume`: both relaunch through `accelerate launch`.
SCALE_OUT = "Scale-out"
NumProcessesOpt = Annotated[
    int | None,
    typer.Option(
        "--num-processes",
        min=1,
        help="Training processes in total (all machines): > 1 re-launches through `accelerate "
        "launch` with `trainer.strategy` (default: 1, or the `--accelerate-config` file's).",
        rich_help_panel=SCALE_OUT,
        show_default=False,
    ),
]
NumMachinesOpt = Annotated[
    int | None,
    typer.Option(
        "--num-machines", min=1, help="Machines in the job (default: 1).", rich_help_panel=SCALE_OUT
    ),
]
MachineRankOpt = Annotated[
    int | None,
    typer.Option(
        "--machine-rank",
        min=0,
        help="This machine's rank (0 = the main one; default: 0).",
        rich_help_panel=SCALE_OUT,
    ),
]
MainProcessIpOpt = Annotated[
    str | None, typer.Option("--main-process-ip", help="Address of machine 0.", rich_help_panel=SCALE_OUT)
]
MainProcessPortOpt = Annotated[
    int | None, typer.Option("--main-process-port", min=1, max=65535, rich_help_panel=SCALE_OUT)
]
AccelerateConfigOpt = Annotated[
    Path | None,
    typer.Option(
        "--accelerate-config",
        help="An `accelerate config` file that owns the distributed setup (the flags above "
        "override its values); the command always re-launches through `accelerate launch`.",
        rich_help_panel=SCALE_OUT,
    ),
]
RestartOpt = Annotated[
    bool,
    typer.Option(
        "--restart",
        help="With no intact checkpoint to resume from: train the run again from step 0, "
        "replacing its metrics.jsonl and samples.jsonl (without it, such a resume is refused).",
    ),
]
ProfileOpt = Annotated[
    bool,
    typer.Option(
        "--profile",
        help="Record steps 2-4 (of this invocation) with "
        "torch.profiler into `<run>/profile/`: trace.json (open in Perfetto or "
        "chrome://tracing) and ops.txt (operators by self time).",
    ),
]


@app.command()
def train(
    recipe: RecipeArg,
    overrides: OverridesArg = None,
    name: Annotated[
        str | None,
        typer.Option(
            "--name",
            help="Run name: the run directory is "
            "`<trainer.output_dir>/<name>` (default: recipe name + UTC time).",
        ),
    ] = None,
    run_dir: Annotated[Path | None, typer.Option("--run-dir", help="Write the run here instead.")] = None,
    resume: Annotated[
        bool,
        typer.Option(
            "--resume",
            help="Continue the run in the run directory from its "
            "latest checkpoint (`rlrun train --resume runs/x` resumes runs/x).",
        ),
    ] = False,
    overwrite: Annotated[
        bool, typer.Option("--overwrite", help="Replace an existing run directory.")
    ] = False,
    dry_run: Annotated[
        bool,
        typer.Option(
            "--dry-run",
            help="Validate, load the models, run one rollout and "
            "one update on a tiny batch; report time and memory; write nothing.",
        ),
    ] = False,
    profile: ProfileOpt = False,
    restart: RestartOpt = False,
    num_processes: NumProcessesOpt = None,
    num_machines: NumMachinesOpt = None,
    machine_rank: MachineRankOpt = None,
    main_process_ip: MainProcessIpOpt = None,
    main_process_port: MainProcessPortOpt = None,
    accelerate_config: AccelerateConfigOpt = None,
) -> None:
    """Train a recipe: rollouts, rewards, advantages and policy updates, with metrics, checkpoints
    and a run directory (`runs/<name>/`). Ctrl-C saves a checkpoint; `rlrun resume` continues."""
    flags = _scale_out(num_processes, num_machines, machine_rank, main_process_ip, main_process_port)
    if resume and run_dir is None and Path(recipe).is_dir():  # `rlrun train --resume runs/x`
        return _resume(Path(recipe), overrides or [], flags, accelerate_config, profile, restart)
    from rlrun.training.run import RunOptions, check_run_dir

    options = RunOptions(
        run_dir=run_dir, name=name, resume=resume, overwrite=overwrite, profile=profile, restart=restart
    )
    with user_errors():
        loaded = load_recipe(recipe, overrides or [])
        check_run_dir(loaded, options)
    print_issues(loaded.notices, "notice", "yellow")
    if dry_run:
        return _dry_run(loaded)
    _relaunch_if_multi_process(loaded, flags, accelerate_config)
    _train(loaded, options)


@app.command("resume")
def resume_run(
    run_dir: Annotated[Path, typer.Argument(help="The run directory to continue.", show_default=False)],
    overrides: OverridesArg = None,
    num_processes: NumProcessesOpt = None,
    num_machines: NumMachinesOpt = None,
    machine_rank: MachineRankOpt = None,
    main_process_ip: MainProcessIpOpt = None,
    main_process_port: MainProcessPortOpt = None,
    accelerate_config: AccelerateConfigOpt = None,
    profile: ProfileOpt = False,
    restart: RestartOpt = False,
) -> None:
    """Continue a run from its latest checkpoint, with the recipe it was started with (overrides
    may change anything but the model, tokenizer and data, e.g. `trainer.total_steps=500`), in
    any number of processes."""
    flags = _scale_out(num_processes, num_machines, machine_rank, main_process_ip, main_process_port)
    _resume(run_dir, overrides or [], flags, accelerate_config, profile, restart)


def _scale_out(
    num_processes: int | None,
    num_machines: int | None,
    machine_rank: int | None,
    main_process_ip: str | None,
    main_process_port: int | None,
) -> dict[str, Any]:
    """The scale-out flags as given (None: not given), by `rlrun.launch.Topology`'s field names."""
    return {
        "num_processes": num_processes,
        "num_machines": num_machines,
        "machine_rank": machine_rank,
        "main_process_ip": main_process_ip,
        "main_process_port": main_process_port,
    }


def _resume(
    run_dir: Path,
    overrides: list[str],
    flags: dict[str, Any],
    accelerate_config: Path | None,
    profile: bool,
    restart: bool,
) -> None:
    from rlrun.api.training import load_run
    from rlrun.training.run import RunOptions, finished_note

    with user_errors():
        loaded = load_run(run_dir, overrides)
        done = finished_note(run_dir, loaded)
    if done:  # before any process starts
        console.print(done, soft_wrap=True)
        return
    _relaunch_if_multi_process(loaded, flags, accelerate_config)
    options = RunOptions(run_dir=run_dir, resume=True, profile=profile, restart=restart, run_dir_key="")
    _train(loaded, options)


def _relaunch_if_multi_process(
    loaded: LoadedRecipe, flags: dict[str, Any], accelerate_config: Path | None
) -> None:
    """With more than one process, or an `accelerate config` file (and not yet launched): check
    the layout and that the recipe splits evenly, re-run this command under `accelerate launch`
    with `trainer.strategy`, exit with its code. `flags`: the scale-out flags as given."""
    from rlrun.facts.launched import is_relaunched
    from rlrun.launch import launch_topology, relaunch_with_accelerate

    if is_relaunched():
        return
    with user_errors():
        topology = launch_topology(loaded, flags, accelerate_config)
    if topology is None:
        return
    try:
        strategy = loaded.recipe.trainer.strategy
        code = relaunch_with_accelerate(sys.argv[1:], topology, accelerate_config, strategy)
    except ValueError as exc:
        raise fail(str(exc)) from None
    raise typer.Exit(code)


@app.command("export")
def export(
    checkpoint: Annotated[
        Path, typer.Argument(help="A checkpoint, e.g. `runs/x/checkpoints/step_000300`.", show_default=False)
    ],
    out: Annotated[Path, typer.Argument(help="Directory for the exported model.", show_default=False)],
    overwrite: Annotated[
        bool,
        typer.Option(
            "--overwrite",
            help="Write into OUT even if it already holds files (files of the same name are replaced).",
        ),
    ] = False,
) -> None:
    """Write a checkpoint's policy as a plain Hugging Face model with its tokenizer; a LoRA
    checkpoint's adapters are merged into the base weights. Refuses an OUT that already holds
    files unless `--overwrite`, and a checkpoint whose files differ from their checksums."""
    from rlrun.pathnames import folder_problem, is_inside
    from rlrun.records.checkpoint import check_checkpoint, export_merged
    from rlrun.records.rundir import CHECKPOINTS

    if not checkpoint.is_dir():
        raise fail(f"no checkpoint at {checkpoint}")
    if (problem := folder_problem(out)) is not None:  # a file in the way: never replaced, --overwrite or not
        raise fail(f"{out} cannot be the export's folder: {problem}. Export to a folder.")
    pruned = checkpoint.parent if checkpoint.parent.name == CHECKPOINTS else checkpoint
    if is_inside(out, pruned):
        raise fail(
            f"{out} is inside {pruned}, which rlrun prunes: the export would be deleted with old "
            "checkpoints. Export to a folder outside the run's checkpoints."
        )
    if out.is_dir() and any(out.iterdir()) and not overwrite:
        raise fail(
            f"{out} already exists and is not empty; rlrun does not overwrite it. "
            "Pick another directory, or pass --overwrite."
        )
    with user_errors():
        check_checkpoint(checkpoint, warn=lambda text: err_console.print(f"[yellow]{text}[/]"))
    try:
        exported = export_merged(checkpoint, out)
    except Exception as exc:  # noqa: BLE001 - any unreadable checkpoint: name it, no traceback
        raise fail(f"cannot read the checkpoint {checkpoint}: {type(exc).__name__}: {exc}") from None
    console.print(f"[green]✓[/] exported: {exported}")


def _train(loaded: LoadedRecipe, options: RunOptions) -> None:
    from rlrun.api.training import train_loaded
    from rlrun.training.run import RunFinished

    try:
        with user_errors():
            run = train_loaded(loaded, options, say=lambda text: err_console.print(text))
    except typer.Exit:
        raise
    except RunFinished as done:
        console.print(str(done), soft_wrap=True)
        return
    except KeyboardInterrupt:  # before the run started (a started run handles Ctrl-C itself)
        raise typer.Exit(INTERRUPTED) from None
    except Exception as exc:  # a failed run: its directory says so; show the reason, not a traceback
        if os.environ.get("RLRUN_TRACEBACK"):
            raise
        if interrupt.requested():  # Ctrl-C while loading, turned into another error by a library
            raise typer.Exit(INTERRUPTED) from None
        err_console.print(f"[red]Training failed:[/] {type(exc).__name__}: {exc}")
        raise typer.Exit(RUN_FAILED) from None
    from rlrun.facts.launched import is_relaunched

    if run.status == "interrupted":
        # Under the launcher the launching process reports it: torchrun would print a failure
        # report for each process that ended with 130.
        raise typer.Exit(0 if is_relaunched() else INTERRUPTED)
    if run.main:  # one line however many processes trained
        console.print(f"[green]✓[/] finished: {run.dir.path}")


def _dry_run(loaded: LoadedRecipe) -> None:
    from rlrun.recipes.summary import unchecked_notices
    from rlrun.training.dryrun import dry_run, dry_run_table

    print_issues(unchecked_notices(loaded), "notice", "yellow")

    with user_errors():  # a model or data file that cannot be loaded is a recipe error here too
        report = dry_run(loaded.recipe)
    console.print(dry_run_table(report))
