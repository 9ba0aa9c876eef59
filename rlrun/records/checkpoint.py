"""Checkpoints: atomic, self-contained, loadable by plain transformers, keep-last-k.

`checkpoints/step_000100/` holds the policy in Hugging Face format (safetensors) with its
tokenizer — with LoRA only the adapter (`adapter_model.safetensors` + `adapter_config.json`,
which names the base model; `export_merged` writes a plain merged model) — the critic (`critic.safetensors`) when there is one, and `trainer_state.pt`:
optimizer, scheduler, RNG states, data position, KL controller, W&B run id — only tensors and
plain Python values, so it loads with `torch.load(..., weights_only=True)`.
Everything is written into a hidden temporary directory first and renamed into place: a
crash (even kill -9) leaves either the whole checkpoint or none, and a failed save (a full
disk) removes its partial directory. Pruning renames a checkpoint to a hidden trash name before
deleting it, so a kill mid-delete never leaves a half checkpoint under a checkpoint's name.
`checksums.json` records every file's size and sha256 at save; every command that reads a
checkpoint (resume, eval, export) verifies them, so a checkpoint damaged later (truncated,
emptied, bytes changed, files or `checksums.json` deleted) is named file by file and never
loaded. The one checkpoint without `checksums.json` that counts as intact is the legacy format
of rlrun before checksums (commit 6079c96): its `trainer_state.pt` loads and lacks the
`checkpoint_format` mark every later checkpoint carries; it cannot be verified, and says so.
"""

from __future__ import annotations

import errno
import hashlib
import json
import random
import re
import shutil
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors.torch import load_file, load_model, save_file, save_model

from rlrun.errors import ConfigIssue, RecipeError
from rlrun.records.rundir import is_disk_full

TRAINER_STATE = "trainer_state.pt"
CRITIC_WEIGHTS = "critic.safetensors"
ADAPTER_CONFIG = "adapter_config.json"  # peft's: marks a LoRA checkpoint
CHECKSUMS = "checksums.json"  # {relative path: {"bytes": n, "sha256": hex}} of every other file
# In trainer_state.pt: 2 = saved with checksums.json (absent in the legacy format before it).
FORMAT_KEY, FORMAT = "checkpoint_format", 2
_STEP_DIR = re.compile(r"^step_(\d+)$")
TMP_PREFIX = ".tmp-"  # a checkpoint being written
TRASH_PREFIX = ".trash-"  # a checkpoint being deleted (pruned, or replaced by a re-save)


def step_dir_name(step: int) -> str:
    return f"step_{step:06d}"


def step_of(checkpoint: Path) -> int | None:
    """The step a checkpoint folder's name says (`step_000100` -> 100), or None."""
    match = _STEP_DIR.match(checkpoint.name)
    return int(match.group(1)) if match else None


def list_checkpoints(root: Path) -> list[tuple[int, Path]]:
    """Complete checkpoints under `root`, oldest first (temporary directories are ignored)."""
    if not root.is_dir():
        return []
    found = [(step, p) for p in root.iterdir() if (step := step_of(p)) is not None and p.is_dir()]
    return sorted(found)


def latest_checkpoint(root: Path) -> Path | None:
    found = list_checkpoints(root)
    return found[-1][1] if found else None


