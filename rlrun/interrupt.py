"""Ctrl-C before a run has started. The interrupt is raised as KeyboardInterrupt (so a long
import stops at once) and also remembered: some libraries turn an exception raised inside their
imports into another error or swallow it (transformers' lazy modules), and the remembered
request still stops the command before it trains. Imports nothing: `rlrun.__main__` installs it first."""

from __future__ import annotations

import signal
from typing import Any

_requested = False


def _on_sigint(signum: int, frame: Any) -> None:
    global _requested
    _requested = True
    raise KeyboardInterrupt


def install() -> None:
    """Handle Ctrl-C as above until a run installs its own handler (`Run.supervise`)."""
    signal.signal(signal.SIGINT, _on_sigint)


def requested() -> bool:
    """Whether Ctrl-C was pressed since `install`, even if the KeyboardInterrupt got lost."""
    return _requested
