"""What every command shares: the Typer app, the consoles, the exit codes, the recipe arguments,
and `user_errors`, which turns a library's RecipeError into located paragraphs and exit code 2."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.panel import Panel
from rich.text import Text

from rlrun import interrupt
from rlrun.errors import ConfigIssue, RecipeError

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
RUN_FAILED = 1
INTERRUPTED = interrupt.INTERRUPTED

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
                    {"valid": False, "errors": issue_dicts(exc.issues), "notices": issue_dicts(exc.notices)},
                    indent=2,
                )
            )
        else:
            print_issues(exc.notices, "notice", "yellow")
            print_issues(exc.issues, "error", "red")
        raise typer.Exit(USER_ERROR) from None


def fail(message: str) -> typer.Exit:
    """Print `error: message` (plain text: it quotes user values) and return the exit to raise."""
    err_console.print(Text("error: ", style="red") + Text(message), soft_wrap=True)
    return typer.Exit(USER_ERROR)


def print_issues(issues: list[ConfigIssue], label: str, colour: str) -> None:
    if issues:
        count = f"{len(issues)} {label}" + ("s" if len(issues) > 1 else "")
        body = "\n\n".join(issue.format() for issue in issues)
        # Text, not markup: messages quote user values and pip extras such as rlrun[vllm]
        err_console.print(
            Panel(Text(body), title=count, title_align="left", border_style=colour, expand=False)
        )


def issue_dicts(issues: list[ConfigIssue]) -> list[dict[str, Any]]:
    return [issue.to_dict() for issue in issues]
