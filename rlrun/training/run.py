"""Starting, resuming and closing a run (`train` drives its steps): the run directory and its
record, the sinks, the checkpoint and evaluation schedule, and how the run ends: on a stop signal
(their meaning is `rlrun.interrupt`'s), on an error and at the end.

Only the main process touches the disk or W&B; every process builds the same `Session`.
"""

from __future__ import annotations

import errno
import os
import shlex
import socket
import statistics
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from functools import partial
from pathlib import Path

import torch
from accelerate import PartialState

from rlrun import interrupt
from rlrun.errors import ConfigIssue, RecipeError
from rlrun.facts.launched import CPU_THREADS_SHARE
from rlrun.interrupt import StopRequests
from rlrun.pathnames import folder_problem
from rlrun.recipes import LoadedRecipe, algorithm_summary, load_recipe
from rlrun.recipes.yaml_io import parse_document, read_text
from rlrun.records import checkpoint as ckpt
from rlrun.records.record import PythonObject, Resume, RunMeta, Setup
from rlrun.records.rundir import (
    META,
    RESOLVED,
    RunDir,
    check_run_name,
    disk_full_message,
    git_state,
    is_disk_full,
    now_iso,
    package_versions,
    run_setup,
    updated,
    wall_time_at,
)
from rlrun.records.sinks import MetricsLogger, Say, Sink, open_sinks, wandb_run_id
from rlrun.records.stalls import StallWatch
from rlrun.training.allocator import keep_freed_memory
from rlrun.training.callbacks import Callback, Callbacks, RunState, in_force
from rlrun.training.experience import Experience
from rlrun.training.loop import (
    SAMPLING_NON_FINITE,
    NonFiniteModel,
    broken_model_message,
    check_policy_health,
    training_step,
    weight_norm,
)
from rlrun.training.metrics import sample_rows
from rlrun.training.profiling import profiled_steps
from rlrun.training.session import Session, TrainState, locked_changes, on_cpu
from rlrun.training.sharding import gathered
from rlrun.user_code import LIVE_PREFIX

SAMPLES_PER_LOG = 16  # completions written to samples.jsonl / the W&B table each time
# Below this many parameters a CPU run uses one intra-op thread: it is nearly as fast as several
# and immune to a busy core (with two threads on 2 shared cores a tiny model's step took 8 s, not 0.2).
SMALL_MODEL_PARAMETERS = 10_000_000
SLOW_STEP_FACTOR = 5  # a step this many times the run's typical step time gets a console note
SLOW_STEP_MIN_S = 1.0  # ...if it also took at least this long


@dataclass
class RunOptions:
    """What the command line adds to the recipe."""

    run_dir: Path | None = None  # default: <trainer.output_dir>/<name>
    name: str | None = None  # default: <recipe file stem>-<UTC time>
    resume: bool = False
    overwrite: bool = False
    profile: bool = False  # record a few steps with torch.profiler into <run>/profile/
    restart: bool = False  # with resume: train again from step 0 when there is no intact checkpoint
    run_dir_key: str = "--run-dir"  # what gave run_dir, for refusals: the flag, or "" (an argument)


def default_run_dir(loaded: LoadedRecipe, options: RunOptions) -> Path:
    if options.run_dir is not None:
        return Path(options.run_dir)
    if options.name is not None:
        check_run_name(options.name)
    name = options.name or f"{loaded.source_path.stem}-{datetime.now(timezone.utc):%Y%m%d-%H%M%S}"
    return Path(loaded.recipe.trainer.output_dir) / name


def check_run_dir(loaded: LoadedRecipe, options: RunOptions) -> None:
    """Refuse (RecipeError), before anything loads, a run name or directory the file system cannot
    hold: `--name ..`, a name or path too long, a file in the way, a folder this user cannot write."""
    path = default_run_dir(loaded, options)
    if (problem := folder_problem(path)) is None:
        return
    message = f"the run directory cannot be made: {problem}"
    fix = "choose another directory"
    if options.run_dir is not None:
        issue = ConfigIssue(
            message, key="--run-dir", code="run-dir", override=f"--run-dir {str(path)[:200]}", fix=fix
        )
    else:
        issue = loaded.provenance.issue(("trainer", "output_dir"), message, code="run-dir", fix=fix)
    raise RecipeError([issue])


