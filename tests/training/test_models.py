"""training/models.py: the dtype keyword each transformers version takes, and loading through it."""

import pytest
import torch
import transformers

from rlrun.training.models import dtype_argument, dtype_keyword, load_causal_lm


@pytest.mark.parametrize(
    ("version", "keyword"),
    [
        ("4.46.3", "torch_dtype"),
        ("4.51.3", "torch_dtype"),
        ("4.55.4", "torch_dtype"),
        ("4.56.0", "dtype"),
        ("4.57.6", "dtype"),
        ("5.0.0", "dtype"),
        ("5.24.0", "dtype"),
        ("5.25.0.dev0", "dtype"),
    ],
)
def test_dtype_keyword_follows_the_rename_in_transformers_4_56(version, keyword):
    assert dtype_keyword(version) == keyword


def test_the_installed_version_gets_its_keyword():
    assert dtype_argument(torch.bfloat16) == {dtype_keyword(transformers.__version__): torch.bfloat16}


def test_the_embedded_model_loads_in_the_asked_dtype():
    assert load_causal_lm("rlrun:tiny-base", dtype="bfloat16", trainable=False).dtype == torch.bfloat16
