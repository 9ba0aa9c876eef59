"""Callbacks: code a Python program runs at named events of a run it trains (`rlrun.train`).

A callback is a `Callback` whose methods for the events it wants are overridden. Each gets the
run's `RunState` and, after a rollout or a step, what it produced; `state.stop(reason)` asks the
run to stop after the current step, through the run's one stop owner
(`rlrun.interrupt.StopRequests`): the run saves a checkpoint of that step and ends "interrupted",
so `rlrun.resume` continues it as after Ctrl-C. A callback that raises fails the run (meta.json
says "failed") with a `CallbackError` naming the callback and the event.

The rollout event is a registered stage (`stages/callbacks.py`, after "sample"), so it runs only
in the steps of a run trained with callbacks; the others are dispatched by `run.train`.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rlrun.interrupt import StopRequests

EVENTS = ("train_start", "rollout", "step_end", "train_end")  # in the order a run meets them


@dataclass
class RunState:
    """Where the run stands when an event fires."""

    run_dir: Path
    step: int  # the last step done (0 before the first)
    total_steps: int
    status: str | None = None  # at train_end: "finished" or "interrupted"
    stop_reason: str | None = None  # set by `stop`
    _stops: StopRequests | None = field(default=None, repr=False)

    def stop(self, reason: str) -> None:
        """Stop the run after the current step (the step finishes and is checkpointed)."""
        self.stop_reason = reason
        if self._stops is not None:
            self._stops.request(reason)


@dataclass(frozen=True)
class Rollout:
    """A step's scored rollouts, before the step trains on them: `rollout.n` completions of each
    prompt, prompt-major (this process's share in a multi-process run)."""

    step: int
    prompts: list[str]  # each completion's prompt
    completions: list[str]
    rewards: list[float]  # after overlong shaping: what the advantages are computed from


class Callback:
    """Override the events you need; the others do nothing."""

    def on_train_start(self, state: RunState) -> None:
        """Once the models are loaded (resumed from the checkpoint when resuming), before step 1."""

    def on_rollout(self, state: RunState, rollout: Rollout) -> None:
        """Each step, once its responses are sampled and scored."""

    def on_step_end(self, state: RunState, metrics: dict[str, float]) -> None:
        """After each step is logged (and checkpointed, when one is due), with its metrics (metrics.jsonl's row
        without `step` and the clock)."""

    def on_train_end(self, state: RunState) -> None:
        """When the run finished or was stopped (`state.status`), after its end is recorded (a raise
        here reaches the caller; the record stays as the run ended)."""


class CallbackError(RuntimeError):
    """A callback raised: the run failed; the message names the callback and the event."""


class Callbacks:
    """The callbacks of one run, and the state they see."""

    def __init__(self, callbacks: Sequence[Callback]):
        for callback in callbacks:
            if not isinstance(callback, Callback):
                raise TypeError(f"a callback is a rlrun.Callback, not a {type(callback).__name__}")
        self.callbacks = list(callbacks)
        self.state = RunState(Path(), 0, 0)  # the run's, once it has started (`run.train`)

    def dispatch(self, event: str, *args: Any) -> None:
        """Call each callback's `on_<event>`; whatever one raises becomes a CallbackError."""
        for callback in self.callbacks:
            try:
                getattr(callback, f"on_{event}")(self.state, *args)
            except KeyboardInterrupt:
                raise
            except Exception as exc:
                name = type(callback).__qualname__
                raise CallbackError(
                    f"callback {name} raised at {event}: {type(exc).__name__}: {exc}"
                ) from exc


_in_force: list[Callbacks] = []  # the callbacks of the run training now (innermost last)


@contextmanager
def in_force(callbacks: Callbacks) -> Iterator[None]:
    """The stages see `callbacks` (`current`) while the block runs."""
    _in_force.append(callbacks)
    try:
        yield
    finally:
        _in_force.remove(callbacks)


def current() -> Callbacks | None:
    """The callbacks of the run training now, or None (a run without any, the command line's)."""
    return _in_force[-1] if _in_force and _in_force[-1].callbacks else None
