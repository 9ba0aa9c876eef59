"""The `rlrun` command line. The only module that knows about the CLI: each command parses its
arguments, calls the library and renders the result. A recipe mistake prints located
paragraphs and exits with code 2, never with a traceback.

A command is a plain function decorated with `@app.command()` in its own section below;
reuse the shared argument types (`RecipeArg`, `OverridesArg`) and wrap library calls that can
raise user errors in `with user_errors():`.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from rlrun import interrupt
from rlrun.errors import ConfigIssue, RecipeError
from rlrun.recipes import LoadedRecipe, algorithm_summary, batch_plan, load_recipe

if TYPE_CHECKING:
    from rlrun.convert.recipe import Conversion
    from rlrun.launch import Topology  # imports torch: only the commands that train load it
    from rlrun.sweep.plan import SweepPlan
    from rlrun.training.run import RunOptions

app = typer.Typer(
    name="rlrun",
    help="Declarative RL post-training of language models: one YAML recipe per experiment.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode="markdown",
    add_completion=False,
)
console = Console(highlight=False)
err_console = Console(stderr=True, highlight=False)

USER_ERROR = 2  # exit code of every mistake in a recipe or on the command line

RecipeArg = Annotated[
    str,
    typer.Argument(
        help="A recipe file, or the name of a built-in recipe (see `rlrun recipes`).", show_default=False
    ),
]
OverridesArg = Annotated[
    list[str] | None,
    typer.Argument(
        help="Changes to the recipe, applied in order: `key.path=value` (value read as YAML, e.g. "
        "`actor.optimizer.lr=3e-6`, `reward.functions=[{fn: 'my.mod:score'}]`) or `~key.path` "
        "(back to the default).",
        show_default=False,
    ),
]


@app.callback()
def main() -> None:
    """Declarative RL post-training of language models: one YAML recipe per experiment.

    Start from a built-in recipe (`rlrun recipes copy grpo my.yaml`), check it with
    `rlrun validate my.yaml`, then train with `rlrun train my.yaml`.
    """
    # Make the working directory importable, so a recipe can name `my_rewards:score` or a plugin
    # module that sits there — last on the path, so a file there named like an installed package
    # (`torch.py`) is never run in its place.
    if os.getcwd() not in sys.path:
        sys.path.append(os.getcwd())


@contextmanager
def user_errors(as_json: bool = False) -> Iterator[None]:
    """Turn a RecipeError into its paragraphs (or JSON) and exit code 2."""
    try:
        yield
    except RecipeError as exc:
        if as_json:
            print(
                json.dumps(
                    {"valid": False, "errors": _dicts(exc.issues), "notices": _dicts(exc.notices)}, indent=2
                )
            )
        else:
            _print_issues(exc.notices, "notice", "yellow")
            _print_issues(exc.issues, "error", "red")
        raise typer.Exit(USER_ERROR) from None


def _print_issues(issues: list[ConfigIssue], label: str, colour: str) -> None:
    if issues:
        count = f"{len(issues)} {label}" + ("s" if len(issues) > 1 else "")
        body = "\n\n".join(issue.format() for issue in issues)
        # Text, not markup: messages quote user values and pip extras such as rlrun[vllm]
        err_console.print(
            Panel(Text(body), title=count, title_align="left", border_style=colour, expand=False)
        )


def _dicts(issues: list[ConfigIssue]) -> list[dict[str, Any]]:
    return [issue.to_dict() for issue in issues]


# --- validate -----------------------------------------------------------------------------


@app.command()
def validate(
    recipe: RecipeArg,
    overrides: OverridesArg = None,
    strict: Annotated[
        bool, typer.Option("--strict", help="Treat notices (likely mistakes) as errors.")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON on stdout.")] = False,
    portable: Annotated[
        bool,
        typer.Option(
            "--portable",
            help="Check the recipe alone, not whether this machine can run it (vLLM, GPU): "
            "for a recipe meant for another machine.",
        ),
    ] = False,
    no_import: Annotated[
        bool,
        typer.Option(
            "--no-import",
            help="Run no code of yours: only check that the reward and plugin modules can be found, "
            "without importing them (names of components registered by plugins are then not checked).",
        ),
    ] = False,
) -> None:
    """Check a recipe without loading any model: every error at once, located by file, line and key.

    Prints what the recipe will run (algorithm, model, data), how each step's batch is split,
    and notices about settings that are legal but probably not meant. Exit code 0 when the
    recipe is valid, 2 when it is not. The reward modules (`pkg.module:function`) and
    `algorithm.plugins` the recipe names are imported, so their top-level code runs; `--no-import`
    only looks them up.
    """
    with user_errors(as_json):
        loaded = load_recipe(
            recipe, overrides or [], strict=strict, environment=not portable, import_modules=not no_import
        )
    if as_json:
        print(json.dumps(_validation_json(loaded), indent=2))
        return
    console.print(f"[green]✓[/] {loaded.source_path} is a valid recipe.", soft_wrap=True)
    console.print(_summary_table(loaded))
    console.print(_batch_plan_table(loaded))
    _print_issues(loaded.notices, "notice", "yellow")


def _validation_json(loaded: LoadedRecipe) -> dict[str, Any]:
    recipe = loaded.recipe
    return {
        "valid": True,
        "recipe": str(loaded.source_path),
        "algorithm": algorithm_summary(recipe),
        "model": recipe.model.path,
        "data": recipe.data.source,
        "batch_plan": batch_plan(recipe).to_dict(),
        "errors": [],
        "notices": _dicts(loaded.notices),
    }


def _summary_table(loaded: LoadedRecipe) -> Table:
    recipe = loaded.recipe
    table = Table(show_header=False, box=None, padding=(0, 2))
    table.add_row("algorithm", algorithm_summary(recipe)["text"])
    table.add_row(
        "model", f"{recipe.model.path} ({recipe.model.dtype}" + (", LoRA)" if recipe.model.lora else ")")
    )
    table.add_row("data", recipe.data.source)
    rewards = ", ".join(f"{f.shown} × {f.weight:g}" for f in recipe.reward.functions)
    table.add_row("reward", rewards)
    table.add_row(
        "steps", f"{recipe.trainer.total_steps} on {recipe.trainer.device} (seed {recipe.trainer.seed})"
    )
    return table


def _batch_plan_table(loaded: LoadedRecipe) -> Table:
    plan = batch_plan(loaded.recipe)
    table = Table(title="Batch plan per step", title_justify="left", show_lines=False)
    table.add_column("stage")
    table.add_column("count", justify="right")
    table.add_column("each")
    table.add_row("prompts", str(plan.prompts), f"{plan.samples_per_prompt} samples")
    table.add_row(
        "samples", str(plan.samples), f"≤ {loaded.recipe.rollout.max_response_tokens} response tokens"
    )
    table.add_row(
        "mini-batches", str(plan.mini_batches), f"{plan.mini_batch_samples} samples, one optimizer step"
    )
    if plan.micro_batch_tokens is None:
        micro = (f"{plan.micro_batches_per_mini_batch} per mini-batch", f"{plan.micro_batch_samples} samples")
    else:
        micro = ("by length", f"≤ {plan.micro_batch_tokens} padded tokens")
    table.add_row("micro-batches", micro[0], f"{micro[1]}, one forward/backward")
    table.add_row("optimizer steps", str(plan.optimizer_steps), f"per rollout ({plan.ppo_epochs} epoch(s))")
    return table


# --- show ---------------------------------------------------------------------------------


@app.command()
def show(
    recipe: RecipeArg,
    overrides: OverridesArg = None,
    provenance: Annotated[
        bool, typer.Option("--provenance", help="Mark each value: default, base recipe, file or override.")
    ] = False,
) -> None:
    """Print the fully resolved recipe (after `extends` and overrides) as YAML. Like `validate`, it
    imports the reward and plugin modules the recipe names (their top-level code runs)."""
    from rlrun.recipes.render import to_yaml

    with user_errors():
        loaded = load_recipe(recipe, overrides or [])
    print(to_yaml(loaded.data, loaded.provenance if provenance else None), end="")


# --- schema -------------------------------------------------------------------------------


@app.command()
def schema() -> None:
    """Print the JSON Schema of a recipe file, for editor completion and checking.

    Save it (`rlrun schema > recipe.schema.json`) and start a recipe with
    `# yaml-language-server: $schema=recipe.schema.json`.
    """
    from rlrun.recipes.json_schema import recipe_json_schema

    print(json.dumps(recipe_json_schema(), indent=2))


# --- recipes ------------------------------------------------------------------------------

recipes_app = typer.Typer(help="The built-in recipes.", no_args_is_help=False)
app.add_typer(recipes_app, name="recipes")


@recipes_app.callback(invoke_without_command=True)
def recipes(ctx: typer.Context) -> None:
    """List the built-in recipes with one line each. `rlrun recipes copy NAME DEST` copies one."""
    if ctx.invoked_subcommand is not None:
        return
    from rlrun.recipes import builtin_descriptions

    table = Table(show_header=False, box=None, padding=(0, 2))
    for name, description in builtin_descriptions().items():
        table.add_row(f"[bold]{name}[/]", description)
    console.print(table)


@recipes_app.command("copy")
def recipes_copy(
    name: Annotated[str, typer.Argument(help="A built-in recipe (see `rlrun recipes`).", show_default=False)],
    dest: Annotated[
        Path, typer.Argument(help="The file to write, or a folder to put NAME.yaml in.", show_default=False)
    ],
) -> None:
    """Copy a built-in recipe to edit. Never overwrites an existing file. A recipe from a subfolder
    (`gsm8k/grpo_qwen2.5-0.5b`) brings the data files beside it, which its relative paths name."""
    from rlrun.recipes import builtin_names, copy_builtin

    try:
        target = copy_builtin(name, dest)
    except KeyError:
        err_console.print(
            f"[red]No built-in recipe {name!r}.[/] Choose one of: {', '.join(builtin_names())}.",
            soft_wrap=True,
        )
        raise typer.Exit(USER_ERROR) from None
    except FileExistsError as exc:
        err_console.print(
            f"[red]{exc.args[0]} already exists;[/] rlrun does not overwrite it. Pick another name.",
            soft_wrap=True,
        )
        raise typer.Exit(USER_ERROR) from None
    console.print(f"Wrote {target}. Check it with `rlrun validate {target}`.", soft_wrap=True)


# --- convert ------------------------------------------------------------------------------

convert_app = typer.Typer(help="Recipes from other stacks' configurations.", no_args_is_help=True)
app.add_typer(convert_app, name="convert")
OutputOption = Annotated[
    Path | None,
    typer.Option(
        "-o",
        "--output",
        help="The recipe file to write (never overwritten); without it, the recipe is printed.",
    ),
]


@convert_app.command("verl", context_settings={"ignore_unknown_options": True})
def convert_verl(
    source: Annotated[
        list[str],
        typer.Argument(
            help="A verl command line (`python3 -m verl.trainer.main_ppo key=value ...`, or only the "
            "key=value items), a shell script (.sh) that runs one, or a verl config (.yaml).",
            show_default=False,
        ),
    ],
    output: OutputOption = None,
) -> None:
    """Turn a verl run into an rlrun recipe, with a report of what mapped, what changed unit (verl's
    ppo_mini_batch_size counts prompts, rlrun's actor.mini_batch_samples samples) and what has no
    equivalent. The recipe is then checked as `rlrun validate --portable` does; exit code 2 when
    the input cannot be read or the recipe does not validate.
    """
    from rlrun.convert.recipe import ConvertError
    from rlrun.convert.verl import convert, read_source

    try:
        settings, notes, name = read_source(source)
    except ConvertError as exc:
        err_console.print(Text(f"error: {exc}", style="red"), soft_wrap=True)
        raise typer.Exit(USER_ERROR) from None
    conversion = convert(settings, name)
    conversion.notes += notes
    _write_conversion(conversion, output)


@convert_app.command("trl")
def convert_trl(
    config: Annotated[
        Path,
        typer.Argument(help="A TRL GRPOConfig YAML (as `trl grpo --config` reads it).", show_default=False),
    ],
    num_processes: Annotated[
        int,
        typer.Option(
            "--num-processes", min=1, help="The processes TRL trained on: its batch sizes are per device."
        ),
    ] = 1,
    output: OutputOption = None,
) -> None:
    """Turn a TRL GRPOConfig into an rlrun recipe, with a report of what mapped, what changed unit
    (TRL's per_device_train_batch_size counts samples per device, rlrun's actor.micro_batch_samples
    samples over all processes) and what has no equivalent; then checked as `rlrun validate
    --portable` does (exit code 2 when it does not validate).
    """
    from rlrun.convert.recipe import ConvertError
    from rlrun.convert.trl import convert, read_config

    try:
        settings, notes = read_config(config)
    except ConvertError as exc:
        err_console.print(Text(f"error: {exc}", style="red"), soft_wrap=True)
        raise typer.Exit(USER_ERROR) from None
    conversion = convert(settings, str(config), num_processes)
    conversion.notes += notes
    _write_conversion(conversion, output)


def _write_conversion(conversion: Conversion, output: Path | None) -> None:
    """Print the report; write the recipe to `output` (never over a file) or print it; validate it."""
    import tempfile

    text = conversion.to_yaml()
    err_console.print(Text(conversion.report()), soft_wrap=True)
    if output is not None:
        try:
            output.parent.mkdir(parents=True, exist_ok=True)
            with output.open("x", encoding="utf-8") as file:
                file.write(text)
        except FileExistsError:
            err_console.print(
                Text(
                    f"{output} already exists; rlrun does not overwrite it. Pick another name.", style="red"
                ),
                soft_wrap=True,
            )
            raise typer.Exit(USER_ERROR) from None
    else:
        print(text, end="")
    with tempfile.TemporaryDirectory() as scratch:
        checked = output
        if checked is None:  # printed: check a copy
            checked = Path(scratch) / "converted.yaml"
            checked.write_text(text, encoding="utf-8")
        with user_errors():
            load_recipe(checked, environment=False)
    where = f"wrote {output}" if output else "the recipe above"
    console.print(f"[green]✓[/] {where}: a valid recipe (`rlrun validate --portable`).", soft_wrap=True)


# --- components ---------------------------------------------------------------------------


@app.command()
def components() -> None:
    """List every component a recipe can name, by kind, with a one-line description.

    Register your own with the decorators of `rlrun.algorithms.registries` in a module
    listed under `algorithm.plugins`.
    """
    from rlrun.components import components as all_components

    for kind, entries in all_components().items():
        table = Table(title=kind, title_justify="left", show_header=False, box=None, padding=(0, 2))
        for name, description in entries.items():
            table.add_row(f"[bold]{name}[/]", description)
        console.print(table)
        console.print()


# --- train / resume -----------------------------------------------------------------------
# The loop, run directory, checkpoints and logging live in rlrun.training; these commands only
# parse options, map errors to exit codes and print the outcome.

RUN_FAILED = 1
INTERRUPTED = interrupt.INTERRUPTED

# Scale-out options, shared by `train` and `resume`: both relaunch through `accelerate launch`.
SCALE_OUT = "Scale-out"
NumProcessesOpt = Annotated[
    int,
    typer.Option(
        "--num-processes",
        min=1,
        help="Training processes in total (all "
        "machines): > 1 re-launches through `accelerate launch` with "
        "`trainer.strategy`.",
        rich_help_panel=SCALE_OUT,
    ),
]
NumMachinesOpt = Annotated[int, typer.Option("--num-machines", min=1, rich_help_panel=SCALE_OUT)]
MachineRankOpt = Annotated[
    int,
    typer.Option(
        "--machine-rank", min=0, help="This machine's rank (0 = the main one).", rich_help_panel=SCALE_OUT
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
        help="An `accelerate config` file that owns the distributed setup.",
        rich_help_panel=SCALE_OUT,
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
    num_processes: NumProcessesOpt = 1,
    num_machines: NumMachinesOpt = 1,
    machine_rank: MachineRankOpt = 0,
    main_process_ip: MainProcessIpOpt = None,
    main_process_port: MainProcessPortOpt = None,
    accelerate_config: AccelerateConfigOpt = None,
) -> None:
    """Train a recipe: rollouts, rewards, advantages and policy updates, with metrics, checkpoints
    and a run directory (`runs/<name>/`). Ctrl-C saves a checkpoint; `rlrun resume` continues."""
    from rlrun.launch import Topology

    topology = Topology(num_processes, num_machines, machine_rank, main_process_ip, main_process_port)
    if resume and run_dir is None and Path(recipe).is_dir():  # `rlrun train --resume runs/x`
        return _resume(Path(recipe), overrides or [], topology, accelerate_config, profile)
    with user_errors():
        loaded = load_recipe(recipe, overrides or [])
    _print_issues(loaded.notices, "notice", "yellow")
    if dry_run:
        return _dry_run(loaded)
    _relaunch_if_multi_process(loaded, topology, accelerate_config)
    from rlrun.training.run import RunOptions

    options = RunOptions(run_dir=run_dir, name=name, resume=resume, overwrite=overwrite, profile=profile)
    _train(loaded, options, overrides or [])


@app.command("resume")
def resume_run(
    run_dir: Annotated[Path, typer.Argument(help="The run directory to continue.", show_default=False)],
    overrides: OverridesArg = None,
    num_processes: NumProcessesOpt = 1,
    num_machines: NumMachinesOpt = 1,
    machine_rank: MachineRankOpt = 0,
    main_process_ip: MainProcessIpOpt = None,
    main_process_port: MainProcessPortOpt = None,
    accelerate_config: AccelerateConfigOpt = None,
    profile: ProfileOpt = False,
) -> None:
    """Continue a run from its latest checkpoint, with the recipe it was started with (overrides
    may change anything but the model, tokenizer and data, e.g. `trainer.total_steps=500`), in
    any number of processes."""
    from rlrun.launch import Topology

    topology = Topology(num_processes, num_machines, machine_rank, main_process_ip, main_process_port)
    _resume(run_dir, overrides or [], topology, accelerate_config, profile)


def _resume(
    run_dir: Path, overrides: list[str], topology: Topology, accelerate_config: Path | None, profile: bool
) -> None:
    from rlrun.training.run import RunOptions
    from rlrun.training.rundir import RESOLVED

    with user_errors():
        loaded = load_recipe(run_dir / RESOLVED, overrides)
    _relaunch_if_multi_process(loaded, topology, accelerate_config)
    _train(loaded, RunOptions(run_dir=run_dir, resume=True, profile=profile), overrides)


def _relaunch_if_multi_process(
    loaded: LoadedRecipe, topology: Topology, accelerate_config: Path | None
) -> None:
    """With more than one process (and not yet launched): check that the recipe splits evenly,
    re-run this command under `accelerate launch` with `trainer.strategy`, exit with its code."""
    from rlrun.launch import check_data_parallel, is_relaunched, relaunch_with_accelerate

    if topology.num_processes <= 1 or is_relaunched():
        return
    with user_errors():
        check_data_parallel(loaded.recipe, topology.num_processes)
    try:
        strategy = loaded.recipe.trainer.strategy
        code = relaunch_with_accelerate(sys.argv[1:], topology, accelerate_config, strategy)
    except ValueError as exc:
        err_console.print(f"[red]error:[/] {exc}")
        raise typer.Exit(USER_ERROR) from None
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
    from rlrun.training.checkpoint import check_checkpoint, export_merged

    if not checkpoint.is_dir():
        err_console.print(f"[red]error:[/] no checkpoint at {checkpoint}")
        raise typer.Exit(USER_ERROR)
    if out.exists() and (not out.is_dir() or any(out.iterdir())) and not overwrite:
        err_console.print(
            f"[red]error:[/] {out} already exists and is not empty; rlrun does not overwrite it. "
            "Pick another directory, or pass --overwrite.",
            soft_wrap=True,
        )
        raise typer.Exit(USER_ERROR)
    with user_errors():
        check_checkpoint(checkpoint)
    try:
        exported = export_merged(checkpoint, out)
    except Exception as exc:  # noqa: BLE001 - any unreadable checkpoint: name it, no traceback
        err_console.print(
            f"[red]error:[/] cannot read the checkpoint {checkpoint}: {type(exc).__name__}: {exc}",
            soft_wrap=True,
        )
        raise typer.Exit(USER_ERROR) from None
    console.print(f"[green]✓[/] exported: {exported}")


def _train(loaded: LoadedRecipe, options: RunOptions, overrides: list[str]) -> None:
    from rlrun.training.loop import train as run_training

    try:
        with user_errors():
            run = run_training(loaded, options, say=lambda text: err_console.print(text), overrides=overrides)
    except typer.Exit:
        raise
    except KeyboardInterrupt:  # before the run started (a started run handles Ctrl-C itself)
        raise typer.Exit(INTERRUPTED) from None
    except Exception as exc:  # a failed run: its directory says so; show the reason, not a traceback
        if os.environ.get("RLRUN_TRACEBACK"):
            raise
        if interrupt.requested():  # Ctrl-C while loading, turned into another error by a library
            raise typer.Exit(INTERRUPTED) from None
        err_console.print(f"[red]Training failed:[/] {type(exc).__name__}: {exc}")
        raise typer.Exit(RUN_FAILED) from None
    from rlrun.launch import is_relaunched, release_process_group

    if run.status == "finished":
        release_process_group()
    if run.status == "interrupted":
        # Under the launcher the launching process reports it: torchrun would print a failure
        # report for each process that ended with 130.
        raise typer.Exit(0 if is_relaunched() else INTERRUPTED)
    if run.main:  # one line however many processes trained
        console.print(f"[green]✓[/] finished: {run.dir.path}")


def _dry_run(loaded: LoadedRecipe) -> None:
    from rlrun.training.dryrun import dry_run

    with user_errors():  # a model or data file that cannot be loaded is a recipe error here too
        report = dry_run(loaded.recipe)
    table = Table(title="dry run (nothing written)", title_justify="left", show_header=False, box=None)
    table.add_row("models loaded in", f"{report['load_s']:.2f} s")
    for phase, seconds in report["timing_s"].items():
        table.add_row(f"  {phase}", f"{seconds:.3f} s")
    table.add_row("rows in the step", str(report["rows"]))
    for key in ("peak_rss_mb", "peak_gpu_mb"):
        if key in report:
            table.add_row(key.replace("_mb", "").replace("_", " "), f"{report[key]:.0f} MiB")
    console.print(table)


# --- eval ---------------------------------------------------------------------------------


@app.command("eval")
def eval_command(
    model: Annotated[
        str,
        typer.Argument(
            help="A run checkpoint (`runs/x/checkpoints/step_000100`, LoRA "
            "included), a run directory (its latest checkpoint), a Hugging Face "
            "model directory, an `rlrun:` model or a hub id.",
            show_default=False,
        ),
    ],
    overrides: OverridesArg = None,
    recipe: Annotated[
        str | None,
        typer.Option(
            "--recipe",
            help="The recipe whose data, rewards and "
            "`trainer.eval` settings to use (default: a checkpoint's own "
            "run recipe, else `base`).",
            show_default=False,
        ),
    ] = None,
    data: Annotated[
        str | None,
        typer.Option(
            "--data",
            help="Evaluate on this data source instead (sets `data.val_source`).",
            show_default=False,
        ),
    ] = None,
    reward: Annotated[
        list[str] | None,
        typer.Option(
            "--reward",
            help="A reward entry replacing the "
            "recipe's (repeatable): `rlrun:exact_match`, "
            "`pkg.module:function`, or a YAML mapping such as "
            "`{model: rlrun:tiny-reward, weight: 1.0}`.",
            show_default=False,
        ),
    ] = None,
    k: Annotated[
        int | None,
        typer.Option(
            "-k",
            "--k",
            min=1,
            help="Samples per prompt (sets `trainer.eval.k`; k > 1 samples at the rollout temperature).",
            show_default=False,
        ),
    ] = None,
    prompts: Annotated[
        int | None,
        typer.Option(
            "--prompts",
            min=1,
            help="Evaluate the first N prompts (sets `trainer.eval.prompts`).",
            show_default=False,
        ),
    ] = None,
    out: Annotated[
        Path | None,
        typer.Option(
            "--out",
            help="Also write the result as JSON to this file (an existing file is not overwritten).",
            show_default=False,
        ),
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the result as JSON instead of a table.")
    ] = False,
) -> None:
    """Evaluate a checkpoint or model on a recipe's validation data with its rewards: mean@k, pass@k,
    maj@k, mean reward per component and response lengths — the same evaluation a run logs as
    `val/*`, so a checkpoint reproduces its run's figures at that step."""
    from rlrun.embedded import UnknownEmbeddedModelError
    from rlrun.training.standalone_eval import eval_target, evaluate_target

    target = eval_target(model)
    if out is not None and out.exists():
        err_console.print(f"[red]error:[/] {out} exists; choose another --out or remove it first")
        raise typer.Exit(USER_ERROR)
    changes = list(overrides or [])
    changes += [f"data.val_source={json.dumps(data)}"] if data is not None else []
    changes += [f"reward.functions={json.dumps([_reward_entry(text) for text in reward])}"] if reward else []
    changes += [f"trainer.eval.k={k}", f"trainer.eval.greedy={str(k == 1).lower()}"] if k is not None else []
    changes += [f"trainer.eval.prompts={prompts}"] if prompts is not None else []
    with user_errors(as_json):
        loaded = load_recipe(recipe or target.run_recipe or "base", changes)
    try:
        with user_errors(as_json):
            result, data_name = evaluate_target(target, loaded.recipe)
    except (OSError, UnknownEmbeddedModelError) as exc:  # no such model: the user's path, not a bug
        err_console.print(f"[red]error:[/] cannot load {model!r}: {exc}")
        raise typer.Exit(USER_ERROR) from None
    report = {
        "model": model,
        "recipe": str(loaded.source_path),
        "data": data_name,
        "num_prompts": result.num_prompts,
        "k": result.k,
        "greedy": result.greedy,
        "metrics": result.metrics(),
    }
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(report, indent=2) + "\n")
    if as_json:
        print(json.dumps(report, indent=2))
        return
    console.print(
        f"{model} on {data_name}: {result.num_prompts} prompts, k={result.k}"
        + (" (greedy)" if result.greedy else ""),
        soft_wrap=True,
    )
    table = Table()
    table.add_column("metric")
    table.add_column("value", justify="right")
    for name, value in report["metrics"].items():
        table.add_row(name, f"{value:.4f}")
    console.print(table)
    if out is not None:
        console.print(f"wrote {out}")


