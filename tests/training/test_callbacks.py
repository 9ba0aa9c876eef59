"""Callbacks: each event calls every callback in order; a raise becomes a CallbackError naming
the callback and the event; a stop goes through the run's StopRequests."""

from pathlib import Path

import pytest

from rlrun.interrupt import StopRequests
from rlrun.training.callbacks import Callback, CallbackError, Callbacks, RunState, current, in_force


class Recorder(Callback):
    def __init__(self, calls: list, tag: str):
        self.calls, self.tag = calls, tag

    def on_step_end(self, state, metrics):
        self.calls.append((self.tag, state.step, metrics["loss"]))


class Broken(Callback):
    def on_train_start(self, state):
        raise ValueError("no such column")


def test_an_event_calls_each_callback_in_order_and_the_others_do_nothing():
    calls: list = []
    hooks = Callbacks([Recorder(calls, "a"), Recorder(calls, "b")])
    hooks.state = RunState(Path("r"), 3, 10)
    hooks.dispatch("step_end", {"loss": 0.5})
    hooks.dispatch("train_start")  # not overridden: nothing happens
    assert calls == [("a", 3, 0.5), ("b", 3, 0.5)]


def test_a_raise_names_the_callback_and_the_event():
    hooks = Callbacks([Broken()])
    with pytest.raises(
        CallbackError, match="callback Broken raised at train_start: ValueError: no such column"
    ):
        hooks.dispatch("train_start")


def test_only_callbacks_are_taken():
    with pytest.raises(TypeError, match="a callback is a rlrun.Callback, not a function"):
        Callbacks([lambda state: None])


def test_stop_asks_the_run_s_stop_owner():
    stops = StopRequests()
    state = RunState(Path("r"), 2, 10, _stops=stops)
    state.stop("plateau")
    assert state.stop_reason == "plateau" and stops.requested and stops.agree()


def test_the_callbacks_in_force_are_the_innermost_run_s_and_none_without_any():
    outer, inner, empty = Callbacks([Callback()]), Callbacks([Callback()]), Callbacks([])
    assert current() is None
    with in_force(outer):
        with in_force(inner):
            assert current() is inner
        assert current() is outer
        with in_force(empty):
            assert current() is None  # a run without callbacks does not run the rollout stage
    assert current() is None
