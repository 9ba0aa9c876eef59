"""The weight dtypes a recipe may name (`model.dtype`, a reward model's `dtype`) and how to pass
one to `from_pretrained` on the installed transformers."""

from __future__ import annotations

import torch
import transformers
from packaging.version import Version

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def dtype_keyword(transformers_version: str) -> str:
    """The `from_pretrained` keyword for the weights' dtype: `dtype` from transformers 4.56 on,
    `torch_dtype` before (older versions pass an unknown `dtype` into the config, whose JSON
    serialisation then fails)."""
    return "dtype" if Version(transformers_version) >= Version("4.56") else "torch_dtype"


def dtype_argument(dtype: torch.dtype) -> dict[str, torch.dtype]:
    """`from_pretrained(..., **dtype_argument(torch.bfloat16))` on the installed transformers."""
    return {dtype_keyword(transformers.__version__): dtype}
