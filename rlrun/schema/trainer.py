"""`trainer`: how long, on what, with which evaluation and checkpoints."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from rlrun.schema.base import NonNegativeInt, PositiveInt, Section


class Eval(Section):
    every_steps: NonNegativeInt = 25
    prompts: PositiveInt = 500
    k: PositiveInt = 1
    greedy: bool = True


class Checkpoint(Section):
    every_steps: NonNegativeInt = 50
    keep_last: PositiveInt = 2


class Trainer(Section):
    total_steps: PositiveInt = 100
    prompts_per_step: PositiveInt = 16
    seed: NonNegativeInt = 0
    output_dir: str = Field("runs", min_length=1)
    device: Literal["auto", "cpu", "cuda"] = "auto"
    strategy: Literal["ddp", "fsdp2", "deepspeed_zero2", "deepspeed_zero3"] = "ddp"
    eval: Eval = Eval()
    checkpoint: Checkpoint = Checkpoint()
    max_skipped_updates: NonNegativeInt = 10
