"""Where the metrics of each step go: the console, `metrics.jsonl`, and Weights & Biases.

Every sink has the same three methods (`log`, `log_samples`, `close`); `MetricsLogger` fans
out to them on the main process. A sink that fails (W&B losing its connection) is dropped
with a warning: logging never stops training. The numbers themselves are `metrics.py`'s.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from netrc import netrc
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.table import Table

from rlrun.records.record import metrics_line
from rlrun.records.rundir import RunDir, truncate_jsonl

if TYPE_CHECKING:
    from rlrun.schema.logs import Logging

Say = Callable[[str], None]

# The figures the progress bar shows, in order: (metric, label).
PROGRESS_FIGURES = (
    ("critic/score/mean", "score"),
    ("val/accuracy", "val"),
    ("actor/pg_loss", "loss"),
    ("response_length/mean", "len"),
    ("timing_s/step", "s/step"),
)
# The compact table printed every N steps.
TABLE_METRICS = (
    "critic/score/mean",
    "val/accuracy",
    "actor/pg_loss",
    "actor/kl_loss",
    "actor/entropy",
    "actor/grad_norm",
    "actor/pg_clipfrac",
    "actor/ppo_kl",
    "critic/vf_loss",
    "critic/advantages/mean",
    "response_length/mean",
    "frac_reward_zero_std",
    "perf/throughput",
    "timing_s/step",
)


class Sink(Protocol):
    def log(self, step: int, metrics: dict[str, float]) -> None: ...
    def log_samples(self, step: int, rows: list[dict[str, Any]]) -> None: ...
    def close(self, status: str) -> None: ...


class JsonlSink:
    """`metrics.jsonl`: one JSON object per step, appended and flushed at once.

    On resume from checkpoint step k, lines after step k are dropped first, so the file reads
    as if the run had never been interrupted."""

    def __init__(self, path: Path, resume_step: int | None = None):
        self.path = path
        if resume_step is not None:
            truncate_jsonl(path, resume_step)
        self._file = open(path, "a")  # noqa: SIM115  (held open for the run, closed in close())

    def log(self, step: int, metrics: dict[str, float]) -> None:
        self._file.write(metrics_line(step, metrics))
        self._file.flush()

    def log_samples(self, step: int, rows: list[dict[str, Any]]) -> None:
        pass

    def close(self, status: str) -> None:
        self._file.close()


class SamplesSink:
    """`samples.jsonl`: sampled completions with their rewards, one object per completion."""

    def __init__(self, path: Path, resume_step: int | None = None):
        if resume_step is not None:
            truncate_jsonl(path, resume_step)
        self._file = open(path, "a")  # noqa: SIM115  (held open for the run, closed in close())

    def log(self, step: int, metrics: dict[str, float]) -> None:
        pass

    def log_samples(self, step: int, rows: list[dict[str, Any]]) -> None:
        self._file.writelines(json.dumps({"step": step, **row}) + "\n" for row in rows)
        self._file.flush()

    def close(self, status: str) -> None:
        self._file.close()


class ConsoleSink:
    """A Rich progress bar with the key figures and ETA, and a compact table every N steps."""

    def __init__(
        self, total_steps: int, start_step: int = 0, table_every: int = 10, console: Console | None = None
    ):
        self.console = console or Console(stderr=True)
        self.table_every = table_every
        self._last: dict[str, float] = {}
        self.progress = Progress(
            TextColumn("[bold]step"),
            MofNCompleteColumn(),
            BarColumn(bar_width=16),
            TimeElapsedColumn(),
            TextColumn("eta"),
            TimeRemainingColumn(),
            TextColumn("{task.fields[figures]}"),
            console=self.console,
        )
        self.task = self.progress.add_task("train", total=total_steps, completed=start_step, figures="")
        self.progress.start()

    def log(self, step: int, metrics: dict[str, float]) -> None:
        self._last.update(metrics)
        figures = "  ".join(
            f"{label} {_fmt(self._last[key])}" for key, label in PROGRESS_FIGURES if key in self._last
        )
        self.progress.update(self.task, completed=step, figures=figures)
        if self.table_every > 0 and step % self.table_every == 0:
            self.progress.console.print(metrics_table(step, self._last, self.console.width))

    def log_samples(self, step: int, rows: list[dict[str, Any]]) -> None:
        pass

    def close(self, status: str) -> None:
        self.progress.stop()


def metrics_table(step: int, metrics: dict[str, float], width: int = 160) -> Table:
    """The key metrics as name/value pairs, as many pairs per row as `width` columns hold."""
    table = Table(title=f"step {step}", show_header=False, box=None, padding=(0, 2), title_justify="left")
    shown = [k for k in TABLE_METRICS if k in metrics]
    per_row = max(1, width // 40)  # a pair takes up to ~40 columns
    for i in range(0, len(shown), per_row):
        row = shown[i : i + per_row]
        table.add_row(*[c for k in row for c in (f"[dim]{k}", _fmt(metrics[k]))])
    return table


def _fmt(value: float) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def wandb_has_api_key() -> bool:
    if os.environ.get("WANDB_API_KEY"):
        return True
    try:
        return netrc().authenticators("api.wandb.ai") is not None
    except (OSError, ValueError):
        return False


# W&B's own default is 90 s: an unreachable server would hold the start of every run that long.
WANDB_INIT_TIMEOUT_S = 20.0
WANDB_SAMPLES_KEY = "completions"  # the samples table; "samples" is the counter of trained responses


class WandbSink:
    """W&B on the main process: the resolved recipe as config, resumable by run id.

    Mode: `WANDB_MODE` if set, else the recipe's. Online without an API key runs offline and
    says how to upload later. If `wandb.init` fails (or cannot reach the server within
    `WANDB_INIT_TIMEOUT_S`, unless `WANDB_INIT_TIMEOUT` says otherwise), offline is tried, then
    W&B is switched off — with a warning each time, never an exception.
    """

    def __init__(
        self,
        *,
        project: str,
        entity: str | None,
        mode: str,
        config: dict[str, Any],
        run_dir: Path,
        name: str,
        run_id: str | None,
        say: Say,
    ):
        import wandb

        self._wandb, self.say, self.run = wandb, say, None
        mode = os.environ.get("WANDB_MODE", mode)
        if mode == "online" and not wandb_has_api_key():
            say("W&B: no API key found (WANDB_API_KEY or `wandb login`); logging offline.")
            mode = "offline"
        timeout = {} if "WANDB_INIT_TIMEOUT" in os.environ else {"init_timeout": WANDB_INIT_TIMEOUT_S}
        for attempt in dict.fromkeys((mode, "offline")):
            if attempt == "disabled":
                break
            try:
                self.run = wandb.init(
                    project=project,
                    entity=entity,
                    config=config,
                    dir=str(run_dir),
                    name=name,
                    id=run_id,
                    resume="allow" if run_id else None,
                    mode=attempt,
                    settings=wandb.Settings(silent=True, console="off", **timeout),
                )
                break
            except Exception as err:  # noqa: BLE001 - any W&B failure must leave training running
                say(f"W&B: init in {attempt} mode failed ({type(err).__name__}: {err}).")
        if self.run is None:
            if mode != "disabled":
                say("W&B: switched off for this run.")
            return
        self.mode = attempt
        if attempt == "offline":
            say(f"W&B: offline run; upload it later with `wandb sync {Path(self.run.dir).parent}`.")

    @property
    def run_id(self) -> str | None:
        return self.run.id if self.run is not None else None

    def log(self, step: int, metrics: dict[str, float]) -> None:
        if self.run is not None:
            self._guard(lambda: self.run.log(metrics, step=step))

    def log_samples(self, step: int, rows: list[dict[str, Any]]) -> None:
        if self.run is not None and rows:
            columns = list(rows[0])
            table = self._wandb.Table(
                columns=["step", *columns], data=[[step, *(r[c] for c in columns)] for r in rows]
            )
            self._guard(lambda: self.run.log({WANDB_SAMPLES_KEY: table}, step=step))

    def close(self, status: str) -> None:
        if self.run is not None:
            self._guard(lambda: self.run.finish(exit_code=0 if status == "finished" else 1))
            self.run = None

    def _guard(self, call: Callable[[], Any]) -> None:
        try:
            call()
        except Exception as err:  # noqa: BLE001
            self.say(f"W&B: {type(err).__name__}: {err}; W&B logging switched off, training continues.")
            self.run = None


class MetricsLogger:
    """Fans each step's metrics out to the sinks, stamping wall time since the run started."""

    def __init__(self, sinks: list[Sink], start_wall: float = 0.0):
        self.sinks = sinks
        self._t0 = time.perf_counter() - start_wall

    @property
    def wall_time(self) -> float:
        return time.perf_counter() - self._t0

    def log(self, step: int, metrics: dict[str, float]) -> None:
        stamped = {"wall_time_s": round(self.wall_time, 3), **metrics}
        for sink in self.sinks:
            sink.log(step, stamped)

    def log_samples(self, step: int, rows: list[dict[str, Any]]) -> None:
        for sink in self.sinks:
            sink.log_samples(step, rows)

    def close(self, status: str) -> None:
        for sink in self.sinks:
            sink.close(status)


