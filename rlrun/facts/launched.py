"""Where this process sits in a launched job, from the variables its launcher (torchrun's agent,
a local sweep) gives the processes it starts. Reads the environment only (no torch), so the run
records can use it."""

from __future__ import annotations

import os

# The CPU threads a local sweep gives each of its runs (its share of the cores): a cap the run
# applies where it would otherwise take every core, not a choice that replaces its own.
CPU_THREADS_SHARE = "RLRUN_CPU_THREADS"
# Set in the processes that `rlrun.launch.relaunch_with_accelerate` starts: they train instead of
# launching again.
RELAUNCH_ENV = "RLRUN_LAUNCHED"


def is_relaunched() -> bool:
    """True inside a process started by `rlrun.launch.relaunch_with_accelerate`."""
    return os.environ.get(RELAUNCH_ENV) == "1"


def launched_machine() -> tuple[int, int]:
    """(this machine's rank, the machines in the job) as torchrun's agent tells the processes it
    starts (`GROUP_RANK`, `GROUP_WORLD_SIZE`: one agent per machine); (0, 1) outside a launch.
    Not derived from `LOCAL_WORLD_SIZE`: vLLM's CPU platform overwrites that with its
    tensor-parallel size."""
    return int(os.environ.get("GROUP_RANK", "0")), int(os.environ.get("GROUP_WORLD_SIZE", "1"))
