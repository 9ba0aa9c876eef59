"""Multi-process training: re-run the current rlrun command under Accelerate's launcher.

``rlrun train recipe.yaml --num-processes 8`` (or ``rlrun resume RUN_DIR --num-processes 8``)
starts as one ordinary process. That process calls :func:`relaunch_with_accelerate`, which runs
``accelerate launch`` on the same command line and waits for it; every launched process runs
the same command again with ``RLRUN_LAUNCHED=1`` in its environment, sees :func:`is_relaunched`
is true and trains instead of relaunching (the guard against recursion).

The caller (the CLI) does, before building anything heavy::

    if num_processes > 1 and not is_relaunched():
        raise SystemExit(relaunch_with_accelerate(sys.argv[1:], Topology(num_processes, ...),
                                                  strategy=recipe.trainer.strategy))

Strategies (``trainer.strategy``):

- ``ddp``: plain data parallel (``--multi_gpu``; on a machine without CUDA, gloo on CPU).
- ``fsdp2``: FSDP version 2 (``--use_fsdp --fsdp_version 2``), transformer-block wrapping (on
  CPU Accelerate ignores these flags and rlrun shards, `rlrun.training.sharding`); checkpoints
  hold full state dicts, so they load in any number of processes.
- ``deepspeed_zero2`` / ``deepspeed_zero3``: a DeepSpeed JSON config written to a temporary
  file (removed when the launch ends); ZeRO-3 gathers 16-bit weights on save.

A user's own ``--accelerate-config FILE`` is passed through as ``--config_file`` and then
decides the distributed setup by itself: no strategy flags are added, only the topology
flags that were given (Accelerate lets flags override the file).
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

import psutil
import torch

from rlrun import interrupt
from rlrun.errors import ConfigIssue, RecipeError
from rlrun.facts.launched import RELAUNCH_ENV, is_relaunched, launched_machine
from rlrun.recipes import LoadedRecipe
from rlrun.recipes.keys import KeyPath
from rlrun.recipes.yaml_io import Mark, Shape, parse_document, read_text
from rlrun.schema import Recipe

STRATEGIES = ("ddp", "fsdp2", "deepspeed_zero2", "deepspeed_zero3")
MIXED_PRECISIONS = ("no", "bf16", "fp16")
ENTRY_MODULE = "rlrun"  # each launched process runs `python -m rlrun <argv>` (rlrun/__main__.py)
# torchrun's `--signals_to_handle` (its environment form): the agent handles only these itself
# and ignores the stop signals (see `run_launcher`). An older torch without the option has its
# agent pass SIGINT and SIGTERM on as well; the training processes take such a twin as one.
LAUNCHER_SIGNALS = "SIGHUP,SIGQUIT"


@dataclass(frozen=True)
class Topology:
    """Where the processes run, in Accelerate's terms.

    Attributes:
        num_processes: processes in total, across all machines.
        num_machines, machine_rank: multi-node layout; run the same command on every machine
            with its own ``machine_rank``.
        main_process_ip, main_process_port: the rendezvous address (machine 0); the IP is
            required with more than one machine, the port defaults to Accelerate's.
    """

    num_processes: int
    num_machines: int = 1
    machine_rank: int = 0
    main_process_ip: str | None = None
    main_process_port: int | None = None

    def problems(self) -> list[tuple[str, str]]:
        """(field, why) for each part of the layout that cannot be launched, in the words of the
        rlrun flags (`FLAGS`)."""
        processes, machines, rank = self.num_processes, self.num_machines, self.machine_rank
        out = []
        if processes < 1:
            out.append(("num_processes", f"--num-processes must be at least 1, got {processes}"))
        if machines < 1:
            out.append(("num_machines", f"--num-machines must be at least 1, got {machines}"))
        elif processes % machines:
            why = "--num-processes counts the processes on all machines: a multiple of --num-machines"
            out.append(("num_processes", f"{why} ({processes} processes on {machines} machines)"))
        elif not 0 <= rank < machines:
            why = f"--machine-rank must be 0 to {machines - 1} with --num-machines {machines}, got {rank}"
            out.append(("machine_rank", why))
        if machines > 1 and not self.main_process_ip:
            out.append(
                ("main_process_ip", "more than one machine needs --main-process-ip (machine 0's address)")
            )
        return out

    def check(self) -> None:
        """Raises ValueError for a layout that cannot be launched."""
        if problems := self.problems():
            raise ValueError("; ".join(why for _, why in problems))

    def launch_flags(self) -> list[str]:
        """The ``accelerate launch`` flags of this layout (they override a config file's)."""
        flags = [
            "--num_processes",
            str(self.num_processes),
            "--num_machines",
            str(self.num_machines),
            "--machine_rank",
            str(self.machine_rank),
        ]
        if self.main_process_ip is not None:
            flags += ["--main_process_ip", self.main_process_ip]
        if self.main_process_port is not None:
            flags += ["--main_process_port", str(self.main_process_port)]
        return flags


def relaunch_with_accelerate(
    argv: Sequence[str],
    topology: Topology,
    accelerate_config: str | Path | None = None,
    strategy: str = "ddp",
    *,
    mixed_precision: str = "no",
    cpu: bool | None = None,
) -> int:
    """Run the rlrun command ``argv`` in ``topology.num_processes`` processes; return the exit code.

    Args:
        argv: the rlrun command line without the program name, e.g.
            ``["train", "recipe.yaml", "--num-processes", "8"]``; passed on unchanged (the
            launched processes ignore the multi-process flags because :func:`is_relaunched`).
        topology: how many processes, on which machines.
        accelerate_config: an ``accelerate config`` YAML that then owns the setup.
        strategy: one of :data:`STRATEGIES` (``trainer.strategy``).
        mixed_precision: ``no`` | ``bf16`` | ``fp16`` (Accelerate's autocast).
        cpu: run on CPU with gloo; ``None`` = when no CUDA device is visible.

    Raises:
        RuntimeError: when called inside a launched process (recursion).
        ValueError: for an impossible topology, strategy or precision.
    """
    if is_relaunched():
        raise RuntimeError(
            f"already running under accelerate launch ({RELAUNCH_ENV}=1); refusing to relaunch"
        )
    use_cpu = (not torch.cuda.is_available()) if cpu is None else cpu
    with tempfile.TemporaryDirectory(prefix="rlrun-launch-") as config_dir:
        command = accelerate_command(
            argv,
            topology,
            accelerate_config,
            strategy,
            mixed_precision=mixed_precision,
            config_dir=Path(config_dir),
        )
        env = {**os.environ, "PET_SIGNALS_TO_HANDLE": LAUNCHER_SIGNALS, RELAUNCH_ENV: "1"}
        if use_cpu:
            # Accelerate's torchrun path plus this flag gives multi-process CPU (gloo); its own
            # --cpu flag would start a single process instead.
            env["ACCELERATE_USE_CPU"] = "true"
        return run_launcher(command, env, note=waiting_note(topology))


ACCELERATE_PORT = 29500  # the rendezvous port `accelerate launch` uses when given none


def waiting_note(topology: Topology) -> str | None:
    """What a machine of several says while it waits for the others (the launcher itself is
    silent until all have joined, however long that takes); None for one machine."""
    if topology.num_machines < 2:
        return None
    others = ", ".join(str(rank) for rank in range(topology.num_machines) if rank != topology.machine_rank)
    address = f"{topology.main_process_ip}:{topology.main_process_port or ACCELERATE_PORT}"
    return (
        f"rlrun: machine {topology.machine_rank} of {topology.num_machines}, waiting for machine "
        f"{others} at {address}: training starts once every machine has run this command with its "
        "own --machine-rank"
    )


def run_launcher(command: Sequence[str], env: dict[str, str], note: str | None = None) -> int:
    """Run the launcher and wait for it; return its exit code, or
    :data:`rlrun.interrupt.INTERRUPTED` when a stop signal came. `note` is printed once the
    launcher runs and the stop signals are handled (a signal it prompts is passed on).

    Each stop signal this process gets (Ctrl-C, SIGTERM, SIGUSR1) goes once to every training
    process: on the first they finish their step and save a checkpoint, on a second (passed on
    as SIGINT, or SIGTERM after a first SIGINT) they stop at once, as a single process does.
    torchrun starts each training process in a session of its own, where a terminal's Ctrl-C
    does not reach it, so this process sends the signals itself; the launcher runs in its own
    session too and ignores them (an ignored signal stays ignored across exec; the training
    processes set their own handlers), or it would pass each one on a second time and, after
    30 s, kill processes still saving. A signal before the training processes exist ends the
    launcher at once.
    """
    on_main_thread = threading.current_thread() is threading.main_thread()
    previous = {}
    if on_main_thread:  # a signal in the moment until the launcher has started is lost
        previous = {sig: signal.signal(sig, signal.SIG_IGN) for sig in interrupt.STOP_SIGNALS}
    received: list[int] = []
    started: list[bool] = []  # whether the training processes ran when the first signal came
    try:
        process = subprocess.Popen(list(command), env=env, start_new_session=True)

        def pass_on(signum: int, frame: Any) -> None:
            received.append(signum)
            if _has_ended(process.pid):
                return
            workers = _children(process.pid)
            started.append(bool(workers))
            if not workers:  # still starting up (or waiting for other machines): nothing to save
                print(
                    f"rlrun: {signal.Signals(signum).name} before the training processes started: "
                    "the launch ends here.",
                    file=sys.stderr,
                )
                process.kill()
            # The training processes take the same signal again soon for the first delivered
            # twice (SLURM signals them too): a second request reaches them as another one.
            first = received[0]
            sent = (
                signum if len(received) == 1 else signal.SIGTERM if first == signal.SIGINT else signal.SIGINT
            )
            for pid in workers:
                with contextlib.suppress(ProcessLookupError):  # it ended meanwhile
                    os.kill(pid, sent)

        if on_main_thread:
            for sig in interrupt.STOP_SIGNALS:
                signal.signal(sig, pass_on)
        if note is not None:
            print(note, file=sys.stderr, flush=True)
        code = process.wait()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if received and started[:1] == [True]:
        # Only the main process (on machine 0) names the checkpoint: every launcher says why it ends.
        outcome = "after saving their step" if code == 0 else f"with exit code {code}"
        print(
            f"rlrun: stopped by {signal.Signals(received[0]).name}: the training processes ended "
            f"{outcome}; `rlrun resume RUN_DIR` continues the run.",
            file=sys.stderr,
        )
    return interrupt.INTERRUPTED if received else code


def _has_ended(pid: int) -> bool:
    """Whether this process's child `pid` has ended, without reaping it (`Popen.poll` cannot tell
    inside a signal handler that interrupted `Popen.wait`, which holds its lock)."""
    try:
        return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    except ChildProcessError:  # already reaped
        return True


def _children(pid: int) -> list[int]:
    """The processes whose parent is `pid`. `pid` is this process's own child, not yet waited
    for, so it cannot have been reused; psutil's `Process.children()` would also drop a child
    whose start time, computed from the wall clock, reads older than its parent's."""
    return [p.pid for p in psutil.process_iter(["ppid"]) if p.info["ppid"] == pid]


# How long the first machine's processes stay after the others at a clean end (see below).
STORE_HOST_LINGER_S = 2.0


def _hosts_the_launchers_store() -> bool:
    """Whether this process runs on the first of several machines, whose torchrun agent holds the
    store every agent meets in at exit. That meeting is safe only when this agent arrives last:
    an agent that arrives last elsewhere sends its final request to a store that has just closed,
    and torchrun logs "Error waiting on exit barrier" with a traceback although the job ended
    well. Its processes therefore leave a moment after the other machines' processes."""
    rank, machines = launched_machine()
    return rank == 0 and machines > 1


def release_process_group(engine: Any = None, *, meet: bool) -> None:
    """End the training processes' communication group once the run is over (a launched process
    then leaves at once: `end_launched_process`). When every process ended after the same whole
    step (`meet`: finished, or stopped by an agreed signal) they first meet at a barrier, so none
    leaves while another still talks to it; a process that a second signal stopped at once may
    never come, and its leaving ends the barrier with an error that says nothing more than that.
    On the first of several machines they then linger a moment (`_hosts_the_launchers_store`). A
    rollout engine with a `close` (vLLM, which joined the group and destroys its own groups and
    the default one when it shuts down) is closed after the barrier, while the groups it tears
    down still exist."""
    initialized = torch.distributed.is_available() and torch.distributed.is_initialized()
    if initialized and meet:
        with contextlib.suppress(RuntimeError):  # gloo: "Connection closed by peer"
            torch.distributed.barrier()
        if _hosts_the_launchers_store():
            time.sleep(STORE_HOST_LINGER_S)
    if (close := getattr(engine, "close", None)) is not None:
        close()
    if initialized and torch.distributed.is_initialized():
        torch.distributed.destroy_process_group()


def end_launched_process(code: int | None) -> NoReturn:
    """End a process the launcher started, its command done and its process group released,
    without the interpreter's teardown. gloo's worker threads outlive `destroy_process_group`
    wherever something still holds a group (DDP's reducer; FSDP2's device meshes, which stay in
    DTensor's caches), and one that needs the GIL once the teardown has begun (to let go of a
    tensor Python gave up, or to run a callback) is ended by Python inside a C++ destructor: the
    process aborts (SIGABRT: "terminate called without an active exception", or Python's fatal
    error on a thread state) after it did all its work, and the launch fails: once in 94
    two-process runs under load. The exit handlers still run first (temporary folders, loggers,
    W&B), and the standard streams are flushed."""
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # closed or gone: nothing left to keep
            stream.flush()
    os._exit(0 if code is None else code)


def accelerate_command(
    argv: Sequence[str],
    topology: Topology,
    accelerate_config: str | Path | None = None,
    strategy: str = "ddp",
    *,
    mixed_precision: str = "no",
    config_dir: Path,
) -> list[str]:
    """The ``accelerate launch`` command line; strategy files are written into ``config_dir``."""
    topology.check()
    if strategy not in STRATEGIES:
        raise ValueError(f"unknown strategy {strategy!r}; valid: {', '.join(STRATEGIES)}")
    if mixed_precision not in MIXED_PRECISIONS:
        raise ValueError(f"unknown mixed_precision {mixed_precision!r}; valid: {', '.join(MIXED_PRECISIONS)}")
    command = [sys.executable, "-m", "accelerate.commands.launch"]
    if accelerate_config is not None:
        command += ["--config_file", str(accelerate_config)]
    command += topology.launch_flags()
    if accelerate_config is None:
        command += ["--mixed_precision", mixed_precision, "--dynamo_backend", "no"]
        command += _strategy_flags(strategy, config_dir)
    return command + ["--module", ENTRY_MODULE, *argv]


def deepspeed_config(stage: int) -> dict[str, Any]:
    """A DeepSpeed config for ZeRO ``stage``; Accelerate fills the ``"auto"`` values.

    rlrun's loop sizes its own micro-batches and accumulation, so DeepSpeed's batch numbers
    are bookkeeping: the micro-batch size must be an integer for Accelerate to accept a run
    without a prepared dataloader, and accumulation / clipping / precision come from the
    Accelerator (``"auto"``).
    """
    if stage not in (2, 3):
        raise ValueError(f"ZeRO stage must be 2 or 3, got {stage}")
    zero: dict[str, Any] = {"stage": stage, "overlap_comm": True, "contiguous_gradients": True}
    if stage == 3:
        zero["stage3_gather_16bit_weights_on_model_save"] = True  # whole HF checkpoints
    return {
        "zero_optimization": zero,
        "bf16": {"enabled": "auto"},
        "fp16": {"enabled": "auto"},
        "train_micro_batch_size_per_gpu": 1,
        "gradient_accumulation_steps": "auto",
        "train_batch_size": "auto",
        "gradient_clipping": "auto",
        "steps_per_print": 2**31 - 1,  # rlrun logs its own metrics
    }


def _strategy_flags(strategy: str, config_dir: Path) -> list[str]:
    if strategy == "ddp":
        return ["--multi_gpu"]
    if strategy == "fsdp2":
        return [
            "--use_fsdp",
            "--fsdp_version",
            "2",
            "--fsdp_auto_wrap_policy",
            "TRANSFORMER_BASED_WRAP",
            "--fsdp_reshard_after_forward",
            "true",
            # no --fsdp_state_dict_type: rlrun gathers full state dicts itself (sharding.py), and
            # Accelerate 1.6 refuses FULL_STATE_DICT with FSDP2
        ]
    stage = 2 if strategy == "deepspeed_zero2" else 3
    path = config_dir / f"deepspeed_zero{stage}.json"
    path.write_text(json.dumps(deepspeed_config(stage), indent=2) + "\n")
    flags = ["--use_deepspeed", "--deepspeed_config_file", str(path)]
    return flags + (["--zero3_init_flag", "true"] if stage == 3 else [])


def check_data_parallel(recipe: Recipe, num_processes: int) -> None:
    """Refuse a recipe that cannot be split over the processes: each process takes an equal share
    of the prompts, mini-batches and micro-batches.

    Raises:
        RecipeError: listing every count that does not divide.
    """
    counts = {
        "trainer.prompts_per_step": recipe.trainer.prompts_per_step,
        "actor.mini_batch_samples": recipe.actor.mini_batch_samples,
        "actor.micro_batch_samples": recipe.actor.micro_batch_samples,
    }
    issues = [
        ConfigIssue(
            f"{key} must be a multiple of the number of processes to split evenly over them",
            key=key,
            code="data-parallel-split",
            expected=f"a multiple of {num_processes}",
            found=str(value),
            fix=f"set {key}={max(num_processes, value // num_processes * num_processes)} or change --num-processes",
        )
        for key, value in counts.items()
        if value % num_processes
    ]
    if issues:
        raise RecipeError(issues)


# Topology's fields: the rlrun flag that sets each (an `accelerate config` file names them as
# the fields are named).
FLAGS = {
    "num_processes": "--num-processes",
    "num_machines": "--num-machines",
    "machine_rank": "--machine-rank",
    "main_process_ip": "--main-process-ip",
    "main_process_port": "--main-process-port",
}
ACCELERATE_SHAPE = Shape(
    "an `accelerate config` file is a mapping of its keys (`distributed_type:`, `num_processes:`, ...)",
    "write the file with `accelerate config --config_file FILE`, or one `key: value` per line",
)
# distributed_type values that rlrun's CPU launch (torchrun with gloo) cannot honour: Accelerate
# sets FSDP and DeepSpeed up only off the CPU; NO and MULTI_CPU start a single process (MULTI_CPU's
# several processes need mpirun and a host file, which rlrun does not drive).
_GPU_ONLY = ("FSDP", "DEEPSPEED")
_ONE_PROCESS = ("NO", "MULTI_CPU")


@dataclass(frozen=True)
class AccelerateConfig:
    """What rlrun reads of a user's `accelerate config` file: its values and where each is written."""

    path: Path
    values: dict[str, Any]
    positions: dict[KeyPath, Mark]

    def issue(self, key: str, message: str, **fields: Any) -> ConfigIssue:
        mark = self.positions.get((key,))
        return ConfigIssue(
            message,
            key=key,
            file=str(self.path),
            line=mark.line if mark else None,
            column=mark.column if mark else None,
            **fields,
        )

    def topology(self) -> tuple[dict[str, Any], list[ConfigIssue]]:
        """The file's topology fields, and an issue for each that is not of its type."""
        found, issues = {}, []
        for name in FLAGS:
            value = self.values.get(name)
            text = name == "main_process_ip"
            if value is None:
                continue
            if isinstance(value, str) if text else isinstance(value, int) and not isinstance(value, bool):
                found[name] = value
            else:
                expected = "an address" if text else "an integer"
                issues.append(
                    self.issue(name, "wrong type", code="wrong-type", expected=expected, found=repr(value))
                )
        return found, issues


def read_accelerate_config(path: Path) -> AccelerateConfig:
    """An `accelerate config` file (YAML or JSON), read as every file a user gives rlrun is."""
    data, positions, issues = parse_document(
        read_text(path, "accelerate config"), str(path), ACCELERATE_SHAPE
    )
    if issues:
        raise RecipeError(issues)
    return AccelerateConfig(path, data, positions)


def launch_topology(
    loaded: LoadedRecipe, flags: dict[str, Any], accelerate_config: Path | None = None
) -> Topology | None:
    """The processes a training command runs in: None when this one process trains alone, else
    the layout to re-launch under `accelerate launch`. `flags`: Topology's fields as the command
    line gave them (None: not given); an `accelerate config` file fills the others, as
    Accelerate's launcher does, and a command with a file always re-launches (the file owns the
    setup). Checked before anything loads: the layout, that the recipe splits over the
    processes, that the file's setup runs here, and that a sharding `trainer.strategy` has more
    than one process to shard over.

    Raises:
        RecipeError: naming the flag, or the file's key and line, of each problem.
    """
    recipe = loaded.recipe
    config = read_accelerate_config(accelerate_config) if accelerate_config is not None else None
    given = {name: value for name, value in flags.items() if value is not None}
    from_file, issues = config.topology() if config is not None else ({}, [])
    values = {"num_processes": 1, **from_file, **given}

    def issue(field: str, message: str, fix: str, at: str | None = None) -> ConfigIssue:
        """Located where the value of `at` (default: `field`) came from; naming `field`'s flag."""
        at = at or field
        if at in given:
            override = f"{FLAGS[at]} {given[at]}"
            return ConfigIssue(message, key=FLAGS[field], code="launch", override=override, fix=fix)
        if config is not None and at in from_file:
            return config.issue(at, message, code="launch", fix=fix)
        return ConfigIssue(message, key=FLAGS[field], code="launch", fix=fix)

    if "num_processes" not in {**from_file, **given} and values.get("num_machines", 1) > 1:
        issues.append(
            issue(
                "num_processes",
                "several machines need the number of processes on all of them",
                f"pass --num-processes (e.g. --num-processes {values['num_machines']} for one per machine)",
                at="num_machines",
            )
        )
    topology = Topology(**values)
    reported = {i.key for i in issues}  # a missing count is not also a wrong one
    issues += [
        issue(field, why, f"pass {FLAGS[field]} to fit the layout")
        for field, why in topology.problems()
        if FLAGS[field] not in reported
    ]
    if config is not None:
        issues += _setup_issues(config, recipe, topology)
    if issues:
        raise RecipeError(issues)
    if config is None and topology.num_processes == 1 and topology.num_machines == 1:
        _check_one_process_strategy(loaded)
        return None
    check_data_parallel(recipe, topology.num_processes)
    return topology


def _setup_issues(config: AccelerateConfig, recipe: Recipe, topology: Topology) -> list[ConfigIssue]:
    """What in an `accelerate config` file would run other than it says: FSDP or DeepSpeed on
    the CPU (Accelerate would set up plain DDP), several processes of a one-process setup."""
    kind = str(config.values.get("distributed_type", "NO")).upper()
    on_cpu = (
        config.values.get("use_cpu") is True
        or recipe.trainer.device == "cpu"
        or not torch.cuda.is_available()
    )
    if kind in _GPU_ONLY and on_cpu:
        return [
            config.issue(
                "distributed_type",
                f"Accelerate sets up {kind} only on GPUs, and this run trains on the CPU, where it "
                "would run plain data parallelism (DDP) instead",
                code="launch",
                found=f"distributed_type: {config.values['distributed_type']}",
                fix="on the CPU, set `distributed_type: MULTI_GPU` here (rlrun runs it with gloo) and "
                "`trainer.strategy: fsdp2` in the recipe to shard the models (rlrun shards them itself)",
            )
        ]
    if kind in _ONE_PROCESS and topology.num_processes > 1:
        return [
            config.issue(
                "distributed_type",
                f"Accelerate starts one process for {kind}, and the launch asks for {topology.num_processes}",
                code="launch",
                found=f"distributed_type: {config.values['distributed_type']}",
                fix="set `distributed_type: MULTI_GPU` (on a machine without GPUs rlrun runs it on the "
                "CPU with gloo), or train one process",
            )
        ]
    return []


def _check_one_process_strategy(loaded: LoadedRecipe) -> None:
    """A sharding strategy needs processes to shard over: one process would train unsharded."""
    strategy = loaded.recipe.trainer.strategy
    if strategy != "ddp":
        issue = loaded.provenance.issue(
            ("trainer", "strategy"),
            f"{strategy} shares the model among several processes, and this command trains one",
            code="strategy-one-process",
            found=f"trainer.strategy: {strategy}",
            fix="pass --num-processes N (N > 1, the processes on all machines), or set "
            "`trainer.strategy: ddp` to train in one process",
        )
        raise RecipeError([issue])
