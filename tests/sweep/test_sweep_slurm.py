"""The SLURM executor: the job parameters submitit turns into sbatch lines, each node's rlrun command
line, what a partition can grant; then sweeps on a real one-host SLURM cluster (the
`slurm_cluster` fixture): submitted, rerun while queued, cancelled, requeued at the time limit."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

import pytest
from submitit.slurm.slurm import _make_sbatch_string
from typer.testing import CliRunner

from rlrun.cli import app
from rlrun.sweep.slurm import Node, Partition, SlurmOptions, TrainJob, _gpus, _minutes

runner = CliRunner()


def options(**changes) -> SlurmOptions:
    base = {"partition": None, "gpus_per_run": 0, "nodes_per_run": 1, "cpus_per_run": 1, "time_limit_min": 30}
    return SlurmOptions(**{**base, **changes})


def test_the_sbatch_script_asks_for_what_the_options_say(tmp_path):
    asked = options(partition="gpu", gpus_per_run=8, nodes_per_run=2, cpus_per_run=32, time_limit_min=240)
    script = _make_sbatch_string(command="true", folder=tmp_path, **asked.sbatch_parameters("s/lr=1/seed-0"))
    lines = set(script.splitlines())
    for line in (
        "#SBATCH --partition=gpu",
        "#SBATCH --nodes=2",
        "#SBATCH --ntasks-per-node=1",  # one task per node: it starts that node's processes
        "#SBATCH --gpus-per-node=8",
        "#SBATCH --cpus-per-task=32",
        "#SBATCH --time=240",
        "#SBATCH --signal=USR2@120",  # two minutes to finish the step and checkpoint
        "#SBATCH --requeue",
        "#SBATCH --job-name=s/lr=1/seed-0",
    ):
        assert line in lines, line
    script = _make_sbatch_string(
        command="true", folder=tmp_path, **options(cpus_per_run=4).sbatch_parameters("x")
    )
    assert "--partition" not in script and "--gpus-per-node" not in script
    # A limit of 3 minutes: warned at half of it, not two minutes before the end.
    short = options(time_limit_min=3).sbatch_parameters("x")
    assert "#SBATCH --signal=USR2@90" in _make_sbatch_string(command="true", folder=tmp_path, **short)


def test_each_node_runs_rlrun_train_with_its_rank(tmp_path):
    train = ["train", "grpo", "trainer.seed=0", "--run-dir", str(tmp_path / "run")]
    job = TrainJob(tmp_path / "run", train, gpus_per_node=4, cwd=str(tmp_path), stop_wait_s=110)
    assert job.argv(node=1, hostnames=["n0", "n1"]) == [
        *train,
        *("--num-processes", "8", "--num-machines", "2", "--machine-rank", "1"),
        *("--main-process-ip", "n0", "--main-process-port", "29500"),
    ]
    assert TrainJob(tmp_path / "run", train, 1, str(tmp_path), 110).argv(0, ["n0"]) == train
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "meta.json").write_text("{}")  # started: a requeued job resumes it
    assert job.argv(0, ["n0"]) == ["resume", str(tmp_path / "run"), "--restart", "--num-processes", "4"]


def test_checkpoint_returns_once_rlrun_has_saved_though_it_interrupts_the_wait(tmp_path, capfd):
    # submitit calls `checkpoint` from its USR2 handler, which interrupts `__call__`'s wait for
    # `rlrun train`. The stand-in for `rlrun train` takes 0.5 s to save after its stop signal
    # (SIGUSR1: the run then names it, not a Ctrl-C nobody pressed); `checkpoint` must then
    # requeue at once, not after stop_wait_s (the job's time limit could end it first).
    job = TrainJob(tmp_path / "run", ["train"], 0, str(tmp_path), stop_wait_s=60)
    script = "trap 'sleep 0.5; exit 130' USR1; while true; do sleep 0.1; done"
    job._process = subprocess.Popen(["sh", "-c", script])
    took: list[float] = []

    def on_usr2(signum, frame):
        began = time.monotonic()
        took.append(job.checkpoint())
        took.append(time.monotonic() - began)

    previous = signal.signal(signal.SIGUSR2, on_usr2)
    try:
        threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGUSR2)).start()
        assert job._process.wait() == 130  # no timeout: as `__call__` waits (holding Popen's lock)
    finally:
        signal.signal(signal.SIGUSR2, previous)
    requeued, seconds = took
    assert seconds < 10, seconds
    assert isinstance(requeued.function, TrainJob) and requeued.function.run_dir == job.run_dir
    assert "SLURM's warning (SIGUSR2) of the time limit or a preemption" in capfd.readouterr().out


def test_a_job_whose_run_a_signal_stopped_ends_without_an_error(tmp_path, monkeypatch, capfd):
    """scancel (SIGTERM) stops `rlrun train` after a saved step, exit code 130: a stop, not a
    failure submitit would log as an ERROR with a traceback; other codes still fail the job."""
    import submitit

    monkeypatch.setattr(submitit, "JobEnvironment", lambda: type("Env", (), {"node": 0, "hostnames": ["n0"]}))
    job = TrainJob(tmp_path / "run", ["train", "grpo"], 0, str(tmp_path), stop_wait_s=60)
    monkeypatch.setattr("rlrun.sweep.slurm.ENTRY", ["sh", "-c", "exit 130", "rlrun"])
    assert job() == 130
    assert (
        "stopped on a signal (scancel, or one sent to the job) after saving its step"
        in capfd.readouterr().out
    )
    monkeypatch.setattr("rlrun.sweep.slurm.ENTRY", ["sh", "-c", "exit 1", "rlrun"])
    with pytest.raises(RuntimeError, match="exited with code 1"):
        job()


def test_sinfo_time_limits_and_gres_are_read():
    assert _minutes("infinite") is None and _minutes("UNLIMITED") is None
    assert _minutes("30:00") == 30  # minutes:seconds
    assert _minutes("1:30") == 2  # a started minute counts
    assert _minutes("4:00:00") == 240
    assert _minutes("2-01:00:00") == 2 * 1440 + 60
    assert _gpus("(null)") == 0
    assert _gpus("gpu:8") == 8
    assert _gpus("gpu:a100:4(S:0-1),gpu:v100:2,shard:16") == 6


def test_a_partition_refuses_what_its_nodes_cannot_grant():
    one_host = Partition("debug", [Node("localhost", 2, 0)], None)
    assert one_host.issues(options(cpus_per_run=2)) == []
    (issue,) = one_host.issues(options(nodes_per_run=2))
    assert (issue.key, issue.override) == ("--nodes-per-run", "--nodes-per-run 2")
    assert "partition `debug` has 1 node(s): localhost (2 CPUs, 0 GPUs)" in issue.message
    assert "at most --nodes-per-run 1" in issue.fix
    assert [i.key for i in one_host.issues(options(cpus_per_run=4))] == ["--cpus-per-run"]
    assert [i.key for i in one_host.issues(options(gpus_per_run=1))] == ["--gpus-per-run"]
    # Two GPU nodes and a third without GPUs; a 4-hour limit.
    gpus = Partition("gpu", [Node("a", 64, 8), Node("b", 64, 8), Node("c", 64, 0)], 240)
    assert gpus.issues(options(nodes_per_run=2, gpus_per_run=8, cpus_per_run=64, time_limit_min=240)) == []
    assert [i.key for i in gpus.issues(options(nodes_per_run=3, gpus_per_run=8))] == ["--gpus-per-run"]
    (issue,) = gpus.issues(options(time_limit_min=300))
    assert issue.key == "--time" and "at most 240 minutes" in issue.message


# --- on a real one-host SLURM cluster ------------------------------------------------------

# A scorer that takes wall time and no CPU (a remote judge, say): each step then lasts at least
# `delay_s`, however fast the machine, so a job's time limit falls in the middle of the run.
SLOW_REWARD = """
import time

