"""Overrides: `actor.optimizer.lr=3e-6` on the command line sets (the value read as YAML), `~key`
deletes (the key falls back to its default); from Python, `{"actor.optimizer.lr": 3e-6}` sets
the value as given."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import yaml

from rlrun.errors import ConfigIssue
from rlrun.recipes.keys import KeyPath, all_keys, dotted, unknown_key_hint
from rlrun.recipes.provenance import Provenance, Source, paths_in
from rlrun.recipes.yaml_io import parse_value

PYTHON_OVERRIDES = "overrides from Python"  # where a problem of an override given from Python is


def apply_overrides(
    data: dict[str, Any], provenance: Provenance, overrides: Iterable[str] | Mapping[str, Any]
) -> list[ConfigIssue]:
    """Apply each override in order to `data` (in place): `key=value` texts, or a mapping of
    dotted keys to values given from Python. Returns the ones that could not be applied."""
    if isinstance(overrides, Mapping):
        return _apply_python(data, provenance, overrides)
    issues = []
    for text in overrides:
        try:
            _apply(data, provenance, text)
        except _OverrideProblem as problem:
            issues.append(
                ConfigIssue(
                    problem.message,
                    key=problem.key,
                    code="override",
                    override=text,
                    expected=problem.expected,
                    fix=problem.fix,
                )
            )
    return issues


def _apply_python(
    data: dict[str, Any], provenance: Provenance, overrides: Mapping[str, Any]
) -> list[ConfigIssue]:
    issues = []
    for key, value in overrides.items():
        try:
            _set(data, provenance, _parse_key(str(key).strip()), value, Source("override", PYTHON_OVERRIDES))
        except _OverrideProblem as problem:
            issues.append(
                ConfigIssue(
                    problem.message,
                    key=problem.key or str(key),
                    code="override",
                    file=PYTHON_OVERRIDES,
                    expected=problem.expected,
                    fix=problem.fix,
                )
            )
    return issues


class _OverrideProblem(Exception):
    def __init__(self, message: str, key: str = "", expected: str | None = None, fix: str | None = None):
        super().__init__(message)
        self.message, self.key, self.expected, self.fix = message, key, expected, fix


def _apply(data: dict[str, Any], provenance: Provenance, text: str) -> None:
    delete = text.startswith("~")
    key, sep, raw = text.removeprefix("~").partition("=")
    if delete == bool(sep):
        raise _OverrideProblem(
            "an override is `key=value` (set) or `~key` (delete)",
            expected="e.g. `rollout.n=16` or `~actor.clip_ratio_high`",
            fix="write the override in one of these forms",
        )
    path = _parse_key(key.strip())
    source = Source("override", override=text)
    if delete:
        _delete(data, path)
        provenance.replace(path, {})
        return
    try:
        value = parse_value(raw)
    except yaml.YAMLError as exc:
        raise _OverrideProblem(
            f"the value is not valid YAML ({str(exc).splitlines()[0]})",
            key=key,
            fix="quote the value for the shell, e.g. 'key=[a, b]'",
        ) from None
    _set(data, provenance, path, value, source)


def _set(data: dict[str, Any], provenance: Provenance, path: KeyPath, value: Any, source: Source) -> None:
    written = _first_missing(data, path)  # missing mappings the override creates are its own
    container, last = _parent(data, path, create=True)
    container[last] = value  # type: ignore[index]
    provenance.replace(written, {sub: source for sub in paths_in(_get(data, written), written)})


def _parse_key(key: str) -> KeyPath:
    parts = key.split(".")
    if not all(parts):
        raise _OverrideProblem(
            "the key is empty or has an empty part",
            key=key,
            expected="a dotted key such as `actor.optimizer.lr`",
            fix="remove the stray dot",
        )
    return tuple(int(part) if part.isdigit() else part for part in parts)


def _parent(
    data: dict[str, Any], path: KeyPath, create: bool
) -> tuple[dict[str, Any] | list[Any], str | int]:
    """The mapping or list holding `path`'s last part (creating missing mappings if asked)."""
    node: Any = data
    for depth, part in enumerate(path[:-1]):
        here = dotted(path[: depth + 1])
        if isinstance(node, list):
            if not isinstance(part, int) or not -len(node) <= part < len(node):
                raise _OverrideProblem(
                    f"`{dotted(path[:depth])}` is a list of {len(node)} items; "
                    f"{part!r} is not an index of it",
                    key=here,
                )
            node = node[part]
        elif isinstance(node, dict):
            if part not in node and create:
                node[part] = {}
            if part not in node:
                raise _OverrideProblem(
                    f"`{here}` is not set, so there is nothing under it to delete", key=here
                )
            node = node[part]
        else:
            raise _OverrideProblem(f"`{dotted(path[:depth])}` is a value, not a section", key=here)
    if isinstance(node, list) and not (isinstance(path[-1], int) and -len(node) <= path[-1] < len(node)):
        raise _OverrideProblem(
            f"`{dotted(path[:-1])}` is a list of {len(node)} items; {path[-1]!r} is not "
            "an index of it (replace the whole list instead)",
            key=dotted(path),
        )
    if not isinstance(node, (dict, list)):
        raise _OverrideProblem(f"`{dotted(path[:-1])}` is a value, not a section", key=dotted(path))
    return node, path[-1]


def _delete(data: dict[str, Any], path: KeyPath) -> None:
    try:
        container, last = _parent(data, path, create=False)
        del container[last]  # type: ignore[arg-type]
    except (_OverrideProblem, KeyError):
        if path in all_keys():
            return  # not written anywhere: it already has its default
        hint = unknown_key_hint(path)
        raise _OverrideProblem(
            "no recipe has this key" + (f"; {hint}" if hint else ""),
            key=dotted(path),
            fix="name a key of the recipe (`rlrun show RECIPE` lists them)",
        ) from None


def _first_missing(data: dict[str, Any], path: KeyPath) -> KeyPath:
    """The shortest prefix of `path` whose mapping key is not in `data` yet (else `path`)."""
    node: Any = data
    for depth, part in enumerate(path):
        if isinstance(node, dict):
            if part not in node:
                return path[: depth + 1]
            node = node[part]
        elif isinstance(node, list) and isinstance(part, int) and -len(node) <= part < len(node):
            node = node[part]
        else:
            break  # _parent reports the path that does not fit
    return path


def _get(data: dict[str, Any], path: KeyPath) -> Any:
    node: Any = data
    for part in path:
        node = node[part]
    return node
