"""`rlrun convert verl|trl`: a recipe from another stack's configuration, with the report of
what mapped, what changed unit and what was refused."""

from __future__ import annotations

import tempfile
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.text import Text

from rlrun.cli._app import USER_ERROR, app, console, err_console, fail, user_errors
from rlrun.errors import RecipeError
from rlrun.recipes import load_recipe
from rlrun.recipes.inherit import display_path

if TYPE_CHECKING:
    from rlrun.convert.conversion import Conversion

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
            "key=value items), a shell script (.sh) that runs one, or a verl config (.yaml); key=value "
            "items after a script are its arguments (`bash run.sh key=value`), after a config they "
            "override it.",
            show_default=False,
        ),
    ],
    output: OutputOption = None,
) -> None:
    """Turn a verl run into an rlrun recipe, with a report of what mapped, what changed unit (verl's
    ppo_mini_batch_size counts prompts, rlrun's actor.mini_batch_samples samples) and what has no
    equivalent. The recipe is checked as `rlrun validate --portable` does before it is written;
    exit code 2, and no file, when the input cannot be read or the recipe does not validate.
    """
    from rlrun.convert.conversion import ConvertError
    from rlrun.convert.verl import convert, read_source

    try:
        conversion = convert(read_source(source))
    except ConvertError as exc:
        err_console.print(Text(f"error: {exc}", style="red"), soft_wrap=True)
        raise typer.Exit(USER_ERROR) from None
    _write_conversion(conversion, output)


@convert_app.command("trl")
def convert_trl(
    config: Annotated[
        Path,
        typer.Argument(
            help="A TRL GRPO config: a YAML as `trl grpo --config` reads it, or a script with a literal "
            "GRPOConfig(...) call.",
            show_default=False,
        ),
    ],
    num_processes: Annotated[
        int | None,
        typer.Option(
            "--num-processes",
            min=1,
            help="The processes TRL trained on (its batch sizes are per device); default: the config's "
            "num_processes, else 1.",
            show_default=False,
        ),
    ] = None,
    trainer: Annotated[
        str,
        typer.Option(
            "--trainer", help="The `trl` command the YAML was written for (grpo | rloo | sft | ...)."
        ),
    ] = "grpo",
    dataset_rows: Annotated[
        int | None,
        typer.Option(
            "--dataset-rows",
            min=1,
            help="The rows of the dataset's train split, which TRL's num_train_epochs needs (the converter "
            "does not load the dataset).",
            show_default=False,
        ),
    ] = None,
    output: OutputOption = None,
) -> None:
    """Turn a TRL GRPO config into an rlrun recipe, with a report of what mapped, what changed unit
    (TRL's per_device_train_batch_size counts samples per device, rlrun's actor.micro_batch_samples
    samples over all processes) and what was ignored as unable to change the numbers; a key rlrun
    cannot honour is refused (exit code 2, naming every one). The recipe is checked as `rlrun
    validate --portable` does before it is written.
    """
    from rlrun.convert.conversion import ConvertError
    from rlrun.convert.trl import convert, read_config

    try:
        settings, notes = read_config(config, trainer)
        conversion = convert(settings, str(config), num_processes, dataset_rows)
    except ConvertError as exc:
        err_console.print(Text(f"error: {exc}", style="red"), soft_wrap=True)
        raise typer.Exit(USER_ERROR) from None
    conversion.notes += notes
    _write_conversion(conversion, output)


def _write_conversion(conversion: Conversion, output: Path | None) -> None:
    """Print the report; check the recipe as `rlrun validate --portable` does; only then write it
    to `output` (never over a file), or print it. A recipe that does not validate is printed with
    its errors and written nowhere: a failed command leaves no file behind."""
    text = conversion.to_yaml()
    err_console.print(Text(conversion.report()), soft_wrap=True)
    exists = f"{output} already exists; rlrun does not overwrite it. Pick another name."
    if output is not None and output.exists():
        raise fail(exists)
    error = _validation_error(text, output)
    if error is not None or output is None:
        print(text, end="")
    if error is not None:
        with user_errors():
            raise error
    if output is not None:
        try:
            output.parent.mkdir(parents=True, exist_ok=True)
            with output.open("x", encoding="utf-8") as file:
                file.write(text)
        except FileExistsError:  # written by someone else since the check above
            raise fail(exists) from None
    where = f"wrote {output}" if output else "the recipe above"
    console.print(f"[green]✓[/] {where}: a valid recipe (`rlrun validate --portable`).", soft_wrap=True)


def _validation_error(text: str, output: Path | None) -> RecipeError | None:
    """What `rlrun validate --portable` finds wrong with the recipe `text`, located in "the
    recipe above"; None when it is valid. The copy checked lies where the recipe will be written
    (relative paths in it resolve from there) and is gone afterwards."""
    folder = output.parent if output is not None and output.parent.is_dir() else None
    with tempfile.TemporaryDirectory() as scratch:
        handle, name = tempfile.mkstemp(prefix=".rlrun-convert-", suffix=".yaml", dir=folder or scratch)
        checked = Path(name)
        try:
            with open(handle, "w", encoding="utf-8") as file:
                file.write(text)
            load_recipe(checked, environment=False)
        except RecipeError as exc:
            copy = display_path(checked)
            where = "the recipe above" + (f" (not written to {output})" if output else "")
            issues, notices = (
                [replace(i, file=where) if i.file == copy else i for i in found]
                for found in (exc.issues, exc.notices)
            )
            return RecipeError(issues, notices)
        finally:
            checked.unlink(missing_ok=True)
    return None
