import json

import pytest
import torch

from rlrun.training.profiling import PROFILED_STEPS, ops_table, profiled_steps


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


def _op(name, start_ms, ms, tid=1, cat="cpu_op"):
    return {"ph": "X", "cat": cat, "name": name, "pid": 7, "tid": tid, "ts": start_ms * 1e3, "dur": ms * 1e3}


def _memory(at_ms, size, tid=1):
    return {"ph": "i", "cat": "cpu_instant_event", "name": "[memory]", "pid": 7, "tid": tid, "ts": at_ms * 1e3, "args": {"Bytes": size}}  # fmt: skip


def test_the_operator_table_gives_self_time_self_memory_and_kernels():
    # ProfilerStep#1 [0, 10] ms holds mm [1, 4] and mm [5, 7]; the second mm holds add [5.5, 6];
    # another thread runs add [0, 2]. 2 MiB are allocated inside that first add, 1 MiB freed
    # in the step outside any operator. A GPU kernel ran 4 ms.
    events = [
        _op("ProfilerStep#1", 0, 10, cat="user_annotation"),
        _op("aten::mm", 1, 3),
        _op("aten::mm", 5, 2),
        _op("aten::add", 5.5, 0.5),
        _op("aten::add", 0, 2, tid=2),
        _memory(5.7, 2 * 2**20),
        _memory(8, -(2**20)),
        {"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": 1e3, "dur": 4e3},
    ]
    lines = ops_table(events).splitlines()
    rows = {line[:60].strip(): line[60:].split() for line in lines[1:4]}
    # calls, self ms, self %, total ms, self MiB; the self times add up to 10 + 2 = 12 ms
    assert rows == {
        "ProfilerStep*": ["1", "5.000", "41.67%", "10.000", "-1.00"],  # 10 - 3 - 2
        "aten::mm": ["2", "4.500", "37.50%", "5.000", "0.00"],  # 3 + (2 - 0.5)
        "aten::add": ["2", "2.500", "20.83%", "2.500", "2.00"],  # 0.5 + 2
    }
    assert lines[-1].split() == ["gemm", "1", "4.000"]
