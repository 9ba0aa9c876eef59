"""Stop signals: Ctrl-C (SIGINT), and SIGTERM and SIGUSR1, which schedulers send (timeouts, SLURM,
Kubernetes). The one owner of what they mean, before, during and after a run.

Before a run has started, a stop signal is raised as KeyboardInterrupt (so a long import stops at
once) and also remembered: some libraries turn an exception raised inside their imports into
another error or swallow it (transformers' lazy modules), and the remembered request still stops
the command before it trains.

While a run trains (`StopRequests.listening`), the first signal asks it to stop after the current
step, and every process agrees on that step (`StopRequests.agree`); a second signal stops at once.

Once a run has recorded how it ended, the process only has to exit: a late signal is ignored, so
it cannot turn that outcome into a traceback or another exit status. Imports only the standard
library (torch inside `agree`, by when a run has loaded it): `rlrun.__main__` installs it first.

A KeyboardInterrupt raised where Python cannot pass it on (a weakref callback, `__del__`, an
import lock's clean-up) is "ignored" and printed with its traceback; the stop it stands for is
remembered either way, so `install` drops that print.
"""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGUSR1)  # each asks for a clean stop
INTERRUPTED = 130  # the exit code of a command a stop signal ended (the shell's, for Ctrl-C)
# The same signal again this soon is one request delivered twice, not the second that stops at
# once: SLURM signals every process of a job step. The processes of a multi-process run also get
# each signal from the rlrun command, when it is next scheduled (a second or more later on a
# loaded machine); it passes a second request on as another stop signal (`launch.run_launcher`).
DUPLICATE_SIGNAL_S = 0.5
DUPLICATE_SIGNAL_S_SEVERAL_PROCESSES = 10.0

_requested = False
_run_ended = False
_stopped_at_once = False  # a run's second signal was raised (`StopRequests.at_once`)
_report_unraisable = sys.unraisablehook  # what reports every other unraisable exception


def _on_stop_signal(signum: int, frame: Any) -> None:
    global _requested
    if _run_ended:
        return
    _requested = True
    raise KeyboardInterrupt


def install() -> None:
    """Handle the stop signals as above until a run listens to them itself, and keep their lost
    KeyboardInterrupts off the console."""
    global _report_unraisable
    for sig in STOP_SIGNALS:
        signal.signal(sig, _on_stop_signal)
    if sys.unraisablehook is not _unraisable:
        _report_unraisable, sys.unraisablehook = sys.unraisablehook, _unraisable


def _unraisable(unraisable: Any) -> None:
    """Drop a stop signal's KeyboardInterrupt that Python could not raise (a Ctrl-C during
    start-up seen as `Exception ignored in: <function _get_module_lock.<locals>.cb>` and a
    traceback): before a run it is remembered (`requested`), during one the run still stops after
    the step (`StopRequests.requested`). Anything else is reported as before."""
    if issubclass(unraisable.exc_type, KeyboardInterrupt) and (_requested or _stopped_at_once):
        return
    _report_unraisable(unraisable)


def requested() -> bool:
    """Whether a stop signal came since `install`, even if its KeyboardInterrupt got lost."""
    return _requested


def run_ended() -> None:
    """The run is recording how it ended (`StopRequests.end`): from now on no signal counts."""
    global _run_ended
    _run_ended = True


def ignore_until_exit() -> None:
    """Ignore the stop signals for good: the command's exit status is decided. Python resets its
    own handlers to the default (death by the signal) while it tears down, which takes a second
    or more once torch is loaded; an ignored signal stays ignored."""
    if threading.current_thread() is threading.main_thread():
        for sig in STOP_SIGNALS:
            signal.signal(sig, signal.SIG_IGN)


