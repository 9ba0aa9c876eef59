"""Fixtures shared across test packages: a randomly initialised, very small causal LM
(milliseconds to build), one intra-op thread for tests that run models in-process, and a run's
record (meta.json) as `rlrun train` writes it."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import pytest
import torch
from transformers import Qwen2Config, Qwen2ForCausalLM

from rlrun.records.record import RunMeta

# One terminal width for every test and the commands they start, set before rlrun's consoles
# exist: without a terminal rich wraps at 80 columns, and where a message wraps would then depend
# on the length of pytest's temporary paths (longer under pytest-xdist's workers).
os.environ["COLUMNS"] = "200"

# pytest-xdist's workers share the cores: each worker, and every process it starts, takes its
# share of them (OMP_NUM_THREADS, unless set), not one thread per core each. Oversubscribed,
# torch's threads wait on each other's descheduled ones: a tiny run's step took 2.7 s, not 0.2.
# The documentation pages' commands run with rlrun's own defaults all the same (docs_transcripts).
WORKERS = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
if WORKERS > 1:
    os.environ.setdefault("OMP_NUM_THREADS", str(max(1, (os.cpu_count() or 1) // WORKERS)))
    torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Files with a slow test first, each file's tests in their order: pytest-xdist hands whole
    files to the workers in this order (`--no-loadscope-reorder`, pyproject.toml), so the runs
    of minutes start early and do not end alone on one worker while the other idles (replayed
    on one suite run's durations, 2026-12-06: 1,386 s against 1,453 s with xdist's own order,
    which puts files with many tests first)."""
    slow = {item.path for item in items if item.get_closest_marker("slow")}
    items.sort(key=lambda item: item.path not in slow)  # stable


@pytest.fixture
def random_lm() -> Qwen2ForCausalLM:
    torch.manual_seed(0)
    config = Qwen2Config(
        vocab_size=24,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=64,
        tie_word_embeddings=True,
        eos_token_id=1,
        pad_token_id=0,
    )
    return Qwen2ForCausalLM(config)


@pytest.fixture
def one_thread():
    """One intra-op thread: the tiny models gain nothing from more, and on a shared 2-core
    machine a second spinning thread makes every step many times slower."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture
def run_meta() -> Callable[..., RunMeta]:
    """`run_meta(**fields)`: the record of a finished 10-step run, with `fields` changed."""

    def make(**fields: Any) -> RunMeta:
        record = {
            "name": "run",
            "status": "finished",
            "git_sha": "0123456789abcdef",
            "git_dirty": False,
            "versions": {"python": "3.11.7", "rlrun": "0.1.0"},
            "seed": 0,
            "start_time": "2026-11-29T10:00:00+00:00",
            "end_time": "2026-11-29T10:05:00+00:00",
            "total_steps": 10,
            "algorithm": {
                "advantage": "grpo",
                "policy_loss": "vanilla",
                "kl_placement": "none",
                "text": "grpo",
            },
            "model": "rlrun:tiny-base",
            "setup": {
                "processes": 1,
                "machines": 1,
                "strategy": "none",
                "device": "cpu",
                "device_name": "cpu",
                "dtype": "float32",
                "mixed_precision": "no",
                "rollout_engine": "hf",
            },
            "recipe": "grpo.yaml",
            "overrides": [],
            "wandb_run_id": None,
            "pid": 4242,
            "hostname": "box",
            "heartbeat": "2026-11-29T10:05:00+00:00",
            "resumes": [],
            "final_step": 10,
        }
        return RunMeta.model_validate({**record, **fields})

    return make
