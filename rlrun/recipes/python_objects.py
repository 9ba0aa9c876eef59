"""Python objects in a recipe given from Python: named, so the recipe stays plain data.

`rlrun.load_recipe(..., overrides={"reward.functions": [score], "data.source": rows})` may put a
function or a class where a recipe names one by import path (a reward function, a tool, an
environment class), and rows (a list of dicts) where it names a data file. Each becomes a name in
the recipe (`name_objects`): a function's or class's import path `module:qualname` when
importing that gives back the very object (another process, or `rlrun resume` from the shell,
imports it again), else a ``python-object:<name>`` that resolves only in this process, while the
table of live objects the loaded recipe carries is in force (`rlrun.user_code.live_objects`).
Rows are named by their content's hash (``python-object:data-<sha256 prefix>``), so a resume
given other rows names other data and is refused as any change of data is. A loaded model or
tokenizer (`model.path`, `model.tokenizer`) is written as `save_pretrained` writes it into a
folder of rlrun's cache named by the written files' hash, which the recipe then names: a recipe
names models by folder, and a resume or another process loads the very same weights. Only the keys of
`OBJECT_KEYS` take an object, each of its kind; elsewhere an object is a located error. What was
passed (`PassedObject.description`) goes into meta.json, with why the run cannot be trained
again from its files alone when it cannot.
"""

from __future__ import annotations

import copy
import hashlib
import json
import numbers
import shutil
import tempfile
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePath
from typing import Any

from rlrun.embedded.gguf import cache_root, file_sha256
from rlrun.errors import ConfigIssue
from rlrun.recipes.keys import KeyPath, dotted
from rlrun.user_code import LIVE_PREFIX, import_path_of


@dataclass(frozen=True)
class PassedObject:
    """An object given from Python, under the name the recipe holds (`reference`)."""

    reference: str
    value: Any
    description: dict[str, Any]  # what meta.json records: kind, qualname, module (data: rows, sha256)
    not_reproducible: str | None  # why the run's files cannot bring it back; None: an import path names it


@dataclass(frozen=True)
class Slot:
    """A kind of key that takes an object: what it takes (`accepts`) and how messages call it."""

    accepts: Callable[[Any], bool]
    expected: str


def _derives_from(value: Any, class_name: str) -> bool:
    """Whether `value` is an instance of a class named `class_name` (transformers' base classes,
    recognised without importing transformers)."""
    return any(cls.__name__ == class_name for cls in type(value).__mro__)


_FUNCTION = Slot(callable, "a function")
_CLASS = Slot(lambda value: isinstance(value, type), "a class")
_MODEL = Slot(
    lambda value: _derives_from(value, "PreTrainedModel"), "a loaded transformers model (PreTrainedModel)"
)
_TOKENIZER = Slot(
    lambda value: _derives_from(value, "PreTrainedTokenizerBase"), "a loaded transformers tokenizer"
)
ANY = "*"  # any list index or mapping key in an OBJECT_KEYS pattern
OBJECT_KEYS: dict[KeyPath, Slot] = {
    ("reward", "functions", ANY, "fn"): _FUNCTION,
    ("agent", "tools", ANY): _FUNCTION,
    ("agent", "environment"): _CLASS,
    ("agent", "environments", ANY): _CLASS,
    ("model", "path"): _MODEL,
}


def slot_at(path: KeyPath) -> Slot | None:
    for pattern, slot in OBJECT_KEYS.items():
        if len(pattern) == len(path) and all(p in (ANY, part) for p, part in zip(pattern, path)):
            return slot
    return None


@dataclass
class Named:
    """The objects named so far in one recipe: the same object keeps one name, and two objects
    never share one (a second `<lambda>` is `<lambda>#2`)."""

    passed: dict[str, PassedObject] = field(default_factory=dict)
    issues: list[ConfigIssue] = field(default_factory=list)
    _names: dict[Hashable, str] = field(default_factory=dict)  # id(object) -> name

    def add(self, passed: PassedObject, identity: Hashable) -> str:
        if identity in self._names:
            return self._names[identity]
        name, count = passed.reference, 1
        while name in self.passed:
            count += 1
            name = f"{passed.reference}#{count}"
        self.passed[name] = PassedObject(name, passed.value, passed.description, passed.not_reproducible)
        self._names[identity] = name
        return name


