"""The run-record tests run their models on one thread (tests/conftest.py says why)."""

import pytest


@pytest.fixture(autouse=True)
def _one_thread(one_thread):
    """Every test here runs its models on one thread."""
