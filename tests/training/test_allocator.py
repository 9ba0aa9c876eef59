import os
import platform
import subprocess
import sys

import pytest

pytestmark = pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="glibc's allocator only")

# A fresh process allocates and frees one 30 MiB tensor; glibc's own statistics (mallinfo2)
# say whether the block got a mapping of its own and whether its memory is kept after the free.
PROBE = """
import ctypes, sys, torch
from rlrun.training.allocator import keep_freed_memory

class MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in
                "arena ordblks smblks hblks hblkhd usmblks fsmblks uordblks fordblks keepcost".split()]

libc = ctypes.CDLL("libc.so.6")
libc.mallinfo2.restype = MallInfo2
tuned = keep_freed_memory() if sys.argv[1] == "tune" else False
size = 30 << 20
mapped_before = libc.mallinfo2().hblkhd
block = torch.empty(size, dtype=torch.uint8)
own_mapping = libc.mallinfo2().hblkhd - mapped_before >= size
del block
kept = libc.mallinfo2().fordblks >= size
print(tuned, own_mapping, kept)
"""


def _probe(mode: str, **env: str) -> list[str]:
    result = subprocess.run(
        [sys.executable, "-c", PROBE, mode],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, **env},
    )
    return result.stdout.split()


def test_big_buffers_come_from_the_heap_and_stay_there_after_a_free():
    # glibc by default maps a 30 MiB block on its own and unmaps it on free: the next step's
    # block faults every page in again. Tuned, it comes from the heap and its pages are kept.
    assert _probe("off") == ["False", "True", "False"]
    assert _probe("tune") == ["True", "False", "True"]


def test_a_users_malloc_settings_are_left_alone():
    assert _probe("tune", MALLOC_TRIM_THRESHOLD_="0")[0] == "False"