def _reward_entry(text: str) -> Any:
    """`--reward` text: a YAML mapping (`{model: ..., weight: ...}`) as is, anything else a function name."""
    import yaml

    value = yaml.safe_load(text) if text.lstrip().startswith("{") else None
    return value if isinstance(value, dict) else {"fn": text}


# --- compare ------------------------------------------------------------------------------


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
        Path | None, typer.Option(help="Write overlaid curves to this PNG.", show_default=False)
    ] = None,
    x: Annotated[XAxis, typer.Option(help="The plot's x-axis.")] = XAxis.step,
    smooth: Annotated[
        float, typer.Option(min=0.0, max=0.99, help="Plot smoothing (EMA weight, 0 = raw).")
    ] = 0.0,
    as_json: Annotated[bool, typer.Option("--json", help="Print the comparison as JSON.")] = False,
) -> None:
    """Compare runs: what changed between them (config), and what it did (metrics, health)."""
    from rlrun.compare.comparison import CompareOptions, compare, to_json
    from rlrun.compare.groups import expand_sweep_folders
    from rlrun.compare.inputs import load_input
    from rlrun.compare.render import render
    from rlrun.compare.runs import RunReadError
    from rlrun.compare.stats import TargetError, parse_target

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
            # matplotlib is slow to import, and optional
            from rlrun.compare.plot import plot_groups, plot_runs

            names = [row.metric for row in comparison.metrics]
            if not names:
                raise RunReadError("nothing to plot: the runs have recorded no metrics yet")
            if comparison.by_seed:
                plot_groups(comparison.runs, comparison.groups, names, plot, x=x.value, smoothing=smooth)
            else:
                plot_runs(comparison.runs, comparison.labels, names, plot, x=x.value, smoothing=smooth)
    except (RunReadError, TargetError, ImportError) as exc:
        err_console.print(f"[bold red]error:[/] {exc}")
        raise typer.Exit(USER_ERROR) from None
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


