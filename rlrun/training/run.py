"""Starting, resuming and closing a run: the run directory, the sinks, the checkpoint and
evaluation schedule, and what happens on Ctrl-C, on an error and at the end.

Only the main process touches the disk or W&B; every process builds the same `Session`.
"""

from __future__ import annotations

import json
import signal
import threading
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import yaml
from accelerate import PartialState

from rlrun.errors import RecipeError
from rlrun.recipes import LoadedRecipe, algorithm_summary
from rlrun.training import checkpoint as ckpt
from rlrun.training.allocator import keep_freed_memory
from rlrun.training.metrics import (
    ConsoleSink,
    JsonlSink,
    MetricsLogger,
    SamplesSink,
    Say,
    Sink,
    WandbSink,
    sample_rows,
)
from rlrun.training.rundir import RunDir, git_state, now_iso, package_versions
from rlrun.training.session import Session, locked_changes, on_cpu
from rlrun.training.stalls import STALL_STEPS, find_stalls

SAMPLES_PER_LOG = 16  # completions written to samples.jsonl / the W&B table each time


@dataclass
class RunOptions:
    """What the command line adds to the recipe."""

    run_dir: Path | None = None  # default: <trainer.output_dir>/<name>
    name: str | None = None  # default: <recipe file stem>-<UTC time>
    resume: bool = False
    overwrite: bool = False
    profile: bool = False  # record a few steps with torch.profiler into <run>/profile/


def default_run_dir(loaded: LoadedRecipe, options: RunOptions) -> Path:
    if options.run_dir is not None:
        return Path(options.run_dir)
    name = options.name or f"{loaded.source_path.stem}-{datetime.now(timezone.utc):%Y%m%d-%H%M%S}"
    return Path(loaded.recipe.trainer.output_dir) / name


def check_resume(run_dir: Path, loaded: LoadedRecipe) -> None:
    """Refuse, before any model loads, a resume that would change the model, tokenizer or data."""
    resolved = run_dir / "resolved.yaml"
    if resolved.is_file():
        issues = locked_changes(yaml.safe_load(resolved.read_text()), loaded.data)
        if issues:
            raise RecipeError(issues)


