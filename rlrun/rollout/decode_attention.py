"""Attention for the hf engine's decode steps: one query per row over the slot cache's filled
columns, as two batched matmuls and a softmax.

For a single query, torch's ``scaled_dot_product_attention`` on CPU runs its flash kernel, which
at decode shapes (SmolLM2: 32-128 rows, 3 key-value heads of 3 queries, 60-550 keys) took 1.2-2.1x
as long as these matmuls (benchmarks/README.md, "A decode step's attention"). The function is
registered with transformers' attention functions and stands in for the model's sdpa attention
only inside ``single_query_attention(model)``, which ``SlotCache.step`` enters. It computes what
sdpa computes - softmax(q k^T x scaling + mask) v, each key-value head serving its group of
query heads - for the families whose attention is exactly that (``FAMILIES``, tested against a
plain forward pass in tests/rollout/test_kv_cache.py); any other call (more than one query, no
additive mask, dropout, or an extra such as soft-capping) goes to sdpa itself.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import torch
from transformers import AttentionInterface
from transformers.integrations.sdpa_attention import sdpa_attention_forward

NAME = "rlrun_single_query"
# Model types whose attention is exactly softmax(q k^T x scaling + mask) v, each key-value head
# serving a group of query heads: rlrun's documented families (Qwen2's layers also pass
# `sliding_window`, None without one).
FAMILIES = frozenset({"llama", "qwen2", "qwen3"})
_CHANGES_RESULT = ("sliding_window", "softcap", "s_aux", "sinks", "position_bias")


def attention(
    module: torch.nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    dropout: float = 0.0,
    scaling: float | None = None,
    **kwargs: Any,
) -> tuple[torch.Tensor, None]:
    """transformers' attention-function interface: query (b, heads, 1, d), key and value
    (b, kv_heads, keys, d), an additive mask broadcasting to (b, 1, 1, keys); returns
    (b, 1, heads, d), as sdpa's wrapper does."""
    batch, heads, length, dim = query.shape
    shared_mask = (
        attention_mask is not None and attention_mask.is_floating_point() and attention_mask.shape[1] == 1
    )
    exact = length == 1 and dropout == 0.0 and shared_mask  # one additive mask for every head
    if not exact or any(kwargs.get(k) is not None for k in _CHANGES_RESULT):
        return sdpa_attention_forward(module, query, key, value, attention_mask, dropout, scaling, **kwargs)
    kv_heads = key.shape[1]
    grouped = query.reshape(batch, kv_heads, heads // kv_heads, dim)  # head j * g + r reads kv head j
    scores = torch.matmul(grouped, key.transpose(-1, -2)).mul_(dim**-0.5 if scaling is None else scaling)
    out = torch.matmul(scores.add_(attention_mask).softmax(-1), value)
    return out.reshape(batch, 1, heads, dim), None


AttentionInterface.register(NAME, attention)


def applies(model: torch.nn.Module) -> bool:
    """Whether decode steps of ``model`` take this attention (else they keep the model's own): a
    float32 model of a family in ``FAMILIES`` on CPU, where it was measured faster (on a GPU,
    sdpa's kernels are; in half precision sdpa's softmax runs in float32)."""
    config = model.config
    if config._attn_implementation != "sdpa" or getattr(config, "model_type", None) not in FAMILIES:
        return False
    return model.device.type == "cpu" and model.dtype == torch.float32


@contextlib.contextmanager
def single_query_attention(model: torch.nn.Module) -> Iterator[None]:
    """The model's attention is this module's inside the block, where ``applies``; restored after."""
    if not applies(model):
        yield
        return
    model.config._attn_implementation = NAME
    try:
        yield
    finally:
        model.config._attn_implementation = "sdpa"
