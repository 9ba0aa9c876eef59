"""Running a sweep's runs on a SLURM cluster through submitit (`pip install 'rlrun[slurm]'`): one
job per run, each job one `rlrun train` (on several nodes: one per node, joined by Accelerate's
launcher as `rlrun train --num-machines` does).

Preemption and time limits: SLURM signals the job (USR2, `signal_delay_s` before the limit);
submitit calls `TrainJob.checkpoint`, which says so in the job's log and stops `rlrun train` with
SIGUSR1, a stop signal of its own (it finishes its step and saves a checkpoint), then requeues
the job, which resumes the run from that checkpoint. `rlrun train` itself ignores USR2 (SLURM
sends it to every process of the job), so only this path stops it. `scancel` sends SIGTERM: the
run saves its step and the job ends, a stop rather than a failure.
"""

from __future__ import annotations

import importlib.util
import math
import os
import re
import shutil
import signal
import subprocess
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from rlrun.errors import ConfigIssue, RecipeError
from rlrun.interrupt import INTERRUPTED
from rlrun.records.rundir import holds_run, write_json_atomic
from rlrun.sweep.local import ENTRY
from rlrun.sweep.plan import MANIFEST, SweepPlan, plan_sweep, read_manifest, resume_argv
from rlrun.sweep.spec import Sweep

SIGNAL_DELAY_S = 120  # warning before the time limit: a step and a checkpoint must fit in it
MAX_TIMEOUTS = 10  # requeues after reaching the time limit (preemptions do not count)
REQUEUE_MARGIN_S = 10  # of the warning, kept for submitit to requeue the job once `rlrun train` exits
MAIN_PROCESS_PORT = 29500
DEFAULT_CPUS_PER_RUN = 8  # per node, where the partition's nodes have that many
COMMANDS = ("sbatch", "squeue", "sinfo", "scontrol")  # what submitting, planning and requeueing call
COMMAND_TIMEOUT_S = 60
POLL_S = 0.2  # how often `checkpoint` looks whether `rlrun train` has exited


@dataclass(frozen=True)
class SlurmOptions:
    """What each run's job asks SLURM for."""

    partition: str | None
    gpus_per_run: int  # per node
    nodes_per_run: int
    cpus_per_run: int  # per node
    time_limit_min: int

    @property
    def signal_delay_s(self) -> int:
        """How long before the time limit SLURM warns the job: two minutes, or half a shorter limit
        (SLURM checks its limits about every 30 s, so the warning may come up to that much earlier)."""
        return min(SIGNAL_DELAY_S, self.time_limit_min * 30)

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
            "signal_delay_s": self.signal_delay_s,
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

    def __init__(
        self, run_dir: Path, train_argv: list[str], gpus_per_node: int, cwd: str, stop_wait_s: float
    ):
        self.run_dir, self.train_argv, self.gpus_per_node, self.cwd = run_dir, train_argv, gpus_per_node, cwd
        self.stop_wait_s = stop_wait_s  # how long `checkpoint` waits for `rlrun train` to save and exit
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
        if code == INTERRUPTED:  # a stop signal (scancel's SIGTERM): the run saved its step
            print(
                f"# rlrun {argv[0]} stopped on a signal (scancel, or one sent to the job) after saving its "
                "step; running the sweep again resumes it",
                flush=True,
            )
            return code
        if code != 0:
            raise RuntimeError(f"rlrun {argv[0]} {self.run_dir} exited with code {code}")
        return code

    def checkpoint(self) -> Any:
        """Stop `rlrun train` at the end of its step (it saves a checkpoint), then requeue this job."""
        import submitit

        process = self._process
        if process is not None and not _exited(process.pid):
            print(
                "# SLURM's warning (SIGUSR2) of the time limit or a preemption: stopping rlrun with "
                "SIGUSR1 after its step, then requeueing the job",
                flush=True,
            )
            process.send_signal(signal.SIGUSR1)
            deadline = time.monotonic() + self.stop_wait_s
            while not _exited(process.pid) and time.monotonic() < deadline:
                time.sleep(POLL_S)
            if not _exited(process.pid):
                process.kill()
        return submitit.helpers.DelayedSubmission(
            TrainJob(self.run_dir, self.train_argv, self.gpus_per_node, self.cwd, self.stop_wait_s)
        )


def _exited(pid: int) -> bool:
    """Whether the child `pid` has ended, leaving it to be reaped by `Popen.wait`. Not Popen's
    poll() or wait(): submitit calls `checkpoint` from a signal handler that interrupted
    `Popen.wait` in `__call__`, which holds the lock they need, so they would never see the end."""
    try:
        return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    except ChildProcessError:  # reaped already
        return True


def _ignore_usr2() -> None:
    signal.signal(signal.SIGUSR2, signal.SIG_IGN)  # an ignored signal stays ignored across exec


