"""Where a step's time goes: `Timer` for the per-phase seconds every step logs (`timing_s/*`),
and `rlrun train --profile`, a torch.profiler record of a few steps.

The profiler skips the first step (allocations, lazy imports, kernel selection) and records
the next `PROFILED_STEPS`. The loop's phases (gen, ref, update_actor, ...) appear in its trace
as named ranges, since `Timer` marks them with `record_function`.
"""

from __future__ import annotations

import json
import re
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile, schedule

PROFILED_STEPS = 3


class Timer:
    """Seconds per phase of a step: `with timer("gen"): ...` (phases may repeat and add up)."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    @contextmanager
    def __call__(self, phase: str) -> Iterator[None]:
        start = time.perf_counter()
        try:
            with torch.profiler.record_function(phase):  # a named range in `rlrun train --profile` traces
                yield
        finally:
            self.seconds[phase] = self.seconds.get(phase, 0.0) + time.perf_counter() - start


@contextmanager
def profiled_steps(out_dir: Path | None, rank: int = 0) -> Iterator[Callable[[], None]]:
    """Yields `step_done`, to call after every training step. With `out_dir`, the steps are
    recorded and written there on exit (even when the run stops early): `trace[-rank<r>].json`
    (open it in Perfetto or chrome://tracing) and `ops[-rank<r>].txt` (operators by self time).
    Without `out_dir` it records nothing."""
    if out_dir is None:
        yield lambda: None
        return
    out_dir.mkdir(parents=True, exist_ok=True)
    suffix = f"-rank{rank}" if rank else ""
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if torch.cuda.is_available() else [])

    def write(prof: profile) -> None:
        trace = out_dir / f"trace{suffix}.json"
        prof.export_chrome_trace(str(trace))
        (out_dir / f"ops{suffix}.txt").write_text(ops_table(json.loads(trace.read_text())["traceEvents"]))

    with profile(
        activities=activities,
        schedule=schedule(wait=0, warmup=1, active=PROFILED_STEPS, repeat=1),
        on_trace_ready=write,
        record_shapes=True,
        profile_memory=True,
    ) as prof:
        yield prof.step


def ops_table(events: list[dict], rows: int = 40) -> str:
    """The `rows` operators and named ranges with the most self CPU time in a chrome trace's
    events, and (when the trace has them) the GPU kernels with the most GPU time. A range's
    self time is its duration less that of the ranges directly inside it on the same thread; its
    self memory, the bytes allocated less those freed while it is the innermost range. Self times
    and memory are those of torch's `key_averages()` (checked on a tiny-model trace), read from
    the exported trace: `key_averages()` first builds a Python object per event, which took a
    minute for three steps of the tiny model."""
    calls: dict[str, int] = defaultdict(int)
    self_us: dict[str, float] = defaultdict(float)
    total_us: dict[str, float] = defaultdict(float)
    self_bytes: dict[str, int] = defaultdict(int)
    kernel_us: dict[str, float] = defaultdict(float)
    kernel_calls: dict[str, int] = defaultdict(int)
    threads: dict[object, list[dict]] = defaultdict(list)
    for event in events:
        category = event.get("cat")
        timed = category in ("cpu_op", "user_annotation") and event.get("ph") == "X"
        if timed or (category == "cpu_instant_event" and "Bytes" in event.get("args", {})):
            threads[event["pid"], event["tid"]].append(event)
        elif category == "kernel":
            kernel_us[event["name"]] += event["dur"]
            kernel_calls[event["name"]] += 1
    for thread in threads.values():
        thread.sort(key=lambda e: (e["ts"], -e.get("dur", 0.0)))
        stack: list[tuple[str, float]] = []  # (name, end) of the ranges open at this moment
        for event in thread:
            while stack and stack[-1][1] <= event["ts"]:
                stack.pop()
            if event["ph"] != "X":  # a memory event: the innermost open range's
                if stack:
                    self_bytes[stack[-1][0]] += event["args"]["Bytes"]
                continue
            name = re.sub(r"^ProfilerStep#\d+$", "ProfilerStep*", event["name"])
            calls[name] += 1
            total_us[name] += event["dur"]
            self_us[name] += event["dur"]
            if stack:
                self_us[stack[-1][0]] -= event["dur"]
            stack.append((name, event["ts"] + event["dur"]))
    all_self = sum(self_us.values()) or 1.0
    lines = [
        f"{'name':<60} {'calls':>8} {'self CPU ms':>12} {'self %':>7} {'CPU total ms':>13} {'self MB':>9}"
    ]
    for name in sorted(self_us, key=self_us.__getitem__, reverse=True)[:rows]:
        lines.append(
            f"{name[:60]:<60} {calls[name]:>8} {self_us[name] / 1e3:>12.3f} "
            f"{100 * self_us[name] / all_self:>6.2f}% {total_us[name] / 1e3:>13.3f} {self_bytes[name] / 2**20:>9.2f}"
        )
    if kernel_us:
        lines += ["", f"{'GPU kernel':<60} {'calls':>8} {'GPU ms':>12}"]
        for name in sorted(kernel_us, key=kernel_us.__getitem__, reverse=True)[:rows]:
            lines.append(f"{name[:60]:<60} {kernel_calls[name]:>8} {kernel_us[name] / 1e3:>12.3f}")
    return "\n".join(lines) + "\n"