def cpu_threads_for(parameters: int | None, environ: Mapping[str, str]) -> int | None:
    """The intra-op thread count a run should use, or None to leave torch's choice (which follows
    OMP_NUM_THREADS): the user's when they set OMP_NUM_THREADS; else one for a small model on CPU
    (`parameters`; None on an accelerator); else a sweep's share of the cores (CPU_THREADS_SHARE),
    when a sweep started the run."""
    if "OMP_NUM_THREADS" in environ:
        return None
    if parameters is not None and parameters < SMALL_MODEL_PARAMETERS:
        return 1
    share = environ.get(CPU_THREADS_SHARE)
    return int(share) if share else None


def slow_step_note(step: int, seconds: float, earlier: list[float]) -> str | None:
    """A console note when `step` took far longer than the run's typical (median) step."""
    if len(earlier) < 3:
        return None
    typical = statistics.median(earlier)
    if seconds < SLOW_STEP_MIN_S or seconds < SLOW_STEP_FACTOR * typical:
        return None
    return (
        f"Step {step} took {seconds:.1f} s, {seconds / typical:.0f}x this run's typical {typical:.2f} s: "
        "the machine is probably busy (other processes on the same cores; with several threads per "
        "process each waits for the slowest — try OMP_NUM_THREADS=1), or it is swapping."
    )


def python_objects(loaded: LoadedRecipe) -> list[PythonObject]:
    """What meta.json records of the Python objects the recipe was given."""
    return [
        PythonObject(name=name, not_reproducible=passed.not_reproducible, **passed.description)
        for name, passed in loaded.objects.items()
    ]


class RunFinished(Exception):
    """`resume` of a run that already trained all its steps: nothing to do (the message says why)."""


def finished_note(run_dir: Path, loaded: LoadedRecipe) -> str | None:
    """Why resuming `run_dir` would do nothing, or None. A finished run resumes only to train
    further (a raised `trainer.total_steps`): anything else would rewrite its records."""
    if not (run_dir / META).is_file():
        return None
    meta = RunDir(run_dir).read_meta()
    total = loaded.recipe.trainer.total_steps
    final = meta.final_step if meta.final_step is not None else meta.total_steps
    if meta.status != "finished" or final is None or total > final:
        return None
    return (
        f"Nothing to resume: {run_dir} finished all its {final} steps, and its records stay as they are. "
        f"To train further, raise trainer.total_steps: `rlrun resume {shlex.quote(str(run_dir))} "
        f"trainer.total_steps={final * 2}`."
    )


def check_resume(run_dir: Path, loaded: LoadedRecipe) -> None:
    """Refuse, before any model loads, a resume that would change the model, tokenizer or data,
    or that has nothing to do (`RunFinished`)."""
    if note := finished_note(run_dir, loaded):
        raise RunFinished(note)
    resolved = run_dir / RESOLVED
    if resolved.is_file():
        # Data given from Python is named by its content: other rows are another name, which the
        # run's own recipe, read next, could not even resolve in this process.
        raw, _, _ = parse_document(read_text(resolved, "recipe", str(resolved)), str(resolved))
        if issues := [i for i in locked_changes(raw, loaded.data) if LIVE_PREFIX in f"{i.expected}{i.found}"]:
            raise RecipeError(issues)
        # The run's recipe as this rlrun resolves it: a key the rlrun that started the run did
        # not have yet reads as its default (the behaviour before the key) on both sides.
        issues = locked_changes(load_recipe(resolved, [], run_record=True).data, loaded.data)
        if issues:
            raise RecipeError(issues)