# --- sweep --------------------------------------------------------------------------------
# The sweep file, its plan and the executors live in rlrun.sweep; this command prints the plan,
# starts the runs and reports how each ended.

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
            help="GPUs per node of each run (default: 1, or 0 when every run's trainer.device is cpu).",
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
    from dataclasses import asdict

    from rlrun.sweep.plan import plan_sweep
    from rlrun.sweep.spec import read_sweep

    if executor is Executor.slurm:
        from rlrun.sweep.slurm import plan_on_cluster

        with user_errors():  # the runs and what they ask of the cluster, checked with it (sinfo, squeue)
            plan, slurm = plan_on_cluster(
                read_sweep(sweep_file),
                partition=partition,
                gpus_per_run=gpus_per_run,
                nodes_per_run=nodes_per_run,
                cpus_per_run=cpus_per_run,
                time_limit_min=time_limit,
            )
        settings, concurrent = slurm.to_json(), len(plan.to_do())
    else:
        with user_errors():
            plan = plan_sweep(read_sweep(sweep_file))
        from rlrun.sweep.local import machine_slots

        cpu_only = all(run.loaded.recipe.trainer.device == "cpu" for run in plan.runs)
        slots = machine_slots(len(plan.to_do()), jobs, use_gpus=not cpu_only)
        settings, concurrent = {"kind": "local", **asdict(slots)}, slots.concurrent
    _print_sweep_plan(plan, settings, concurrent)
    if dry_run or not plan.to_do():
        return
    plan.write_manifest(settings)
    if executor is Executor.slurm:
        from rlrun.sweep.slurm import submit

        for name, job in submit(plan, slurm).items():
            console.print(f"{name}: SLURM job {job.job_id} (log: {job.paths.stdout})", soft_wrap=True)
        return
    from rlrun.sweep.local import run_local

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