def save_checkpoint(
    root: Path,
    step: int,
    *,
    model: torch.nn.Module,
    tokenizer: Any,
    state: dict[str, Any],
    critic: torch.nn.Module | None = None,
    weights: dict[str, torch.Tensor] | None = None,
    critic_weights: dict[str, torch.Tensor] | None = None,
    keep_last: int = 0,
) -> Path:
    """Write checkpoint `step` atomically and prune to the newest `keep_last` (0 = keep all).

    `model` is the unwrapped policy (a `PreTrainedModel`); `state` must hold only tensors and
    plain Python containers/scalars. `weights` / `critic_weights`: the models' whole state
    dicts where the models hold only shards of them (FSDP2); by default their own.
    """
    root.mkdir(parents=True, exist_ok=True)
    final = root / step_dir_name(step)
    tmp = root / f"{TMP_PREFIX}{final.name}"
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        tmp.mkdir()
        model.save_pretrained(tmp, safe_serialization=True, state_dict=weights)
        if tokenizer is not None:
            tokenizer.save_pretrained(tmp)
        if critic_weights is not None:
            save_file(critic_weights, str(tmp / CRITIC_WEIGHTS))
        elif critic is not None:
            save_model(critic, str(tmp / CRITIC_WEIGHTS))
        # Through a Python file: on a full disk torch's own writer says only "unexpected pos",
        # while this one's write raises the ENOSPC OSError that `is_disk_full` recognises.
        with (tmp / TRAINER_STATE).open("wb") as file:
            torch.save({**state, FORMAT_KEY: FORMAT}, file)
        (tmp / CHECKSUMS).write_text(json.dumps(_checksums(tmp), indent=2))
    except BaseException as exc:
        # A partial checkpoint only takes room (on a full disk, the room meta.json needs).
        free = shutil.disk_usage(root).free
        shutil.rmtree(tmp, ignore_errors=True)
        if isinstance(exc, Exception) and is_disk_full(exc):
            raise DiskFullError(tmp, free, latest_checkpoint(root)) from exc
        raise
    # Re-saving a step (the final step after a periodic save): the old one leaves its name first.
    replaced = _to_trash(final) if final.exists() else None
    tmp.rename(final)
    if replaced is not None:
        shutil.rmtree(replaced, ignore_errors=True)
    if keep_last > 0:
        for _, old in list_checkpoints(root)[:-keep_last]:
            delete_checkpoint(old)
    return final


def delete_checkpoint(checkpoint: Path) -> None:
    """Rename to a trash name, then delete: a kill mid-delete leaves a trash folder (removed on
    resume), never a half checkpoint under a checkpoint's name."""
    shutil.rmtree(_to_trash(checkpoint), ignore_errors=True)


def _to_trash(checkpoint: Path) -> Path:
    trash = checkpoint.with_name(f"{TRASH_PREFIX}{checkpoint.name}")
    shutil.rmtree(trash, ignore_errors=True)
    checkpoint.rename(trash)
    return trash


class DiskFullError(OSError):
    """A checkpoint did not fit on its disk; its partial directory is gone, older ones are kept."""

    def __init__(self, path: Path, free_bytes: int, kept: Path | None):
        kept_text = (
            f"the last complete checkpoint, {kept}, is kept" if kept else "there is no earlier checkpoint"
        )
        super().__init__(
            errno.ENOSPC,
            f"no space left on the disk holding {path.parent} while writing {path.name} "
            f"({free_bytes / 2**20:.1f} MiB free); the partial checkpoint was removed and {kept_text}. "
            "Free some space (or lower trainer.checkpoint.keep_last), then `rlrun resume` the run",
        )


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def _checksums(checkpoint: Path) -> dict[str, dict[str, Any]]:
    return {
        str(p.relative_to(checkpoint)): {"bytes": p.stat().st_size, "sha256": _sha256(p)}
        for p in sorted(checkpoint.rglob("*"))
        if p.is_file() and p.name != CHECKSUMS
    }


def checkpoint_damage(checkpoint: Path) -> list[str]:
    """What is wrong with a checkpoint's files compared with its checksums (empty: intact).
    Without `checksums.json` only the legacy format (see the module's docstring) is intact."""
    listing = checkpoint / CHECKSUMS
    if not listing.is_file():
        return _unlisted_damage(checkpoint)
    try:
        expected = {
            name: (int(saved["bytes"]), str(saved["sha256"]))
            for name, saved in json.loads(listing.read_text(encoding="utf-8")).items()
        }
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        return [f"{listing}: unreadable ({type(exc).__name__})"]
    if TRAINER_STATE not in expected:
        return [f"{listing}: lists no {TRAINER_STATE} (not the list rlrun wrote)"]
    damage = []
    for name, (size, sha256) in expected.items():
        path = checkpoint / name
        if not path.is_file():
            damage.append(f"{path}: missing")
        elif (found := path.stat().st_size) != size:
            damage.append(f"{path}: {found} bytes, {size} when saved (truncated or overwritten)")
        elif _sha256(path) != sha256:
            damage.append(f"{path}: its contents changed since it was saved (sha256 differs)")
    return damage


