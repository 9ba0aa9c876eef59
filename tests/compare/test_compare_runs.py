"""Reading run directories: names, partial lines, runs in progress, crashes, resumes, W&B paths."""

from __future__ import annotations

import json
import math
import os
import signal
import socket
import subprocess
import sys
import time
from datetime import datetime, timedelta, timezone
from types import SimpleNamespace

import psutil
import pytest

from rlrun.compare.inputs import load_input
from rlrun.compare.runs import RunReadError, load_run
from rlrun.compare.wandb_runs import load_wandb_run
from rlrun.records.rundir import RunDir


def test_a_run_is_found_by_directory_or_by_name(make_run, steps, tmp_path):
    path = make_run("grpo", steps(3, {"critic/score/mean": 0.5}))
    by_path = load_run(str(path))
    by_name = load_run("grpo", runs_dir=tmp_path / "runs")
    assert by_path.name == by_name.name == "grpo"
    assert by_name.source == str(path)
    assert by_name.status == "finished" and by_name.last_step == 3 and by_name.wall_time_s == 6.0
    assert by_name.recipe["actor"]["optimizer"]["lr"] == 1e-4
    assert by_name.notes == []


def test_an_unknown_run_name_suggests_close_names(make_run, steps, tmp_path):
    make_run("grpo-lr3e-4", steps(1, {}))
    with pytest.raises(RunReadError, match="did you mean grpo-lr3e-4"):
        load_run("grpo-lr3e4", runs_dir=tmp_path / "runs")
    with pytest.raises(RunReadError, match="no run 'nothing'"):
        load_run("nothing", runs_dir=tmp_path / "elsewhere")


def test_a_partial_last_line_is_dropped_and_noted(make_run, steps):
    path = make_run(
        "crashed",
        steps(4, {"critic/score/mean": 0.5}),
        status="failed",
        tail='{"step": 5, "wall_time_s": 10.0, "critic/sco',
    )
    run = load_run(str(path))
    assert [row["step"] for row in run.rows] == [1, 2, 3, 4]
    assert run.status == "failed"
    assert any("partial line (line 5)" in note for note in run.notes)


def test_a_run_in_progress_reads_what_is_there(make_run, steps):
    path = make_run("live", steps(7, {"critic/score/mean": 0.5}), status="running", total_steps=100)
    (path / "resolved.yaml").unlink()  # not even every file written yet
    run = load_run(str(path))
    assert run.status == "running" and run.last_step == 7 and run.meta.total_steps == 100
    assert run.recipe is None and any("no resolved.yaml" in note for note in run.notes)
    assert run.last_update is not None


def test_a_run_that_has_written_nothing_yet(tmp_path, run_meta):
    (tmp_path / "fresh").mkdir()
    RunDir(tmp_path / "fresh").write_meta(run_meta(name="fresh", status="running"))
    run = load_run(str(tmp_path / "fresh"))
    assert run.rows == [] and run.last_step is None and run.metric_names() == []
    assert "no metrics.jsonl yet" in run.notes


def test_a_wandb_path_must_have_three_parts():
    with pytest.raises(RunReadError, match="wandb:entity/project/run_id"):
        load_input("wandb:project/run")


def test_wandb_without_key_or_network_says_so(monkeypatch, tmp_path):
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.netrc
    monkeypatch.setenv("WANDB_CONFIG_DIR", str(tmp_path))
    with pytest.raises(RunReadError, match="network access and an API key"):
        load_input("wandb:me/rlrun/abc123")


def test_a_wandb_run_maps_onto_the_run_directory_format():
    history = [
        {"_step": 1, "_runtime": 3.5, "critic/score/mean": 0.25, "samples": 128, "_timestamp": 1.0},
        {"_step": 2, "_runtime": 7.0, "critic/score/mean": 0.5, "samples": 256, "val/accuracy": "NaN"},
    ]
    wb_run = SimpleNamespace(
        name="grpo-wb",
        id="abc123",
        state="crashed",
        commit="feedbeef",
        config={
            "trainer": {"seed": 3, "total_steps": 10},
            "model": {"path": "rlrun:tiny-base"},
            "algorithm": {"advantage": "grpo"},
            "actor": {"policy_loss": "vanilla"},
            "_wandb": {"x": 1},
        },
        scan_history=lambda: iter(history),
    )
    api = SimpleNamespace(run=lambda path: wb_run if path == "me/rlrun/abc123" else None)
    run = load_wandb_run("me/rlrun/abc123", api=api)
    assert run.name == "grpo-wb" and run.source == "wandb:me/rlrun/abc123"
    assert run.status == "failed" and run.meta.total_steps == 10 and run.meta.seed == 3
    assert run.rows[0] == {"step": 1, "wall_time_s": 3.5, "critic/score/mean": 0.25, "samples": 128}
    assert math.isnan(run.rows[1]["val/accuracy"])
    assert run.recipe["model"]["path"] == "rlrun:tiny-base" and "_wandb" not in run.recipe