class Run:
    """A started run: its directory and record, its logs, and its checkpoint and evaluation
    schedule (the main process writes them); `stops` takes its stop signals (`rlrun.interrupt`)."""

    def __init__(
        self,
        loaded: LoadedRecipe,
        options: RunOptions,
        session: Session,
        say: Say,
        overrides: list[str],
        directory: RunDir | None = None,  # the claimed (locked) directory, on the main process
        resumed: TrainState | None = None,  # the checkpoint's state the session was resumed from
    ):
        self.recipe, self.session, self.say = loaded.recipe, session, say
        accelerator = session.group.accelerator
        self.main = accelerator.is_main_process
        path = default_run_dir(loaded, options)
        self.dir = directory or RunDir(path)
        self.profile_dir = path / "profile" if options.profile else None
        self.stops = StopRequests(
            processes=accelerator.num_processes, device=accelerator.device, say=say if self.main else None
        )
        # Every process ended after the same whole step (finished, or a stop they agreed on):
        # they can all meet once more to end their process group.
        self.ended_at_step_boundary = False
        self.step_seconds: list[float] = []  # this invocation's step times, for the slow-step note
        self.stalls = StallWatch()
        self.sinks: list[Sink] = []
        start_wall = 0.0
        if resumed is not None:
            start_wall = wall_time_at(self.dir.metrics_file, session.counters.step)
        if self.main:
            if not options.resume:
                self.dir.write_recipe(loaded.source_text, loaded.data, overrides)
            self.sinks = open_sinks(
                self.recipe.logging,
                self.dir,
                total_steps=self.recipe.trainer.total_steps,
                start_step=session.counters.step,
                # On resume the logs are cut back to the checkpoint (all of them when there was none).
                resume_step=(session.counters.step if resumed is not None else -1)
                if options.resume
                else None,
                config=loaded.data,
                wandb_id=resumed.wandb_run_id if resumed is not None else None,
                say=say,
            )
            self.dir.write_meta(self._started_record(loaded, overrides, resume=options.resume))
        self.logger = MetricsLogger(self.sinks, start_wall=start_wall)

    def _setup(self) -> Setup:
        engine = getattr(self.session.generation.engine, "description", self.recipe.rollout.engine)
        return run_setup(
            self.session.group.accelerator,
            self.recipe.model.dtype,
            self.recipe.trainer.autocast,
            strategy=self.session.strategy,
            engine=engine,
        )

    def _started_record(self, loaded: LoadedRecipe, overrides: list[str], *, resume: bool) -> RunMeta:
        """meta.json as this start leaves it: a new record, or the run's own with this resume added."""
        # Who is training and when it last finished a step: `compare` tells a live run from
        # one that died without a word (kill -9, power loss, a full disk).
        now = now_iso()
        alive = {"status": "running", "end_time": None, "pid": os.getpid(), "hostname": socket.gethostname()}
        if not resume:
            sha, dirty = git_state()
            r = loaded.recipe
            return RunMeta(
                name=self.dir.path.name,
                git_sha=sha,
                git_dirty=dirty,
                versions=package_versions(),
                seed=r.trainer.seed,
                start_time=now,
                total_steps=r.trainer.total_steps,
                algorithm=algorithm_summary(r),
                model=r.model.path,
                setup=self._setup(),  # of the start; each resume records its own
                recipe=str(loaded.source_path),
                overrides=overrides,
                wandb_run_id=wandb_run_id(self.sinks),
                heartbeat=now,
                python_objects=python_objects(loaded),
                **alive,
            )
        meta = self.dir.read_meta()
        resumed = Resume(
            time=now,
            from_step=self.session.counters.step,
            overrides=overrides,
            setup=self._setup(),
            python_objects=python_objects(loaded),
        )
        return updated(
            meta,
            total_steps=loaded.recipe.trainer.total_steps,  # a resume may extend the run
            wandb_run_id=wandb_run_id(self.sinks) or meta.wandb_run_id,
            heartbeat=now,
            resumes=[*meta.resumes, resumed],
            **alive,
        )

    # --- the schedule -----------------------------------------------------------------------

    def eval_due(self, step: int) -> bool:
        every = self.recipe.trainer.eval.every_steps
        return step == self.recipe.trainer.total_steps or (every > 0 and step % every == 0)

    def checkpoint_due(self, step: int) -> bool:
        every = self.recipe.trainer.checkpoint.every_steps
        return step == self.recipe.trainer.total_steps or (every > 0 and step % every == 0)

    def log(self, step: int, metrics: dict[str, float], experience: Experience | None = None) -> None:
        """Write a step's metrics (and, every `logging.samples_every_steps`, some of the
        completions of `experience`, the step's rollouts)."""
        if not self.main:
            return
        self.logger.log(step, metrics)
        self.dir.update_meta(heartbeat=now_iso())
        if "timing_s/step" in metrics:
            note = slow_step_note(step, metrics["timing_s/step"], self.step_seconds[-50:])
            if note:
                self.say(note)
            self.step_seconds.append(metrics["timing_s/step"])
        for stall in self.stalls.new_stalls(step, metrics):
            self.say(f"Warning: {stall.message}.")
        every = self.recipe.logging.samples_every_steps
        if every and experience is not None and step % every == 0:
            self.logger.log_samples(
                step, sample_rows(experience, self.session.generation.train_data, SAMPLES_PER_LOG)
            )

    def checkpoint(self) -> None:
        self.session.save_checkpoint(self.dir.checkpoints, wandb_run_id(self.sinks))

    @contextmanager
    def supervise(self) -> Iterator[None]:
        """Ctrl-C, SIGTERM (timeout, SLURM, Kubernetes) and SIGUSR1 ask the loop to stop after the
        current step (`stops`, agreed on by every process in `stops.agree`); the run then saves a
        checkpoint of that step and ends "interrupted". A second signal stops at once: the
        half-done step is lost and nothing is saved, so a checkpoint only ever holds a whole step.
        Any error marks the run failed."""
        status = "failed"
        at_step_boundary = False
        with self.stops.listening():
            try:
                yield
                at_step_boundary = True
                status = "interrupted" if self.stops.stopping else "finished"
            except KeyboardInterrupt:
                status = "interrupted"
            except Exception as exc:
                if self.stops.at_once:  # the second signal, as another error (`StopRequests.at_once`)
                    status = "interrupted"
                elif is_disk_full(exc) and not isinstance(exc, ckpt.DiskFullError):  # a log, meta.json
                    raise OSError(errno.ENOSPC, disk_full_message(self.dir.path, exc)) from exc
                else:
                    raise
            finally:
                if status == "interrupted":
                    try:
                        if (
                            at_step_boundary
                            and self.session.counters.step > 0
                            and not self.checkpoint_due(self.session.counters.step)
                        ):
                            self.checkpoint()
                    except BaseException:  # a second signal while saving, as itself or as another error
                        if not self.stops.at_once:
                            raise
                        at_step_boundary = False  # the partial save is ignored
                self.close(status)
                self.ended_at_step_boundary = at_step_boundary
                if status == "interrupted" and self.main:
                    self.say(self._interrupted_note())

    def _interrupted_note(self) -> str:
        """Where the run stopped and where `rlrun resume` continues: after a second signal the last
        step done may be newer than the last checkpoint."""
        step = self.session.counters.step
        saved = ckpt.list_checkpoints(self.dir.checkpoints)
        if not saved:
            return f"Interrupted at step {step}, before any checkpoint was saved."
        command = f"`rlrun resume {shlex.quote(str(self.dir.path))}`"
        if saved[-1][0] == step:
            return f"Interrupted at step {step}, saved. Continue with {command}."
        return (
            f"Interrupted at step {step}; the last checkpoint is step {saved[-1][0]}, where {command} "
            "continues (the steps after it are trained again)."
        )

    def close(self, status: str) -> None:
        """Record how the run ended (meta.json first: it is what `compare` and `resume` read),
        then close the sinks; signals arriving meanwhile or later are ignored."""
        self.stops.end()
        if self.main:
            # On a full disk these can fail too; the error that ended the run is the one to report.
            for record in (
                partial(
                    self.dir.record_end,
                    status=status,
                    end_time=now_iso(),
                    final_step=self.session.counters.step,
                ),
                partial(self.logger.close, status),
            ):
                try:
                    record()
                except OSError as exc:
                    self.say(f"Warning: the run's end could not be recorded in {self.dir.path}: {exc}")
            self.dir.release()
        self.status = status


