"""The recipes shipped with rlrun (package data in `builtin/`, `recipes/` at the repo root).

A recipe in a subfolder is named by its relative path without `.yaml` (`real/grpo_smollm2`)."""

from __future__ import annotations

import shutil
from pathlib import Path

from rlrun.recipes.yaml_io import parse_document

BUILTIN_DIR = Path(__file__).parent / "builtin"


def builtin_names() -> list[str]:
    return sorted(
        path.relative_to(BUILTIN_DIR).with_suffix("").as_posix() for path in BUILTIN_DIR.rglob("*.yaml")
    )


def builtin_path(name: str) -> Path | None:
    # Only listed names: a name is never a path that could leave the folder (`../x`).
    return BUILTIN_DIR / f"{name}.yaml" if name in builtin_names() else None


def builtin_descriptions() -> dict[str, str]:
    """Each built-in recipe with its `description:` line."""
    out = {}
    for name in builtin_names():
        data, _, _ = parse_document((BUILTIN_DIR / f"{name}.yaml").read_text(), name)
        out[name] = str(data.get("description", ""))
    return out


def copy_builtin(name: str, dest: Path) -> Path:
    """Copy built-in recipe `name` to `dest` (a file, or a folder to put `<name>.yaml` in).

    Raises KeyError for an unknown name and FileExistsError rather than overwrite."""
    source = builtin_path(name)
    if source is None:
        raise KeyError(name)
    target = dest / source.name if dest.is_dir() else dest
    if target.exists():
        raise FileExistsError(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(source, target)
    return target