class Run:
    """A started run: where it writes, and its logging (main process only)."""

    def __init__(
        self, loaded: LoadedRecipe, options: RunOptions, session: Session, say: Say, overrides: list[str]
    ):
        self.recipe, self.session, self.say = loaded.recipe, session, say
        self.main = session.accelerator.is_main_process
        path = default_run_dir(loaded, options)
        self.dir = RunDir(path)
        self.profile_dir = path / "profile" if options.profile else None
        self.start_wall = 0.0
        self.stop_requested = False
        resume_from = None
        if options.resume:
            ckpt.remove_partial_checkpoints(self.dir.checkpoints)
            resume_from = ckpt.latest_checkpoint(self.dir.checkpoints)
        wandb_id = None
        if resume_from is not None:
            state = session.load_checkpoint(resume_from)
            wandb_id = state["wandb_run_id"]
            self.start_wall = _wall_time_at(self.dir.metrics_file, session.step)
            say(f"Resuming {path} from {resume_from.name} (step {session.step}).")
        self.sinks: list[Sink] = []
        if self.main:
            meta = self.dir.read_meta() if options.resume else self._new_meta(loaded, overrides)
            if not options.resume:
                self.dir.write_recipe(loaded.source_path.read_text(), loaded.data, overrides)
            # On resume the logs are cut back to the checkpoint (all of them when there was none).
            resume_step = (session.step if resume_from is not None else -1) if options.resume else None
            self.sinks = self._sinks(loaded, wandb_id, resume_step=resume_step)
            meta.update(
                status="running", end_time=None, wandb_run_id=self._wandb_id() or meta.get("wandb_run_id")
            )
            if options.resume:
                meta["total_steps"] = loaded.recipe.trainer.total_steps  # a resume may extend the run
                meta.setdefault("resumes", []).append(
                    {"time": now_iso(), "from_step": session.step, "overrides": overrides}
                )
            self.dir.write_meta(meta)
        self.logger = MetricsLogger(self.sinks, start_wall=self.start_wall)
        # The latest steps' metrics: a stall shows as a window of STALL_STEPS stalled steps.
        self.recent: deque[dict[str, float]] = deque(maxlen=STALL_STEPS)
        self.stalls_reported: set[str] = set()

    def _new_meta(self, loaded: LoadedRecipe, overrides: list[str]) -> dict[str, Any]:
        sha, dirty = git_state()
        r = loaded.recipe
        return {
            "name": self.dir.path.name,
            "status": "running",
            "git_sha": sha,
            "git_dirty": dirty,
            "versions": package_versions(),
            "seed": r.trainer.seed,
            "start_time": now_iso(),
            "end_time": None,
            "total_steps": r.trainer.total_steps,
            "algorithm": algorithm_summary(r),
            "model": r.model.path,
            "recipe": str(loaded.source_path),
            "overrides": overrides,
            "wandb_run_id": None,
        }

    def _sinks(self, loaded: LoadedRecipe, wandb_id: str | None, resume_step: int | None) -> list[Sink]:
        log = self.recipe.logging
        sinks: list[Sink] = []
        if log.console.enabled:
            sinks.append(
                ConsoleSink(
                    self.recipe.trainer.total_steps,
                    start_step=self.session.step,
                    table_every=log.console.table_every_steps,
                )
            )
        if log.jsonl:
            sinks.append(JsonlSink(self.dir.metrics_file, resume_step=resume_step))
        if log.samples_every_steps:
            sinks.append(SamplesSink(self.dir.samples_file, resume_step=resume_step))
        if log.wandb.enabled:
            sinks.append(
                WandbSink(
                    project=log.wandb.project,
                    entity=log.wandb.entity,
                    mode=log.wandb.mode,
                    config=loaded.data,
                    run_dir=self.dir.path,
                    name=self.dir.path.name,
                    run_id=wandb_id,
                    say=self.say,
                )
            )
        return sinks

    def _wandb_id(self) -> str | None:
        return next((s.run_id for s in self.sinks if isinstance(s, WandbSink)), None)

    # --- the schedule -----------------------------------------------------------------------

    def eval_due(self, step: int) -> bool:
        every = self.recipe.trainer.eval.every_steps
        return step == self.recipe.trainer.total_steps or (every > 0 and step % every == 0)

    def checkpoint_due(self, step: int) -> bool:
        every = self.recipe.trainer.checkpoint.every_steps
        return step == self.recipe.trainer.total_steps or (every > 0 and step % every == 0)

    def log(self, step: int, metrics: dict[str, float]) -> None:
        if not self.main:
            return
        self.logger.log(step, metrics)
        self.recent.append({"step": step, **metrics})
        for stall in find_stalls(self.recent):
            if stall.check not in self.stalls_reported:
                self.stalls_reported.add(stall.check)
                self.say(f"Warning: {stall.message}.")
        every = self.recipe.logging.samples_every_steps
        exp = self.session.last_experience
        if every and exp is not None and step % every == 0:
            self.logger.log_samples(step, sample_rows(exp, self.session.train_data, SAMPLES_PER_LOG))

    def checkpoint(self) -> None:
        self.session.save_checkpoint(self.dir.checkpoints, self._wandb_id())

    @contextmanager
    def supervise(self) -> Iterator[None]:
        """Ctrl-C asks the loop to stop after the current step (`stop_requested`); the run then
        saves a checkpoint of that step and ends "interrupted". A second Ctrl-C stops at once
        (the half-done step is lost; the last checkpoint stays). Any error marks the run failed."""
        status = "failed"
        previous = None
        if threading.current_thread() is threading.main_thread():
            previous = signal.signal(signal.SIGINT, self._on_sigint)
        try:
            yield
            status = "interrupted" if self.stop_requested else "finished"
        except KeyboardInterrupt:
            status = "interrupted"
        finally:
            if previous is not None:
                signal.signal(signal.SIGINT, previous)
            if status == "interrupted":
                if (
                    self.stop_requested
                    and self.session.step > 0
                    and not self.checkpoint_due(self.session.step)
                ):
                    self.checkpoint()
                self.say(
                    f"Interrupted at step {self.session.step}. Continue with `rlrun resume {self.dir.path}`."
                )
            self.close(status)

    def _on_sigint(self, signum: int, frame: Any) -> None:
        if self.stop_requested:
            raise KeyboardInterrupt
        self.stop_requested = True
        self.say("Ctrl-C: finishing this step, then saving a checkpoint (Ctrl-C again stops at once).")

    def close(self, status: str) -> None:
        if self.main:
            self.logger.close(status)
            self.dir.update_meta(status=status, end_time=now_iso(), final_step=self.session.step)
        self.status = status


def _wall_time_at(metrics_file: Path, step: int) -> float:
    """The run's wall time when `step` was logged (0 if unknown), so a resumed run keeps counting."""
    wall = 0.0
    if metrics_file.exists():
        for line in metrics_file.read_text().splitlines():
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                continue
            if record.get("step", -1) <= step:
                wall = record.get("wall_time_s", wall)
    return wall


def start_run(
    loaded: LoadedRecipe,
    options: RunOptions,
    say: Say,
    overrides: list[str],
    make_session: Callable[[Any], Session] = Session,
) -> Run:
    """Claim the run directory (refusing to reuse one without --resume / --overwrite), then
    build the session and resume it from the latest checkpoint when asked."""
    path = default_run_dir(loaded, options)
    if options.resume:
        check_resume(path, loaded)
    state = PartialState(cpu=on_cpu(loaded.recipe))
    if state.is_main_process:
        RunDir.open(path, resume=options.resume, overwrite=options.overwrite)
    state.wait_for_everyone()
    keep_freed_memory()  # every step re-allocates the same buffers: reuse them, don't re-fault them
    session = make_session(loaded.recipe)
    session.warn = say
    return Run(loaded, options, session, say, overrides)
