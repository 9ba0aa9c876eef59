"""The hf engine's decode steps for rlrun's documented families, through the layers' operations
called directly rather than through transformers' modules.

A decode step runs one token a row through every layer. Through the model's own forward that is
over a dozen module calls a layer, each with its keyword handling, and the model's wrappers
around them; with few rows or a small model that Python is a large part of the step. Calling the
same operations directly made the agent recipes' generation 1.03-1.21x faster (``agent_guess``
1.12-1.16x), SmolLM2-135M's 1.03-1.09x at two points of three, and ``rlrun:tiny-base``'s at 4 rows 1.35-1.50x
(benchmarks/README.md, "A decode step without transformers' modules").

``decode_layers(model)`` reads a model into ``DecodeLayers`` only where it is exactly one of
these families' transformers classes: its modules that family's own, none with a hook or a
replaced forward (a projection's may be replaced, as packed weights replace it: it is called),
SiLU in the MLP, no sliding window, and the single-query attention of
``rlrun.rollout.decode_attention`` in use (CPU, float32). ``DecodeLayers.logits`` then computes
what the model's forward computes for a decode step, operation for operation and in the same
order, so the logits are the same numbers (tested against the model's own forward per family).
Any other model decodes through its own forward.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

import torch
from torch.nn import functional as F
from transformers import Cache

from rlrun.rollout.decode_attention import applies, attention

# model_type -> the prefix of its transformers classes (LlamaDecoderLayer, Qwen3RMSNorm, ...)
_PREFIX = {"llama": "Llama", "qwen2": "Qwen2", "qwen3": "Qwen3"}


@dataclass(frozen=True)
class _Layer:
    input_norm: torch.nn.Module
    attention: torch.nn.Module
    post_norm: torch.nn.Module
    mlp: torch.nn.Module
    query_norm: torch.nn.Module | None  # Qwen3 normalises each head's queries and keys
    key_norm: torch.nn.Module | None


@dataclass(frozen=True)
class DecodeLayers:
    """A model's embedding, rotary embedding, layers, final norm and LM head, for decode steps."""

    embed: torch.nn.Module
    rotary: torch.nn.Module
    layers: tuple[_Layer, ...]
    norm: torch.nn.Module
    head: torch.nn.Module
    modules: tuple[torch.nn.Module, ...]  # all of the model's
    bypassed: tuple[torch.nn.Module, ...]  # those whose forward these calls stand in for

    def usable(self) -> bool:
        """Whether a step may take these calls now: no hook on any module (none would run) and
        no bypassed forward replaced, since they were read (a hook can be added at any time)."""
        if _global_hooks():
            return False
        return not any(m._forward_hooks or m._forward_pre_hooks for m in self.modules) and not any(
            "forward" in vars(m) for m in self.bypassed
        )

    def logits(
        self, ids: torch.Tensor, positions: torch.Tensor, mask: torch.Tensor, *, cache: Cache
    ) -> torch.Tensor:
        """The next logits (k, V) after one token a row: ``ids`` and ``positions`` (k, 1), ``mask``
        the additive attention mask (k, 1, 1, keys); each layer's keys and values go through
        ``cache.update``, as the model's attention sends them."""
        rows = len(ids)
        x = self.embed.forward(ids)
        cos, sin = self.rotary(x, positions)
        cos, half = cos.unsqueeze(1), cos.shape[-1] // 2
        # rotate_half(q) * sin, as q.roll(half) * sin with its first half negated: -a * b == a * -b
        sin = sin.unsqueeze(1)
        sin = torch.cat((-sin[..., :half], sin[..., half:]), -1)
        for index, layer in enumerate(self.layers):
            attn = layer.attention
            h = _rms_norm(x, layer.input_norm)
            q, k, v = (
                p.forward(h).view(rows, 1, -1, attn.head_dim) for p in (attn.q_proj, attn.k_proj, attn.v_proj)
            )
            if layer.query_norm is not None:
                q, k = _rms_norm(q, layer.query_norm), _rms_norm(k, layer.key_norm)
            q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
            q = q * cos + q.roll(half, -1) * sin
            k = k * cos + k.roll(half, -1) * sin
            keys, values = cache.update(k, v, index)
            dropout = attn.attention_dropout if attn.training else 0.0
            out, _ = attention(attn, q, keys, values, mask, dropout=dropout, scaling=attn.scaling)
            x = x + attn.o_proj.forward(out.reshape(rows, 1, -1))
            h = _rms_norm(x, layer.post_norm)
            mlp = layer.mlp
            x = x + mlp.down_proj.forward(F.silu(mlp.gate_proj.forward(h)) * mlp.up_proj.forward(h))
        return self.head.forward(_rms_norm(x, self.norm))[:, -1]