@pytest.mark.parametrize(("state", "status"), [("pending", "running"), ("killed", "interrupted")])
def test_a_wandb_run_state_reads_as_a_status_and_an_unknown_one_is_refused(state, status):
    wb_run = SimpleNamespace(name="r", id="i", state=state, config={}, scan_history=lambda: iter([]))
    assert load_wandb_run("me/p/i", api=SimpleNamespace(run=lambda path: wb_run)).status == status
    wb_run.state = "hibernating"
    with pytest.raises(RunReadError, match="in a state rlrun does not know: 'hibernating'"):
        load_wandb_run("me/p/i", api=SimpleNamespace(run=lambda path: wb_run))


def test_a_running_run_whose_process_is_gone_reads_as_crashed_and_a_silent_one_as_stale(run_meta):
    from rlrun.compare.runs import STALE_AFTER_S, live_status

    beat = "2026-11-30T10:00:00+00:00"
    t = datetime.fromisoformat(beat).timestamp()
    meta = run_meta(status="running", pid=4242, hostname="box", heartbeat=beat)
    here = {"now": t + 5, "hostname": "box"}
    assert live_status(meta, **here, alive=lambda: True) == "running"
    assert live_status(meta, **here, alive=lambda: False) == "crashed"
    elsewhere = {"hostname": "laptop", "alive": lambda: pytest.fail("a process elsewhere cannot be seen")}
    assert live_status(meta, now=t + STALE_AFTER_S - 1, **elsewhere) == "running"
    assert live_status(meta, now=t + STALE_AFTER_S + 1, **elsewhere) == "stale"
    # alive here, but no step for that long: hung
    assert live_status(meta, now=t + STALE_AFTER_S + 1, hostname="box", alive=lambda: True) == "stale"
    assert live_status(run_meta(status="finished"), **here, alive=lambda: False) == "finished"
    before_heartbeats = run_meta(status="running", pid=None, hostname=None, heartbeat=None)
    assert live_status(before_heartbeats, **here, alive=lambda: False) == "running"


HOLD_LOCK = """
import sys, time
from pathlib import Path
from rlrun.records.rundir import RunLock
lock = RunLock(Path(sys.argv[1]))
print("locked", flush=True)
time.sleep(600)
"""


@pytest.mark.parametrize("end", ["zombie", "pid reused"])
def test_running_is_decided_by_the_run_lock_never_by_a_pid_alone(make_run, steps, end):
    """A killed run whose process is an unreaped zombie, or whose pid now belongs to another
    process, is not running: the kernel dropped its lock when it died."""
    path = make_run("run", steps(3, {}), status="running")
    holder = subprocess.Popen([sys.executable, "-c", HOLD_LOCK, str(path)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        now = datetime.now(timezone.utc).isoformat()
        meta = {
            **json.loads((path / "meta.json").read_text()),
            "hostname": socket.gethostname(),
            "heartbeat": now,
        }
        (path / "meta.json").write_text(json.dumps({**meta, "pid": holder.pid}))
        assert load_run(str(path)).status == "running"
        holder.send_signal(signal.SIGKILL)
        deadline = time.time() + 60
        while psutil.Process(holder.pid).status() != psutil.STATUS_ZOMBIE and time.time() < deadline:
            time.sleep(0.05)  # killed, and not reaped: its pid still answers os.kill(pid, 0)
        if end == "pid reused":  # this test's own process stands for the pid's new owner
            (path / "meta.json").write_text(json.dumps({**meta, "pid": os.getpid()}))
        assert load_run(str(path)).status == "crashed"
    finally:
        holder.kill()
        holder.wait()


def test_a_run_from_before_the_lock_is_alive_only_while_its_pid_is_the_same_process(
    make_run, steps, run_meta
):
    from rlrun.compare.runs import training_process_alive

    path = make_run("old", steps(3, {}), status="running")
    started = datetime.fromtimestamp(psutil.Process().create_time(), timezone.utc)
    for pid, heartbeat, alive in [
        (os.getpid(), started + timedelta(seconds=5), True),
        (
            os.getpid(),
            started - timedelta(seconds=5),
            False,
        ),  # the pid's process began after the run's last step
    ]:
        meta = run_meta(status="running", pid=pid, heartbeat=heartbeat.isoformat())
        assert training_process_alive(path, meta) is alive


def test_compare_shows_a_run_killed_with_9_as_crashed(make_run, steps):
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True, check=True
    )
    path = make_run("killed", steps(3, {}), status="running",
                    meta={"pid": int(dead.stdout), "hostname": socket.gethostname(), "heartbeat": "2026-11-30T10:00:00+00:00"})  # fmt: skip
    assert load_run(str(path)).status == "crashed"
