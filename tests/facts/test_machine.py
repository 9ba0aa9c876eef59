"""What decides a CPU run's numbers besides its seed (rlrun.facts.machine.numerics)."""

import os
import subprocess
import sys
from pathlib import Path

import numpy
import torch
import transformers

from rlrun.facts.machine import numerics

REPO = Path(__file__).resolve().parents[2]


def test_numerics_names_the_libraries_and_the_kernels_torch_runs():
    assert numerics() == {
        "torch": torch.__version__,
        "torch_cpu_kernels": torch.backends.cpu.get_cpu_capability(),
        "transformers": transformers.__version__,
        "numpy": numpy.__version__,
    }


def test_the_kernels_are_those_torch_chose_at_start_up():
    """ATEN_CPU_CAPABILITY caps the instruction set torch dispatches to: a process held to the
    baseline kernels reports them, whatever this CPU has."""
    env = {**os.environ, "ATEN_CPU_CAPABILITY": "default", "PYTHONPATH": str(REPO)}
    code = "from rlrun.facts.machine import numerics; print(numerics()['torch_cpu_kernels'])"
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "DEFAULT"
