"""Sweep files for the tests, and overrides that make a run of the embedded default take seconds."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

# A run of a few seconds: 2 steps of 4 prompts x 4 samples, one mini-batch, a small evaluation.
TINY = {
    "trainer.total_steps": 2,
    "trainer.prompts_per_step": 4,
    "trainer.eval.prompts": 16,
    "trainer.eval.every_steps": 1,
    "trainer.checkpoint.every_steps": 1,
    "rollout.n": 4,
    "actor.mini_batch_samples": 8,
    "actor.micro_batch_samples": 8,
    "logging.console.enabled": False,
}

WriteSweep = Callable[..., Path]


@pytest.fixture
def write_sweep(tmp_path: Path) -> WriteSweep:
    """`write_sweep(text_or_mapping, name="sweep.yaml")`: the file in tmp_path (runs go to tmp_path/runs)."""

    def write(content: str | dict, name: str = "sweep.yaml") -> Path:
        path = tmp_path / name
        path.write_text(content if isinstance(content, str) else yaml.safe_dump(content, sort_keys=False))
        return path

    return write


@pytest.fixture
def tiny() -> dict:
    return dict(TINY)


@pytest.fixture
def rlrun() -> Callable[..., subprocess.CompletedProcess]:
    """`rlrun(*args, cwd=...)`: the CLI as a user runs it, a fresh process with its exit code and streams."""

    def run(*args: str, cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess:
        command = [sys.executable, "-m", "rlrun", *args]
        return subprocess.run(command, check=False, cwd=cwd, capture_output=True, text=True, timeout=timeout)

    return run