def _print_sweep_plan(plan: SweepPlan, settings: dict[str, Any], concurrent: int) -> None:
    from rlrun.compare.render import format_duration

    states = [run.state for run in plan.runs]
    points = len({run.run.point.name for run in plan.runs})
    console.print(
        f"sweep [bold]{plan.sweep.name}[/] ({plan.sweep.file}): {points} point(s) × "
        f"{len(plan.sweep.spec.seeds)} seed(s) = {len(plan.runs)} runs in {plan.dir}/; "
        + ", ".join(f"{states.count(state)} {label}" for state, label in _STATE_LABELS.items()),
        soft_wrap=True,
    )
    table = Table(box=None, padding=(0, 2))
    for column in ("run", "recipe", "state", "steps", "samples"):
        table.add_column(
            column, justify="right" if column in ("steps", "samples") else "left", overflow="fold"
        )
    for run in plan.runs:
        table.add_row(
            run.name,
            Path(run.recipe).stem,
            _STATE_LABELS[run.state],
            f"{run.steps_done}/{run.total_steps}",
            f"{run.samples:,}",
        )
    console.print(table)
    estimate = plan.estimated_seconds(concurrent)
    where = ", ".join(
        f"{key} {value}" for key, value in settings.items() if key != "kind" and value not in ((), None)
    )
    if not plan.to_do():
        outlook = "nothing to do"
    elif estimate is None:
        outlook = "no finished run to estimate the time from"
    else:
        outlook = f"about {format_duration(estimate)} of training at the finished runs' pace (plus start-up)"
    console.print(f"executor: {settings['kind']} ({where}); {outlook}", soft_wrap=True)


_STATE_LABELS = {
    "new": "to start",
    "resume": "to resume",
    "finished": "finished",
    "running": "running elsewhere",
}
