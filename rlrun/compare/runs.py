"""Finding runs and what their status means now (W&B runs: `wandb_runs.py`).

The files are read by `rlrun.records.rundir`, the owner of the run-directory format
(docs/training.md, "The run directory"): robustly, so a run in progress, crashed or resumed reads with notes
rather than errors.
"""

from __future__ import annotations

import difflib
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import Any

import psutil

from rlrun.records.record import AXIS_KEYS, RunMeta
from rlrun.records.rundir import lock_is_held, looks_like_run, read_run_files

STALE_AFTER_S = 30 * 60  # no heartbeat for this long: "stale" (hung, or on a machine out of sight)


def live_status(meta: RunMeta, *, now: float, hostname: str, alive: Callable[[], bool]) -> str:
    """What a run's meta.json status means now (see `RunRecord.status`); `alive` says whether
    the training process of a run on this machine is still there."""
    if meta.status != "running":
        return meta.status
    if meta.hostname == hostname and not alive():
        return "crashed"
    if meta.heartbeat is None:
        return meta.status  # written before heartbeats were recorded
    heartbeat = datetime.fromisoformat(meta.heartbeat).timestamp()
    return "stale" if now - heartbeat > STALE_AFTER_S else meta.status


def training_process_alive(run_dir: Path, meta: RunMeta) -> bool:
    """Whether the process that trains `run_dir` on this machine is alive: it holds the run
    lock, which the kernel drops when the process ends (a zombie holds nothing). A pid alone
    misleads: a zombie's pid still exists and a reused one belongs to another process. Runs
    from before the lock: the pid, if its process is no zombie and started before the heartbeat."""
    held = lock_is_held(run_dir)
    if held is not None:
        return held
    if meta.pid is None or meta.heartbeat is None:
        return False
    try:
        process = psutil.Process(meta.pid)
        heartbeat = datetime.fromisoformat(meta.heartbeat).timestamp()
        return process.status() != psutil.STATUS_ZOMBIE and process.create_time() <= heartbeat
    except psutil.Error:
        return False


class RunReadError(Exception):
    """A run could not be found or read at all."""


@dataclass(frozen=True)
class RunRecord:
    """One finished or running run as `compare` sees it: its meta.json (None: none yet), resolved
    recipe and metric rows (ordered by step). (`rlrun.training.run.Run` is a run while it trains.)"""

    name: str
    source: str
    meta: RunMeta | None
    recipe: dict[str, Any] | None
    rows: list[dict[str, float]]
    notes: list[str] = field(default_factory=list)
    last_update: float | None = None  # epoch seconds of the last metrics write

    @property
    def status(self) -> str:
        """meta.json's status, except that a "running" run on this machine whose training
        process is gone reads as "crashed", and one with no step for `STALE_AFTER_S` as "stale"."""
        if self.meta is None:
            return "unknown"
        alive = partial(training_process_alive, Path(self.source), self.meta)
        return live_status(self.meta, now=time.time(), hostname=socket.gethostname(), alive=alive)

    @property
    def last_step(self) -> int | None:
        return int(self.rows[-1]["step"]) if self.rows else None

    @property
    def wall_time_s(self) -> float | None:
        for row in reversed(self.rows):
            if "wall_time_s" in row:
                return float(row["wall_time_s"])
        return None

    def metric_names(self) -> list[str]:
        names = {key for row in self.rows for key in row if key not in AXIS_KEYS}
        return sorted(names)

    def series(self, metric: str) -> list[tuple[dict[str, float], float]]:
        """The rows that recorded `metric`, each with its value (NaN/inf kept)."""
        return [(row, row[metric]) for row in self.rows if metric in row]

    def until(self, step: int) -> RunRecord:
        """This run as it stood at `step` (for `--at`)."""
        return replace(self, rows=[row for row in self.rows if row["step"] <= step])


def load_run(ref: str, runs_dir: Path | str = "runs") -> RunRecord:
    """Read a run given as a directory or a run name under `runs_dir`."""
    path = resolve_run_dir(ref, Path(runs_dir))
    files = read_run_files(path)
    name = files.meta.name if files.meta is not None else path.name
    return RunRecord(name, str(path), files.meta, files.recipe, files.rows, files.notes, files.last_update)


def resolve_run_dir(ref: str, runs_dir: Path) -> Path:
    """A path that holds a run, else the run of that name under `runs_dir`."""
    for candidate in (Path(ref), runs_dir / ref):
        if looks_like_run(candidate):
            return candidate
    known = sorted(p.name for p in runs_dir.iterdir() if p.is_dir()) if runs_dir.is_dir() else []
    hint = difflib.get_close_matches(ref, known, n=3)
    message = f"no run {ref!r}: not a run directory, and no run of that name in {runs_dir}/"
    if hint:
        message += f"; did you mean {', '.join(hint)}?"
    elif known:
        message += f"; runs there: {', '.join(known[:10])}"
    raise RunReadError(message)