def resume_point(run_dir: RunDir, options: RunOptions, say: Say, *, main: bool) -> Path | None:
    """The newest intact checkpoint to resume from (newer damaged ones are named and skipped),
    chosen before any model loads; the leftovers of interrupted writes are removed first. With
    no checkpoint, or none intact, the run's records are kept unless `--restart` says to start
    again (the damaged checkpoints are then deleted, or they would shadow the new ones)."""
    if main:
        ckpt.remove_partial_checkpoints(run_dir.checkpoints)
        run_dir.remove_stale_temp_files()
    try:
        latest = ckpt.latest_intact_checkpoint(run_dir.checkpoints, warn=say if main else _quiet)
    except RecipeError:
        if not options.restart:
            raise
        latest = None
    if latest is not None:
        return latest
    if not options.restart:
        raise RecipeError(
            [
                ConfigIssue(
                    f"there is no checkpoint to resume from in {run_dir.checkpoints}",
                    code="no-checkpoint",
                    file=str(run_dir.path),
                    fix="train it again from step 0, replacing its metrics.jsonl and samples.jsonl: "
                    f"`rlrun resume {shlex.quote(str(run_dir.path))} --restart`",
                )
            ]
        )
    if main:
        for _, damaged in ckpt.list_checkpoints(run_dir.checkpoints):
            ckpt.delete_checkpoint(damaged)
        say(f"Restarting {run_dir.path} from step 0 (--restart): its metrics.jsonl starts again.")
    return None


