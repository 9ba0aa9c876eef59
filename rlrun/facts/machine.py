"""Probes of what this machine can do, asked by validation before anything loads and by the
trainer when it builds its passes."""

from __future__ import annotations

import importlib.util
import os
import shutil

import torch


def numerics() -> dict[str, str]:
    """What decides a CPU run's float results besides its seed and thread count: the libraries
    that compute them, and the instruction set torch's CPU kernels use (AVX2, AVX512, ...), which
    orders float sums differently. Elsewhere the same seed rounds differently, and a run that
    compares its metrics to a threshold may cross it at another step."""
    from importlib import metadata

    return {
        "torch": torch.__version__,
        "torch_cpu_kernels": torch.backends.cpu.get_cpu_capability(),
        "transformers": metadata.version("transformers"),
        "numpy": metadata.version("numpy"),
    }


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


def fsdp_module_class() -> type | None:
    """torch's FSDP2 module class (public from torch 2.6), None where torch lacks it."""
    try:
        from torch.distributed.fsdp import FSDPModule
    except ImportError:
        return None
    return FSDPModule


def dtensor_class() -> type | None:
    """torch's distributed tensor class, what FSDP2's sharded parameters are (public from torch
    2.5), None where torch lacks it."""
    try:
        from torch.distributed.tensor import DTensor
    except ImportError:
        return None
    return DTensor


def strategy_problem(strategy: str, device: str) -> str | None:
    """Why this machine cannot run `trainer.strategy` (None: it can); `device`: `cuda` or `cpu`,
    where the run trains. Checked before anything loads: a strategy is never swapped for
    another (Accelerate on CPU sets up plain data parallelism whatever the launch flags say)."""
    if strategy.startswith("deepspeed"):
        if importlib.util.find_spec("deepspeed") is None:
            return "DeepSpeed is not installed"
        if device != "cuda":
            # accelerate.state: ZeRO only `and not cpu`; DeepSpeed's own CPU accelerator is unused
            return "Accelerate runs DeepSpeed only on GPUs, and this run trains on the CPU"
    if strategy == "fsdp2" and fsdp_module_class() is None:
        return f"torch {torch.__version__} has no FSDP2 (`torch.distributed.fsdp.fully_shard`, torch 2.6 on)"
    return None