def _rms_norm(x: torch.Tensor, norm: torch.nn.Module) -> torch.Tensor:
    """The families' RMSNorm on a float32 ``x``, its operations in its order."""
    return norm.weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + norm.variance_epsilon))


def decode_layers(model: torch.nn.Module) -> DecodeLayers | None:
    """``model``'s ``DecodeLayers`` where its classes allow (the module docstring says when), else
    None; a step checks ``usable()`` before it takes them."""
    config = getattr(model, "config", None)
    prefix = _PREFIX.get(getattr(config, "model_type", None))
    if prefix is None or not applies(model) or getattr(config, "hidden_act", None) != "silu":
        return None
    classes = _family_classes(type(model), prefix)
    base = getattr(model, "model", None)
    if classes is None or type(base) is not classes["Model"]:
        return None
    if type(base.norm) is not classes["RMSNorm"] or type(base.rotary_emb) is not classes["RotaryEmbedding"]:
        return None
    layers, bypassed = [], [model, base, base.norm]
    for layer in base.layers:
        attn, mlp = layer.self_attn, layer.mlp
        query_norm, key_norm = getattr(attn, "q_norm", None), getattr(attn, "k_norm", None)
        norms = [layer.input_layernorm, layer.post_attention_layernorm]
        norms += [n for n in (query_norm, key_norm) if n is not None]
        if not (
            type(layer) is classes["DecoderLayer"]
            and type(attn) is classes["Attention"]
            and type(mlp) is classes["MLP"]
            and all(type(n) is classes["RMSNorm"] for n in norms)
            and getattr(attn, "sliding_window", None) is None
        ):
            return None
        bypassed += [layer, attn, mlp, *norms]
        layers.append(
            _Layer(layer.input_layernorm, attn, layer.post_attention_layernorm, mlp, query_norm, key_norm)
        )
    found = DecodeLayers(
        base.embed_tokens,
        base.rotary_emb,
        tuple(layers),
        base.norm,
        model.get_output_embeddings(),
        modules=tuple(model.modules()),
        bypassed=tuple(bypassed),
    )
    return found if found.usable() else None


def _global_hooks() -> bool:
    """Whether a forward hook is registered for every module (torch keeps them in these dicts)."""
    module = torch.nn.modules.module
    return bool(
        getattr(module, "_global_forward_hooks", None) or getattr(module, "_global_forward_pre_hooks", None)
    )


def _family_classes(model_class: type, prefix: str) -> dict[str, type] | None:
    """The family's classes from the transformers module that defines ``model_class``, if it is
    that family's ``ForCausalLM``."""
    if model_class.__name__ != f"{prefix}ForCausalLM" or not model_class.__module__.startswith(
        "transformers."
    ):
        return None
    module = sys.modules.get(model_class.__module__)
    names = ("Model", "DecoderLayer", "Attention", "MLP", "RMSNorm", "RotaryEmbedding")
    classes = {name: getattr(module, f"{prefix}{name}", None) for name in names}
    return classes if all(isinstance(c, type) for c in classes.values()) else None
