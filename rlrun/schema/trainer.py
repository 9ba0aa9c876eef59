"""`trainer`: how long, on what, with which evaluation and checkpoints."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from rlrun.schema.base import NonNegativeInt, PositiveInt, Section


class Eval(Section):
    every_steps: NonNegativeInt = 25
    """Evaluate every this many steps; 0 = only at the start and the end"""
    prompts: PositiveInt | None = 500
    """Validation prompts per evaluation (the first ones); null = the whole validation set."""
    k: PositiveInt = 1
    """Samples per validation prompt (pass@k, maj@k)."""
    greedy: bool = True
    """Greedy decoding for evaluation (else sampling, at the settings below)."""
    temperature: Annotated[float, Field(gt=0)] | None = None
    """Sampling temperature of a sampled evaluation; null = rollout.temperature."""
    top_p: Annotated[float, Field(gt=0, le=1)] | None = None
    """Nucleus sampling of a sampled evaluation; null = rollout.top_p."""
    top_k: NonNegativeInt | None = None
    """Top-k of a sampled evaluation (0 = off); null = rollout.top_k."""


class Checkpoint(Section):
    every_steps: NonNegativeInt = 50
    """Checkpoint every this many steps; 0 = only at the end"""
    keep_last: PositiveInt = 2
    """Checkpoints kept; older ones are deleted."""


class Trainer(Section):
    total_steps: PositiveInt = 100
    """Training steps (one rollout and its updates each)."""
    prompts_per_step: PositiveInt = 16
    """Prompts sampled per step (times rollout.n samples)."""
    seed: NonNegativeInt = 0
    """Seed of sampling, shuffling and initialisation."""
    output_dir: str = Field("runs", min_length=1)
    """Where run directories are created."""
    device: Literal["auto", "cpu", "cuda"] = "auto"
    """Where to train: auto | cpu | cuda"""
    strategy: Literal["ddp", "fsdp2", "deepspeed_zero2", "deepspeed_zero3"] = "ddp"
    """How several processes share the model: ddp | fsdp2 | deepspeed_zero2 | deepspeed_zero3"""
    autocast: Literal["bfloat16"] | None = None
    """Run the trainer's forward and backward passes under torch.autocast in this dtype: matrix
    products in bfloat16, weights, gradients, optimizer and log-probs in float32 (null = float32
    throughout). Needs `model.dtype: float32` and a device that computes in bfloat16 (on CPU:
    AVX512-BF16 or AMX). The rollout and evaluation stay float32; benchmarks/README.md has the
    measured speed and log-prob differences."""
    compile: bool = False
    """torch.compile the policy's (and critic's) forward in the trainer's passes, with dynamic
    shapes; the first steps pay the compile time (on CPU it needs a C++ compiler). Measured in
    benchmarks/README.md."""
    eval: Eval = Eval()
    """Periodic evaluation on the validation prompts."""
    checkpoint: Checkpoint = Checkpoint()
    """Periodic checkpoints."""
    max_skipped_updates: NonNegativeInt = 10
    """non-finite losses tolerated before the run aborts"""
