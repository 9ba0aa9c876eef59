"""The run directory: everything one run leaves behind, and its `meta.json` status record.

Layout (docs/architecture.md): `recipe.yaml` (as given), `resolved.yaml`, `overrides.json`,
`meta.json`, `metrics.jsonl`, `samples.jsonl`, `checkpoints/`. A new run never writes into
an existing directory unless told to: `resume` continues it, `overwrite` replaces it (and only
if it is an rlrun run directory — nothing else a user made is ever deleted).
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import Any

import yaml

from rlrun.errors import ConfigIssue, RecipeError

META = "meta.json"
STATUSES = ("running", "finished", "failed", "interrupted")


def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def write_json_atomic(path: Path, data: Any) -> None:
    """Write JSON through a temporary file and a rename, so a reader never sees half a file."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    with os.fdopen(fd, "w") as f:
        json.dump(data, f, indent=2, default=str)
        f.write("\n")
    os.replace(tmp, path)


def _refuse(path: Path, message: str, fix: str) -> RecipeError:
    return RecipeError(
        [ConfigIssue(message=message, key="trainer.output_dir", code="run-dir", file=str(path), fix=fix)]
    )


@dataclass
class RunDir:
    """A run directory on disk, owned by the main process."""

    path: Path

    @property
    def checkpoints(self) -> Path:
        return self.path / "checkpoints"

    @property
    def metrics_file(self) -> Path:
        return self.path / "metrics.jsonl"

    @property
    def samples_file(self) -> Path:
        return self.path / "samples.jsonl"

    @classmethod
    def open(cls, path: Path, *, resume: bool = False, overwrite: bool = False) -> RunDir:
        """Claim `path` for a run. Refuses an existing, non-empty directory unless `resume`
        (it must then hold a run) or `overwrite` (it must be a run directory, which is deleted)."""
        path = Path(path)
        exists = path.exists() and any(path.iterdir())
        is_run = (path / META).is_file()
        if resume:
            if not is_run:
                raise _refuse(
                    path, "there is no run to resume here (no meta.json)", "start a new run without --resume"
                )
            return cls(path)
        if exists:
            if not overwrite:
                raise _refuse(
                    path,
                    "the run directory already exists",
                    "continue it with --resume, replace it with --overwrite, or pick another with --name / --run-dir",
                )
            if not is_run:
                raise _refuse(
                    path,
                    "--overwrite refuses to delete a directory that is not an rlrun run (no meta.json)",
                    "pick another directory with --run-dir",
                )
            shutil.rmtree(path)
        path.mkdir(parents=True, exist_ok=True)
        return cls(path)

    def write_recipe(self, recipe_text: str, resolved: dict[str, Any], overrides: list[str]) -> None:
        (self.path / "recipe.yaml").write_text(recipe_text)
        (self.path / "resolved.yaml").write_text(yaml.safe_dump(resolved, sort_keys=False))
        write_json_atomic(self.path / "overrides.json", list(overrides))

    def read_meta(self) -> dict[str, Any]:
        return json.loads((self.path / META).read_text())

    def write_meta(self, meta: dict[str, Any]) -> None:
        write_json_atomic(self.path / META, meta)

    def update_meta(self, **fields: Any) -> dict[str, Any]:
        meta = self.read_meta() if (self.path / META).is_file() else {}
        if fields.get("status") not in (None, *STATUSES):
            raise ValueError(f"status must be one of {STATUSES}")
        meta.update(fields)
        self.write_meta(meta)
        return meta


def git_state(repo: Path | None = None) -> tuple[str | None, bool | None]:
    """(sha, dirty) of the git checkout holding `repo` (default: rlrun's source), or (None, None)."""
    where = str(repo or Path(__file__).resolve().parent)
    try:
        sha = subprocess.run(
            ["git", "-C", where, "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10, check=True
        ).stdout.strip()
        dirty = (
            subprocess.run(
                ["git", "-C", where, "status", "--porcelain", "--untracked-files=no"],
                capture_output=True,
                text=True,
                timeout=10,
                check=True,
            ).stdout.strip()
            != ""
        )
        return sha, dirty
    except (OSError, subprocess.SubprocessError):
        return None, None


def package_versions() -> dict[str, str]:
    versions = {"python": platform.python_version()}
    for name in ("rlrun", "torch", "transformers", "accelerate", "numpy", "wandb", "peft", "vllm"):
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            pass
    return versions


def run_setup(accelerator: Any, model_dtype: str) -> dict[str, Any]:
    """Where and how a run computes, for meta.json's `setup` (`rlrun compare` shows it and warns
    when runs differ): processes and machines, the data-parallel strategy in effect (Accelerate's,
    so an `--accelerate-config` file counts; `none` for one process), the device (with the GPU's
    name), the model's dtype and Accelerate's mixed precision."""
    processes = accelerator.num_processes
    distributed = getattr(accelerator.distributed_type, "value", str(accelerator.distributed_type))
    if processes == 1:
        strategy = "none"
    elif distributed == "FSDP":
        strategy = f"fsdp{getattr(accelerator.state.fsdp_plugin, 'fsdp_version', 1)}"
    elif distributed == "DEEPSPEED":
        strategy = f"deepspeed_zero{accelerator.state.deepspeed_plugin.zero_stage}"
    else:
        strategy = "ddp"
    device = accelerator.device
    # torchrun (under `accelerate launch`) says how many processes share this machine
    per_machine = int(os.environ.get("LOCAL_WORLD_SIZE", processes))
    return {
        "processes": processes,
        "machines": max(1, processes // per_machine),
        "strategy": strategy,
        "device": device.type,
        "device_name": _device_name(device),
        "dtype": model_dtype,
        "mixed_precision": str(accelerator.mixed_precision),
    }


def _device_name(device: Any) -> str:
    if device.type == "cuda":
        import torch

        return torch.cuda.get_device_name(device)
    try:  # Linux names the CPU model here; platform.processor() is often empty
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()