from rlrun.rewards.scorers import exact_match


def exact_match_slowly(prompts, completions, ground_truths, delay_s, **columns):
    time.sleep(delay_s)
    return exact_match(prompts, completions, ground_truths)
"""
UNTIMED = ("wall_time_s", "timing_s/", "perf/")  # metrics that measure time, not training


def slow_sweep(tmp_path: Path, tiny: dict, seeds: list[int], steps: int, delay_s: float) -> dict:
    (tmp_path / "slow_reward.py").write_text(SLOW_REWARD)  # the runs' working directory: importable
    reward = {"fn": "slow_reward:exact_match_slowly", "style": "rlrun", "kwargs": {"delay_s": delay_s}}
    tiny.update(
        {
            "trainer.output_dir": str(tmp_path / "runs"),
            "trainer.total_steps": steps,
            "trainer.eval.every_steps": 0,
            "trainer.checkpoint.every_steps": 0,  # the only checkpoints: at a stop and at the end
            "trainer.device": "cpu",
            "reward.functions": [reward],
        }
    )
    return {"name": "s", "recipe": "grpo", "overrides": tiny, "seeds": seeds}


def rlrun_in(cwd: Path, env: dict[str, str]) -> Callable[..., subprocess.CompletedProcess]:
    def run(*args: str) -> subprocess.CompletedProcess:
        command = [sys.executable, "-m", "rlrun", *args]
        return subprocess.run(
            command, cwd=cwd, env=env, capture_output=True, text=True, timeout=600, check=False
        )

    return run


def queued(env: dict[str, str]) -> set[str]:
    out = subprocess.run(
        ["squeue", "--noheader", "--me", "--format=%i"], env=env, capture_output=True, text=True, check=True
    )
    return set(out.stdout.split())


def wait_for(condition: Callable[[], bool], seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, f"waited {seconds:.0f} s for {what}"
        time.sleep(0.5)


def rows(run_dir: Path) -> list[dict]:
    path = run_dir / "metrics.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.is_file() else []


def submitted(output: str) -> dict[str, str]:
    """Run name -> job id, from the lines `rlrun sweep` prints for the jobs it submitted."""
    return {line.split(":")[0]: line.split()[3] for line in output.splitlines() if ": SLURM job " in line}


@pytest.mark.slow
def test_a_request_the_cluster_cannot_grant_is_refused_before_anything_is_submitted(
    slurm_cluster, write_sweep, tmp_path, tiny
):
    tiny["trainer.output_dir"] = str(tmp_path / "runs")
    path = write_sweep({"name": "s", "recipe": "grpo", "overrides": tiny, "seeds": [0]})
    for flags, expected in (
        (["--nodes-per-run", "2"], "`--nodes-per-run 2`, `--nodes-per-run`: partition `debug` has 1 node(s)"),
        (["--partition", "gpu"], "the cluster has no partition `gpu`"),
        (["--cpus-per-run", "512"], "each run asks for 1 node(s) with 512 CPUs each"),
    ):
        result = runner.invoke(app, ["sweep", str(path), "--executor", "slurm", *flags], env=slurm_cluster)
        assert result.exit_code == 2, result.output
        assert expected in " ".join(result.output.replace("│", "").split())
    # A run on CUDA asks for a GPU by default, which this partition has none of.
    path = write_sweep({"name": "s", "recipe": "grpo", "overrides": {**tiny, "trainer.device": "cuda"}})
    result = runner.invoke(
        app, ["sweep", str(path), "--executor", "slurm", "--cpus-per-run", "1"], env=slurm_cluster
    )
    assert result.exit_code == 2 and "--gpus-per-run 1" in result.output
    # The default CPU count fits the nodes (this host has fewer than 8): never refused as if asked for.
    path = write_sweep({"name": "s", "recipe": "grpo", "overrides": tiny, "seeds": [0]})
    result = runner.invoke(app, ["sweep", str(path), "--executor", "slurm", "--dry-run"], env=slurm_cluster)
    assert result.exit_code == 0, result.output
    cpus = min(8, len(os.sched_getaffinity(0)))  # the one node has `nproc` CPUs (the script)
    assert f"cpus_per_run {cpus}" in " ".join(result.output.split())
    assert not (tmp_path / "runs").exists() and not queued(slurm_cluster)


@pytest.mark.slow
def test_a_sweep_on_slurm_finishes_and_survives_a_rerun_and_scancel(
    slurm_cluster, write_sweep, tmp_path, tiny
):
    # 30 steps of at least 2 s: the second `rlrun sweep` (its imports take a minute on a loaded
    # machine) returns before seed-0 ends, so that it can be cancelled halfway.
    path = write_sweep(slow_sweep(tmp_path, tiny, seeds=[0, 1], steps=30, delay_s=2.0))
    rlrun = rlrun_in(tmp_path, slurm_cluster)
    sweep = ["sweep", str(path), "--executor", "slurm", "--cpus-per-run", "1", "--time", "10"]
    first = rlrun(*sweep)
    assert first.returncode == 0, first.stderr
    jobs = submitted(first.stdout)
    assert sorted(jobs) == ["default/seed-0", "default/seed-1"]
    manifest = tmp_path / "runs" / "s" / "sweep.json"
    assert json.loads(manifest.read_text())["jobs"] == jobs

    again = rlrun(*sweep)  # the jobs are queued or starting: nothing is submitted twice
    assert again.returncode == 0 and submitted(again.stdout) == {}, again.stdout
    assert json.loads(manifest.read_text())["jobs"] == jobs

    seed0 = tmp_path / "runs" / "s" / "default" / "seed-0"
    wait_for(lambda: len(rows(seed0)) >= 3, 300, "seed-0's third step")
    subprocess.run(["scancel", jobs["default/seed-0"]], env=slurm_cluster, check=True)
    wait_for(lambda: jobs["default/seed-0"] not in queued(slurm_cluster), 120, "the cancelled job to end")
    stopped_at = len(rows(seed0))
    assert json.loads((seed0 / "meta.json").read_text())["status"] == "interrupted"
    assert 3 <= stopped_at < 31  # SIGTERM: the step finished and was saved; the run did not
    # a clean stop, not a failed job: no submitit ERROR, no traceback
    log = tmp_path / "runs" / "s" / "slurm" / f"{jobs['default/seed-0']}_0_log"
    err, out = Path(f"{log}.err").read_text(), Path(f"{log}.out").read_text()
    assert "ERROR" not in err and "Traceback" not in err, err[-3000:]
    assert "stopped on a signal (scancel, or one sent to the job)" in out, (out[-2000:], err[-3000:])

    rerun = rlrun(*sweep)
    assert rerun.returncode == 0, rerun.stderr
    resubmitted = submitted(rerun.stdout)
    assert list(resubmitted) == ["default/seed-0"], rerun.stdout  # seed-1 is running or finished
    assert json.loads(manifest.read_text())["jobs"] == {**jobs, **resubmitted}
    wait_for(lambda: not queued(slurm_cluster), 600, "the jobs to end")

    for seed, resumes in ((0, 1), (1, 0)):
        run_dir = tmp_path / "runs" / "s" / "default" / f"seed-{seed}"
        meta = json.loads((run_dir / "meta.json").read_text())
        assert meta["status"] == "finished" and len(meta.get("resumes", [])) == resumes
        assert [row["step"] for row in rows(run_dir)] == list(range(31))  # none lost, none twice
    compared = rlrun("compare", "--json", str(tmp_path / "runs" / "s"))
    assert compared.returncode == 0, compared.stderr
    runs = [(run["name"], run["status"], run["steps_done"]) for run in json.loads(compared.stdout)["runs"]]
    assert runs == [("default/seed-0", "finished", 30), ("default/seed-1", "finished", 30)]


def squeue_field(env: dict[str, str], job_id: str, field: str) -> str:
    out = subprocess.run(
        ["squeue", "--noheader", f"--jobs={job_id}", f"--format={field}"],
        check=True,
        env=env,
        capture_output=True,
        text=True,
    )
    return out.stdout.strip()


def scontrol_time_limit(env: dict[str, str], job_id: str, minutes: int) -> None:
    command = ["scontrol", "update", f"JobId={job_id}", f"TimeLimit={minutes}"]
    subprocess.run(command, env=env, check=True, capture_output=True)


@pytest.mark.slow
def test_a_job_at_its_time_limit_is_requeued_and_resumes_exactly(slurm_cluster, write_sweep, tmp_path, tiny):
    # The job asks for 10 minutes (SLURM warns it with USR2 two minutes before the end). Once the
    # run has trained two steps, its limit is cut (scontrol) so that the end is under two minutes
    # away: SLURM warns the job at its next check of the limits, however long the start took.
    # Steps of at least 2 s leave the warning time to come before the run ends.
    path = write_sweep(slow_sweep(tmp_path, tiny, seeds=[0], steps=25, delay_s=2.0))
    rlrun = rlrun_in(tmp_path, slurm_cluster)
    result = rlrun("sweep", str(path), "--executor", "slurm", "--cpus-per-run", "1", "--time", "10")
    assert result.returncode == 0, result.stderr
    (job_id,) = submitted(result.stdout).values()
    # The same run, uninterrupted, on this machine meanwhile.
    (run,) = json.loads((tmp_path / "runs" / "s" / "sweep.json").read_text())["runs"]
    reference = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "rlrun",
            "train",
            run["recipe"],
            *run["overrides"],
            "--run-dir",
            str(tmp_path / "ref"),
        ],
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    run_dir = tmp_path / "runs" / "s" / "default" / "seed-0"
    log = tmp_path / "runs" / "s" / "slurm" / f"{job_id}_0_log.out"
    try:
        wait_for(lambda: len(rows(run_dir)) >= 3, 600, "the run's second step")
        started = squeue_field(slurm_cluster, job_id, "%S")  # the job's start (this machine's time)
        elapsed_s = time.time() - datetime.fromisoformat(started).timestamp()
        scontrol_time_limit(slurm_cluster, job_id, int(elapsed_s // 60) + 2)  # 60 to 120 s left
        wait_for(lambda: "Requeued job" in log.read_text(), 300, "the job to be warned and requeued")
        interrupted_at = len(rows(run_dir)) - 1
        scontrol_time_limit(slurm_cluster, job_id, 10)  # the requeued job gets its 10 minutes again
        wait_for(lambda: job_id not in queued(slurm_cluster), 900, "the job to finish")
        _, errors = reference.communicate(timeout=600)
        assert reference.returncode == 0, errors
    finally:
        reference.kill()

    meta = json.loads((run_dir / "meta.json").read_text())
    assert meta["status"] == "finished" and meta["resumes"][0]["from_step"] == interrupted_at < 25
    assert "Caught signal SIGUSR2" in log.read_text() and "timed-out" in log.read_text()
    # the cause and the signal named, not a Ctrl-C nobody pressed
    said = log.read_text() + log.with_suffix(".err").read_text()
    assert "SLURM's warning (SIGUSR2) of the time limit or a preemption" in said
    assert "SIGUSR1: finishing this step" in said and "Ctrl-C: finishing" not in said
    got, want = rows(run_dir), rows(tmp_path / "ref")
    assert [row["step"] for row in got] == list(range(26))
    for mine, theirs in zip(got, want, strict=True):
        untimed = {key for key in theirs if not key.startswith(UNTIMED)}
        assert {key: mine.get(key) for key in untimed} == {key: theirs[key] for key in untimed}, mine["step"]
