"""`model`: the policy being trained."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from rlrun.schema.base import Fraction, PositiveFloat, PositiveInt, Section


class Lora(Section):
    """LoRA adapter; the reference model is then the policy with the adapter disabled."""

    r: PositiveInt = 8
    """Rank of the adapter matrices."""
    alpha: PositiveFloat = 16.0
    """Scaling numerator: the update is scaled by alpha / r."""
    dropout: Fraction = 0.0
    """Dropout on the adapter's input, 0 to 1."""
    target_modules: list[str] | Literal["all-linear"] = "all-linear"
    """Module names to adapt, or all-linear for every linear layer but the output head."""


class Model(Section):
    path: str = Field("rlrun:tiny-base", min_length=1)
    """rlrun:<name> = a model shipped with rlrun; else a local HF dir or hub id"""
    tokenizer: str | None = None
    """The tokenizer; null = same as path"""
    dtype: Literal["float32", "bfloat16", "float16"] = "float32"
    """Weights and compute dtype: float32 | bfloat16 | float16"""
    trust_remote_code: bool = False
    """Let transformers run the model repository's own code (only for models you trust)."""
    gradient_checkpointing: bool = False
    """Recompute activations in the backward pass: less memory, about a third more compute."""
    lora: Lora | None = None
    """{r, alpha, dropout, target_modules}; the reference is then the adapter-disabled model"""
