import json

import pytest
import torch

from rlrun.training.profiling import PROFILED_STEPS, profiled_steps


def _steps(out_dir, count: int) -> None:
    with profiled_steps(out_dir) as step_done:
        for _ in range(count):
            with torch.profiler.record_function("update_actor"):
                torch.randn(64, 64) @ torch.randn(64, 64)
            step_done()


@pytest.mark.parametrize(
    "count", [1 + PROFILED_STEPS + 2, 2]
)  # more steps than recorded; a run stopped early
def test_recorded_steps_are_written_as_a_trace_and_an_operator_table(tmp_path, count):
    _steps(tmp_path / "profile", count)
    events = json.loads((tmp_path / "profile" / "trace.json").read_text())["traceEvents"]
    phases = [e for e in events if e.get("name") == "update_actor"]
    assert len(phases) == min(count - 1, PROFILED_STEPS)  # the warm-up step is not recorded
    assert "aten::mm" in (tmp_path / "profile" / "ops.txt").read_text()


def test_without_a_directory_nothing_is_recorded(tmp_path):
    _steps(None, 3)
    assert not any(tmp_path.iterdir())
