"""Tools for the episode tests, imported by path as `tests.agents.tools_fixture:<name>`: one that
records what it was called with, and ones that misbehave in every way a tool can."""

from __future__ import annotations

import time

SEEN: list[tuple[int, int]] = []


def record(a: int, b: int = 0) -> str:
    """Add two integers and remember the call.

    Args:
        a: The first.
        b: The second.
    """
    SEEN.append((a, b))
    return str(a + b)


def raises() -> str:
    """Fails."""
    raise RuntimeError("broken")


def hangs() -> str:
    """Never answers."""
    time.sleep(60)
    return ""


def returns_bytes() -> str:
    """Returns bytes."""
    return b"raw"  # type: ignore[return-value]


def returns_megabytes() -> str:
    """Returns far too much."""
    return "y" * 3_000_000
