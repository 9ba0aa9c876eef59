"""Peak memory of each training process under `trainer.strategy: ddp` and `fsdp2`.

Runs `rlrun train RECIPE --num-processes 2` once per strategy (one after the other, so they do
not share the cores) and reads each training process's peak resident set (`VmHWM` in
/proc/PID/status, the kernel's high-water mark) until it ends, and the state a process keeps
between steps (`memory/held_state_mib` in metrics.jsonl: weights and AdamW state, its shards
under fsdp2). On CPU this is the memory the
strategies differ in: weights, gradients and AdamW's two moments per process, plus the whole
weights FSDP2 gathers for sampling and scoring, plus what the allocator keeps.

    python benchmarks/sharded_memory.py [--recipe real/grpo_smollm2] [--steps 2] [OVERRIDE...]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

from rlrun.records.rundir import RunDir, read_metrics

QUIET = ["logging.console.enabled=false", "trainer.eval.prompts=8", "trainer.checkpoint.every_steps=0"]


def peak_rss_mib(command: list[str]) -> dict[int, float]:
    """Run `command`; the peak resident set (MiB) of every process started under it that ran
    rlrun's training (`python -m rlrun` below the launcher), by pid."""
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL)
    launcher = psutil.Process(proc.pid)
    peaks: dict[int, float] = {}
    while proc.poll() is None:
        for child in launcher.children(recursive=True):
            try:
                if child.ppid() == launcher.pid or "rlrun" not in " ".join(child.cmdline()):
                    continue  # the accelerate launcher itself
                status = Path(f"/proc/{child.pid}/status").read_text()
            except (psutil.NoSuchProcess, OSError):
                continue
            hwm = next(line for line in status.splitlines() if line.startswith("VmHWM"))
            peaks[child.pid] = int(hwm.split()[1]) / 1024
        time.sleep(0.2)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed with exit code {proc.returncode}")
    return peaks


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--recipe", default="real/grpo_smollm2")
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("overrides", nargs="*")
    args = parser.parse_args()
    for strategy in ("ddp", "fsdp2"):
        with tempfile.TemporaryDirectory() as tmp:
            run_dir = Path(tmp) / "run"
            command = [sys.executable, "-m", "rlrun", "train", args.recipe, *QUIET, *args.overrides]
            command += [f"trainer.total_steps={args.steps}", f"trainer.strategy={strategy}"]
            command += ["--run-dir", str(run_dir), "--num-processes", "2"]
            started = time.monotonic()
            peaks = peak_rss_mib(command)
            seconds = time.monotonic() - started
            ran = RunDir(run_dir).read_meta().setup.strategy
            rows = read_metrics(run_dir / "metrics.jsonl", [])
            held = [row["memory/held_state_mib"] for row in rows if "memory/held_state_mib" in row]
        per_process = ", ".join(f"{mib:.0f}" for mib in sorted(peaks.values()))
        print(
            f"{strategy}: ran as {ran}; weights and optimizer state held per process (MiB): "
            f"{held[-1]:.0f}; peak RSS per training process (MiB): {per_process}; {seconds:.0f} s"
        )


if __name__ == "__main__":
    main()
