"""The user-facing error types: what went wrong in a recipe, where, and how to fix it.

Everything the library can blame on the user's recipe (or command-line overrides) is a
`ConfigIssue`; loading collects all of them and raises one `RecipeError`. The CLI prints each
issue as one paragraph and exits with code 2, never with a traceback.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import asdict, dataclass
from typing import Any

_LIST_INDEX = re.compile(r"\.\d+(?=[.`])")  # `.7` in a dotted key path quoted in a message


@dataclass(frozen=True)
class ConfigIssue:
    """One problem (or, as a notice, one likely mistake) in a recipe.

    `file`/`line`/`column` locate the value in its YAML file (1-based); a value that came
    from a command-line override has `override` set to that argument instead. `key` is the
    dotted key path (`actor.optimizer.lr`, list items by index: `reward.functions.0.fn`).
    `code` is a stable identifier (e.g. `batch-divisibility`) for tests and `--json`.
    """

    message: str
    key: str = ""
    code: str = "invalid"
    file: str | None = None
    line: int | None = None
    column: int | None = None
    override: str | None = None
    expected: str | None = None
    found: str | None = None
    fix: str | None = None

    @property
    def where(self) -> str:
        """`recipe.yaml, line 12, column 3` / `override "actor.lr=1"` / `recipe.yaml`."""
        if self.override is not None:
            return f"command-line override `{self.override}`"
        if self.file is None:
            return "recipe"
        if self.line is None:
            return self.file
        return f"{self.file}, line {self.line}, column {self.column}"

    @property
    def place(self) -> str:
        """Where and which key: `recipe.yaml, line 12, column 3, `actor.lr``."""
        return f"{self.where}, `{self.key}`" if self.key else self.where

    @property
    def kind(self) -> tuple[str, str, str | None]:
        """What makes two issues the same mistake in different places: list items' indices in
        the message do not count (`did you mean `reward.functions.7.weight`?`)."""
        return (self.code, _LIST_INDEX.sub(".*", self.message), self.expected)

    def format(self) -> str:
        """One paragraph: where, which key, what is wrong, expected vs found, how to fix."""
        parts = [f"{self.place}: {self.message}"]
        if self.expected is not None:
            parts.append(f"Expected {self.expected}")
        if self.found is not None:
            parts.append(f"Found {self.found}")
        if self.fix:
            parts.append(f"Fix: {self.fix}")
        return " ".join(_sentence(part) for part in parts)

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "text": self.format()}


def issue_kinds(issues: list[ConfigIssue]) -> list[list[ConfigIssue]]:
    """The issues grouped by kind (`ConfigIssue.kind`), in the order each kind first occurs, each
    group in the issues' order: a file with thousands of one mistake shows every other mistake
    too. Linear in the number of issues."""
    kinds: dict[tuple[str, str, str | None], list[ConfigIssue]] = {}
    for issue in issues:
        kinds.setdefault(issue.kind, []).append(issue)
    return list(kinds.values())


class RecipeError(Exception):
    """A recipe that cannot be used, with every issue found (not just the first)."""

    def __init__(self, issues: list[ConfigIssue], notices: list[ConfigIssue] | None = None):
        if not issues:
            raise ValueError("RecipeError needs at least one issue")
        self.issues = list(issues)
        self.notices = list(notices or [])
        super().__init__(self.issues, self.notices)  # the text is made when asked for (`__str__`)

    def format(self) -> str:
        count = f"{len(self.issues)} error" + ("s" if len(self.issues) > 1 else "")
        return f"The recipe has {count}:\n\n" + "\n\n".join(issue.format() for issue in self.issues)

    def __str__(self) -> str:
        return self.format()


def _sentence(text: str) -> str:
    return text if text.endswith((".", "?", "!")) else text + "."


def show_value(value: Any) -> str:
    """A value as the user would write it: strings quoted, `true`/`null`/`.nan` in YAML spelling."""
    if isinstance(value, float) and not math.isfinite(value):
        return ".nan" if math.isnan(value) else ("-.inf" if value < 0 else ".inf")
    return json.dumps(value, default=str)