def _quiet(text: str) -> None:
    """The other processes check the same files; the main process alone says what it found."""


def start_run(
    loaded: LoadedRecipe,
    options: RunOptions,
    say: Say,
    overrides: list[str],
    make_session: Callable[..., Session] = Session,
) -> Run:
    """Claim the run directory (refusing to reuse one without --resume / --overwrite), then
    build the session and resume it from the latest checkpoint when asked."""
    # The default name holds the clock's second: fix it once, so the directory claimed here is
    # the one the run writes into after the (slow) model load.
    path = default_run_dir(loaded, options)
    key = "trainer.output_dir" if options.run_dir is None else options.run_dir_key
    options = replace(options, run_dir=path)
    if options.resume:
        check_resume(path, loaded)
    state = PartialState(cpu=on_cpu(loaded.recipe))
    directory = (
        RunDir.open(path, resume=options.resume, overwrite=options.overwrite, key=key)
        if state.is_main_process
        else None
    )
    try:
        state.wait_for_everyone()
        start_from = (
            resume_point(directory or RunDir(path), options, say, main=state.is_main_process)
            if options.resume
            else None
        )
        keep_freed_memory()  # every step re-allocates the same buffers: reuse them, don't re-fault them
        session = make_session(loaded.recipe, warn=say)
        if interrupt.requested():  # Ctrl-C while loading, its KeyboardInterrupt lost in a library
            raise KeyboardInterrupt
        parameters = None  # on an accelerator the small-model rule does not apply; a sweep's share does
        if on_cpu(loaded.recipe):
            parameters = sum(p.numel() for p in session.models.unwrapped_policy.parameters())
        threads = cpu_threads_for(parameters, os.environ)
        if threads is not None:
            torch.set_num_threads(threads)
        resumed = None
        if start_from is not None:
            resumed = session.load_checkpoint(start_from)
            say(f"Resuming {path} from {start_from.name} (step {session.counters.step}).")
        return Run(loaded, options, session, say, overrides, directory, resumed)
    except BaseException:
        if directory is not None:  # a run that never started leaves no directory behind
            directory.release()
            directory.discard_if_unused()
        raise


def train(
    loaded: LoadedRecipe,
    options: RunOptions,
    *,
    say: Say = print,
    overrides: list[str] | None = None,
    callbacks: Sequence[Callback] = (),
) -> Run:
    """Run (or resume) the recipe to `trainer.total_steps`, calling `callbacks` at their events
    (`training.callbacks`); returns the finished or stopped run."""
    hooks = Callbacks(callbacks)
    with in_force(hooks):  # before the session is built: its pipeline runs the rollout stage
        run = start_run(loaded, options, say, list(overrides or []))
        _train_steps(run, hooks)
    hooks.state.status = run.status
    hooks.dispatch("train_end")
    return run


def _train_steps(run: Run, hooks: Callbacks) -> None:
    s, total = run.session, run.recipe.trainer.total_steps
    hooks.state = RunState(run.dir.path, s.counters.step, total, _stops=run.stops)
    with run.supervise(), profiled_steps(run.profile_dir, s.group.rank) as step_done:
        hooks.dispatch("train_start")
        if s.counters.step == 0:
            run.log(0, s.evaluate())  # the starting point every curve is compared with
        with gathered(s.models.policy):
            norm = weight_norm(s.models.unwrapped_policy)
        for step in range(s.counters.step + 1, total + 1):
            (
                s.generation.reward_fn.trainer_state.global_step,
                s.generation.reward_fn.trainer_state.max_steps,
            ) = step, total
            try:
                metrics, experience = training_step(s, step)
            except RuntimeError as exc:  # sampling from a policy that broke without being caught
                if SAMPLING_NON_FINITE not in str(exc):
                    raise
                problem = "sampling probabilities stopped being finite numbers"
                raise NonFiniteModel(
                    broken_model_message(problem, step, s.optim.scheduler.get_last_lr()[0])
                ) from exc
            norm = check_policy_health(s, experience.seq, step, lr=metrics["actor/lr"], norm_before=norm)
            step_done()
            s.counters.step = step
            if run.eval_due(step):
                metrics |= s.evaluate()
            run.log(step, metrics, experience)
            if run.checkpoint_due(step):
                run.checkpoint()
            hooks.state.step = step
            hooks.dispatch("step_end", dict(metrics))  # a copy: a callback cannot change what was logged
            if run.stops.agree():  # Ctrl-C, or a callback's stop: the step is complete, the run stops here
                break
