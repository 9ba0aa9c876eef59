"""Starting a run: the run directory it claims is the one it writes."""

from __future__ import annotations

import itertools
from datetime import datetime, timedelta, timezone
from types import SimpleNamespace

import rlrun.training.run as run_module
from rlrun.recipes import load_recipe
from rlrun.training.run import RunOptions, start_run


class _TickingClock:
    """A `datetime` whose `now()` moves one second on every call (a slow model load)."""

    ticks = itertools.count()

    @classmethod
    def now(cls, tz=None):
        return datetime(2026, 11, 30, 9, 49, 6, tzinfo=timezone.utc) + timedelta(seconds=next(cls.ticks))


def _fake_session(recipe):
    return SimpleNamespace(
        accelerator=SimpleNamespace(is_main_process=True, process_index=0), step=0, last_experience=None
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
