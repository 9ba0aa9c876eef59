"""`rlrun.train` and `rlrun.resume`: a run trained from Python, in this process, with callbacks,
handing back a `TrainResult`. They check what `rlrun train` / `rlrun resume` check before
anything loads, and train through the same `rlrun.training.run.train`."""

from __future__ import annotations

import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from rlrun.api.recipes import load_recipe
from rlrun.errors import ConfigIssue, RecipeError
from rlrun.facts.launched import is_relaunched
from rlrun.launch import launch_topology, release_process_group
from rlrun.recipes import LoadedRecipe
from rlrun.recipes import load_recipe as load_run_recipe
from rlrun.records import checkpoint as ckpt
from rlrun.records.rundir import CHECKPOINTS, META, METRICS, RESOLVED, read_meta, read_metrics
from rlrun.records.sinks import Say
from rlrun.training.callbacks import Callback
from rlrun.training.run import Run, RunOptions, check_run_dir, default_run_dir
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
    num_processes: int = 1,
) -> TrainResult:
    """Train a recipe (a loaded one, or what `rlrun.load_recipe` takes, with `overrides`) into
    `run_dir` (default `<trainer.output_dir>/<name>`, as `rlrun train`): an existing run
    directory is refused unless `overwrite`. Raises `rlrun.RecipeError` before anything loads when
    the recipe or the directory cannot be used, `CallbackError` when a callback raised, and the
    run's own error when it failed.

    `num_processes` > 1 trains as `rlrun train --num-processes N` does, in processes launched for
    it (`trainer.strategy` says how): the recipe reaches them as a file, so every object it names
    must be importable there, and callbacks, which run in this process, are refused."""
    if isinstance(recipe, LoadedRecipe):
        if overrides:
            raise TypeError("a loaded recipe takes no overrides: give them to rlrun.load_recipe")
        loaded = recipe
    else:
        loaded = load_recipe(recipe, overrides)
    where = None if run_dir is None else Path(run_dir)
    options = RunOptions(run_dir=where, name=name, overwrite=overwrite, run_dir_key="run_dir")
    check_run_dir(loaded, options)
    # one process: a sharding trainer.strategy is refused, as by `rlrun train`
    topology = launch_topology(loaded, {"num_processes": num_processes})
    if topology is not None:
        return _launched(
            loaded, default_run_dir(loaded, options), num_processes, callbacks, overwrite=overwrite
        )
    return _result(train_loaded(loaded, options, say=_say, callbacks=callbacks))


class LaunchedRunFailed(RuntimeError):
    """A run trained in launched processes did not finish; its run directory says why."""


def _launched(
    loaded: LoadedRecipe, run_dir: Path, num_processes: int, callbacks: Sequence[Callback], *, overwrite: bool
) -> TrainResult:
    """`rlrun train RECIPE --num-processes N` on the recipe written as a file, then its result."""
    if callbacks:
        raise ValueError(
            "callbacks run in the calling process, and with num_processes > 1 the run trains in processes "
            "launched for it: train in this process, or read the run's metrics.jsonl as it grows"
        )
    live = [
        (name, passed.not_reproducible) for name, passed in loaded.objects.items() if passed.not_reproducible
    ]
    if live:
        raise RecipeError(
            [
                ConfigIssue(
                    f"`{name}` cannot reach the launched processes: {why}",
                    code="python-object",
                    fix="pass an object an import path names (a module-level function or class), or train in "
                    "this process (num_processes=1)",
                )
                for name, why in live
            ]
        )
    with tempfile.TemporaryDirectory(prefix="rlrun-recipe-") as folder:
        recipe = loaded.to_yaml(Path(folder) / f"{loaded.source_path.stem}.yaml")
        command = [sys.executable, "-m", "rlrun", "train", str(recipe), "--run-dir", str(run_dir)]
        command += ["--num-processes", str(num_processes), *(["--overwrite"] if overwrite else [])]
        code = subprocess.run(command, check=False).returncode
    meta = read_meta(run_dir / META) if (run_dir / META).is_file() else None
    if code != 0 or meta is None or meta.status not in ("finished", "interrupted"):
        raise LaunchedRunFailed(
            f"the run in {num_processes} processes exited {code}"
            + (
                f" with status {meta.status!r}: {run_dir} holds what it wrote"
                if meta
                else " before it started"
            )
        )
    rows = read_metrics(run_dir / METRICS, [])
    return _record(run_dir, meta.status, rows)


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
    # A launched process ends next (`end_launched_process`) and keeps its models to the end:
    # collecting DDP's would destroy its gloo group, whose destructor waits for a worker thread
    # that may still be letting go of a finished collective's tensors and needs the GIL for it,
    # which the collecting thread holds (a hang, seen once in 61 two-process runs under load).
    if not is_relaunched():
        run.session.close()
    return run


def _result(run: Run) -> TrainResult:
    result = _record(run.dir.path, run.status, read_metrics(run.dir.metrics_file, []))
    return replace(result, step=run.session.counters.step)


def _record(run_dir: Path, status: str, rows: list[dict[str, Any]]) -> TrainResult:
    saved = ckpt.list_checkpoints(run_dir / CHECKPOINTS)
    return TrainResult(
        run_dir=run_dir,
        status=status,
        step=int(rows[-1]["step"]) if rows else 0,
        metrics=rows[-1] if rows else {},
        checkpoint=saved[-1][1] if saved else None,
    )
