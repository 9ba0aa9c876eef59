"""A sweep's plan: every run's recipe validated before anything starts, where each run lives, what
state it is in (new, to resume, finished, running elsewhere), the manifest, and a time estimate.

Layout: `<trainer.output_dir>/<sweep>/sweep.json` (the manifest) and, per run,
`<sweep>/<point>/seed-<n>/` (an ordinary run directory), `seed-<n>.log` (its console) and
`seed-<n>.lock` (held by the process training it, so two sweeps never train one run at once).
"""

from __future__ import annotations

import fcntl
import json
import math
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

from rlrun.compare.diff import flatten
from rlrun.compare.runs import load_run
from rlrun.errors import ConfigIssue, RecipeError
from rlrun.pathnames import folder_problem, name_problem
from rlrun.recipes import LoadedRecipe, batch_plan, load_recipe
from rlrun.recipes.paths import expand
from rlrun.records.rundir import RESOLVED, holds_run, now_iso, write_json_atomic
from rlrun.sweep.spec import RECIPE_KEY, PlannedRun, Sweep

MANIFEST = "sweep.json"
RunState = Literal["new", "resume", "finished", "running"]


@dataclass(frozen=True)
class RunPlan:
    """One run of the sweep, validated and located."""

    run: PlannedRun
    recipe: str  # what `rlrun train` is given: a file (absolute) or a built-in name
    loaded: LoadedRecipe
    dir: Path
    state: RunState
    steps_done: int  # logged steps so far (0 for a new run)
    seconds_per_step: float | None  # a finished run's measured pace

    @property
    def name(self) -> str:
        return self.run.name

    @property
    def total_steps(self) -> int:
        return self.loaded.recipe.trainer.total_steps

    @property
    def samples(self) -> int:
        """Responses trained on over the whole run."""
        return batch_plan(self.loaded.recipe).samples * self.total_steps

    @property
    def log_file(self) -> Path:
        return self.dir.with_name(self.dir.name + ".log")

    @property
    def lock_file(self) -> Path:
        return self.dir.with_name(self.dir.name + ".lock")

    def argv(self) -> list[str]:
        """The `rlrun` command line that trains this run from where it stands now: a run that has
        started (meta.json written) resumes from its latest intact checkpoint, or starts again
        without one (running the sweep again asks for that), any other starts."""
        if holds_run(self.dir):
            return resume_argv(self.dir.resolve())
        return self.train_argv()

    def train_argv(self) -> list[str]:
        """`rlrun train` of this run from the start (paths absolute: a job may start elsewhere)."""
        return ["train", self.recipe, *self.run.overrides, "--run-dir", str(self.dir.resolve())]


def resume_argv(run_dir: Path) -> list[str]:
    """`rlrun resume` of a sweep's run; `--restart`: a run stopped before its first checkpoint
    trains again from step 0 (a lone `rlrun resume` would ask first)."""
    return ["resume", str(run_dir), "--restart"]


@dataclass(frozen=True)
class SweepPlan:
    sweep: Sweep
    runs: list[RunPlan]

    @property
    def dir(self) -> Path:
        return self.runs[0].dir.parents[1]

    @property
    def manifest_file(self) -> Path:
        return self.dir / MANIFEST

    def to_do(self) -> list[RunPlan]:
        return [run for run in self.runs if run.state in ("new", "resume")]

    def seconds_per_step(self) -> float | None:
        """The mean pace of the sweep's finished runs, if any finished."""
        paces = [run.seconds_per_step for run in self.runs if run.seconds_per_step is not None]
        return math.fsum(paces) / len(paces) if paces else None

    def estimated_seconds(self, concurrent: int) -> float | None:
        """Wall time left with `concurrent` runs at once, at the finished runs' pace."""
        pace = self.seconds_per_step()
        if pace is None:
            return None
        steps = sum(run.total_steps - run.steps_done for run in self.to_do())
        return pace * steps / max(1, min(concurrent, len(self.to_do()) or 1))

    def manifest(self, executor: dict[str, Any]) -> dict[str, Any]:
        previous = read_manifest(self.manifest_file)
        return {
            "sweep": self.sweep.name,
            "file": str(self.sweep.file.resolve()),
            "description": self.sweep.spec.description,
            "written": now_iso(),
            "executor": executor,
            "seeds": self.sweep.spec.seeds,
            "runs": [
                {
                    "name": run.name,
                    "point": run.run.point.name,
                    "seed": run.run.seed,
                    "dir": str(run.dir.relative_to(self.dir)),
                    "recipe": run.recipe,
                    "overrides": run.run.overrides,
                    "total_steps": run.total_steps,
                    "samples": run.samples,
                }
                for run in self.runs
            ],
            "jobs": previous.get("jobs", {}),  # cluster job ids by run name (the SLURM executor's)
        }

    def write_manifest(self, executor: dict[str, Any]) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        write_json_atomic(self.manifest_file, self.manifest(executor))


