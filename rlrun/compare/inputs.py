"""What `rlrun compare` takes as a run: a run directory, a run name under `runs_dir`, or a
W&B run (`wandb:entity/project/run_id`)."""

from __future__ import annotations

from pathlib import Path

from rlrun.compare.runs import RunReadError, RunRecord, load_run
from rlrun.compare.wandb_runs import load_wandb_run
from rlrun.errors import RecipeError

WANDB_PREFIX = "wandb:"


def load_input(ref: str, runs_dir: Path | str = "runs") -> RunRecord:
    """The run `ref` names (W&B runs are fetched through wandb's public API)."""
    if ref.startswith(WANDB_PREFIX):
        return load_wandb_run(ref[len(WANDB_PREFIX) :])
    try:
        return load_run(ref, runs_dir)
    except RecipeError as exc:  # its meta.json is damaged, or newer than this rlrun reads
        raise RunReadError(" ".join(issue.format() for issue in exc.issues)) from None
