"""Shared prompts: run each distinct prompt through the model once, then reuse its KV cache for
every row that continues it.

A GRPO-style batch answers each prompt n times. Under causal attention a prompt's keys and
values do not depend on what follows it, so computing them once per prompt and gathering them
to the rows is exact, forward and backward (the rows' gradients sum into the shared prompt).
Both the rollout engine (generation) and the trainer (log-probs) use it.
"""

from __future__ import annotations

import inspect
from functools import cache
from typing import Any

import torch


def cache_keyword(model: torch.nn.Module) -> str:
    """The forward keyword of a transformers KV cache: `cache` from transformers 5.2x on,
    `past_key_values` before (the old name is deprecated, so the newest one the model takes)."""
    return _cache_keyword_of(type(base_model(model)))


def base_model(model: torch.nn.Module) -> torch.nn.Module:
    """The transformers model inside the wrappers of distributed training and peft."""
    inner = model
    while True:  # DDP / DeepSpeed wrap in `.module`, peft in `get_base_model()`
        if hasattr(inner, "get_base_model"):
            inner = inner.get_base_model()
        elif isinstance(getattr(inner, "module", None), torch.nn.Module):
            inner = inner.module
        else:
            return inner


@cache
def _cache_keyword_of(model_class: type) -> str:
    return "cache" if "cache" in inspect.signature(model_class.forward).parameters else "past_key_values"


def takes_4d_mask(model: torch.nn.Module) -> bool:
    """Whether the model computes attention exactly under a custom 4D attention mask passed
    through unchanged (the trainer's packed layout, the hf engine's preallocated cache):
    transformers' sdpa and eager attention take one (4.51's `_update_causal_mask` and 5.x's
    `create_causal_mask` return a 4D mask as given), while flash attention ignores it and flex
    attention wants a BlockMask. A sliding window would be dropped with the model's own mask, so
    such models are left out, as are models outside transformers' own classes (FSDP2's sharded
    ones included: `_library_class`)."""
    inner = base_model(model)
    config = inner.config
    window = getattr(config, "sliding_window", None) is not None and getattr(
        config, "use_sliding_window", True
    )
    full = all(kind == "full_attention" for kind in getattr(config, "layer_types", None) or [])
    # Remote code may prepare its mask its own way; ALiBi models build their biases from a 2D mask.
    library = _library_class(getattr(inner, "backbone", inner)).__module__.startswith("transformers.")
    alibi = getattr(config, "alibi", False) or getattr(config, "model_type", None) in ("bloom", "mpt")
    return config._attn_implementation in ("sdpa", "eager") and not (window or alibi) and full and library


def _library_class(module: torch.nn.Module) -> type:
    """The module's class as its library defines it. FSDP2's `fully_shard` (and `replicate`)
    give a module a class of their own, made in torch.distributed with the original as a base:
    judged by that one, a sharded model decoded over the slower DynamicCache and trained padded."""
    return next(c for c in type(module).__mro__ if not c.__module__.startswith("torch.distributed."))


def prefill(
    model: torch.nn.Module, prompt_ids: torch.Tensor, prompt_mask: torch.Tensor
) -> tuple[torch.Tensor, Any]:
    """Run left-padded prompts (G, P); returns the logits at each prompt's last position (G, V),
    which predict the first response token, and the KV cache of the G prompts."""
    key = cache_keyword(model)
    out = model(
        input_ids=prompt_ids,
        attention_mask=prompt_mask,
        position_ids=prompt_positions(prompt_mask),
        use_cache=True,
        logits_to_keep=1,
    )
    return out.logits[:, -1], out[key]


def prompt_positions(attention_mask: torch.Tensor) -> torch.Tensor:
    """Position ids of a left-padded batch, as `generate` numbers them: 0 at the first real token."""
    return (attention_mask.cumsum(-1) - 1).clamp(min=0)