def read_manifest(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def plan_sweep(
    sweep: Sweep, environment: bool = True, elsewhere: Callable[[Path], set[str]] | None = None
) -> SweepPlan:
    """Validate every run's recipe and find each run's state. Raises RecipeError with every
    problem, each naming the runs it concerns and located in the sweep file where it comes
    from there. `environment=False` skips the checks of this machine (vLLM, GPU), for runs that
    train elsewhere (a cluster). `elsewhere(sweep_dir)` names the runs being trained elsewhere
    now (their cluster job is queued or running): they are "running", whatever their directory
    holds at this moment."""
    problems: dict[ConfigIssue, list[str]] = {}
    loaded_runs: list[tuple[PlannedRun, str, LoadedRecipe]] = []
    all_runs = sweep.runs()
    for run in all_runs:
        recipe = recipe_ref(sweep, run.point.recipe.value)
        try:
            loaded = load_recipe(recipe, run.overrides, environment=environment)
        except RecipeError as exc:
            for issue in exc.issues:
                problems.setdefault(_relocate(sweep, run, issue), []).append(run.name)
            continue
        loaded_runs.append((run, recipe, loaded))
    output_dirs = {loaded.recipe.trainer.output_dir for _, _, loaded in loaded_runs}
    if len(output_dirs) > 1:
        message = (
            f"the runs' recipes write to different trainer.output_dir ({', '.join(sorted(output_dirs))})"
        )
        problems.setdefault(
            sweep.issue(("recipe",), message, fix="set trainer.output_dir under `overrides:`"), []
        )
    plans = []
    if not problems:
        sweep_dir = Path(output_dirs.pop()) / sweep.name
        busy = elsewhere(sweep_dir) if elsewhere is not None else set()
        for run, recipe, loaded in loaded_runs:
            path = sweep_dir / run.point.name / f"seed-{run.seed}"
            plan, issue = _locate(run, recipe, loaded, path, busy=run.name in busy)
            if issue is not None:
                problems.setdefault(issue, []).append(run.name)
            plans.append(plan)
    if problems:
        raise RecipeError([_naming_runs(issue, names, all_runs) for issue, names in problems.items()])
    return SweepPlan(sweep, plans)


def recipe_ref(sweep: Sweep, value: str) -> str:
    """A recipe named in a sweep: a file beside the sweep file, else as `rlrun train` reads it
    (a built-in name, or a path from the working directory); `~` and variables expanded."""
    expanded = expand(value)
    beside = sweep.file.parent / expanded
    return str(beside.resolve()) if beside.is_file() else expanded


def _relocate(sweep: Sweep, run: PlannedRun, issue: ConfigIssue) -> ConfigIssue:
    """Point an issue at the sweep file line that caused it: an override the sweep made, or the
    recipe it named. Issues inside a recipe file keep their place there."""
    fields = {"code": issue.code, "expected": issue.expected, "found": issue.found, "fix": issue.fix}
    for setting in run.settings:
        if issue.override == setting.override:
            return sweep.issue(setting.at, issue.message, key=issue.key, **fields)
    if issue.code == "recipe-missing":
        return sweep.issue(run.point.recipe.at, issue.message, key=RECIPE_KEY, **fields)
    return issue


def _naming_runs(issue: ConfigIssue, names: list[str], all_runs: list[PlannedRun]) -> ConfigIssue:
    """The issue, its message starting with the runs it concerns: whole points when every seed of
    them is concerned."""
    if not names:
        return issue
    if len(names) == len(all_runs):
        return replace(issue, message=f"every run of the sweep: {issue.message}")
    by_point: dict[str, list[str]] = {}
    for run in all_runs:
        by_point.setdefault(run.point.name, []).append(run.name)
    shown = []
    for point, runs in by_point.items():
        hit = [name for name in runs if name in names]
        shown += [f"point `{point}` (every seed)"] if hit == runs else [f"run `{name}`" for name in hit]
    text = ", ".join(shown[:4]) + (f" and {len(shown) - 4} more" if len(shown) > 4 else "")
    return replace(issue, message=f"sweep {text}: {issue.message}")


def _locate(
    run: PlannedRun, recipe: str, loaded: LoadedRecipe, path: Path, busy: bool
) -> tuple[RunPlan, ConfigIssue | None]:
    """The run's state on disk, or why its directory cannot be used for it. A run being trained
    (`busy`: its job is queued or running; or another sweep holds its lock) is "running", its
    directory not checked: a process that is starting has made it but not yet written meta.json."""
    plan = RunPlan(run, recipe, loaded, path, "new", 0, None)
    if (problem := folder_problem(path) or name_problem(plan.lock_file.name)) is not None:
        return plan, ConfigIssue(
            f"the run's directory cannot be made: {problem}",
            key="trainer.output_dir",
            code="run-dir",
            file=str(path)[:300],
            fix="choose a shorter, writable trainer.output_dir (under `overrides:`), sweep `name:` or seeds",
        )
    if busy or is_locked(plan.lock_file):
        steps = (load_run(str(path)).last_step or 0) if holds_run(path) else 0
        return replace(plan, state="running", steps_done=steps), None
    if not path.exists() or (path.is_dir() and not any(path.iterdir())):
        return plan, None
    if not holds_run(path):
        return plan, ConfigIssue(
            "the run's directory exists but holds no rlrun run (no meta.json); a sweep never deletes it",
            code="run-dir",
            file=str(path),
            fix="move it away, or give the sweep another `name:`",
        )
    resolved = path / RESOLVED
    # As this rlrun resolves it: a key added since reads as its default, a moved one where it went.
    recorded = flatten(
        load_recipe(resolved, [], environment=False, run_record=True).data if resolved.is_file() else {}
    )
    planned = flatten(loaded.data)
    changed = [key for key in sorted(set(recorded) | set(planned)) if recorded.get(key) != planned.get(key)]
    if changed:
        return plan, ConfigIssue(
            "the run's directory holds a run of another recipe (the sweep file or a recipe changed "
            f"since it started: {', '.join(changed[:5])}); a sweep never overwrites a run",
            code="run-dir",
            file=str(path),
            fix="give the sweep another `name:`, or move the old sweep folder away",
        )
    existing = load_run(str(path))
    steps = existing.last_step or 0
    if existing.status == "finished":
        pace = existing.wall_time_s / steps if existing.wall_time_s and steps else None
        return replace(plan, state="finished", steps_done=steps, seconds_per_step=pace), None
    return replace(plan, state="resume", steps_done=steps), None


def is_locked(lock_file: Path) -> bool:
    """True when another process holds the run's lock (it is training the run now)."""
    if not lock_file.exists():
        return False
    with open(lock_file) as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(handle, fcntl.LOCK_UN)
    return False


@contextmanager
def run_lock(run: RunPlan) -> Iterator[int | None]:
    """Hold the run's lock: yields its file descriptor (pass it on to the training process, which
    then holds the lock for as long as it lives), or None when another process holds it."""
    run.lock_file.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(run.lock_file, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield None
            return
        yield fd
    finally:
        os.close(fd)
