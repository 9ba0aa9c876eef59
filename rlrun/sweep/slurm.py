"""Running a sweep's runs on a SLURM cluster through submitit (`pip install 'rlrun[slurm]'`): one
job per run, each job one `rlrun train` (on several nodes: one per node, joined by Accelerate's
launcher as `rlrun train --num-machines` does).

Preemption and time limits: SLURM signals the job (USR2, `signal_delay_s` before the limit);
submitit calls `TrainJob.checkpoint`, which passes the signal on to `rlrun train` as a Ctrl-C
(it finishes its step and saves a checkpoint) and requeues the job, which then resumes the run
from that checkpoint. `rlrun train` itself ignores USR2 (SLURM sends it to every process of the
job), so only this path stops it.
"""

from __future__ import annotations

import os
import signal
import subprocess
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from rlrun.records.rundir import holds_run, write_json_atomic
from rlrun.sweep.local import ENTRY
from rlrun.sweep.plan import RunPlan, SweepPlan, read_manifest, resume_argv

SIGNAL_DELAY_S = 120  # warning before the time limit: a step and a checkpoint must fit in it
MAX_TIMEOUTS = 10  # requeues after reaching the time limit (preemptions do not count)
STOP_WAIT_S = SIGNAL_DELAY_S - 10  # how long checkpoint() waits for `rlrun train` to save and exit
MAIN_PROCESS_PORT = 29500
ACTIVE_STATES = ("PENDING", "RUNNING", "REQUEUED", "REQUEUE_HOLD", "CONFIGURING", "COMPLETING", "SUSPENDED")


@dataclass(frozen=True)
class SlurmOptions:
    """What each run's job asks SLURM for."""

    partition: str | None
    gpus_per_run: int  # per node
    nodes_per_run: int
    cpus_per_run: int  # per node
    time_limit_min: int

    def to_json(self) -> dict[str, Any]:
        return {"kind": "slurm", **asdict(self)}

    def sbatch_parameters(self, job_name: str) -> dict[str, Any]:
        """submitit.SlurmExecutor parameters: one task per node (it starts the node's processes)."""
        parameters: dict[str, Any] = {
            "job_name": job_name,
            "time": self.time_limit_min,
            "nodes": self.nodes_per_run,
            "ntasks_per_node": 1,
            "cpus_per_task": self.cpus_per_run,
            "signal_delay_s": SIGNAL_DELAY_S,
            "additional_parameters": {"requeue": True},
        }
        if self.partition:
            parameters["partition"] = self.partition
        if self.gpus_per_run:
            parameters["gpus_per_node"] = self.gpus_per_run
        return parameters


class TrainJob:
    """The job of one run: `rlrun train` (or `rlrun resume`) as a child process, with the
    multi-node flags of this node. submitit pickles it; `checkpoint` makes it requeueable."""

    def __init__(self, run_dir: Path, train_argv: list[str], gpus_per_node: int, cwd: str):
        self.run_dir, self.train_argv, self.gpus_per_node, self.cwd = run_dir, train_argv, gpus_per_node, cwd
        self._process: subprocess.Popen | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_process": None}  # a process does not travel to the requeued job

    def argv(self, node: int, hostnames: list[str]) -> list[str]:
        """The rlrun command line on node `node`: a run that has started resumes."""
        if holds_run(self.run_dir):
            argv = resume_argv(self.run_dir)
        else:
            argv = list(self.train_argv)
        nodes = len(hostnames)
        processes = max(1, self.gpus_per_node) * nodes
        if processes > 1:
            argv += ["--num-processes", str(processes)]
        if nodes > 1:
            argv += ["--num-machines", str(nodes), "--machine-rank", str(node)]
            argv += ["--main-process-ip", hostnames[0], "--main-process-port", str(MAIN_PROCESS_PORT)]
        return argv

    def __call__(self) -> int:
        import submitit

        environment = submitit.JobEnvironment()
        argv = self.argv(environment.node, list(environment.hostnames))
        print(f"# rlrun {' '.join(argv)}", flush=True)
        self._process = subprocess.Popen(
            [*ENTRY, *argv],
            cwd=self.cwd,
            preexec_fn=_ignore_usr2,  # noqa: PLW1509  (the job's process runs no other thread)
        )
        code = self._process.wait()
        if code != 0:
            raise RuntimeError(f"rlrun {argv[0]} {self.run_dir} exited with code {code}")
        return code

    def checkpoint(self) -> Any:
        """Stop `rlrun train` as Ctrl-C does (it saves a checkpoint), then requeue this job."""
        import submitit

        process = self._process
        if process is not None and process.poll() is None:
            process.send_signal(signal.SIGINT)
            try:
                process.wait(timeout=STOP_WAIT_S)
            except subprocess.TimeoutExpired:
                process.kill()
        return submitit.helpers.DelayedSubmission(
            TrainJob(self.run_dir, self.train_argv, self.gpus_per_node, self.cwd)
        )


def _ignore_usr2() -> None:
    signal.signal(signal.SIGUSR2, signal.SIG_IGN)  # an ignored signal stays ignored across exec


def make_executor(folder: Path, options: SlurmOptions, cluster: str = "slurm") -> Any:
    """A submitit executor for the runs' jobs; `cluster="local"` runs them on this machine with
    submitit's own LocalExecutor (one node), for trying a sweep out."""
    import submitit

    if cluster == "local":
        executor = submitit.LocalExecutor(folder, max_num_timeout=MAX_TIMEOUTS)
        executor.update_parameters(
            timeout_min=options.time_limit_min,
            gpus_per_node=options.gpus_per_run,
            tasks_per_node=1,
            signal_delay_s=SIGNAL_DELAY_S,
        )
        return executor
    return submitit.SlurmExecutor(folder, max_num_timeout=MAX_TIMEOUTS)


def job_for(run: RunPlan, options: SlurmOptions) -> TrainJob:
    return TrainJob(run.dir.resolve(), run.train_argv(), options.gpus_per_run, os.getcwd())


def submit(plan: SweepPlan, options: SlurmOptions, cluster: str = "slurm") -> dict[str, Any]:
    """Submit one job per unfinished run (not those whose job from an earlier submission is still
    queued or running); records the job ids in the manifest and returns the submitit jobs by run
    name."""
    try:
        import submitit  # noqa: F401
    except ImportError as exc:
        raise ImportError("the SLURM executor needs submitit: pip install 'rlrun[slurm]'") from exc
    folder = plan.dir / "slurm"
    manifest = read_manifest(plan.manifest_file)
    jobs: dict[str, str] = dict(manifest.get("jobs", {}))
    submitted: dict[str, Any] = {}
    executor = make_executor(folder, options, cluster)
    for run in plan.to_do():
        if cluster == "slurm" and run.name in jobs and _active(folder, jobs[run.name]):
            continue
        if cluster == "slurm":
            executor.update_parameters(**options.sbatch_parameters(f"{plan.sweep.name}/{run.name}"))
        submitted[run.name] = executor.submit(job_for(run, options))
        jobs[run.name] = str(submitted[run.name].job_id)
    write_json_atomic(plan.manifest_file, {**manifest, "jobs": jobs})
    return submitted


def _active(folder: Path, job_id: str) -> bool:
    import submitit

    return submitit.SlurmJob(folder, job_id).state in ACTIVE_STATES