def _unlisted_damage(checkpoint: Path) -> list[str]:
    missing = f"{checkpoint / CHECKSUMS}: missing, so its files cannot be verified"
    try:
        state = load_trainer_state(checkpoint)
    except RecipeError as exc:
        return [missing, *(issue.message for issue in exc.issues)]
    if state.get(FORMAT_KEY) is not None:
        return [missing]
    return []  # the legacy format


def is_legacy_checkpoint(checkpoint: Path) -> bool:
    """Saved before checksums.json existed (call after `checkpoint_damage` found nothing)."""
    return not (checkpoint / CHECKSUMS).is_file()


def _damage_issues(damage: list[str], fix: str) -> list[ConfigIssue]:
    issues = []
    for problem in damage:
        path, what = problem.split(": ", 1)
        issues.append(
            ConfigIssue(f"the checkpoint is damaged: {what}", code="checkpoint-damaged", file=path, fix=fix)
        )
    return issues


def check_checkpoint(checkpoint: Path, warn: Callable[[str], None]) -> None:
    """Raise a located error if the checkpoint's files are not the ones that were saved (naming
    the newest intact checkpoint beside it, if any)."""
    damage = checkpoint_damage(checkpoint)
    if damage:
        intact = next(
            (
                p
                for _, p in reversed(list_checkpoints(checkpoint.parent))
                if p != checkpoint and not checkpoint_damage(p)
            ),
            None,
        )
        fix = (
            f"use the newest intact checkpoint of the run, {intact}"
            if intact
            else "no other checkpoint of the run is intact"
        )
        raise RecipeError(_damage_issues(damage, fix))
    if is_legacy_checkpoint(checkpoint):
        warn(_legacy_note(checkpoint))


def _legacy_note(checkpoint: Path) -> str:
    return f"Checkpoint {checkpoint} predates checksums.json (an older rlrun): its files cannot be verified."


def latest_intact_checkpoint(root: Path, warn: Callable[[str], None]) -> Path | None:
    """The newest checkpoint whose files match their checksums; each newer, damaged one is
    skipped with a warning naming its files. None when there is no checkpoint; raises, naming
    every damaged file, when there are checkpoints but none is intact."""
    found = list_checkpoints(root)
    damaged = []
    for _, path in reversed(found):
        damage = checkpoint_damage(path)
        if not damage:
            if is_legacy_checkpoint(path):
                warn(_legacy_note(path))
            return path
        warn(f"Checkpoint {path.name} is damaged and skipped: {'; '.join(damage)}.")
        damaged += _damage_issues(damage, "")
    if damaged:
        raise RecipeError(
            [
                replace(issue, fix="no checkpoint of the run is intact: start it again with --restart")
                for issue in damaged
            ]
        )
    return None


def remove_partial_checkpoints(root: Path) -> None:
    """Delete the directories a crashed save (temporary) or prune (trash) left behind."""
    if root.is_dir():
        for p in [*root.glob(f"{TMP_PREFIX}step_*"), *root.glob(f"{TRASH_PREFIX}step_*")]:
            shutil.rmtree(p, ignore_errors=True)


