"""The recipes shipped with rlrun (package data in `builtin/`, `recipes/` at the repo root).

A recipe's name is its path under `builtin/` without `.yaml`: `dapo`, or `gsm8k/grpo_qwen2.5-0.5b`
or `real/grpo_smollm2` for one in a subfolder (a family of recipes for real models, with the data files they name).
"""

from __future__ import annotations

import shutil
from pathlib import Path

from rlrun.recipes.yaml_io import parse_document

BUILTIN_DIR = Path(__file__).parent / "builtin"


def builtin_names() -> list[str]:
    """Every built-in recipe: those at the top level first, then each subfolder's."""
    names = [path.relative_to(BUILTIN_DIR).with_suffix("").as_posix() for path in BUILTIN_DIR.rglob("*.yaml")]
    return sorted(names, key=lambda name: (name.count("/"), name))


def builtin_path(name: str) -> Path | None:
    """The file of built-in recipe `name`, or None if there is none."""
    parts = name.split("/")
    if not name or any(part in ("", ".", "..") or "\\" in part for part in parts):
        return None
    path = BUILTIN_DIR.joinpath(*parts[:-1], f"{parts[-1]}.yaml")
    return path if path.is_file() else None


def builtin_descriptions() -> dict[str, str]:
    """Each built-in recipe with its `description:` line."""
    out = {}
    for name in builtin_names():
        data, _, _ = parse_document(builtin_path(name).read_text(), name)  # type: ignore[union-attr]
        out[name] = str(data.get("description", ""))
    return out


def copy_builtin(name: str, dest: Path) -> Path:
    """Copy built-in recipe `name` to `dest` (a file, or a folder to put `<name>.yaml` in).

    A recipe from a subfolder brings the data files beside it (its relative paths name them),
    each unless the destination folder already has one of that name.
    Raises KeyError for an unknown name and FileExistsError rather than overwrite."""
    source = builtin_path(name)
    if source is None:
        raise KeyError(name)
    target = dest / source.name if dest.is_dir() else dest
    if target.exists():
        raise FileExistsError(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(source, target)
    if source.parent != BUILTIN_DIR:
        for data_file in source.parent.iterdir():
            if (
                data_file.is_file()
                and data_file.suffix != ".yaml"
                and not (target.parent / data_file.name).exists()
            ):
                shutil.copyfile(data_file, target.parent / data_file.name)
    return target