def plan_on_cluster(
    sweep: Sweep,
    *,
    partition: str | None,
    gpus_per_run: int | None,
    nodes_per_run: int,
    cpus_per_run: int | None,
    time_limit_min: int,
) -> tuple[SweepPlan, SlurmOptions]:
    """The sweep's plan and its jobs' options, checked with the cluster before anything is
    written or submitted: a run whose job is still queued or running is "running elsewhere", and
    a request the partition cannot grant (more nodes than it has, more CPUs or GPUs than a node
    has, a longer time limit) is a RecipeError naming the flag. `gpus_per_run=None`: 1 when a
    run asks for CUDA, or for `auto` on a partition with GPUs; else 0. `cpus_per_run=None`:
    `DEFAULT_CPUS_PER_RUN`, or all of a node's CPUs where the partition's nodes have fewer (a
    default is never refused as if it had been asked for)."""
    if importlib.util.find_spec("submitit") is None:
        raise RecipeError(
            [
                _flag_issue(
                    "--executor slurm", "the SLURM executor needs submitit", "pip install 'rlrun[slurm]'"
                )
            ]
        )
    missing = [command for command in COMMANDS if shutil.which(command) is None]
    if missing:
        raise RecipeError(
            [
                _flag_issue(
                    "--executor slurm",
                    f"the SLURM commands {', '.join(missing)} are not on PATH: this machine is not a "
                    "login node of a SLURM cluster",
                    "run the sweep on the cluster's login node, or with `--executor local`",
                )
            ]
        )
    granted = read_partition(partition)
    plan = plan_sweep(sweep, environment=False, elsewhere=runs_in_queue)
    if gpus_per_run is None:
        devices = {run.loaded.recipe.trainer.device for run in plan.runs}
        on_gpus = "cuda" in devices or ("auto" in devices and granted.has_gpus)
        gpus_per_run = 1 if on_gpus else 0
    if cpus_per_run is None:
        cpus_per_run = min(DEFAULT_CPUS_PER_RUN, max(node.cpus for node in granted.nodes))
    options = SlurmOptions(granted.name, gpus_per_run, nodes_per_run, cpus_per_run, time_limit_min)
    issues = granted.issues(options)
    if issues:
        raise RecipeError(issues)
    return plan, options


def submit(plan: SweepPlan, options: SlurmOptions) -> dict[str, Any]:
    """Submit one job per run to do (a run whose job is queued or running is not one: see
    `plan_on_cluster`); records the job ids in the manifest and returns the submitit jobs by run
    name."""
    import submitit

    manifest = read_manifest(plan.manifest_file)
    jobs: dict[str, str] = dict(manifest.get("jobs", {}))
    submitted: dict[str, Any] = {}
    executor = submitit.SlurmExecutor(plan.dir / "slurm", max_num_timeout=MAX_TIMEOUTS)
    stop_wait_s = max(1, options.signal_delay_s - REQUEUE_MARGIN_S)
    for run in plan.to_do():
        executor.update_parameters(**options.sbatch_parameters(f"{plan.sweep.name}/{run.name}"))
        job = TrainJob(run.dir.resolve(), run.train_argv(), options.gpus_per_run, os.getcwd(), stop_wait_s)
        submitted[run.name] = executor.submit(job)
        jobs[run.name] = str(submitted[run.name].job_id)
        # After each job: an interrupted submission still knows the jobs it did submit.
        write_json_atomic(plan.manifest_file, {**manifest, "jobs": jobs})
    return submitted


def runs_in_queue(sweep_dir: Path) -> set[str]:
    """The runs of the sweep whose job (from the manifest) SLURM still holds as pending,
    running, requeued or completing. squeue, not sacct: a cluster may keep no accounting."""
    jobs = read_manifest(sweep_dir / MANIFEST).get("jobs", {})
    if not jobs:
        return set()
    queued = set(_slurm_command(["squeue", "--noheader", "--me", "--format=%i"]).split())
    return {name for name, job_id in jobs.items() if str(job_id) in queued}


@dataclass(frozen=True)
class Node:
    name: str
    cpus: int
    gpus: int

    def describe(self) -> str:
        return f"{self.name} ({self.cpus} CPUs, {self.gpus} GPUs)"


