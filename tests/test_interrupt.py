"""Stop signals outside a run: raised and remembered before it, ignored after it."""

from __future__ import annotations

import signal

import pytest

from rlrun import interrupt


@pytest.fixture
def fresh(monkeypatch):
    monkeypatch.setattr(interrupt, "_requested", False)
    monkeypatch.setattr(interrupt, "_run_ended", False)
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


def test_a_signal_after_the_run_ended_is_ignored(fresh):
    interrupt.install()
    interrupt.run_ended()
    signal.getsignal(signal.SIGTERM)(signal.SIGTERM, None)  # returns: no KeyboardInterrupt
    assert not interrupt.requested()


def test_ignore_until_exit_leaves_no_python_handler_to_reset(fresh):
    interrupt.install()
    interrupt.ignore_until_exit()
    assert all(signal.getsignal(sig) is signal.SIG_IGN for sig in interrupt.STOP_SIGNALS)
