"""Starting a run: the run directory it claims is the one it writes."""

from __future__ import annotations

import itertools
from datetime import datetime, timedelta, timezone
from types import SimpleNamespace

import torch

import rlrun.training.run as run_module
from rlrun.recipes import load_recipe
from rlrun.training.run import RunOptions, cpu_threads_for, slow_step_note, start_run


class _TickingClock:
    """A `datetime` whose `now()` moves one second on every call (a slow model load)."""

    ticks = itertools.count()

    @classmethod
    def now(cls, tz=None):
        return datetime(2026, 11, 30, 9, 49, 6, tzinfo=timezone.utc) + timedelta(seconds=next(cls.ticks))


def _fake_session(recipe):
    return SimpleNamespace(
        accelerator=SimpleNamespace(is_main_process=True, process_index=0),
        step=0,
        last_experience=None,
        unwrapped_policy=torch.nn.Linear(2, 2),
    )


def test_the_default_run_name_is_chosen_once(tmp_path, monkeypatch):
    monkeypatch.setattr(run_module, "datetime", _TickingClock)
    overrides = [f"trainer.output_dir={tmp_path}", "logging.console.enabled=false"]
    run = start_run(
        load_recipe("dapo", overrides), RunOptions(), print, overrides, make_session=_fake_session
    )
    made = [p for p in tmp_path.iterdir()]
    assert made == [run.dir.path] and run.dir.path.name.startswith("dapo-20261130-0949")
    assert (run.dir.path / "recipe.yaml").is_file()


def test_a_small_model_on_cpu_uses_one_thread_unless_the_user_chose():
    assert cpu_threads_for(995_200, {}) == 1  # the embedded tiny model
    assert cpu_threads_for(995_200, {"OMP_NUM_THREADS": "2"}) is None
    assert cpu_threads_for(500_000_000, {}) is None


def test_a_step_far_slower_than_the_runs_typical_step_is_explained():
    earlier = [0.2, 0.25, 0.2, 0.3]  # median 0.225
    note = slow_step_note(9, 8.0, earlier)
    assert note.startswith("Step 9 took 8.0 s, 36x this run's typical 0.23 s") and "OMP_NUM_THREADS=1" in note
    assert slow_step_note(9, 1.0, earlier) is None  # 4.4x: within the noise of a shared machine
    assert slow_step_note(9, 0.9, [0.1, 0.1, 0.1]) is None  # under a second: not worth a line
    assert slow_step_note(3, 8.0, [0.2, 0.2]) is None  # too few steps to know what is typical
