"""Pydantic's validation errors, restated as located ConfigIssues with did-you-mean hints."""

from __future__ import annotations

import copy
import difflib
import re
from typing import Any

from pydantic import ValidationError

from rlrun.errors import ConfigIssue, show_value
from rlrun.recipes.keys import KeyPath, did_you_mean, dotted, section_at, suggest_keys
from rlrun.recipes.provenance import Provenance
from rlrun.schema.base import Section

_TYPE_NAMES = {
    bool: "a boolean",
    int: "an integer",
    float: "a number",
    str: "a string",
    list: "a list",
    dict: "a mapping",
    type(None): "null",
}


def schema_issues(exc: ValidationError, data: dict[str, Any], provenance: Provenance) -> list[ConfigIssue]:
    return [_issue(error, data, provenance) for error in exc.errors(include_url=False)]


def _issue(error: Any, data: dict[str, Any], provenance: Provenance) -> ConfigIssue:
    path = _real_path(data, tuple(error["loc"]))
    kind, found = error["type"], error.get("input")
    if kind == "extra_forbidden":
        member = _tagged_member(tuple(error["loc"]))
        if member is not None:  # an item of a tagged union (a reward entry): its own keys
            close = difflib.get_close_matches(str(path[-1]), list(member.model_fields), n=1, cutoff=0.6)
            hint = did_you_mean([dotted((*path[:-1], close[0]))]) if close else None
        else:
            hint = did_you_mean(suggest_keys(path))
        return provenance.issue(
            path,
            "unknown key" + (f"; {hint}" if hint else ""),
            code="unknown-key",
            expected="one of " + (", ".join(member.model_fields) if member else _keys_of(path[:-1]))
            if not hint
            else None,
            fix="rename or remove it (`rlrun schema` lists every key)",
        )
    # "Input should be greater than 0" -> "greater than 0"
    expected = re.sub(r"^\w+ should (?:be|have) |,? or instance of \w+", "", error["msg"])
    if kind == "literal_error":
        choices = re.findall(r"'([^']*)'", error["ctx"]["expected"])
        close = difflib.get_close_matches(str(found), choices, n=1) if isinstance(found, str) else []
        return provenance.issue(
            path,
            "not one of the allowed values" + (f"; did you mean {close[0]!r}?" if close else ""),
            code="invalid-choice",
            expected="one of " + ", ".join(choices),
            found=show_value(found),
            fix="use one of the allowed values",
        )
    if kind == "missing":
        return provenance.issue(
            path, "this key is required", code="missing-key", fix=f"add `{path[-1]}:` with a value"
        )
    if kind.endswith(("_type", "_parsing")) or kind in ("model_type", "dict_type", "list_type"):
        return provenance.issue(
            path,
            "wrong type",
            code="wrong-type",
            expected=expected,
            found=f"{_short(found)} ({_TYPE_NAMES.get(type(found), type(found).__name__)})",
            fix=f"write {expected}"
            + (" (without quotes: a quoted value is a string)" if isinstance(found, str) else ""),
        )
    in_range = kind in ("greater_than", "greater_than_equal", "less_than", "less_than_equal")
    return provenance.issue(
        path,
        "value out of range" if in_range else "invalid value",
        code="out-of-range" if in_range else "invalid-value",
        expected=expected,
        found=_short(found),
        fix=f"set `{dotted(path)}` to a value {expected}",
    )


def without_invalid(data: dict[str, Any], exc: ValidationError) -> dict[str, Any]:
    """A copy of `data` without the values the schema rejected (so they take their defaults):
    what the cross-field rules can still check while the schema errors are reported."""
    pruned = copy.deepcopy(data)
    # Deepest first, so deleting a list item does not shift the index of another error's path.
    for path in sorted((_real_path(data, tuple(e["loc"])) for e in exc.errors()), key=len, reverse=True):
        *parents, last = path
        node: Any = pruned
        for part in parents:
            node = node[part]
        if isinstance(node, dict):
            node.pop(last, None)
        elif isinstance(node, list) and isinstance(last, int) and last < len(node):
            del node[last]
    return pruned


def _real_path(data: Any, loc: KeyPath) -> KeyPath:
    """`loc` without pydantic's union-member tags: only the parts that index into `data`
    (the last part is kept even when absent: a missing key)."""
    path: list[str | int] = []
    node = data
    for index, part in enumerate(loc):
        inside = (isinstance(node, dict) and part in node) or (
            isinstance(node, list) and isinstance(part, int) and part < len(node)
        )
        if inside:
            path.append(part)
            node = node[part]
        elif index == len(loc) - 1:
            path.append(part)
    return tuple(path)


def _tagged_member(loc: KeyPath) -> type[Section] | None:
    """The union member an error's location names by its tag (the class name), if any."""
    members = {cls.__name__: cls for cls in _sections(Section)}
    return next((members[part] for part in reversed(loc) if isinstance(part, str) and part in members), None)


def _sections(cls: type[Section]) -> list[type[Section]]:
    return [sub for direct in cls.__subclasses__() for sub in (direct, *_sections(direct))]


def _keys_of(path: KeyPath) -> str:
    section = section_at(path)
    return ", ".join(section.model_fields) if section else "the documented keys"


def _short(value: Any) -> str:
    text = show_value(value)
    return text if len(text) <= 60 else text[:57] + "..."
