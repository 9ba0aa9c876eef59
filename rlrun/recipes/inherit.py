"""`extends`: a recipe is its parent chain merged base-first (mappings deep-merged, lists and
values replaced), each layer remembering where its values were written."""

from __future__ import annotations

import copy
import difflib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rlrun.errors import ConfigIssue, RecipeError
from rlrun.recipes.builtin import BUILTIN_DIR, builtin_names, builtin_path
from rlrun.recipes.keys import KeyPath, did_you_mean
from rlrun.recipes.paths import anchor_paths, expand, unset_variable, unset_variables
from rlrun.recipes.provenance import Provenance, Source, SourceKind, paths_in
from rlrun.recipes.yaml_io import Mark, parse_document, read_text


@dataclass
class Layer:
    """One recipe file's own mapping and the source of each of its key paths."""

    data: dict[str, Any]
    sources: dict[KeyPath, Source]


def display_path(path: Path) -> str:
    """How error messages name a file: relative to the working directory when inside it."""
    resolved = path.resolve()
    try:
        return str(resolved.relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(resolved)


def read_chain(path: Path, issues: list[ConfigIssue]) -> list[Layer]:
    """The layers of `path` and its ancestors, base first. Problems are appended to `issues`;
    a layer that cannot be read is left out."""
    return _read(path, "file", [], issues)


def read_given(data: dict[str, Any], name: str, issues: list[ConfigIssue]) -> list[Layer]:
    """The layers of a recipe given as a mapping (from Python, named `name` in messages) and
    its ancestors, base first: its relative paths and `extends` start at the working directory."""
    data = copy.deepcopy(data)
    anchor_paths(data, Path.cwd())
    sources = {key: Source("file", name) for key in paths_in(data, ()) if key and key[0] != "extends"}
    parents: list[Layer] = []
    if "extends" in data:
        here = Path.cwd() / name  # no file: `extends` is looked up as if written in the working directory
        parent = _resolve_extends(data.pop("extends"), here, None, name, [], issues)
        if parent is not None:
            parents = _read(parent, "base recipe", [here.resolve()], issues)
    return [*parents, Layer(data, sources)]


def _read(path: Path, kind: SourceKind, stack: list[Path], issues: list[ConfigIssue]) -> list[Layer]:
    name = display_path(path)
    if path.resolve() == (BUILTIN_DIR / "base.yaml").resolve():
        kind = "default"  # the built-in base *is* the defaults
    try:
        text = read_text(path, "recipe", name)
    except RecipeError as exc:
        issues.extend(exc.issues)
        return []
    data, marks, found = parse_document(text, name)
    issues.extend(found)
    anchor_paths(data, path.parent)  # relative paths start at the file that wrote them
    sources = {key: Source(kind, name, mark.line, mark.column) for key, mark in marks.items() if key}
    parents: list[Layer] = []
    if "extends" in data:
        parent = _resolve_extends(data.pop("extends"), path, marks.get(("extends",)), name, stack, issues)
        if parent is not None:
            parents = _read(parent, "base recipe", [*stack, path.resolve()], issues)
        sources = {key: source for key, source in sources.items() if key[0] != "extends"}
    return [*parents, Layer(data, sources)]


def _resolve_extends(
    ref: Any, path: Path, mark: Mark | None, name: str, stack: list[Path], issues: list[ConfigIssue]
) -> Path | None:
    """The file `extends: ref` in `path` names, or None (with an issue) if there is none."""

    def problem(message: str, **fields: str | None) -> None:
        line, column = (mark.line, mark.column) if mark else (None, None)
        issues.append(ConfigIssue(message, key="extends", file=name, line=line, column=column, **fields))  # type: ignore[arg-type]

    if not isinstance(ref, str) or not ref:
        problem(
            "`extends` names the recipe this one builds on",
            code="extends-type",
            expected="a built-in recipe name or a path",
            found=repr(ref),
            fix="write e.g. `extends: grpo`",
        )
        return None
    if unset := unset_variables(ref):
        problem(**unset_variable(unset[0], ref))
        return None
    is_path = "/" in ref or ref.endswith((".yaml", ".yml")) or ref.startswith(("~", "$"))
    target = (path.parent / expand(ref)) if is_path else None
    if target is None or not target.is_file():  # `gsm8k/grpo_qwen2.5-0.5b`: a built-in in a subfolder
        target = builtin_path(ref) or target
    if target is not None and target.is_dir():
        problem(
            f"the recipe to extend, {ref!r}, is a folder, not a recipe file (paths are relative to this "
            f"file: {display_path(target)})",
            code="extends-folder",
            found=repr(ref),
            fix="name a .yaml file inside it",
        )
        return None
    if target is None or not target.is_file():
        if is_path:
            problem(
                f"the recipe to extend, {ref!r}, does not exist (paths are relative to this file: "
                f"{display_path(path.parent / expand(ref))})",
                code="extends-missing",
                found=repr(ref),
                fix="correct the path, or name a built-in recipe",
            )
        else:
            hint = did_you_mean(difflib.get_close_matches(ref, builtin_names(), n=2))
            problem(
                f"there is no built-in recipe {ref!r}" + (f"; {hint}" if hint else ""),
                code="extends-unknown",
                expected="one of " + ", ".join(builtin_names()),
                found=repr(ref),
                fix="name a built-in recipe, or give a path such as `./my_base.yaml`",
            )
        return None
    if target.resolve() in [*stack, path.resolve()]:
        chain = " -> ".join(display_path(p) for p in [*stack, path.resolve(), target.resolve()])
        problem(
            f"`extends` forms a cycle: {chain}",
            code="extends-cycle",
            fix="remove `extends` from one of these files",
        )
        return None
    return target


def merge(layers: list[Layer], recipe_file: str) -> tuple[dict[str, Any], Provenance]:
    """Merge layers base-first: later mappings are merged into earlier ones key by key; any
    other value (lists included) replaces what was there."""
    data: dict[str, Any] = {}
    provenance = Provenance(recipe_file)
    for layer in layers:
        _merge_into(data, layer.data, (), layer.sources, provenance)
    return data, provenance


def _merge_into(
    target: dict[str, Any],
    update: dict[str, Any],
    prefix: KeyPath,
    sources: dict[KeyPath, Source],
    provenance: Provenance,
) -> None:
    for key, value in update.items():
        path = (*prefix, key)
        if isinstance(value, dict) and isinstance(target.get(key), dict):
            if path in sources:
                provenance.record(path, sources[path])
            _merge_into(target[key], value, path, sources, provenance)
        else:
            target[key] = copy.deepcopy(value)
            provenance.replace(path, {p: sources[p] for p in paths_in(value, path) if p in sources})
