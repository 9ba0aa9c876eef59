"""The condition of the tests against real vLLM on CPU (test_vllm_cpu*.py): vLLM's CPU build is
installed here, as in CI's vLLM stage (`.ci/run`, `vllm_install`). Not a test module."""

from __future__ import annotations

import importlib.util

import pytest

from rlrun.rollout.vllm import installed_build

BUILD = installed_build()
NEEDS_VLLM_CPU = pytest.mark.skipif(
    importlib.util.find_spec("vllm") is None or BUILD is None or BUILD.device != "cpu",
    reason="needs vLLM's CPU build (vllm-cpu); .ci/run's vLLM stage installs it",
)
