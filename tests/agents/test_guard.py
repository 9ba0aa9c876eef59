"""Guarded calls: a time limit that interrupts, outer timers kept, errors as outcomes."""

import asyncio
import signal
import threading
import time

import pytest

from rlrun.agents.guard import RAISED, TIMEOUT, TimeLimitError, as_number, guarded_call, time_limit


def test_a_value_comes_back_with_its_time():
    outcome = guarded_call(lambda a, b=0: a + b, (2,), {"b": 3}, timeout_s=1)
    assert (outcome.value, outcome.error) == (5, None)
    assert 0 <= outcome.seconds < 1


def test_a_hang_is_stopped_at_its_limit_even_when_the_code_catches_exceptions():
    def stubborn() -> None:
        while True:
            try:
                time.sleep(10)
            except Exception:  # noqa: BLE001, S110 (what a careless tool does)
                pass

    started = time.monotonic()
    outcome = guarded_call(stubborn, timeout_s=0.2)
    assert outcome.error == TIMEOUT and outcome.message == "no result within 0.2 s"
    assert 0.2 <= time.monotonic() - started < 2


@pytest.mark.parametrize(
    ("error", "message"),
    [
        (ValueError("bad input"), "ValueError: bad input"),
        (KeyError, "KeyError"),
        (SystemExit(3), "SystemExit: 3"),
    ],
)
def test_what_the_code_raises_is_an_outcome(error, message):
    def raises():
        raise error

    outcome = guarded_call(raises, timeout_s=1)
    assert (outcome.error, outcome.message) == (RAISED, message)


def test_a_coroutine_function_is_awaited_and_limited():
    async def later(x: int) -> int:
        await asyncio.sleep(0.01)
        return x * 2

    async def forever() -> None:
        await asyncio.sleep(100)

    assert guarded_call(later, (21,), timeout_s=1).value == 42
    assert guarded_call(forever, timeout_s=0.2).error == TIMEOUT


def test_an_outer_timer_and_handler_survive_a_guarded_call():
    fired = []
    previous = signal.signal(signal.SIGALRM, lambda *_: fired.append(True))
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.5)
        guarded_call(time.sleep, (0.1,), timeout_s=1)
        left, _ = signal.getitimer(signal.ITIMER_REAL)
        assert 0.2 < left <= 0.4  # the outer timer kept running while the call took 0.1 s
        time.sleep(0.6)
        assert fired == [True]
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def test_a_limit_off_the_main_thread_is_refused_not_dropped():
    errors = []

    def run():
        try:
            with time_limit(1):
                pass
        except TimeLimitError as exc:
            errors.append(str(exc))

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    assert errors and "main thread" in errors[0]


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (1, 1.0),
        (0.5, 0.5),
        (True, None),
        ("1", None),
        (float("nan"), None),
        (float("inf"), None),
        (None, None),
    ],
)
def test_as_number(value, expected):
    assert as_number(value) == expected


def test_numpy_numbers_are_numbers():
    import numpy as np

    assert as_number(np.float32(0.25)) == 0.25 and as_number(np.int64(3)) == 3.0
