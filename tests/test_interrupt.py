"""Stop signals: raised and remembered before a run, ignored after it; while it trains, the first
asks to stop after the step, a second stops at once and a duplicate counts once (the run's side of
it, the checkpoint and the status: tests/training/test_run.py)."""

from __future__ import annotations

import os
import signal
import sys
import weakref

import pytest

from rlrun import interrupt


@pytest.fixture
def fresh(monkeypatch):
    monkeypatch.setattr(interrupt, "_requested", False)
    monkeypatch.setattr(interrupt, "_run_ended", False)
    monkeypatch.setattr(interrupt, "_stopped_at_once", False)
    monkeypatch.setattr(sys, "unraisablehook", sys.unraisablehook)  # install's, undone
    monkeypatch.setattr(interrupt, "_report_unraisable", interrupt._report_unraisable)
    saved = {sig: signal.getsignal(sig) for sig in interrupt.STOP_SIGNALS}
    yield
    for sig, handler in saved.items():
        signal.signal(sig, handler)


def test_every_stop_signal_before_a_run_raises_and_is_remembered(fresh):
    interrupt.install()
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGUSR1):
        with pytest.raises(KeyboardInterrupt):
            signal.getsignal(sig)(sig, None)
    assert interrupt.requested()


def _reported_from_a_weakref_callback(monkeypatch, run_callback) -> list[type]:
    """The unraisable exceptions reported (their types) when a weakref callback runs
    ``run_callback``: Python cannot raise from one, so it reports what it raises instead."""
    reported = []
    monkeypatch.setattr(sys, "unraisablehook", lambda unraisable: reported.append(unraisable.exc_type))
    interrupt.install()

    class Thing:
        pass

    thing = Thing()
    ref = weakref.ref(thing, lambda _: run_callback())  # noqa: F841 - kept until `thing` goes
    del thing
    return reported


def test_a_stop_signal_python_cannot_raise_is_remembered_and_not_reported(fresh, monkeypatch):
    # A Ctrl-C during start-up that lands in an import lock's weakref callback (seen in CI)
    reported = _reported_from_a_weakref_callback(
        monkeypatch, lambda: signal.getsignal(signal.SIGINT)(signal.SIGINT, None)
    )
    assert reported == [] and interrupt.requested()


def test_other_unraisable_exceptions_are_reported_as_before(fresh, monkeypatch):
    def interrupted_by_code():  # not by a stop signal
        raise KeyboardInterrupt

    assert _reported_from_a_weakref_callback(monkeypatch, lambda: 1 / 0) == [ZeroDivisionError]
    assert _reported_from_a_weakref_callback(monkeypatch, interrupted_by_code) == [KeyboardInterrupt]


def test_a_second_signal_python_cannot_raise_is_not_reported_and_the_run_still_stops(fresh, monkeypatch):
    stops = interrupt.StopRequests()
    with stops.listening():
        os.kill(os.getpid(), signal.SIGTERM)
        reported = _reported_from_a_weakref_callback(
            monkeypatch, lambda: stops._on_stop_signal(signal.SIGINT, None)
        )
    assert reported == [] and stops.at_once and stops.agree()


def test_a_signal_after_the_run_ended_is_ignored(fresh):
    interrupt.install()
    interrupt.run_ended()
    signal.getsignal(signal.SIGTERM)(signal.SIGTERM, None)  # returns: no KeyboardInterrupt
    assert not interrupt.requested()


def test_ignore_until_exit_leaves_no_python_handler_to_reset(fresh):
    interrupt.install()
    interrupt.ignore_until_exit()
    assert all(signal.getsignal(sig) is signal.SIG_IGN for sig in interrupt.STOP_SIGNALS)


# --- while a run trains ------------------------------------------------------------------------


def test_a_run_listens_to_the_stop_signals_only_while_it_trains(fresh):
    interrupt.install()
    before = {sig: signal.getsignal(sig) for sig in (*interrupt.STOP_SIGNALS, signal.SIGALRM)}
    said = []
    stops = interrupt.StopRequests(say=said.append)
    with stops.listening():
        os.kill(os.getpid(), signal.SIGUSR1)
        assert stops.requested and not stops.stopping and stops.first_signal == signal.SIGUSR1
        assert signal.getsignal(signal.SIGUSR1) is signal.SIG_IGN  # its duplicate, for a moment
        assert stops.agree() and stops.stopping
    assert said == ["SIGUSR1: finishing this step, then saving a checkpoint (Ctrl-C again stops at once)."]
    assert {sig: signal.getsignal(sig) for sig in before} == before
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)


def test_a_second_signal_stops_at_once_unless_the_end_is_being_recorded(fresh):
    stops = interrupt.StopRequests()  # a process other than the main one: it says nothing
    with stops.listening():
        os.kill(os.getpid(), signal.SIGTERM)
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGINT)
        stops.end()
        os.kill(os.getpid(), signal.SIGINT)  # ignored: the run records how it ended
    assert interrupt._run_ended  # and the handler outside a run ignores signals from now on


def test_several_processes_wait_longer_for_a_duplicate(fresh, monkeypatch):
    windows = []
    monkeypatch.setattr(signal, "setitimer", lambda which, seconds: windows.append(seconds))
    for processes in (1, 2):
        stops = interrupt.StopRequests(processes=processes)
        with stops.listening():
            os.kill(os.getpid(), signal.SIGTERM)
    assert windows == [0.5, 0, 10.0, 0]  # armed on the first signal, disarmed on leaving


def test_a_request_from_code_stops_after_the_step_like_a_first_signal(fresh):
    said = []
    stops = interrupt.StopRequests(say=said.append)
    assert not stops.agree()
    stops.request("the reward is high enough")
    stops.request("asked twice")  # one stop: said once
    assert stops.agree() and stops.stopping
    assert said == ["Stopping after this step: the reward is high enough."]
    ended = interrupt.StopRequests(say=said.append)
    ended.end()
    ended.request("too late")  # the run is recording its end
    assert not ended.requested and len(said) == 1