def load_trainer_state(checkpoint: Path) -> dict[str, Any]:
    """The checkpoint's trainer state; a file that is missing or is not one is a located error."""
    path = checkpoint / TRAINER_STATE
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except FileNotFoundError:
        raise unreadable_state(path, "missing") from None
    except Exception as exc:  # noqa: BLE001 - torch raises many kinds; its text may advise unsafe loading
        raise unreadable_state(
            path,
            f"cannot be read as a trainer state ({type(exc).__name__}): it is damaged, or holds Python "
            "objects besides tensors and plain values, which rlrun never unpickles",
        ) from None
    if not isinstance(state, dict):
        raise unreadable_state(path, f"holds a {type(state).__name__}, not a trainer state")
    return state


def unreadable_state(path: Path, problem: str) -> RecipeError:
    return RecipeError(
        [
            ConfigIssue(
                f"{path}: {problem}",
                code="checkpoint-unreadable",
                file=str(path),
                fix="use another checkpoint of the run (each checkpoint folder holds its own trainer_state.pt)",
            )
        ]
    )


def is_lora_checkpoint(checkpoint: Path) -> bool:
    return (checkpoint / ADAPTER_CONFIG).is_file()


WeightsLoader = Callable[[torch.nn.Module, dict[str, torch.Tensor]], None]


def load_policy_weights(
    checkpoint: Path, model: torch.nn.Module, *, load: WeightsLoader | None = None
) -> None:
    """Load a checkpoint's policy weights (the whole model, or only a peft model's adapter).
    `load(model, state_dict)` puts whole weights into the model: a sharded model's loader (FSDP2);
    by default `model.load_state_dict`."""
    if is_lora_checkpoint(checkpoint):
        from peft import load_peft_weights, set_peft_model_state_dict

        set_peft_model_state_dict(model, load_peft_weights(str(checkpoint), device="cpu"))
    else:
        from transformers import AutoModelForCausalLM

        from rlrun.facts.dtypes import dtype_argument

        # Through the Auto class: a sharded model's own class is FSDP's subclass of the model's
        weights = AutoModelForCausalLM.from_pretrained(checkpoint, **dtype_argument(model.dtype)).state_dict()
        (load or torch.nn.Module.load_state_dict)(model, weights)


def export_merged(checkpoint: Path, out: Path) -> Path:
    """Write a checkpoint's policy as a plain Hugging Face model (LoRA adapters merged into
    the base weights) with its tokenizer into `out`; returns `out`."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if is_lora_checkpoint(checkpoint):
        from peft import AutoPeftModelForCausalLM

        model = AutoPeftModelForCausalLM.from_pretrained(checkpoint).merge_and_unload()
    else:
        model = AutoModelForCausalLM.from_pretrained(checkpoint)
    model.save_pretrained(out, safe_serialization=True)
    AutoTokenizer.from_pretrained(checkpoint).save_pretrained(out)
    return out


def load_critic_weights(
    checkpoint: Path, critic: torch.nn.Module, *, load: WeightsLoader | None = None
) -> None:
    """`load` as for `load_policy_weights`; by default safetensors' own loading."""
    if load is not None:
        load(critic, load_file(str(checkpoint / CRITIC_WEIGHTS)))
    else:
        load_model(critic, str(checkpoint / CRITIC_WEIGHTS))


def capture_rng_state() -> dict[str, Any]:
    """Python, numpy and torch (CPU and CUDA) generator states, in weights_only-safe form."""
    kind, keys, pos, has_gauss, cached = np.random.get_state()
    state = {
        "python": random.getstate(),
        "numpy": {
            "kind": kind,
            "keys": torch.from_numpy(keys.astype(np.int64)),
            "pos": int(pos),
            "has_gauss": int(has_gauss),
            "cached_gaussian": float(cached),
        },
        "torch": torch.get_rng_state(),
    }
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def restore_rng_state(state: dict[str, Any]) -> None:
    version, internal, gauss = state["python"]
    random.setstate((version, tuple(internal), gauss))
    n = state["numpy"]
    np.random.set_state(
        (n["kind"], n["keys"].numpy().astype(np.uint32), n["pos"], n["has_gauss"], n["cached_gaussian"])
    )
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])
