"""Checkpoints: atomic, self-contained, loadable by plain transformers, keep-last-k.

`checkpoints/step_000100/` holds the policy in Hugging Face format (safetensors) with its
tokenizer — with LoRA only the adapter (`adapter_model.safetensors` + `adapter_config.json`,
which names the base model; `export_merged` writes a plain merged model) — the critic (`critic.safetensors`) when there is one, and `trainer_state.pt`:
optimizer, scheduler, RNG states, data position, KL controller, W&B run id — only tensors and
plain Python values, so it loads with `torch.load(..., weights_only=True)`.
Everything is written into a hidden temporary directory first and renamed into place: a
crash (even kill -9) leaves either the whole checkpoint or none. `checksums.json` records every
file's size and sha256 at save; resume and export verify them, so a checkpoint damaged later
(truncated, emptied, bytes changed) is named file by file and never loaded.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors.torch import load_model, save_model

from rlrun.errors import ConfigIssue, RecipeError

TRAINER_STATE = "trainer_state.pt"
CRITIC_WEIGHTS = "critic.safetensors"
ADAPTER_CONFIG = "adapter_config.json"  # peft's: marks a LoRA checkpoint
CHECKSUMS = "checksums.json"  # {relative path: {"bytes": n, "sha256": hex}} of every other file
_STEP_DIR = re.compile(r"^step_(\d+)$")


def step_dir_name(step: int) -> str:
    return f"step_{step:06d}"


def list_checkpoints(root: Path) -> list[tuple[int, Path]]:
    """Complete checkpoints under `root`, oldest first (temporary directories are ignored)."""
    if not root.is_dir():
        return []
    found = [(int(m.group(1)), p) for p in root.iterdir() if (m := _STEP_DIR.match(p.name)) and p.is_dir()]
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
    keep_last: int = 0,
) -> Path:
    """Write checkpoint `step` atomically and prune to the newest `keep_last` (0 = keep all).

    `model` is the unwrapped policy (a `PreTrainedModel`); `state` must hold only tensors and
    plain Python containers/scalars.
    """
    root.mkdir(parents=True, exist_ok=True)
    final = root / step_dir_name(step)
    tmp = root / f".tmp-{final.name}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    model.save_pretrained(tmp, safe_serialization=True)
    if tokenizer is not None:
        tokenizer.save_pretrained(tmp)
    if critic is not None:
        save_model(critic, str(tmp / CRITIC_WEIGHTS))
    torch.save(state, tmp / TRAINER_STATE)
    (tmp / CHECKSUMS).write_text(json.dumps(_checksums(tmp), indent=2))
    if final.exists():  # re-saving a step (e.g. the final step after a periodic save)
        shutil.rmtree(final)
    tmp.rename(final)
    if keep_last > 0:
        for _, old in list_checkpoints(root)[:-keep_last]:
            shutil.rmtree(old, ignore_errors=True)
    return final


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
    A checkpoint saved before checksums were recorded cannot be checked and counts as intact."""
    listing = checkpoint / CHECKSUMS
    if not listing.is_file():
        return []
    try:
        expected = json.loads(listing.read_text())
    except (OSError, ValueError) as exc:
        return [f"{listing}: unreadable ({exc})"]
    damage = []
    for name, saved in expected.items():
        path = checkpoint / name
        if not path.is_file():
            damage.append(f"{path}: missing")
        elif (size := path.stat().st_size) != saved["bytes"]:
            damage.append(f"{path}: {size} bytes, {saved['bytes']} when saved (truncated or overwritten)")
        elif _sha256(path) != saved["sha256"]:
            damage.append(f"{path}: its contents changed since it was saved (sha256 differs)")
    return damage


def check_checkpoint(checkpoint: Path) -> None:
    """Raise a located error if the checkpoint's files are not the ones that were saved."""
    damage = checkpoint_damage(checkpoint)
    if damage:
        raise RecipeError(
            [
                ConfigIssue(
                    f"the checkpoint is damaged: {problem}",
                    code="checkpoint-damaged",
                    file=problem.split(": ", 1)[0],
                    fix="use an earlier checkpoint of the run",
                )
                for problem in damage
            ]
        )


def latest_intact_checkpoint(root: Path, warn: Callable[[str], None]) -> Path | None:
    """The newest checkpoint whose files match their checksums; each newer, damaged one is
    skipped with a warning naming its files. Raises if there are checkpoints but none is intact."""
    found = list_checkpoints(root)
    for _, path in reversed(found):
        damage = checkpoint_damage(path)
        if not damage:
            return path
        warn(f"Checkpoint {path.name} is damaged and skipped: {'; '.join(damage)}.")
    if found:
        check_checkpoint(found[-1][1])
    return None


def remove_partial_checkpoints(root: Path) -> None:
    """Delete temporary directories a crashed save left behind."""
    if root.is_dir():
        for p in root.glob(".tmp-step_*"):
            shutil.rmtree(p, ignore_errors=True)


def load_trainer_state(checkpoint: Path) -> dict[str, Any]:
    return torch.load(checkpoint / TRAINER_STATE, map_location="cpu", weights_only=True)


def is_lora_checkpoint(checkpoint: Path) -> bool:
    return (checkpoint / ADAPTER_CONFIG).is_file()


def load_policy_weights(checkpoint: Path, model: torch.nn.Module) -> None:
    """Load a checkpoint's policy weights (the whole model, or only a peft model's adapter)."""
    if is_lora_checkpoint(checkpoint):
        from peft import load_peft_weights, set_peft_model_state_dict

        set_peft_model_state_dict(model, load_peft_weights(str(checkpoint), device="cpu"))
    else:
        from rlrun.facts.dtypes import dtype_argument

        weights = type(model).from_pretrained(checkpoint, **dtype_argument(model.dtype)).state_dict()
        model.load_state_dict(weights)


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


def load_critic_weights(checkpoint: Path, critic: torch.nn.Module) -> None:
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
