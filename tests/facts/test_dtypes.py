"""facts/dtypes.py: the dtype keyword each transformers version takes."""

import pytest
import torch
import transformers

from rlrun.facts.dtypes import dtype_argument, dtype_keyword


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
