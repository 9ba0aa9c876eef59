"""`rlrun.train` and `rlrun.resume`: a run trained from Python, in this process, with callbacks,
handing back a `TrainResult`. They check what `rlrun train` / `rlrun resume` check before
anything loads, and train through the same `rlrun.training.run.train`."""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rlrun.api.recipes import load_recipe
from rlrun.launch import launch_topology, release_process_group
from rlrun.recipes import LoadedRecipe
from rlrun.recipes import load_recipe as load_run_recipe
from rlrun.records import checkpoint as ckpt
from rlrun.records.rundir import RESOLVED, read_metrics
from rlrun.records.sinks import Say
from rlrun.training.callbacks import Callback
from rlrun.training.run import Run, RunOptions, check_run_dir
from rlrun.training.run import train as run_training
from rlrun.user_code import live_objects


@dataclass(frozen=True)
class TrainResult:
    """How a run trained from Python ended. A failed run raises instead (its meta.json says
    "failed")."""

    run_dir: Path
    status: str  # "finished", or "interrupted" (a callback's stop, Ctrl-C): `rlrun.resume` continues it
    step: int  # the last step trained
    metrics: dict[str, float]  # that step's row of metrics.jsonl
    checkpoint: Path | None  # the newest checkpoint, where a resume starts


def _say(text: str) -> None:
    print(text, file=sys.stderr)


def train(
    recipe: LoadedRecipe | str | Path | Mapping[str, Any],
    overrides: Mapping[str, Any] | Sequence[str] | None = None,
    *,
    run_dir: str | Path | None = None,
    name: str | None = None,
    overwrite: bool = False,
    callbacks: Sequence[Callback] = (),
) -> TrainResult:
    """Train a recipe (a loaded one, or what `rlrun.load_recipe` takes, with `overrides`) into
    `run_dir` (default `<trainer.output_dir>/<name>`, as `rlrun train`): an existing run
    directory is refused unless `overwrite`. Raises `rlrun.RecipeError` before anything loads when
    the recipe or the directory cannot be used, `CallbackError` when a callback raised, and the
    run's own error when it failed."""
    if isinstance(recipe, LoadedRecipe):
        if overrides:
            raise TypeError("a loaded recipe takes no overrides: give them to rlrun.load_recipe")
        loaded = recipe
    else:
        loaded = load_recipe(recipe, overrides)
    where = None if run_dir is None else Path(run_dir)
    options = RunOptions(run_dir=where, name=name, overwrite=overwrite, run_dir_key="run_dir")
    check_run_dir(loaded, options)
    launch_topology(loaded, {})  # one process: a sharding trainer.strategy is refused, as by `rlrun train`
    return _result(train_loaded(loaded, options, say=_say, callbacks=callbacks))


def resume(
    run_dir: str | Path,
    overrides: Mapping[str, Any] | Sequence[str] | None = None,
    *,
    restart: bool = False,
    callbacks: Sequence[Callback] = (),
) -> TrainResult:
    """Continue a run from its newest intact checkpoint with the recipe it was started with, as
    `rlrun resume` does (`overrides` may change anything but the model, tokenizer and data, e.g.
    `{"trainer.total_steps": 500}`). A Python object the run was given is given again here, at its
    key (`{"reward.functions.0.fn": score}`). `restart`: with no intact checkpoint, train again
    from step 0. Raises `RunFinished` when the run has trained all its steps."""
    run_dir = Path(run_dir)
    if isinstance(overrides, str):
        overrides = [overrides]
    loaded = load_run(run_dir, overrides if overrides is not None else ())
    launch_topology(loaded, {})
    options = RunOptions(run_dir=run_dir, resume=True, restart=restart, run_dir_key="")
    return _result(train_loaded(loaded, options, say=_say, callbacks=callbacks))


def load_run(run_dir: Path, overrides: Mapping[str, Any] | Sequence[str]) -> LoadedRecipe:
    """The recipe a run was started with (its resolved.yaml, perhaps of an earlier rlrun) with
    `overrides` (RecipeError where they do not validate)."""
    return load_run_recipe(run_dir / RESOLVED, overrides, run_record=True)


def train_loaded(
    loaded: LoadedRecipe, options: RunOptions, *, say: Say, callbacks: Sequence[Callback] = ()
) -> Run:
    """Train (or resume) a checked recipe in this process, the Python objects it was given in
    force, then end its process group: what `rlrun train`, `rlrun resume` and `rlrun.train` share.
    Returns the finished or stopped run; raises what ended a failed one."""
    with live_objects(loaded.live_table()):
        run = run_training(loaded, options, say=say, overrides=loaded.overrides, callbacks=callbacks)
    # the rollout engine too: vLLM tears down its own groups when it closes
    release_process_group(run.session.generation.engine, meet=run.ended_at_step_boundary)
    return run


def _result(run: Run) -> TrainResult:
    rows = read_metrics(run.dir.metrics_file, [])
    saved = ckpt.list_checkpoints(run.dir.checkpoints)
    return TrainResult(
        run_dir=run.dir.path,
        status=run.status,
        step=run.session.counters.step,
        metrics=rows[-1] if rows else {},
        checkpoint=saved[-1][1] if saved else None,
    )
