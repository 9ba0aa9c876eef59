"""The trainer's tests run on one thread, and `torchrun` starts two local processes."""

from __future__ import annotations

import socket
import sys

import pytest


@pytest.fixture(autouse=True)
def _one_thread(one_thread):
    """Every test here runs its models on one thread (tests/conftest.py says why)."""


@pytest.fixture
def torchrun() -> list[str]:
    """`torchrun` for two processes on this machine; append the script and its arguments."""
    with socket.socket() as probe:  # a free rendezvous port: other test runs may share this machine
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--nproc_per_node",
        "2",
        "--master_port",
        str(port),
    ]
