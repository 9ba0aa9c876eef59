"""`model`: the policy being trained."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from rlrun.schema.base import Fraction, PositiveFloat, PositiveInt, Section


class Lora(Section):
    """LoRA adapter; the reference model is then the policy with the adapter disabled."""

    r: PositiveInt = 8
    alpha: PositiveFloat = 16.0
    dropout: Fraction = 0.0
    target_modules: list[str] | Literal["all-linear"] = "all-linear"


class Model(Section):
    path: str = Field("rlrun:tiny-base", min_length=1)
    tokenizer: str | None = None
    dtype: Literal["float32", "bfloat16", "float16"] = "float32"
    trust_remote_code: bool = False
    gradient_checkpointing: bool = False
    lora: Lora | None = None
