"""Importing what a recipe names: a module (`algorithm.plugins`) or an object in one,
``pkg.module:attr`` (a reward function, a tool, an environment class). User code runs only from
import paths the user wrote; whatever it raises while importing is reported, never let through."""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any


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
    attribute."""
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