def name_objects(value: Any, at: KeyPath, named: Named, where: str) -> Any:
    """`value` (a recipe, a section or one value, at key path `at`) as plain recipe data, each
    object in it replaced by its name (module docstring); `where` says in messages where the
    value came from. Problems are added to `named.issues`; a refused object is REFUSED (its key is
    left out of a mapping)."""
    if at in DATA_KEYS and _is_rows(value):
        return _name_rows(value, named)
    if isinstance(value, Mapping):
        items = ((key, name_objects(item, (*at, key), named, where)) for key, item in value.items())
        return {key: item for key, item in items if item is not REFUSED}
    if isinstance(value, (list, tuple)):
        if at == ("reward", "functions"):  # TRL's reward_funcs=[fn]: a bare function is an entry
            value = [
                item if isinstance(item, Mapping) or not callable(item) else {"fn": item} for item in value
            ]
        items = [name_objects(item, (*at, i), named, where) for i, item in enumerate(value)]
        return [None if item is REFUSED else item for item in items]  # an index stays where it was
    plain = _plain(value)
    if plain is not _NOT_PLAIN:
        return plain
    slot = slot_at(at)
    if slot is None or not slot.accepts(value):
        takes = f"`{dotted(at)}` takes " + (slot.expected if slot else "no Python object")
        named.issues.append(
            ConfigIssue(
                f"a Python object ({type(value).__name__}) cannot stand here: {takes}",
                key=dotted(at),
                code="python-object",
                file=where,
                fix="give a value of the kind this key takes (docs/python-api.md lists the keys that take "
                "Python objects)",
            )
        )
        return REFUSED
    if slot is _MODEL:
        try:
            return named.add(_saved(value), id(value))
        except OSError as exc:  # a full disk, a cache folder this user cannot write
            message = f"the model cannot be written to rlrun's cache ({cache_root()}): {exc}"
            fix = "free space there, or point $RLRUN_CACHE at a folder with room"
            named.issues.append(
                ConfigIssue(message, key=dotted(at), code="python-object", file=where, fix=fix)
            )
            return REFUSED
    return named.add(_describe(value), id(value))


DATA_KEYS = (("data", "source"), ("data", "val_source"))  # take rows (a list of dicts) besides file names


def _is_rows(value: Any) -> bool:
    return isinstance(value, (list, tuple)) and bool(value) and all(isinstance(row, Mapping) for row in value)


def _name_rows(given: list[Mapping[str, Any]] | tuple[Mapping[str, Any], ...], named: Named) -> str:
    """Rows given as data, copied (changing the list afterwards changes nothing) and named by
    their content."""
    rows = [copy.deepcopy(dict(row)) for row in given]
    digest = hashlib.sha256()
    for row in rows:
        digest.update(json.dumps(row, sort_keys=True, ensure_ascii=False, default=repr).encode() + b"\n")
    sha256 = digest.hexdigest()
    passed = PassedObject(
        f"{LIVE_PREFIX}data-{sha256[:16]}",
        rows,
        {"kind": "data", "qualname": type(given).__name__, "rows": len(rows), "sha256": sha256},
        f"{len(rows)} rows passed in memory: the run's files do not hold them",
    )
    return named.add(passed, passed.reference)  # the same content is the same data


_NOT_PLAIN = object()
REFUSED = object()  # an object the key does not take (an issue says so)


def _plain(value: Any) -> Any:
    """A YAML-plain value as itself (a path as text, a numpy number as a number), else _NOT_PLAIN."""
    if value is None or isinstance(value, (str, bool)):
        return value
    if isinstance(value, PurePath):
        return str(value)
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        return float(value)
    return _NOT_PLAIN


def _describe(value: Any) -> PassedObject:
    """A function or class, named and described."""
    qualname = getattr(value, "__qualname__", None)
    module = getattr(value, "__module__", None)
    kind = "class" if isinstance(value, type) else "function" if qualname else "object"
    name = qualname or type(value).__name__
    description = {"kind": kind, "qualname": name, "module": module if qualname else None}
    if (path := import_path_of(value)) is not None:
        return PassedObject(path, value, description, None)
    if not qualname:
        why = f"a {name} instance passed in memory: no import path names it"
    elif module == "__main__":
        why = f"`{qualname}` is defined in __main__ (a script or a notebook), which no other process imports"
    else:
        why = f"`{qualname}` is made inside a function (a lambda or a closure): no import path names it"
    return PassedObject(f"{LIVE_PREFIX}{getattr(value, '__name__', name)}", value, description, why)


def live_table(passed: Mapping[str, PassedObject]) -> dict[str, Any]:
    """The ``python-object:`` names of `passed` and their objects (what `user_code.live_objects`
    takes): the objects no import path brings back."""
    return {name: p.value for name, p in passed.items() if name.startswith(LIVE_PREFIX)}


def _saved(value: Any) -> PassedObject:
    """A loaded model written into rlrun's cache, named by the folder (module docstring)."""
    root = cache_root() / "python-objects"
    root.mkdir(parents=True, exist_ok=True)
    written = Path(tempfile.mkdtemp(dir=root, prefix=".writing-"))
    try:
        value.save_pretrained(written)  # safetensors: transformers' default
        digest = hashlib.sha256()
        for file in sorted(written.rglob("*")):
            if file.is_file():
                digest.update(f"{file.relative_to(written)}\n{file_sha256(file)}\n".encode())
        sha256 = digest.hexdigest()
        folder = root / f"model-{sha256[:16]}"
        if not folder.is_dir():  # the same content is already there: keep it
            written.rename(folder)
    finally:
        shutil.rmtree(written, ignore_errors=True)
    description = {"kind": "model", "qualname": type(value).__name__, "sha256": sha256}
    return PassedObject(str(folder), value, description, None)