@dataclass(frozen=True)
class Partition:
    """A partition as sinfo shows it: its nodes and its time limit (None: none)."""

    name: str
    nodes: list[Node]
    time_limit_min: int | None

    @property
    def has_gpus(self) -> bool:
        return any(node.gpus for node in self.nodes)

    def issues(self, options: SlurmOptions) -> list[ConfigIssue]:
        """What the partition cannot grant each run's job: SLURM would refuse such a job, or
        keep it pending for ever."""
        issues = []
        wanted, cpus, gpus = options.nodes_per_run, options.cpus_per_run, options.gpus_per_run
        enough_cpus = [node for node in self.nodes if node.cpus >= cpus]
        if len([node for node in enough_cpus if node.gpus >= gpus]) < wanted:
            shown = ", ".join(node.describe() for node in self.nodes[:4])
            has = f"partition `{self.name}` has {len(self.nodes)} node(s): {shown}" + (
                " ..." if len(self.nodes) > 4 else ""
            )
            if len(self.nodes) < wanted:
                flag, fix = f"--nodes-per-run {wanted}", f"at most --nodes-per-run {len(self.nodes)} here"
                message = f"{has}; each run asks for {wanted} nodes"
            elif len(enough_cpus) < wanted:
                flag, fix = f"--cpus-per-run {cpus}", "ask for fewer CPUs per node"
                message = f"{has}; each run asks for {wanted} node(s) with {cpus} CPUs each"
            else:
                flag, fix = f"--gpus-per-run {gpus}", "ask for fewer GPUs per node (0 trains on CPUs)"
                message = f"{has}; each run asks for {wanted} node(s) with {gpus} GPUs each"
            issues.append(_flag_issue(flag, message, fix + ", or another --partition"))
        if self.time_limit_min is not None and options.time_limit_min > self.time_limit_min:
            issues.append(
                _flag_issue(
                    f"--time {options.time_limit_min}",
                    f"partition `{self.name}` lets a job run at most {self.time_limit_min} minutes; "
                    "SLURM would keep the jobs pending for ever",
                    f"--time {self.time_limit_min} or less (a run that needs longer is requeued and resumes)",
                )
            )
        return issues


def read_partition(name: str | None) -> Partition:
    """The partition `name` (None: the cluster's default), or a RecipeError naming --partition."""
    out = _slurm_command(["sinfo", "--noheader", "--Node", "--format=%N|%P|%c|%G|%l"])
    rows = [line.split("|") for line in out.splitlines() if line.strip()]
    names = sorted({row[1].rstrip("*") for row in rows})
    if name is None:
        default = sorted({row[1].rstrip("*") for row in rows if row[1].endswith("*")})
        if not default:
            raise RecipeError(
                [
                    _flag_issue(
                        "--partition",
                        "the cluster has no default partition",
                        f"name one with --partition ({', '.join(names)})",
                    )
                ]
            )
        name = default[0]
    ours = [row for row in rows if row[1].rstrip("*") == name]
    if not ours:
        raise RecipeError(
            [
                _flag_issue(
                    f"--partition {name}",
                    f"the cluster has no partition `{name}`",
                    f"one of {', '.join(names)}",
                )
            ]
        )
    nodes = sorted({Node(row[0], int(row[2]), _gpus(row[3])) for row in ours}, key=lambda node: node.name)
    return Partition(name, nodes, _minutes(ours[0][4]))  # the partition's limit, on each of its rows


def _flag_issue(override: str, message: str, fix: str) -> ConfigIssue:
    return ConfigIssue(message, key=override.split()[0], code="slurm-cluster", override=override, fix=fix)


def _gpus(gres: str) -> int:
    """GPUs in sinfo's GRES column: `gpu:8`, `gpu:a100:4(S:0-1),gpu:v100:2`, `(null)`."""
    return sum(int(count) for count in re.findall(r"gpu(?::[^:,(]+)?:(\d+)", gres))


def _minutes(limit: str) -> int | None:
    """A time limit as sinfo prints it (`infinite`, `30:00`, `4:00:00`, `2-00:00:00`) in whole
    minutes; None when there is none."""
    if not re.fullmatch(r"(\d+-)?\d+(:\d+){0,2}", limit):
        return None
    days, _, clock = limit.rpartition("-")
    parts = [int(part) for part in clock.split(":")]
    hours, minutes, seconds = ([0] * (3 - len(parts)) + parts) if len(parts) > 1 else (0, parts[0], 0)
    return int(days or 0) * 1440 + hours * 60 + minutes + math.ceil(seconds / 60)


def _slurm_command(argv: list[str]) -> str:
    """A SLURM command's output; a failure (the controller does not answer) is a RecipeError."""
    try:
        result = subprocess.run(argv, capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired:
        result = subprocess.CompletedProcess(argv, 1, "", f"no answer in {COMMAND_TIMEOUT_S} s")
    if result.returncode != 0:
        raise RecipeError(
            [
                _flag_issue(
                    "--executor slurm",
                    f"`{' '.join(argv)}` failed: {result.stderr.strip() or f'exit code {result.returncode}'}",
                    "check that the cluster's controller answers (`sinfo`), then run the sweep again",
                )
            ]
        )
    return result.stdout
