"""Pydantic's validation errors, restated as located ConfigIssues with did-you-mean hints."""

from __future__ import annotations

import copy
import difflib
import functools
import re
from typing import Any

import yaml
from pydantic import ValidationError

from rlrun.errors import ConfigIssue, show_value
from rlrun.recipes.keys import KeyPath, did_you_mean, dotted, section_at, unknown_key_hint
from rlrun.recipes.provenance import Provenance
from rlrun.recipes.yaml_io import parse_value
from rlrun.schema.base import Section

# How a value is named in "Found ...": `the integer 1`, `the string "8"`, `null`.
_TYPE_NAMES = {
    bool: "the boolean",
    int: "the integer",
    float: "the number",
    str: "the string",
    list: "the list",
    dict: "the mapping",
}
_MAPPING = "a mapping (indented `key: value` lines)"
# What each pydantic type error expects, in the words of a recipe.
_EXPECTED_TYPES = {
    "int_type": "an integer",
    "float_type": "a number",
    "string_type": "a string",
    "bool_type": "true or false",
    "list_type": "a list",
    "dict_type": _MAPPING,
    "model_type": _MAPPING,
    "model_attributes_type": _MAPPING,
}
_BOUNDS = {
    "greater_than": ("gt", "greater than"),
    "greater_than_equal": ("ge", "at least"),
    "less_than": ("lt", "less than"),
    "less_than_equal": ("le", "at most"),
}
_LENGTHS = {
    "too_short": ("min_length", "at least", "item"),
    "too_long": ("max_length", "at most", "item"),
    "string_too_short": ("min_length", "at least", "character"),
    "string_too_long": ("max_length", "at most", "character"),
}


def schema_issues(exc: ValidationError, data: dict[str, Any], provenance: Provenance) -> list[ConfigIssue]:
    """One issue per rejected value. A value that fits none of a union's forms (pydantic
    reports each form's complaint) is one issue at the union's key."""
    issues: list[ConfigIssue] = []
    unions: dict[KeyPath, list[tuple[str, Any, KeyPath]]] = {}
    for error in exc.errors(include_url=False):
        path, union = _real_path(data, error)
        if union is None:
            issues.append(_issue(error, path, provenance))
        else:
            unions.setdefault(union, []).append((str(error["loc"][len(union)]), error, path))
    for path, complaints in list(unions.items()):
        if len({form for form, _, _ in complaints}) == 1:  # a tagged union chose its form: its own errors
            issues.extend(_issue(error, inner, provenance) for _, error, inner in complaints)
            del unions[path]
    for path, complaints in unions.items():
        expected = " or ".join(dict.fromkeys(_describe_form(form) for form, _, _ in complaints))
        issues.append(
            provenance.issue(
                path,
                "wrong type",
                code="wrong-type",
                expected=expected,
                found=_found(_value_at(data, path)),
                fix=f"write {expected}",
            )
        )
    return issues


def _issue(error: Any, path: KeyPath, provenance: Provenance) -> ConfigIssue:
    kind, found, ctx = error["type"], error.get("input"), error.get("ctx") or {}
    if kind == "extra_forbidden":
        member = _tagged_member(tuple(error["loc"]))
        if member is not None:  # an item of a tagged union (a reward entry): its own keys
            close = difflib.get_close_matches(str(path[-1]), list(member.model_fields), n=1, cutoff=0.6)
            hint = did_you_mean([dotted((*path[:-1], close[0]))]) if close else None
        else:
            hint = unknown_key_hint(path, found)
        return provenance.issue(
            path,
            "unknown key" + (f"; {hint}" if hint else ""),
            code="unknown-key",
            expected="one of " + (", ".join(member.model_fields) if member else _keys_of(path[:-1]))
            if not hint
            else None,
            fix="rename or remove it (`rlrun schema` lists every key)",
        )
    if kind == "literal_error":
        choices = _choices(ctx["expected"])
        close = difflib.get_close_matches(str(found), choices, n=1) if isinstance(found, str) else []
        return provenance.issue(
            path,
            "not one of the allowed values" + (f"; did you mean {close[0]!r}?" if close else ""),
            code="invalid-choice",
            expected=_one_of(choices),
            found=show_value(found),
            fix="use one of the allowed values",
        )
    if kind == "missing":
        return provenance.issue(
            path, "this key is required", code="missing-key", fix=f"add `{path[-1]}:` with a value"
        )
    if kind == "invalid_key":  # `1:` or `true:` as a key: YAML reads it as a number or boolean
        return provenance.issue(
            path,
            "a key must be a name",
            code="wrong-type",
            expected="a string",
            found=_found(found),
            fix=f'quote it (`"{found}":`) if that is the name you mean',
        )
    if kind in _EXPECTED_TYPES or kind.endswith("_type"):
        expected = _EXPECTED_TYPES.get(kind) or _expected_from(error["msg"])
        quoted = isinstance(found, str) and kind != "string_type" and _unquoted_is_not_text(found)
        return provenance.issue(
            path,
            "wrong type",
            code="wrong-type",
            expected=expected,
            found=_found(found),
            fix=f"write {expected}" + (" without quotes (a quoted value is a string)" if quoted else ""),
        )
    if kind in _BOUNDS:
        bound, phrase = _BOUNDS[kind]
        limit = ctx[bound]  # an int for an integer key, a float for a number key
        number = "an integer" if isinstance(limit, int) else "a number"
        expected = f"{number} {phrase} {limit:g}"
        return provenance.issue(
            path,
            "value out of range",
            code="out-of-range",
            expected=expected,
            found=_short(found),
            fix=f"set `{dotted(path)}` to {expected}",
        )
    if kind == "finite_number":
        return provenance.issue(
            path,
            "not a finite number",
            code="invalid-value",
            expected="a finite number",
            found=_short(found),
            fix="write a finite number (`.inf` and `.nan` mean nothing in a recipe)",
        )
    if kind in _LENGTHS:
        bound, phrase, unit = _LENGTHS[kind]
        count = ctx[bound]
        expected = f"{phrase} {count} {unit}" + ("s" if count != 1 else "")
        size = len(found) if isinstance(found, (str, list)) else None
        return provenance.issue(
            path,
            "too short" if phrase == "at least" else "too long",
            code="invalid-value",
            expected=expected,
            found=_short(found) + (f" ({size} {unit}{'s' if size != 1 else ''})" if size is not None else ""),
            fix=f"give `{dotted(path)}` {expected}",
        )
    return provenance.issue(
        path,
        "invalid value",
        code="invalid-value",
        expected=_expected_from(error["msg"]),
        found=_short(found),
    )


