"""Calling user code that must not break a run: a tool, an environment's reset/step/get_reward.

`guarded_call` runs a callable under a wall-clock limit and turns whatever it does wrong into
an `Outcome` with an error kind instead of an exception. The limit is a SIGALRM timer
(`setitimer`), the one way to stop Python code running in this process: it interrupts
`time.sleep`, loops and blocking reads, but not one long call inside a C extension (the
built-in tools bound their own work; `rlrun:python` runs in a separate process it kills), and
not code that catches BaseException itself. A signal handler can only run on the main thread,
so a limit is refused elsewhere (`TimeLimitError`) rather than silently not applied.
"""

from __future__ import annotations

import asyncio
import inspect
import math
import numbers
import signal
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

# Error kinds (the counters' keys)
RAISED = "raised"  # the callable raised an exception
TIMEOUT = "timeout"  # it ran past its limit and was interrupted


class TimeLimitError(RuntimeError):
    """A time limit asked for where it cannot be enforced (not on the main thread)."""


class _Expired(BaseException):
    """Raised into the guarded code by the timer. A BaseException, so that a tool's own
    `except Exception` does not swallow it."""


@dataclass(frozen=True)
class Outcome:
    """What a guarded call did: its `value`, or an `error` kind with a `message`; `seconds` it took."""

    value: Any = None
    error: str | None = None
    message: str = ""
    seconds: float = 0.0


def check_time_limits_here() -> None:
    """Refuse to start episodes where their time limits cannot work (a signal handler runs only
    on the main thread of the main interpreter)."""
    if threading.current_thread() is not threading.main_thread():
        raise TimeLimitError(
            "tool and environment time limits are SIGALRM timers, which only the main thread receives; "
            "run episodes on the main thread"
        )


@contextmanager
def time_limit(seconds: float) -> Iterator[None]:
    """Interrupt the body with `_Expired` after `seconds` (wall clock). Whatever timer and
    handler were set before are put back afterwards, the time already elapsed on that timer
    deducted, so an outer limit (a reward's) still fires when it should."""
    check_time_limits_here()
    previous_handler = signal.getsignal(signal.SIGALRM)
    previous_delay, previous_interval = signal.getitimer(signal.ITIMER_REAL)
    started = time.monotonic()

    def expire(signum: int, frame: Any) -> None:
        raise _Expired

    signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous_handler)
        if previous_delay > 0:
            left = previous_delay - (time.monotonic() - started)
            signal.setitimer(signal.ITIMER_REAL, max(left, 1e-6), previous_interval)


def guarded_call(
    fn: Callable[..., Any],
    args: Sequence[Any] = (),
    kwargs: Mapping[str, Any] | None = None,
    *,
    timeout_s: float,
) -> Outcome:
    """Call ``fn(*args, **kwargs)`` (awaited when it is a coroutine function) within `timeout_s`
    seconds. Never raises but for KeyboardInterrupt and SystemExit of the interpreter itself."""
    started = time.monotonic()
    try:
        with time_limit(timeout_s):
            value = fn(*args, **(kwargs or {}))
            if inspect.isawaitable(value):
                value = asyncio.run(_awaited(value))
    except _Expired:
        return Outcome(error=TIMEOUT, message=f"no result within {timeout_s:g} s", seconds=_since(started))
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # noqa: BLE001 (user code: anything it raises is an outcome, SystemExit included)
        return Outcome(error=RAISED, message=describe_exception(exc), seconds=_since(started))
    return Outcome(value=value, seconds=_since(started))


async def _awaited(awaitable: Any) -> Any:
    return await awaitable


def describe_exception(exc: BaseException) -> str:
    """`ValueError: bad input`, or the type alone when the message is empty."""
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def as_number(value: Any) -> float | None:
    """A finite real number (numpy's included, bool not) as float, else None."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        return None
    number = float(value)
    return number if math.isfinite(number) else None


def _since(started: float) -> float:
    return time.monotonic() - started
