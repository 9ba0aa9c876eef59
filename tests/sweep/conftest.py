"""Sweep files for the tests, overrides that make a run of the embedded default take seconds, and
a real one-host SLURM cluster for the SLURM executor's tests."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
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


SLURM_SCRIPT = Path(__file__).parents[2] / "scripts" / "slurm_one_host.sh"
REQUIRE_SLURM = "RLRUN_REQUIRE_SLURM"  # set to 1 (CI): a cluster that cannot start fails the tests


@pytest.fixture(scope="session")
def slurm_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """A real one-host SLURM cluster for this test session (scripts/slurm_one_host.sh: munge,
    slurmctld and slurmd, a partition of this machine's cores), stopped afterwards. Yields the
    environment its commands need (SLURM_CONF). Starting it needs root (it installs slurm-wlm and
    munge with apt if they are missing): elsewhere its tests skip, unless RLRUN_REQUIRE_SLURM=1."""

    def unavailable(reason: str) -> None:
        if os.environ.get(REQUIRE_SLURM) == "1":
            pytest.fail(f"{REQUIRE_SLURM}=1 but the one-host SLURM cluster cannot start: {reason}")
        pytest.skip(f"a real SLURM cluster is needed: {reason}")

    if os.geteuid() != 0:
        unavailable("starting munged and slurmd (scripts/slurm_one_host.sh) needs root")
    folder = tmp_path_factory.mktemp("slurm")
    began = time.monotonic()
    started = subprocess.run(
        [str(SLURM_SCRIPT), "start", str(folder)], capture_output=True, text=True, timeout=900, check=False
    )
    if started.returncode != 0:
        unavailable(f"{SLURM_SCRIPT.name} start failed: {started.stderr.strip()[-2000:]}")
    print(f"one-host SLURM cluster started in {time.monotonic() - began:.1f} s ({folder})", file=sys.stderr)
    try:
        yield {**os.environ, "SLURM_CONF": str(folder / "slurm.conf")}
    finally:
        subprocess.run([str(SLURM_SCRIPT), "stop", str(folder)], timeout=120, check=False)
