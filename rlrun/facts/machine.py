"""Probes of what this machine can do, asked by validation before anything loads and by the
trainer when it builds its passes."""

from __future__ import annotations

import os
import shutil

import torch


def bf16_supported(device_type: str) -> bool:
    """Whether this machine computes in bfloat16 natively on `device_type` (on CPU: oneDNN's
    check for AVX512-BF16 / AMX; elsewhere autocast would emulate it, slower than float32)."""
    if device_type == "cuda":
        return torch.cuda.is_available() and torch.cuda.is_bf16_supported()
    return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())


def cpp_compiler() -> str | None:
    """The C++ compiler torch.compile's CPU backend (inductor) would call, if it is installed."""
    from torch._inductor import config

    return shutil.which(os.environ.get("CXX") or config.cpp.cxx[-1])
