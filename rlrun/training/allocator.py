"""Keep freed host memory for reuse instead of handing it back to the kernel.

glibc serves large allocations (above a threshold that adapts upwards from 128 KiB) with fresh
`mmap`s and trims freed memory at the top of its heap. A training step frees and re-allocates
the same activation buffers every time, so by default each step faults every page of them in
again: on a small model on CPU that is thousands of page faults and a sizeable share of the
step. Fixing the two thresholds makes the step reuse its memory (the same knobs as the
MALLOC_MMAP_THRESHOLD_ / MALLOC_TRIM_THRESHOLD_ environment variables, set from inside).
"""

from __future__ import annotations

import ctypes
import os
import platform

# mallopt(3) parameters
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD = 32 << 20  # glibc's largest (64-bit): only bigger blocks get their own mapping
TRIM_THRESHOLD = 1 << 30  # freed memory kept at the heap's top before any is returned

_USER_SETTINGS = ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "MALLOC_TOP_PAD_", "MALLOC_MMAP_MAX_")


def keep_freed_memory() -> bool:
    """Fix glibc's mmap and trim thresholds for this process; returns whether it did. Nothing
    changes off glibc, or when the user set any MALLOC_* knob (or preloaded another allocator)."""
    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return False
    if any(name in os.environ for name in _USER_SETTINGS) or "malloc" in os.environ.get("LD_PRELOAD", ""):
        return False
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:
        return False
    return bool(libc.mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(
        libc.mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD)
    )
