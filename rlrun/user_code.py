"""Importing what a recipe names: a module (`algorithm.plugins`) or an object in one,
``pkg.module:attr`` (a reward function, a tool, an environment class). User code runs only from
import paths the user wrote; whatever it raises while importing is reported, never let through.

An object passed to rlrun from Python (`rlrun.load_recipe(..., overrides={...})`) is named in the
recipe by its import path when importing that gives back the very object (`import_path_of`), and
otherwise by a ``python-object:<name>`` (a lambda, a closure, a function of ``__main__``, data or a
model in memory). Such a name resolves only while a table of live objects holding it is in force
(`live_objects`, around validation and the run): the one place where the recipe's names become
objects serves both faces, the command line and Python.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from types import ModuleType
from typing import Any

LIVE_PREFIX = "python-object:"  # not an import path: no module name holds a hyphen
_live_tables: list[Mapping[str, Any]] = []  # the tables in force, innermost last


class UserModuleError(ImportError):
    """A module a recipe names (a reward's, a plugin) failed while being imported."""


class ImportPathError(ValueError):
    """A ``pkg.module:attr`` a recipe wrote names nothing importable (the message says why)."""


def import_user_module(name: str) -> ModuleType:
    """Import a module a recipe names. Whatever its top-level code raises, `sys.exit()`
    included, becomes a UserModuleError (Ctrl-C still stops): the recipe named broken code,
    and a module that exits must not end `rlrun validate` as if all were well."""
    try:
        return importlib.import_module(name)
    except KeyboardInterrupt:
        raise
    except ImportError:
        raise
    except BaseException as err:  # noqa: BLE001 (see the docstring)
        raise UserModuleError(f"the module {name!r} raised {err!r} while being imported") from None


def is_import_path(spec: str) -> bool:
    """Whether `spec` has the form ``pkg.module:attr`` (both parts non-empty)."""
    module, sep, attr = spec.partition(":")
    return bool(sep and module and attr)


def resolve_import_path(spec: str) -> Any:
    """The object ``pkg.module:attr`` names (``attr`` may be dotted: ``Class.method``), or an
    ImportPathError saying why not: no such module, the module failing on import, no such
    attribute. A ``python-object:`` name is looked up in the live tables in force."""
    if is_live_name(spec):
        return live_object(spec)
    module_name, _, attr = spec.partition(":")
    if not is_import_path(spec):
        raise ImportPathError(f"{spec!r} is not an import path of the form 'pkg.module:name'")
    try:
        found: Any = import_user_module(module_name)
    except UserModuleError as err:
        raise ImportPathError(str(err)) from None
    except ImportError as err:
        raise ImportPathError(f"cannot import module {module_name!r} ({err})") from err
    for part in attr.split("."):
        if not hasattr(found, part):
            raise ImportPathError(f"module {module_name!r} has no attribute {attr!r}")
        found = getattr(found, part)
    return found


def resolve_named(spec: str, *, what: str, builtins: list[str]) -> Any:
    """What a recipe entry that is either a built-in or ``pkg.module:name`` names, when it is not
    a built-in: an ImportPathError names the entry (`what`: "reward", "tool") and says why not."""
    if not is_import_path(spec):
        raise ImportPathError(
            f"{what} {spec!r} is neither a built-in ({', '.join(builtins)}) nor an import path of the form "
            "'pkg.module:function'"
        )
    try:
        return resolve_import_path(spec)
    except ImportPathError as err:
        raise ImportPathError(f"{what} {spec!r}: {err}") from None


def is_live_name(spec: str) -> bool:
    """Whether `spec` names an object passed from Python that no import path names."""
    return spec.startswith(LIVE_PREFIX)


@contextmanager
def live_objects(table: Mapping[str, Any]) -> Iterator[None]:
    """While the block runs, the ``python-object:`` names of `table` resolve to its objects."""
    _live_tables.append(table)
    try:
        yield
    finally:
        _live_tables.remove(table)


def live_object(spec: str) -> Any:
    """The object a ``python-object:`` name stands for, or an ImportPathError saying that this
    process does not hold it (it lived in the process that passed it)."""
    for table in reversed(_live_tables):
        if spec in table:
            return table[spec]
    raise ImportPathError(
        f"{spec!r} stood for a Python object passed to rlrun in memory, which no file or import path "
        "holds, and this process was not given it: from Python, pass the object again at this key "
        "(`overrides={key: object}`)"
    )


def import_path_of(obj: Any) -> str | None:
    """``module:qualname`` of `obj` when importing it gives back this very object (so another
    process can import it), else None: a lambda, a function made inside another, anything of
    ``__main__`` (a script or a notebook), an instance."""
    module, qualname = getattr(obj, "__module__", None), getattr(obj, "__qualname__", None)
    if (
        not isinstance(module, str)
        or not isinstance(qualname, str)
        or module == "__main__"
        or "<" in qualname
    ):
        return None
    spec = f"{module}:{qualname}"
    try:
        found = resolve_import_path(spec)
    except ImportPathError:
        return None
    return spec if found is obj else None
