"""Where each value of a resolved recipe came from, and error locations derived from it."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any, Literal

from rlrun.errors import ConfigIssue
from rlrun.recipes.keys import KeyPath, dotted

SourceKind = Literal["default", "base recipe", "file", "override"]


@dataclass(frozen=True)
class Source:
    """`default` = the schema or the built-in `base` recipe; `base recipe` = a recipe named by
    `extends`; `file` = the recipe given; `override` = a command-line `key=value`."""

    kind: SourceKind
    file: str | None = None
    line: int | None = None
    column: int | None = None
    override: str | None = None

    def describe(self) -> str:
        if self.override is not None:
            return f"override {self.override}"
        if self.kind == "default" or self.file is None:
            return self.kind
        if self.line is None:  # given from Python: no file, no line
            return f"{self.kind} {self.file}"
        return f"{self.kind} {self.file}:{self.line}"


DEFAULT = Source("default")
_NEARNESS: list[SourceKind] = ["default", "base recipe", "file", "override"]


class Provenance:
    """Source of every key path (sections, keys and list items) that some layer wrote."""

    def __init__(self, recipe_file: str):
        self.recipe_file = recipe_file
        self.sources: dict[KeyPath, Source] = {}
        # The key paths one part longer below each path (recorded or not): replacing a value
        # then forgets only its own subtree, so loading stays linear in the number of keys.
        self._below: defaultdict[KeyPath, set[KeyPath]] = defaultdict(set)

    def of(self, path: KeyPath) -> Source:
        """The source of the value at `path`; `default` if no layer wrote it."""
        return self.sources.get(path, DEFAULT)

    def record(self, path: KeyPath, source: Source) -> None:
        """A layer wrote the value at `path` (a mapping it then merges into, or a value)."""
        self.sources[path] = source
        for end in range(len(path)):
            self._below[path[:end]].add(path[: end + 1])

    def replace(self, path: KeyPath, sources: dict[KeyPath, Source]) -> None:
        """A layer replaced the value at `path` (and so everything under it)."""
        stack = [path]
        while stack:
            here = stack.pop()
            self.sources.pop(here, None)
            stack.extend(self._below.pop(here, ()))
        for key, source in sources.items():
            self.record(key, source)

    def issue(self, path: KeyPath, message: str, **fields: str | None) -> ConfigIssue:
        """A ConfigIssue located where `path`'s value was written. A key no layer wrote (a
        default, a missing key) is located at the nearest enclosing mapping or list one did;
        failing that, at the recipe file without a line: that is where the fix goes."""
        enclosing = (path[:end] for end in range(len(path), 0, -1))
        source = next((self.sources[p] for p in enclosing if p in self.sources), None)
        if source is None or source.kind == "default":
            source = Source("default", file=self.recipe_file)
        return ConfigIssue(
            message,
            key=dotted(path),
            file=source.file,
            line=source.line,
            column=source.column,
            override=source.override,
            **fields,  # type: ignore[arg-type]
        )

    def user_set(self, *paths: KeyPath) -> KeyPath:
        """Of `paths`, the one written closest to the user (override, then the recipe file,
        then a base recipe; the first on ties): where an error about several keys is best
        reported, since that is most likely the change that broke the recipe."""
        return max(paths, key=lambda path: _NEARNESS.index(self.of(path).kind))


def paths_in(value: Any, prefix: KeyPath) -> list[KeyPath]:
    """`prefix` and the path of every key and list item inside `value` (which sits at `prefix`)."""
    out = [prefix]
    stack = [(value, prefix)]
    while stack:
        node, path = stack.pop()
        items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
        for key, sub in items:
            out.append((*path, key))
            stack.append((sub, (*path, key)))
    return out