class StopRequests:
    """The stop signals one training process takes while its run trains.

    The first asks to stop after the current step (`requested`); the processes of the run agree
    on it after each step (`agree`), so they all stop after the same one. A second signal stops
    at once (KeyboardInterrupt): the half-done step is lost. Once the run is recording its end
    (`end`), no signal counts. `say` announces the first (the main process's console), or None.
    """

    def __init__(self, *, processes: int = 1, device: Any = None, say: Callable[[str], None] | None = None):
        self.processes, self.device, self.say = processes, device, say
        self.requested = False  # a stop signal reached this process
        self.stopping = False  # every process stops after the step just done (`agree`)
        self.first_signal: int | None = None
        # A second signal stopped the run at once. Its KeyboardInterrupt may reach the run as
        # another error: torch's checkpoint writer, interrupted inside its Python write, raises
        # RuntimeError("unexpected pos ...") instead.
        self.at_once = False
        self.ending = False  # the end is being recorded: a further signal must not cut it short

    @contextmanager
    def listening(self) -> Iterator[None]:
        """Take the stop signals (and SIGALRM, for the duplicate window) while the block runs,
        then give them back to their previous handlers. Only the main thread can."""
        previous = {}
        if threading.current_thread() is threading.main_thread():
            previous = {sig: signal.signal(sig, self._on_stop_signal) for sig in STOP_SIGNALS}
            previous[signal.SIGALRM] = signal.signal(signal.SIGALRM, self._hear_the_first_again)
        try:
            yield
        finally:
            if previous:
                signal.setitimer(signal.ITIMER_REAL, 0)
            for sig, handler in previous.items():
                signal.signal(sig, handler)

    def _on_stop_signal(self, signum: int, frame: Any) -> None:
        global _stopped_at_once
        if self.ending:
            return
        if self.first_signal is not None:
            self.at_once = _stopped_at_once = True
            raise KeyboardInterrupt
        self.first_signal = signum
        self.requested = True
        # Its duplicate is dropped by the kernel on arrival for DUPLICATE_SIGNAL_S. A handler
        # comparing times would run only when this thread is back in Python: after a collective
        # that waits for a slower process, say, it would take a duplicate for a second request.
        # Not while user code (a reward's timeout) holds SIGALRM: the alarm is its.
        if signal.getsignal(signal.SIGALRM) == self._hear_the_first_again:
            signal.signal(signum, signal.SIG_IGN)
            several = self.processes > 1
            signal.setitimer(
                signal.ITIMER_REAL, DUPLICATE_SIGNAL_S_SEVERAL_PROCESSES if several else DUPLICATE_SIGNAL_S
            )
        if self.say is not None:
            name = "Ctrl-C" if signum == signal.SIGINT else signal.Signals(signum).name
            self.say(f"{name}: finishing this step, then saving a checkpoint (Ctrl-C again stops at once).")

    def request(self, reason: str) -> None:
        """Stop after the current step, as a first stop signal would (a callback asking, from
        Python): every process agrees on the step, and a later signal still stops at once."""
        if self.ending or self.requested:
            return
        self.requested = True
        if self.say is not None:
            self.say(f"Stopping after this step: {reason}.")

    def _hear_the_first_again(self, signum: int, frame: Any) -> None:
        """SIGALRM, DUPLICATE_SIGNAL_S after the first stop signal: that signal, sent again, is
        a second request from now on."""
        if self.first_signal is not None and not self.ending:
            signal.signal(self.first_signal, self._on_stop_signal)

    def agree(self) -> bool:
        """Whether the run stops after the step just done. Several processes decide together: a
        signal can reach one of them a step before another, and a process that stopped alone
        would leave the others waiting in their next collective operation for ever."""
        if self.processes == 1:
            self.stopping = self.requested
            return self.stopping
        import torch  # a multi-process run has loaded it long before; the CLI's start must not

        flag = torch.tensor([float(self.requested)], device=self.device)
        torch.distributed.all_reduce(flag, op=torch.distributed.ReduceOp.MAX)
        # Kept apart from `requested`: a signal handled while this process waited in the
        # collective, after its flag was read, is agreed on at the next step, not lost.
        self.stopping = bool(flag.item())
        return self.stopping

    def end(self) -> None:
        """The run is recording how it ended: signals arriving now or later are ignored."""
        self.ending = True
        run_ended()
