"""examples/train_from_python.py run as a reader runs it: its callback stops the run at step 2,
the resume trains to step 6, and the run's metrics.jsonl equals an uninterrupted run's of the
same recipe (compared as the kill -9 test in tests/training/test_end_to_end.py compares)."""

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

import rlrun
from tests.training.test_end_to_end import ENV, REPO, records, without_clock

EXAMPLE = Path(REPO) / "examples" / "train_from_python.py"


@pytest.mark.slow
def test_the_example_stops_resumes_and_ends_like_an_uninterrupted_run(tmp_path):
    done = subprocess.run(
        [sys.executable, str(EXAMPLE), str(tmp_path / "ex")],
        env=ENV,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert f"interrupted at step 2; checkpoint {tmp_path / 'ex' / 'checkpoints' / 'step_000002'}" in lines
    assert lines[-1].startswith("finished at step 6: val/accuracy ")

    spec = importlib.util.spec_from_file_location("train_from_python", EXAMPLE)
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    recipe = rlrun.load_recipe(example.RECIPE, {"reward.functions": [example.number_reward]})
    straight = rlrun.train(recipe, run_dir=tmp_path / "straight")
    assert straight.step == 6
    assert [row["step"] for row in records(tmp_path / "ex")] == list(range(7))
    assert without_clock(records(tmp_path / "ex")) == without_clock(records(tmp_path / "straight"))
