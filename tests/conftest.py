"""Fixtures shared across test packages: a randomly initialised, very small causal LM
(milliseconds to build), and one intra-op thread for tests that run models in-process."""

from __future__ import annotations

import os

import pytest
import torch
from transformers import Qwen2Config, Qwen2ForCausalLM

# One terminal width for every test and the commands they start, set before rlrun's consoles
# exist: without a terminal rich wraps at 80 columns, and where a message wraps would then depend
# on the length of pytest's temporary paths (longer under pytest-xdist's workers).
os.environ["COLUMNS"] = "200"


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
