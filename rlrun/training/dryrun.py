"""`rlrun train --dry-run`: build everything, run one step on a tiny batch, write nothing.

It answers "will this recipe run, and what will a step cost" in seconds: the models load, one
rollout and one update go through every component the recipe names, and the time of each
phase and the peak memory are reported.
"""

from __future__ import annotations

import resource
import sys
import time
from typing import Any

import torch
from rich.table import Table

from rlrun.schema import Recipe
from rlrun.training.loop import training_step
from rlrun.training.session import Session


def tiny_batch(recipe: Recipe) -> Recipe:
    """The recipe shrunk to one step of two prompts: one mini-batch of two micro-batches."""
    n = recipe.rollout.n
    return recipe.model_copy(
        update={
            "trainer": recipe.trainer.model_copy(update={"prompts_per_step": 2, "total_steps": 1}),
            "actor": recipe.actor.model_copy(update={"mini_batch_samples": 2 * n, "micro_batch_samples": n}),
        }
    )


def peak_memory_mb() -> dict[str, float]:
    max_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # bytes on macOS, KiB on Linux
    out = {"peak_rss_mb": max_rss / 2**20 if sys.platform == "darwin" else max_rss / 2**10}
    if torch.cuda.is_available():
        out["peak_gpu_mb"] = torch.cuda.max_memory_allocated() / 2**20
    return out


def dry_run(recipe: Recipe) -> dict[str, Any]:
    """Load, roll out and update once; returns load time, per-phase timings and peak memory."""
    start = time.perf_counter()
    session = Session(tiny_batch(recipe))
    loaded_s = time.perf_counter() - start
    metrics, _ = training_step(session, 1)
    timings = {k.removeprefix("timing_s/"): v for k, v in metrics.items() if k.startswith("timing_s/")}
    return {
        "load_s": loaded_s,
        "timing_s": timings,
        "rows": int(metrics["samples"]),
        **peak_memory_mb(),
        "metrics": {k: v for k, v in metrics.items() if not k.startswith("timing_s/")},
    }


def dry_run_table(report: dict[str, Any]) -> Table:
    """The dry run's report as `rlrun train --dry-run` prints it."""
    table = Table(title="dry run (nothing written)", title_justify="left", show_header=False, box=None)
    table.add_row("models loaded in", f"{report['load_s']:.2f} s")
    for phase, seconds in report["timing_s"].items():
        table.add_row(f"  {phase}", f"{seconds:.3f} s")
    table.add_row("rows in the step", str(report["rows"]))
    for key in ("peak_rss_mb", "peak_gpu_mb"):
        if key in report:
            table.add_row(key.replace("_mb", "").replace("_", " "), f"{report[key]:.0f} MiB")
    return table
