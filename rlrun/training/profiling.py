"""Where a step's time goes: `Timer` for the per-phase seconds every step logs (`timing_s/*`),
and `rlrun train --profile`, a torch.profiler record of a few steps.

The profiler skips the first step (allocations, lazy imports, kernel selection) and records
the next `PROFILED_STEPS`. The loop's phases (gen, ref, update_actor, ...) appear in its trace
as named ranges, since `Timer` marks them with `record_function`.
"""

from __future__ import annotations

import time
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
    cuda = torch.cuda.is_available()
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])

    def write(prof: profile) -> None:
        prof.export_chrome_trace(str(out_dir / f"trace{suffix}.json"))
        sort_by = "self_cuda_time_total" if cuda else "self_cpu_time_total"
        table = prof.key_averages().table(sort_by=sort_by, row_limit=40)
        (out_dir / f"ops{suffix}.txt").write_text(table + "\n")

    with profile(
        activities=activities,
        schedule=schedule(wait=0, warmup=1, active=PROFILED_STEPS, repeat=1),
        on_trace_ready=write,
        record_shapes=True,
        profile_memory=True,
    ) as prof:
        yield prof.step
