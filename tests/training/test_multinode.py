"""Two machines on one host: two `rlrun train --num-machines 2 --machine-rank {0,1}` launchers
(one training process each) meet at 127.0.0.1, as two hosts meet at machine 0's address. The
job is the 2-process job of one machine (which takes the same steps as one process:
test_multiprocess), writes one run directory, stops on a signal to either launcher and resumes."""

from __future__ import annotations

import contextlib
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from safetensors.torch import load_file
from test_multiprocess import ENV, TINY, _descendants, _free_port

COMMON = ["trainer.checkpoint.every_steps=1", "trainer.eval.prompts=8", "logging.console.enabled=false"]
TIMING = ("wall_time_s", "timing_s/", "perf/")  # the clock's, not the training's


def _machines(command: list[str], port: int) -> list[subprocess.Popen]:
    """`command` (an rlrun command line) started as machine 0 and machine 1."""
    return [_machine(command, port, rank) for rank in (0, 1)]


def _machine(command: list[str], port: int, rank: int) -> subprocess.Popen:
    """`command` started as machine `rank` of two, meeting at 127.0.0.1:`port`."""
    return subprocess.Popen(
        [
            *[sys.executable, "-m", "rlrun", *command],
            *["--num-processes", "2", "--num-machines", "2", "--machine-rank", str(rank)],
            *["--main-process-ip", "127.0.0.1", "--main-process-port", str(port)],
        ],
        env=ENV,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )


def _returncodes(procs: list[subprocess.Popen], stderr: list[str] | None = None) -> list[int]:
    """Wait for every process; none may print a traceback. Their stderr goes into `stderr`."""
    try:
        errors = [p.communicate(timeout=600)[1] for p in procs]
    finally:  # a failed check leaves nothing training for minutes
        for proc in procs:
            with contextlib.suppress(OSError):
                for pid in [*_descendants(proc.pid), proc.pid] if proc.poll() is None else []:
                    os.kill(pid, signal.SIGKILL)

    for err in errors:
        assert "Traceback" not in err, err[-3000:]
    if stderr is not None:
        stderr.extend(errors)
    return [p.returncode for p in procs]


def _rows(run_dir: Path) -> list[dict]:
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return [{k: v for k, v in row.items() if not k.startswith(TIMING)} for row in rows]


@pytest.mark.slow
def test_two_machines_train_as_two_processes_of_one_machine_into_one_run_directory(tmp_path):
    train = ["train", "grpo", *TINY, *COMMON, "trainer.total_steps=2"]
    two = _machines([*train, "--run-dir", str(tmp_path / "two_machines")], _free_port())
    one = subprocess.Popen(
        [sys.executable, "-m", "rlrun", *train, "--run-dir", str(tmp_path / "one_machine")]
        + ["--num-processes", "2", "--main-process-port", str(_free_port())],
        env=ENV,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert _returncodes([*two, one]) == [0, 0, 0]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["one_machine", "two_machines"]
    meta = json.loads((tmp_path / "two_machines" / "meta.json").read_text())
    assert (meta["status"], meta["setup"]["processes"], meta["setup"]["machines"]) == ("finished", 2, 2)
    assert json.loads((tmp_path / "one_machine" / "meta.json").read_text())["setup"]["machines"] == 1
    rows = _rows(tmp_path / "two_machines")
    assert [r["step"] for r in rows] == [0, 1, 2]  # one writer
    assert rows == _rows(tmp_path / "one_machine")
    weights = [
        load_file(tmp_path / run / "checkpoints" / "step_000002" / "model.safetensors")
        for run in ("two_machines", "one_machine")
    ]
    assert all((weights[0][k] == weights[1][k]).all() for k in weights[1])


def _stop(procs: list[subprocess.Popen], signalled: int, run_dir: Path, rows: int) -> int:
    """Once the job has logged `rows` rows, SIGTERM the launcher of machine `signalled`; check
    that both machines stop at a saved step, leaving nothing running; return that step."""
    metrics = run_dir / "metrics.jsonl"
    while all(p.poll() is None for p in procs) and not (
        metrics.exists() and metrics.read_text().count("\n") >= rows
    ):
        time.sleep(0.1)
    trees = [[p.pid, *_descendants(p.pid)] for p in procs]
    procs[signalled].send_signal(signal.SIGTERM)
    stderr: list[str] = []
    codes = _returncodes(procs, stderr)
    assert codes == [130 if rank == signalled else 0 for rank in (0, 1)], stderr
    assert "rlrun: stopped by SIGTERM: the training processes ended after saving" in stderr[signalled]
    assert not [pid for tree in trees for pid in tree if Path(f"/proc/{pid}").exists()]
    meta = json.loads((run_dir / "meta.json").read_text())
    assert meta["status"] == "interrupted", (meta, trees, [err[-2000:] for err in stderr])
    saved = sorted(p.name for p in (run_dir / "checkpoints").glob("step_*"))
    assert saved[-1] == f"step_{meta['final_step']:06d}"
    return meta["final_step"]


@pytest.mark.slow
def test_a_signal_to_either_launcher_stops_both_machines_at_a_saved_step_and_the_job_resumes(tmp_path):
    run_dir = tmp_path / "run"
    train = ["train", "grpo", *TINY, *COMMON, "trainer.total_steps=500", "--run-dir", str(run_dir)]
    first = _stop(_machines(train, _free_port()), 0, run_dir, rows=2)
    resume = ["resume", str(run_dir), "trainer.total_steps=500"]
    second = _stop(_machines(resume, _free_port()), 1, run_dir, rows=first + 2)
    assert second > first

    end = ["resume", str(run_dir), f"trainer.total_steps={second + 1}"]
    assert _returncodes(_machines(end, _free_port())) == [0, 0]
    meta = json.loads((run_dir / "meta.json").read_text())
    assert meta["status"] == "finished"
    assert [r["from_step"] for r in meta["resumes"]] == [first, second]
    assert meta["resumes"][-1]["setup"]["machines"] == 2
    assert [r["step"] for r in _rows(run_dir)] == list(range(second + 2))


@pytest.mark.slow
def test_a_machine_waiting_for_another_says_so_and_a_signal_ends_the_wait(tmp_path):
    """Machine 0 alone: it says early whom it waits for, where (the launcher itself is silent
    until every machine has joined), and a SIGTERM ends the launch saying so."""
    port = _free_port()
    train = ["train", "grpo", *TINY, *COMMON, "--run-dir", str(tmp_path / "run")]
    machine_0 = _machine(train, port, rank=0)
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line) for line in machine_0.stderr], daemon=True).start()
    seen, deadline = [], time.monotonic() + 300  # the imports take a while on a loaded machine
    while not any(f"waiting for machine 1 at 127.0.0.1:{port}" in line for line in seen):
        assert time.monotonic() < deadline, seen
        with contextlib.suppress(queue.Empty):
            seen.append(lines.get(timeout=1))
    machine_0.send_signal(signal.SIGTERM)
    assert machine_0.wait(timeout=120) == 130
    time.sleep(0.5)  # the reader thread takes the last lines
    while not lines.empty():
        seen.append(lines.get())
    text = "".join(seen)
    assert "SIGTERM before the training processes started: the launch ends here" in text
    assert "Traceback" not in text
    assert not (tmp_path / "run").exists()
