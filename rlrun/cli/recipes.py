"""Commands about recipes, none of which loads a model: `validate`, `show`, `schema`, `recipes`
(list, copy) and `components`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table
from rich.text import Text

from rlrun.cli._app import (
    USER_ERROR,
    OverridesArg,
    RecipeArg,
    app,
    console,
    err_console,
    print_issues,
    user_errors,
)
from rlrun.recipes import load_recipe


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
    from rlrun.recipes.summary import (
        batch_plan_table,
        episode_plan_table,
        summary_table,
        unchecked_notices,
        validation_json,
    )

    with user_errors(as_json):
        loaded = load_recipe(
            recipe, overrides or [], strict=strict, environment=not portable, import_modules=not no_import
        )
    if as_json:
        print(json.dumps(validation_json(loaded, here=not portable), indent=2))
        return
    console.print(f"[green]✓[/] {loaded.source_path} is a valid recipe.", soft_wrap=True)
    console.print(summary_table(loaded, here=not portable))
    console.print(batch_plan_table(loaded))
    if (episodes := episode_plan_table(loaded)) is not None:
        console.print(episodes)
    print_issues([*loaded.notices, *unchecked_notices(loaded)], "notice", "yellow")


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
    from rlrun.recipes.yaml_dump import to_yaml

    with user_errors():
        loaded = load_recipe(recipe, overrides or [])
    print(to_yaml(loaded.data, loaded.provenance if provenance else None), end="")


@app.command()
def schema() -> None:
    """Print the JSON Schema of a recipe file, for editor completion and checking.

    Save it (`rlrun schema > recipe.schema.json`) and start a recipe with
    `# yaml-language-server: $schema=recipe.schema.json`.
    """
    from rlrun.recipes.json_schema import recipe_json_schema

    print(json.dumps(recipe_json_schema(), indent=2))


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
        table.add_row(Text(name, style="bold"), Text(description))  # text: "rlrun[real]" keeps its brackets
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
            # Text, not markup: a description such as "needs the rlrun[vllm] extra" has brackets
            table.add_row(Text(name, style="bold"), Text(description))
        console.print(table)
        console.print()
