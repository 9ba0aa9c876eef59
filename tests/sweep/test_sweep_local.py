"""The local executor: slots sized to the machine, tiny sweeps end to end through `rlrun sweep`,
and a sweep killed with kill -9 resumed by running it again."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
import yaml

from rlrun.sweep.local import size_slots

REPO = Path(__file__).parents[2]


@pytest.mark.parametrize(
    ("runs", "cpus", "gpus", "jobs", "expected"),
    [
        (6, 16, 0, None, (6, 2, ())),  # one run per two cores
        (3, 16, 0, None, (3, 5, ())),  # never more at once than there are runs; cores split evenly
        (6, 2, 0, None, (1, 2, ())),
        (6, 16, 0, 4, (4, 4, ())),  # --jobs
        (6, 16, 4, None, (4, 4, (0, 1, 2, 3))),  # one GPU each
        (2, 16, 4, None, (2, 8, (0, 1))),
        (6, 16, 4, 8, (4, 4, (0, 1, 2, 3))),  # not more runs than GPUs
    ],
)
def test_slots_split_the_machine(runs, cpus, gpus, jobs, expected):
    slots = size_slots(runs, cpus, gpus, jobs)
    assert (slots.concurrent, slots.threads, slots.gpus) == expected
    environment = slots.environment(slots.concurrent - 1)
    assert environment["RLRUN_CPU_THREADS"] == str(expected[1])
    assert environment.get("CUDA_VISIBLE_DEVICES") == (str(expected[2][-1]) if gpus else None)


def sweep_file(write_sweep, tmp_path, tiny, **changes):
    return write_sweep(
        {
            "name": "s",
            "recipe": "grpo",
            "overrides": {"trainer.output_dir": str(tmp_path / "runs"), **tiny},
            **changes,
        }
    )


def meta(run_dir):
    return json.loads((run_dir / "meta.json").read_text())


def steps(run_dir):
    return [json.loads(line)["step"] for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


@pytest.mark.slow
def test_the_documented_sweep_trains_every_run_compares_and_a_second_call_skips_them(tmp_path, tiny, rlrun):
    """docs/sweeps.md's sweep file, shrunk to seconds (tiny runs, two seeds), then its commands."""
    readme_sweep = yaml.safe_load((REPO / "sweeps" / "grpo_vs_dapo.yaml").read_text())
    (tmp_path / "sweeps").mkdir()
    shrunk = {**readme_sweep, "overrides": tiny, "seeds": [0, 1]}
    (tmp_path / "sweeps" / "grpo_vs_dapo.yaml").write_text(yaml.safe_dump(shrunk, sort_keys=False))
    result = rlrun("sweep", "sweeps/grpo_vs_dapo.yaml", "--jobs", "2", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    sweep_dir = tmp_path / "runs" / "grpo-vs-dapo"
    for point, kl in (("recipe=grpo", "loss"), ("recipe=dapo", "none")):
        for seed in (0, 1):
            run_dir = sweep_dir / point / f"seed-{seed}"
            assert meta(run_dir)["status"] == "finished" and meta(run_dir)["seed"] == seed
            assert meta(run_dir)["algorithm"]["kl_placement"] == kl
            assert steps(run_dir)[-1] == 2
            assert "rlrun train" in (sweep_dir / point / f"seed-{seed}.log").read_text()
    assert "4 run(s) finished, 0 failed" in result.stdout
    assert "executor: local (concurrent 2, threads" in result.stdout
    manifest = json.loads((sweep_dir / "sweep.json").read_text())
    assert [run["name"] for run in manifest["runs"]][:2] == ["recipe=grpo/seed-0", "recipe=grpo/seed-1"]

    readme_compare = ["--metrics", "val/accuracy,critic/score/mean,response_length/mean"]
    readme_compare += ["--target", "val/accuracy=0.8", "--plot", "curves.png"]
    compared = rlrun("compare", "runs/grpo-vs-dapo", *readme_compare, cwd=tmp_path)
    assert compared.returncode == 0, compared.stderr
    assert "metrics over seeds" in compared.stdout and "95% interval" in compared.stdout
    assert "time to target over seeds" in compared.stdout and (tmp_path / "curves.png").is_file()
    data = json.loads(rlrun("compare", "runs/grpo-vs-dapo", "--json", cwd=tmp_path).stdout)
    assert [(group["label"], group["seeds"]) for group in data["groups"]] == [
        ("recipe=grpo", [0, 1]),
        ("recipe=dapo", [0, 1]),
    ]
    accuracy = next(row for row in data["group_metrics"] if row["metric"] == "val/accuracy")
    dapo = accuracy["groups"]["recipe=dapo"]
    assert dapo["final"]["n"] == 2 and dapo["difference"] is not None and dapo["verdict"]

    before = (sweep_dir / "recipe=grpo" / "seed-0" / "metrics.jsonl").stat().st_mtime_ns
    again = rlrun("sweep", "sweeps/grpo_vs_dapo.yaml", cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert "0 to start, 0 to resume, 4 finished" in again.stdout and "nothing to do" in again.stdout
    assert (sweep_dir / "recipe=grpo" / "seed-0" / "metrics.jsonl").stat().st_mtime_ns == before


@pytest.mark.slow
def test_a_killed_sweep_resumes_its_unfinished_runs(write_sweep, tmp_path, tiny):
    tiny.update({"trainer.total_steps": 6, "trainer.eval.every_steps": 0})
    path = sweep_file(write_sweep, tmp_path, tiny)
    first = tmp_path / "runs" / "s" / "default" / "seed-0"
    command = [sys.executable, "-m", "rlrun", "sweep", str(path), "--jobs", "1"]
    sweep = subprocess.Popen(command, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 240
    while not (first / "checkpoints" / "step_000002").is_dir():
        assert sweep.poll() is None and time.monotonic() < deadline, "the sweep ended before it was killed"
        time.sleep(0.05)
    for process in [*psutil.Process(sweep.pid).children(recursive=True), psutil.Process(sweep.pid)]:
        os.kill(process.pid, signal.SIGKILL)  # the sweep and its runs, as a lost node would
    sweep.wait()
    assert meta(first)["status"] == "running" and steps(first)[-1] < 6

    result = subprocess.run(
        [*command[:-2]], cwd=tmp_path, capture_output=True, text=True, timeout=300, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 to start, 1 to resume, 0 finished" in result.stdout
    resumed = meta(first)
    assert resumed["status"] == "finished" and len(resumed["resumes"]) == 1
    assert steps(first) == [0, 1, 2, 3, 4, 5, 6]  # step 0: the first evaluation; no step twice


@pytest.mark.slow
def test_a_signal_to_the_sweep_stops_its_runs_with_a_checkpoint(write_sweep, tmp_path, tiny):
    tiny.update(
        {"trainer.total_steps": 200, "trainer.eval.every_steps": 0, "trainer.checkpoint.every_steps": 0}
    )
    path = sweep_file(write_sweep, tmp_path, tiny)
    run_dir = tmp_path / "runs" / "s" / "default" / "seed-0"
    sweep = subprocess.Popen(
        [sys.executable, "-m", "rlrun", "sweep", str(path)],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 240
    while not ((run_dir / "metrics.jsonl").is_file() and steps(run_dir)):
        assert sweep.poll() is None and time.monotonic() < deadline
        time.sleep(0.05)
    sweep.send_signal(signal.SIGTERM)
    out, err = sweep.communicate(timeout=120)
    assert sweep.returncode == 130, out + err
    assert "signal SIGTERM: stopping the runs" in err and "1 not finished" in out
    assert meta(run_dir)["status"] == "interrupted"
    assert (run_dir / "checkpoints").is_dir() and any((run_dir / "checkpoints").iterdir())
