"""What every command shares: the Typer app, the consoles, the exit codes, the recipe arguments,
and `user_errors`, which turns a library's RecipeError into located paragraphs and exit code 2."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.panel import Panel
from rich.text import Text

from rlrun import interrupt
from rlrun.errors import ConfigIssue, RecipeError, issue_kinds

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


MAX_SHOWN_ISSUES = 50  # more is a file gone wrong (a generated recipe): its kinds are shown instead
PLACES_PER_KIND = 3  # where else a repeated kind of issue occurs, beyond its first paragraph


def print_issues(issues: list[ConfigIssue], label: str, colour: str) -> None:
    """The issues in a panel: each one in full, or, when there are more than MAX_SHOWN_ISSUES,
    each kind once (`issue_kinds`) with its count and a few more places, so that no mistake is
    hidden behind thousands of another."""
    if not issues:
        return
    count = f"{len(issues)} {label}" + ("s" if len(issues) > 1 else "")
    if len(issues) <= MAX_SHOWN_ISSUES:
        body = "\n\n".join(issue.format() for issue in issues)
    else:
        kinds = issue_kinds(issues)
        count += f" of {len(kinds)} kind" + ("s" if len(kinds) > 1 else "")
        body = "\n\n".join(_kind_text(kind) for kind in kinds[:MAX_SHOWN_ISSUES])
        if len(kinds) > MAX_SHOWN_ISSUES:
            body += f"\n\n... and {len(kinds) - MAX_SHOWN_ISSUES} more kinds (`rlrun validate --json` lists them all)."
    # Text, not markup: messages quote user values and pip extras such as rlrun[vllm]
    err_console.print(Panel(Text(body), title=count, title_align="left", border_style=colour, expand=False))


def _kind_text(kind: list[ConfigIssue]) -> str:
    """One kind of issue: its first occurrence in full, then how many more and a few of their places."""
    first, more = kind[0], kind[1:]
    if not more:
        return first.format()
    places = "; ".join(issue.place for issue in more[:PLACES_PER_KIND])
    etc = "; ..." if len(more) > PLACES_PER_KIND else ""
    return f"{first.format()}\n  ({len(more)} more like it: {places}{etc})"


def refuse_output_file(path: Path | None, option: str, make_folder: bool = False) -> None:
    """Exit 2, before any work, when the file an option names cannot be written."""
    from rlrun.pathnames import output_file_problem

    if path is not None and (problem := output_file_problem(path, make_folder=make_folder)) is not None:
        raise fail(f"{option} {path}: {problem}")


def issue_dicts(issues: list[ConfigIssue]) -> list[dict[str, Any]]:
    return [issue.to_dict() for issue in issues]
