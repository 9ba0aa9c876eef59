"""`data`: where prompts and answers come from."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from rlrun.schema.base import NonNegativeInt, PositiveInt, Section

PROMPT_PLACEHOLDER = "{prompt}"  # where data.prompt_template puts the dataset's prompt


class Arithmetic(Section):
    """The built-in generator: `23+58=` -> `81`."""

    digits: PositiveInt = 2
    operators: list[Literal["+", "-", "*"]] = Field(["+"], min_length=1)
    train_size: PositiveInt = 20000
    val_size: PositiveInt = 500
    seed: NonNegativeInt = 1234


class Data(Section):
    source: str = Field("rlrun:arithmetic", min_length=1)
    val_source: str | None = None
    arithmetic: Arithmetic = Arithmetic()
    prompt_key: str = Field("prompt", min_length=1)
    answer_key: str = Field("answer", min_length=1)
    apply_chat_template: Literal["auto", True, False] = "auto"
    system_prompt: str | None = None  # an instruction before every prompt (a chat model's system message)
    prompt_template: str = PROMPT_PLACEHOLDER  # wraps each dataset prompt; rules.py checks the placeholder
    max_prompt_tokens: PositiveInt = 64
    overlong_prompts: Literal["drop", "truncate", "error"] = "drop"
    shuffle: bool = True
    seed: NonNegativeInt = 0
