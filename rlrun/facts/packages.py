"""Whether an optional package is installed, decided without the working directory.

`rlrun` puts the working directory on the import path (last), so that a recipe can name its own
reward module. A file there named like a missing optional package (`datasets.py`, `gguf.py`) must
not count as that package: a check would pass, and the import that follows would run the file.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from importlib.machinery import ModuleSpec


def installed_spec(name: str) -> ModuleSpec | None:
    """Where the installed top-level package `name` is (without importing it), or None; a module
    of that name in the working directory does not count."""
    cwd = os.path.realpath(os.getcwd())
    saved = sys.path[:]
    sys.path[:] = [entry for entry in saved if os.path.realpath(entry or ".") != cwd]
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):  # a broken or half-imported package: not usable either
        return None
    finally:
        sys.path[:] = saved
    return spec


def is_installed(name: str) -> bool:
    return installed_spec(name) is not None
