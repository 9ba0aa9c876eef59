"""Stop signals outside a run: Ctrl-C (SIGINT), and SIGTERM and SIGUSR1, which schedulers send
(timeouts, SLURM, Kubernetes). A run in progress handles them itself (`Run.supervise`).

Before a run has started, a stop signal is raised as KeyboardInterrupt (so a long import stops at
once) and also remembered: some libraries turn an exception raised inside their imports into
another error or swallow it (transformers' lazy modules), and the remembered request still stops
the command before it trains. Once a run has recorded how it ended, the process only has to exit:
a late signal is ignored, so it cannot turn that outcome into a traceback or another exit status.
Imports nothing: `rlrun.__main__` installs it first.
"""

from __future__ import annotations

import signal
import threading
from typing import Any

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGUSR1)  # each asks for a clean stop
INTERRUPTED = 130  # the exit code of a command a stop signal ended (the shell's, for Ctrl-C)

_requested = False
_run_ended = False


def _on_stop_signal(signum: int, frame: Any) -> None:
    global _requested
    if _run_ended:
        return
    _requested = True
    raise KeyboardInterrupt


def install() -> None:
    """Handle the stop signals as above until a run installs its own handler."""
    for sig in STOP_SIGNALS:
        signal.signal(sig, _on_stop_signal)


def requested() -> bool:
    """Whether a stop signal came since `install`, even if its KeyboardInterrupt got lost."""
    return _requested


def run_ended() -> None:
    """The run has written how it ended (`Run.close`): from now on the handler ignores signals."""
    global _run_ended
    _run_ended = True


def ignore_until_exit() -> None:
    """Ignore the stop signals for good: the command's exit status is decided. Python resets its
    own handlers to the default (death by the signal) while it tears down, which takes a second
    or more once torch is loaded; an ignored signal stays ignored."""
    if threading.current_thread() is threading.main_thread():
        for sig in STOP_SIGNALS:
            signal.signal(sig, signal.SIG_IGN)
