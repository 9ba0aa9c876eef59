"""Folder names and paths that rlrun makes from what a user wrote (`--name`, a sweep's `name:` and
points, `--run-dir`, `trainer.output_dir`, an output file): each must stay inside its folder and be
one the file system accepts, and this is checked before anything loads or is written."""

from __future__ import annotations

import os
import unicodedata
from pathlib import Path

NAME_MAX_BYTES = 255  # one path component (ext4, XFS, APFS, NTFS)
# Linux's PATH_MAX (4096) less room for what a run writes inside its folder
# (`checkpoints/.tmp-step_000000/model.safetensors.index.json` and the like).
PATH_MAX_BYTES = 4096 - 256


def name_problem(name: str) -> str | None:
    """Why `name` cannot be the name of one folder inside another, or None."""
    if not name.strip():
        return "it is empty"
    if name in (".", ".."):
        return f"`{name}` is the folder itself or its parent, not a folder inside it"
    if "/" in name or "\\" in name:
        return "it holds a path separator (`/` or `\\`), so it would name a folder elsewhere"
    if control := next((c for c in name if unicodedata.category(c) == "Cc"), None):
        return f"it holds the control character U+{ord(control):04X}" + (
            " (NUL), which no file system accepts" if control == "\0" else ""
        )
    size = len(os.fsencode(name))
    if size > NAME_MAX_BYTES:
        return f"it is {size} bytes long; a file system allows at most {NAME_MAX_BYTES} per folder name"
    return None


def folder_problem(path: Path) -> str | None:
    """Why rlrun cannot create (or write in) the folder `path`, or None: a part the file system
    refuses, a path too long, a file where it or a folder above it would be, or a folder this user
    may not write in."""
    text = str(path)
    if "\0" in text:
        return "it holds a NUL character, which no file system accepts"
    for part in path.parts:
        if len(os.fsencode(part)) > NAME_MAX_BYTES:
            return f"its part `{part[:40]}...` is longer than the {NAME_MAX_BYTES} bytes a file system allows"
    if len(os.fsencode(str(path.absolute()))) > PATH_MAX_BYTES:
        return f"the path is longer than the {PATH_MAX_BYTES} bytes rlrun can write under"
    existing = path
    try:
        while not existing.exists():
            if existing.is_symlink():
                return f"{existing} is a link to something that does not exist"
            existing = existing.parent
    except OSError as exc:
        return f"{existing} cannot be looked at ({exc.strerror or exc})"
    if not existing.is_dir():
        return "it is a file, not a folder" if existing == path else f"{existing} is a file, not a folder"
    if not os.access(existing, os.W_OK | os.X_OK):
        return f"this user may not write in {existing}"
    return None


def output_file_problem(path: Path, make_folder: bool = False) -> str | None:
    """Why rlrun cannot write the new file `path` (a plot, a JSON report), or None; with
    `make_folder` a missing folder for it is made, else it must exist. An existing file is never
    replaced: it may be a result the user keeps."""
    if path.is_dir():
        return "it is a folder, not a file"
    if path.exists() or path.is_symlink():
        return "it already exists, and rlrun does not overwrite it: choose another name or remove it first"
    if (problem := name_problem(path.name)) is not None:
        return f"its name cannot be a file name: {problem}"
    if not make_folder and not path.parent.is_dir():
        return (
            f"the folder {path.parent} does not exist"
            if not path.parent.exists()
            else f"{path.parent} is not a folder"
        )
    if (problem := folder_problem(path.parent)) is not None:
        return f"its folder {path.parent} cannot be used: {problem}"
    return None


def is_inside(path: Path, folder: Path) -> bool:
    """Whether `path` is `folder` or lies under it (links resolved)."""
    return path.resolve() == folder.resolve() or folder.resolve() in path.resolve().parents
