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
from typing import Any

import psutil
import torch

from rlrun import interrupt
from rlrun.errors import ConfigIssue, RecipeError
from rlrun.facts.launched import launched_machine
from rlrun.schema import Recipe

RELAUNCH_ENV = "RLRUN_LAUNCHED"
STRATEGIES = ("ddp", "fsdp2", "deepspeed_zero2", "deepspeed_zero3")
MIXED_PRECISIONS = ("no", "bf16", "fp16")
ENTRY_MODULE = "rlrun"  # each launched process runs `python -m rlrun <argv>` (rlrun/__main__.py)
# torchrun's `--signals_to_handle` (its environment form): the agent handles only these itself
# and ignores the stop signals (see `run_launcher`). An older torch without the option has its
# agent pass SIGINT and SIGTERM on as well; the training processes take such a twin as one.
LAUNCHER_SIGNALS = "SIGHUP,SIGQUIT"


def is_relaunched() -> bool:
    """True inside a process started by :func:`relaunch_with_accelerate`."""
    return os.environ.get(RELAUNCH_ENV) == "1"


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

    def check(self) -> None:
        """Raises ValueError for a layout that cannot be launched."""
        if self.num_processes < 1 or self.num_machines < 1:
            raise ValueError(
                f"num_processes and num_machines must be >= 1, got {self.num_processes}, {self.num_machines}"
            )
        if self.num_processes % self.num_machines:
            raise ValueError(
                f"num_processes ({self.num_processes}) must be a multiple of "
                f"num_machines ({self.num_machines})"
            )
        if not 0 <= self.machine_rank < self.num_machines:
            raise ValueError(f"machine_rank must be in [0, {self.num_machines}), got {self.machine_rank}")
        if self.num_machines > 1 and not self.main_process_ip:
            raise ValueError("more than one machine needs main_process_ip (the address of machine 0)")

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
        return run_launcher(command, env)


def run_launcher(command: Sequence[str], env: dict[str, str]) -> int:
    """Run the launcher and wait for it; return its exit code, or
    :data:`rlrun.interrupt.INTERRUPTED` when a stop signal came.

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
    try:
        process = subprocess.Popen(list(command), env=env, start_new_session=True)

        def pass_on(signum: int, frame: Any) -> None:
            received.append(signum)
            if _has_ended(process.pid):
                return
            workers = _children(process.pid)
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
        code = process.wait()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
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
    """End the training processes' communication group before Python's teardown, where gloo's
    threads can abort a process that has done its work (SIGABRT, "terminate called without an
    active exception", and torchrun reports the launch failed). When every process ended after
    the same whole step (`meet`: finished, or stopped by an agreed signal) they first meet at a
    barrier, so none leaves while another still talks to it; a process that a second signal
    stopped at once may never come, and its leaving ends the barrier with an error that says
    nothing more than that. On the first of several machines they then linger a moment
    (`_hosts_the_launchers_store`). A rollout engine with a `close` (vLLM, which joined the group
    and destroys its own groups and the default one when it shuts down) is closed after the
    barrier, while the groups it tears down still exist."""
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
    of the prompts, mini-batches and micro-batches; under FSDP2 a LoRA policy is refused (its
    adapters are not loaded into, nor saved from, sharded weights).

    Raises:
        RecipeError: listing every count that does not divide, and the strategy.
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
    if num_processes > 1 and recipe.trainer.strategy == "fsdp2" and recipe.model.lora:
        issues.append(
            ConfigIssue(
                "LoRA is not supported under FSDP2: rlrun neither loads adapters into sharded weights "
                "nor saves them from there",
                key="trainer.strategy",
                code="strategy-unsupported",
                expected="ddp with model.lora",
                found="fsdp2",
                fix="set trainer.strategy=ddp (a LoRA policy's optimizer state is small), or remove model.lora",
            )
        )
    if issues:
        raise RecipeError(issues)