def open_sinks(
    logging: Logging,
    run_dir: RunDir,
    *,
    total_steps: int,
    start_step: int,
    resume_step: int | None,
    config: dict[str, Any],
    wandb_id: str | None,
    say: Say,
) -> list[Sink]:
    """The sinks the recipe's `logging` asks for, writing into `run_dir`. On resume
    (`resume_step`: the checkpoint's step, -1 without one) the logs are cut back to that step;
    W&B continues the run `wandb_id`, and logs the resolved recipe `config`."""
    sinks: list[Sink] = []
    if logging.console.enabled:
        sinks.append(
            ConsoleSink(total_steps, start_step=start_step, table_every=logging.console.table_every_steps)
        )
    if logging.jsonl:
        sinks.append(JsonlSink(run_dir.metrics_file, resume_step=resume_step))
    if logging.samples_every_steps:
        sinks.append(SamplesSink(run_dir.samples_file, resume_step=resume_step))
    if logging.wandb.enabled:
        sinks.append(
            WandbSink(
                project=logging.wandb.project,
                entity=logging.wandb.entity,
                mode=logging.wandb.mode,
                config=config,
                run_dir=run_dir.path,
                name=run_dir.path.name,
                run_id=wandb_id,
                say=say,
            )
        )
    return sinks


def wandb_run_id(sinks: list[Sink]) -> str | None:
    """The id of the W&B run the sinks log to, if one does."""
    return next((s.run_id for s in sinks if isinstance(s, WandbSink)), None)
