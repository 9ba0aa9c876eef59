"""The shipped tiny model (rlrun:tiny-base) and its tokenizer, loaded once per test module."""

import pytest
from transformers import AutoModelForCausalLM, AutoTokenizer

from rlrun.embedded import resolve_model_path


@pytest.fixture(scope="module")
def model_and_tokenizer():
    path = resolve_model_path("rlrun:tiny-base")
    return AutoModelForCausalLM.from_pretrained(path), AutoTokenizer.from_pretrained(path)
