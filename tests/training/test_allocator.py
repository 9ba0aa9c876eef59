import os
import platform
import subprocess
import sys

import pytest

pytestmark = pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="glibc's allocator only")

# Twenty forward/backward passes of a small MLP after five warm-up ones; print the page faults they took.
PROBE = """
import resource, sys, torch
from rlrun.training.allocator import keep_freed_memory
tuned = keep_freed_memory() if sys.argv[1] == "tune" else False
mlp = torch.nn.Sequential(torch.nn.Linear(128, 512), torch.nn.SiLU(), torch.nn.Linear(512, 128))
x = torch.randn(512, 128)
for i in range(25):
    if i == 5:
        before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    mlp(x).square().mean().backward()
print(tuned, resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


def _probe(mode: str, **env: str) -> tuple[str, int]:
    out = subprocess.run(
        [sys.executable, "-c", PROBE, mode],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "OMP_NUM_THREADS": "1", **env},
    ).stdout.split()
    return out[0], int(out[1])


def test_freed_blocks_are_reused_instead_of_faulted_in_again():
    tuned, faults = _probe("tune")
    untuned, default_faults = _probe("off")
    assert (tuned, untuned) == ("True", "False")
    # By default glibc maps and unmaps the 1 MiB activation buffers, faulting them in every pass.
    assert default_faults > 1000 and faults < default_faults / 3


def test_a_users_malloc_settings_are_left_alone():
    assert _probe("tune", MALLOC_TRIM_THRESHOLD_="0")[0] == "False"
