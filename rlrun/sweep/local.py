"""Running a sweep's runs on this machine: several `rlrun train` processes at once, the CPU threads
split between them and one GPU each when there are GPUs.

Each run is its own process (`python -m rlrun train ...`, the entry `accelerate launch`
uses too), in its own session so that a Ctrl-C reaches it once, through this executor: the
executor forwards SIGINT/SIGTERM/SIGHUP as one SIGINT (the trainer then finishes its step, saves
a checkpoint and exits "interrupted"; a second signal stops it at once), waits for the runs and
starts no new ones. The run's lock is passed to its process, so a run whose sweep was killed
keeps its lock until it ends too.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass
from typing import Any

from rlrun import interrupt
from rlrun.facts.launched import CPU_THREADS_SHARE
from rlrun.sweep.plan import RunPlan, run_lock

POLL_S = 0.2
ENTRY = [sys.executable, "-m", "rlrun"]  # the rlrun CLI (rlrun/__main__.py)


@dataclass(frozen=True)
class Slots:
    """How the machine is shared: `concurrent` runs at once, each with `threads` CPU threads and,
    when `gpus` is not empty, one of those GPUs."""

    concurrent: int
    threads: int
    gpus: tuple[int, ...] = ()

    def environment(self, slot: int) -> dict[str, str]:
        env = {CPU_THREADS_SHARE: str(self.threads)}  # a cap: a small model's run keeps its one thread
        if self.gpus:
            env["CUDA_VISIBLE_DEVICES"] = str(self.gpus[slot])
        return env


def size_slots(runs: int, cpus: int, gpus: int, jobs: int | None = None) -> Slots:
    """With GPUs, one run per GPU; without, `jobs` runs (default: one per two CPU cores, the pace
    a small model trains well at), never more than there are runs. CPU cores are split evenly."""
    if gpus:
        concurrent = min(jobs or gpus, gpus, max(1, runs))
    else:
        concurrent = min(jobs or max(1, cpus // 2), max(1, runs))
    return Slots(concurrent, max(1, cpus // concurrent), tuple(range(concurrent)) if gpus else ())


def machine_slots(runs: int, jobs: int | None, use_gpus: bool) -> Slots:
    """`size_slots` for this machine (GPUs counted by torch, unless the runs are CPU-only)."""
    gpus = 0
    if use_gpus:
        import torch

        gpus = torch.cuda.device_count()
    return size_slots(runs, os.cpu_count() or 1, gpus, jobs)


@dataclass
class _Active:
    run: RunPlan
    process: subprocess.Popen
    slot: int
    stack: ExitStack  # the lock and the log file, released when the process ends


def run_local(
    runs: list[RunPlan], slots: Slots, say: Callable[[str], None], extra_env: dict[str, str] | None = None
) -> dict[str, int | None]:
    """Train `runs`, `slots.concurrent` at a time; returns each run's exit code (None: not
    started, because it was running elsewhere or the sweep was stopped)."""
    queue = list(runs)
    active: list[_Active] = []
    codes: dict[str, int | None] = {run.name: None for run in runs}
    stopping: list[int] = []

    def forward(signum: int, frame: Any) -> None:
        stopping.append(signum)
        say(f"signal {signal.Signals(signum).name}: stopping the runs (each saves a checkpoint)")
        for item in active:
            if item.process.poll() is None:
                item.process.send_signal(signal.SIGINT)

    handled = (*interrupt.STOP_SIGNALS, signal.SIGHUP)
    previous = {signum: signal.signal(signum, forward) for signum in handled}
    try:
        while (queue and not stopping) or active:
            free = sorted(set(range(slots.concurrent)) - {item.slot for item in active})
            while queue and free and not stopping:
                item = _start(queue.pop(0), free.pop(0), slots, extra_env or {}, say)
                if item is not None:
                    active.append(item)
            time.sleep(POLL_S)
            for item in [item for item in active if item.process.poll() is not None]:
                active.remove(item)
                item.stack.close()
                codes[item.run.name] = item.process.returncode
                say(f"{item.run.name}: {_outcome(item.process.returncode)}")
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    return codes


def _start(
    run: RunPlan, slot: int, slots: Slots, extra_env: dict[str, str], say: Callable[[str], None]
) -> _Active | None:
    stack = ExitStack()
    fd = stack.enter_context(run_lock(run))
    if fd is None:
        stack.close()
        say(f"{run.name}: another process is training it; skipped")
        return None
    log = stack.enter_context(open(run.log_file, "a"))  # noqa: SIM115  (closed with the stack)
    argv = run.argv()
    log.write(f"\n# rlrun {' '.join(argv)}\n")
    log.flush()
    env = {**os.environ, **slots.environment(slot), **extra_env}
    process = subprocess.Popen(
        [*ENTRY, *argv],
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=subprocess.STDOUT,
        env=env,
        pass_fds=(fd,),
        start_new_session=True,
    )
    say(f"{run.name}: {argv[0]} (log: {run.log_file})")
    return _Active(run, process, slot, stack)


def _outcome(code: int) -> str:
    return {0: "finished", 130: "interrupted (resume it by running the sweep again)"}.get(
        code, f"failed (exit code {code}; see its log)"
    )
