"""GGUF files -> cached Hugging Face folders (float32 safetensors, tokenizer, chat template).

transformers reads GGUF through the `gguf` package and dequantizes it; the result is saved once
under the cache (``RLRUN_CACHE``, default ``~/.cache/rlrun``; one tree per transformers major
release) and reused. A folder is written under a temporary name and renamed into place, so a
killed conversion never leaves a half folder where a finished one is expected; its manifest
(size and sha256 of every file) is checked on first use in a process, and a folder that fails
the check is converted again.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import logging
import os
import shutil
import tempfile
from pathlib import Path

logger = logging.getLogger("rlrun.embedded")

MANIFEST = "rlrun-manifest.json"
_verified: set[Path] = set()  # folders whose checksums matched in this process


def cache_root() -> Path:
    """Where converted models live: ``$RLRUN_CACHE`` or ``~/.cache/rlrun``."""
    return Path(os.environ.get("RLRUN_CACHE") or Path.home() / ".cache" / "rlrun")


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(1 << 22):
            digest.update(chunk)
    return digest.hexdigest()


def conversions_root() -> Path:
    """Where converted folders live: one tree per transformers major release, since a folder saved
    by one may name classes the other cannot import (5.x saves a ``TokenizersBackend`` tokenizer)."""
    return cache_root() / f"transformers-{importlib.metadata.version('transformers').split('.')[0]}"


def gguf_cache_dir(gguf_file: Path) -> Path:
    """The cache folder of a user's ``.gguf`` file, keyed by its content (a replaced file converts anew)."""
    return conversions_root() / "gguf" / f"{gguf_file.stem}-{file_sha256(gguf_file)[:16]}"


def packaged_model_dir(name: str) -> Path:
    """The cache folder of the packaged GGUF model ``rlrun:<name>``."""
    return conversions_root() / "models" / name


def converted_folder(gguf_file: Path, target: Path) -> Path:
    """``target``, holding ``gguf_file`` converted; converted now unless a verified copy is there."""
    if is_intact(target):
        return target
    if target.exists():
        logger.warning(
            "the cached model %s is incomplete or corrupted: converting %s again", target, gguf_file
        )
    else:
        logger.warning("converting %s to float32 safetensors in %s (once)", gguf_file, target)
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
    try:
        convert_gguf(gguf_file, staging)
        write_manifest(staging, source=gguf_file)
        if is_intact(target):  # another process finished first: its copy may be in use, keep it
            return target
        _discard(target)
        try:
            staging.rename(target)
        except OSError:  # another process renamed its own finished copy first
            if not is_intact(target):
                raise
    finally:
        _discard(staging)
    _verified.add(target)
    return target


def convert_gguf(gguf_file: Path, out_dir: Path) -> None:
    """Dequantize ``gguf_file`` into ``out_dir`` (model and tokenizer with its chat template)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from rlrun.facts.dtypes import dtype_argument

    folder, name = str(gguf_file.parent), gguf_file.name
    tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=name)
    model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, **dtype_argument(torch.float32))
    # The weights are plain float32 now; the GGUF quantizer marker would make save_pretrained refuse.
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.save_pretrained(out_dir, safe_serialization=True)
    tokenizer.save_pretrained(out_dir)


def write_manifest(folder: Path, source: Path) -> None:
    """Record the size and sha256 of every file in ``folder``, for ``is_intact``."""
    files = {
        p.name: {"size": p.stat().st_size, "sha256": file_sha256(p)}
        for p in sorted(folder.iterdir())
        if p.is_file()
    }
    (folder / MANIFEST).write_text(json.dumps({"source": str(source), "files": files}, indent=1))


def is_intact(folder: Path) -> bool:
    """Whether ``folder`` holds every file its manifest lists, with the listed size and sha256."""
    if folder in _verified:
        return True
    try:
        files = json.loads((folder / MANIFEST).read_text())["files"]
        intact = bool(files) and all(
            (folder / name).stat().st_size == entry["size"] and file_sha256(folder / name) == entry["sha256"]
            for name, entry in files.items()
        )
    except (OSError, ValueError, KeyError, TypeError):
        return False
    if intact:
        _verified.add(folder)
    return intact


def _discard(folder: Path) -> None:
    """Remove a cache folder rlrun wrote (never a user's folder: only cache paths reach here)."""
    shutil.rmtree(folder, ignore_errors=True)
