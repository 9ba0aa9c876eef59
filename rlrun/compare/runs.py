"""Reading run directories, robustly: in progress, crashed or resumed (W&B runs: `wandb_runs.py`).

The format is the run-directory contract in docs/architecture.md. A run may be read while
`rlrun train` is still appending to it, or after a crash left half a line behind, so every
file is optional and every problem becomes a note on the run rather than an error.
"""

from __future__ import annotations

import difflib
import json
import math
import os
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import Any

import yaml

AXIS_KEYS = ("step", "wall_time_s", "samples")  # per-row coordinates, not metrics
RUN_FILES = ("meta.json", "metrics.jsonl", "resolved.yaml")
_NON_FINITE = {
    "nan": math.nan,
    "inf": math.inf,
    "+inf": math.inf,
    "infinity": math.inf,
    "-inf": -math.inf,
    "-infinity": -math.inf,
}


STALE_AFTER_S = 30 * 60  # no heartbeat for this long from a run on another machine: "stale"


def live_status(meta: dict[str, Any], *, now: float, hostname: str, pid_alive: Callable[[int], bool]) -> str:
    """What a run's meta.json status means now (see `Run.status`)."""
    status = str(meta.get("status") or "unknown")
    if status != "running":
        return status
    if meta.get("hostname") == hostname and isinstance(meta.get("pid"), int):
        return "running" if pid_alive(meta["pid"]) else "crashed"
    try:
        heartbeat = datetime.fromisoformat(str(meta["heartbeat"])).timestamp()
    except (KeyError, ValueError):
        return status  # written before heartbeats were recorded
    return "stale" if now - heartbeat > STALE_AFTER_S else status


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, someone else's
        return True
    return True


class RunReadError(Exception):
    """A run could not be found or read at all."""


@dataclass(frozen=True)
class Run:
    """One run: its meta.json, resolved recipe and metric rows (ordered by step)."""

    name: str
    source: str
    meta: dict[str, Any]
    recipe: dict[str, Any] | None
    rows: list[dict[str, float]]
    notes: list[str] = field(default_factory=list)
    last_update: float | None = None  # epoch seconds of the last metrics write

    @property
    def status(self) -> str:
        """meta.json's status, except that a "running" run whose process is gone reads as
        "crashed", and one on another machine with no step for `STALE_AFTER_S` as "stale"."""
        return live_status(self.meta, now=time.time(), hostname=socket.gethostname(), pid_alive=_pid_alive)

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

    def until(self, step: int) -> Run:
        """This run as it stood at `step` (for `--at`)."""
        return replace(self, rows=[row for row in self.rows if row["step"] <= step])


def load_run(ref: str, runs_dir: Path | str = "runs") -> Run:
    """Read a run given as a directory or a run name under `runs_dir`."""
    path = resolve_run_dir(ref, Path(runs_dir))
    notes: list[str] = []
    meta = _read_meta(path / "meta.json", notes)
    recipe = _read_recipe(path / "resolved.yaml", notes)
    metrics_path = path / "metrics.jsonl"
    if metrics_path.exists():
        rows = read_metrics(metrics_path, notes)
        last_update = metrics_path.stat().st_mtime
    else:
        rows, last_update = [], None
        notes.append("no metrics.jsonl yet")
    name = str(meta.get("name") or path.name)
    return Run(name, str(path), meta, recipe, rows, notes, last_update)


def resolve_run_dir(ref: str, runs_dir: Path) -> Path:
    """A path that holds a run, else the run of that name under `runs_dir`."""
    for candidate in (Path(ref), runs_dir / ref):
        if candidate.is_dir() and any((candidate / f).exists() for f in RUN_FILES):
            return candidate
    known = sorted(p.name for p in runs_dir.iterdir() if p.is_dir()) if runs_dir.is_dir() else []
    hint = difflib.get_close_matches(ref, known, n=3)
    message = f"no run {ref!r}: not a run directory, and no run of that name in {runs_dir}/"
    if hint:
        message += f"; did you mean {', '.join(hint)}?"
    elif known:
        message += f"; runs there: {', '.join(known[:10])}"
    raise RunReadError(message)


def read_metrics(path: Path, notes: list[str]) -> list[dict[str, float]]:
    """Parse metrics.jsonl into rows ordered by step.

    A last line without its newline is a write in progress or a crash, and is dropped.
    Rows for the step just written are merged (validation may log separately). A step
    lower than the one before means the run resumed from a checkpoint: the rows it will
    write again are superseded.
    """
    text = path.read_text(encoding="utf-8", errors="replace")
    lines = text.split("\n")
    rows: list[dict[str, float]] = []
    bad = 0
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            step = int(row["step"])
        except (ValueError, KeyError, TypeError):
            if number == len(lines):  # no newline after it: cut off mid-write
                notes.append(f"metrics.jsonl ends in a partial line (line {number}), ignored")
            else:
                bad += 1
            continue
        row = {key: num for key, value in row.items() if (num := parse_number(value)) is not None}
        row["step"] = step
        fill_axis_defaults(row)
        if rows and step == rows[-1]["step"]:
            rows[-1].update(row)
        elif rows and step < rows[-1]["step"]:
            kept = [r for r in rows if r["step"] < step]
            notes.append(f"resumed at step {step}: {len(rows) - len(kept)} earlier rows superseded")
            rows = [*kept, row]
        else:
            rows.append(row)
    if bad:
        notes.append(f"metrics.jsonl: {bad} unreadable line(s) skipped")
    return rows


def fill_axis_defaults(row: dict[str, float]) -> None:
    """Step 0 (the evaluation before training) has trained on no samples, whether or not it says so."""
    if row["step"] == 0:
        row.setdefault("samples", 0)


def parse_number(value: Any) -> float | None:
    """A metric value as a number, or None; JSON writers spell non-finite ones in several ways."""
    if isinstance(value, (bool, int, float)):
        return float(value) if isinstance(value, bool) else value
    if isinstance(value, str):
        return _NON_FINITE.get(value.strip().lower())
    return None


def _read_meta(path: Path, notes: list[str]) -> dict[str, Any]:
    if not path.exists():
        notes.append("no meta.json")
        return {}
    try:
        meta = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as exc:  # written non-atomically and caught mid-write
        notes.append(f"meta.json unreadable ({exc})")
        return {}
    return meta if isinstance(meta, dict) else {}


def _read_recipe(path: Path, notes: list[str]) -> dict[str, Any] | None:
    if not path.exists():
        notes.append("no resolved.yaml: config diff and comparability checks skip this run")
        return None
    try:
        recipe = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        notes.append(f"resolved.yaml unreadable ({exc.__class__.__name__})")
        return None
    return recipe if isinstance(recipe, dict) else None
