"""The SLURM executor: the job parameters submitit turns into sbatch lines, each node's rlrun command
line, and a real run through submitit's own LocalExecutor, preempted and requeued."""

from __future__ import annotations

import json
import os
import signal
import time

import psutil
import pytest
from submitit.slurm.slurm import _make_sbatch_string

from rlrun.sweep.plan import plan_sweep
from rlrun.sweep.slurm import SlurmOptions, TrainJob, submit
from rlrun.sweep.spec import read_sweep


def test_the_sbatch_script_asks_for_what_the_options_say(tmp_path):
    options = SlurmOptions(
        partition="gpu", gpus_per_run=8, nodes_per_run=2, cpus_per_run=32, time_limit_min=240
    )
    script = _make_sbatch_string(
        command="true", folder=tmp_path, **options.sbatch_parameters("s/lr=1/seed-0")
    )
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
    cpu_only = SlurmOptions(
        partition=None, gpus_per_run=0, nodes_per_run=1, cpus_per_run=4, time_limit_min=30
    )
    script = _make_sbatch_string(command="true", folder=tmp_path, **cpu_only.sbatch_parameters("x"))
    assert "--partition" not in script and "--gpus-per-node" not in script


def test_each_node_runs_rlrun_train_with_its_rank(tmp_path):
    train = ["train", "grpo", "trainer.seed=0", "--run-dir", str(tmp_path / "run")]
    job = TrainJob(tmp_path / "run", train, gpus_per_node=4, cwd=str(tmp_path))
    assert job.argv(node=1, hostnames=["n0", "n1"]) == [
        *train,
        *("--num-processes", "8", "--num-machines", "2", "--machine-rank", "1"),
        *("--main-process-ip", "n0", "--main-process-port", "29500"),
    ]
    assert TrainJob(tmp_path / "run", train, 1, str(tmp_path)).argv(0, ["n0"]) == train
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "meta.json").write_text("{}")  # started: a requeued job resumes it
    assert job.argv(0, ["n0"]) == ["resume", str(tmp_path / "run"), "--restart", "--num-processes", "4"]


@pytest.mark.slow
def test_a_run_through_submitit_survives_preemption(write_sweep, tmp_path, tiny):
    tiny.update(
        {"trainer.total_steps": 12, "trainer.eval.every_steps": 0, "trainer.checkpoint.every_steps": 0}
    )
    path = write_sweep(
        {"name": "s", "recipe": "grpo", "overrides": {"trainer.output_dir": str(tmp_path / "runs"), **tiny}}
    )
    plan = plan_sweep(read_sweep(path))
    plan.write_manifest({"kind": "slurm"})
    options = SlurmOptions(partition=None, gpus_per_run=0, nodes_per_run=1, cpus_per_run=1, time_limit_min=10)
    (job,) = submit(plan, options, cluster="local").values()
    assert json.loads(plan.manifest_file.read_text())["jobs"] == {"default/seed-0": str(job.job_id)}
    run_dir = plan.runs[0].dir
    deadline = time.monotonic() + 240
    while not (
        (run_dir / "metrics.jsonl").is_file()
        and len((run_dir / "metrics.jsonl").read_text().splitlines()) > 2
    ):
        assert job.state == "RUNNING" and time.monotonic() < deadline, job.stderr()
        time.sleep(0.05)
    (task,) = psutil.Process(int(job.job_id)).children()  # submitit's job process (its child: rlrun train)
    os.kill(task.pid, signal.SIGUSR2)  # what SLURM sends before preempting or at the time limit
    assert job.result() == 0
    meta = json.loads((run_dir / "meta.json").read_text())
    assert meta["status"] == "finished" and len(meta["resumes"]) == 1
    steps = [json.loads(line)["step"] for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert steps == list(range(13))  # step 0 (the first evaluation) to 12, none twice