def without_invalid(data: dict[str, Any], exc: ValidationError) -> dict[str, Any]:
    """A copy of `data` without the values the schema rejected (so they take their defaults):
    what the cross-field rules can still check while the schema errors are reported. Linear in
    the size of `data` and the number of errors: each container loses all its rejected items at
    once, the deepest containers first, so no removal shifts the index another path names."""
    pruned = copy.deepcopy(data)
    doomed: dict[KeyPath, set[Any]] = {}
    for path, union in (_real_path(data, error) for error in exc.errors()):
        if path := union or path:
            doomed.setdefault(path[:-1], set()).add(path[-1])
    for parent in sorted(doomed, key=len, reverse=True):
        node: Any = pruned
        for part in parent:
            node = node[part]
        if isinstance(node, dict):
            for key in doomed[parent]:
                node.pop(key, None)
        elif isinstance(node, list):
            node[:] = [item for index, item in enumerate(node) if index not in doomed[parent]]
    return pruned


def _real_path(data: Any, error: Any) -> tuple[KeyPath, KeyPath | None]:
    """The error's `loc` without pydantic's union-form tags (`list[str]`, `literal['all-linear']`):
    only the parts that index into `data`, and the missing key of a `missing` error. Also the
    path of the union, if the error is one form's complaint."""
    loc = tuple(error["loc"])
    path: list[str | int] = []
    union: KeyPath | None = None
    node = data
    for index, part in enumerate(loc):
        inside = (isinstance(node, dict) and part in node) or (
            isinstance(node, list) and isinstance(part, int) and part < len(node)
        )
        if inside:
            path.append(part)
            node = node[part]
        elif index == len(loc) - 1 and error["type"] == "missing":
            path.append(part)
        elif union is None and isinstance(part, str):
            union = tuple(path)
    return tuple(path), union


def _value_at(data: Any, path: KeyPath) -> Any:
    for part in path:
        data = data[part]
    return data


def _describe_form(tag: str) -> str:
    """A union form as a recipe writer would say it: `list[str]` -> `a list of strings`."""
    if tag.startswith("literal["):
        return _one_of(_choices(tag[len("literal[") : -1]))
    plural = {"str": "strings", "int": "integers", "float": "numbers"}
    if (match := re.fullmatch(r"list\[(\w+)\]", tag)) is not None:
        return "a list of " + plural.get(match.group(1), match.group(1))
    return tag


def _choices(expected: str) -> list[str]:
    """Pydantic's `'auto', True or False` -> [`auto`, `true`, `false`] (as YAML writes them)."""
    parts = re.split(r", | or ", expected)
    return [part.strip("'") if part.startswith("'") else part.lower() for part in parts]


def _unquoted_is_not_text(text: str) -> bool:
    """Whether `text` written without quotes would be a number, boolean, ... (`"8"`, not `yes`)."""
    try:
        return not isinstance(parse_value(text), str)
    except yaml.YAMLError:
        return False


def _one_of(choices: list[str]) -> str:
    return f"`{choices[0]}`" if len(choices) == 1 else "one of " + ", ".join(choices)


def _expected_from(message: str) -> str:
    """Pydantic's "Input should be a valid date" -> "a valid date"."""
    return re.sub(r"^\w+ should (?:be|have) |,? or instance of \w+", "", message)


def _found(value: Any) -> str:
    """`the integer 1`, `the string "8"`, `null`."""
    if value is None:
        return "null"
    return f"{_TYPE_NAMES.get(type(value), 'a ' + type(value).__name__)} {_short(value)}"


def _tagged_member(loc: KeyPath) -> type[Section] | None:
    """The union member an error's location names by its tag (the class name), if any."""
    members = _sections_by_name()
    return next((members[part] for part in reversed(loc) if isinstance(part, str) and part in members), None)


@functools.cache
def _sections_by_name() -> dict[str, type[Section]]:
    """Every recipe section class by name (the schema's classes are all defined at import)."""
    return {cls.__name__: cls for cls in _sections(Section)}


def _sections(cls: type[Section]) -> list[type[Section]]:
    return [sub for direct in cls.__subclasses__() for sub in (direct, *_sections(direct))]


def _keys_of(path: KeyPath) -> str:
    section = section_at(path)
    return ", ".join(section.model_fields) if section else "the documented keys"


def _short(value: Any) -> str:
    text = show_value(value)
    return text if len(text) <= 60 else text[:57] + "..."
