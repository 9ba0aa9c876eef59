"""`actor`: the policy loss, its KL and entropy terms, optimisation and batch sizes."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from rlrun.schema.base import NonNegativeFloat, NonNegativeInt, Optimizer, PositiveFloat, PositiveInt, Section

LossAggMode = Literal[
    "token-mean", "token-sum", "seq-mean-token-sum", "seq-mean-token-sum-norm", "seq-mean-token-mean"
]


class KlLoss(Section):
    enabled: bool = False
    """Add a KL-to-reference term to the actor loss."""
    estimator: str = "low_var_kl"
    """KL estimator name (`rlrun components` lists them)."""
    coef: NonNegativeFloat = 0.001
    """Weight of the KL term."""


class LrScheduler(Section):
    """The lr at the k-th step of the schedule (k from 0) is lr x k / warmup_steps during the
    warm-up (0 at the first update, as in verl and transformers), then constant or decaying."""

    name: Literal["constant", "linear", "cosine"] = "constant"
    """The schedule after warm-up: constant | linear | cosine"""
    step_unit: Literal["training_step", "optimizer_step"] = "training_step"
    """training_step | optimizer_step: what one step of the schedule is, so what warmup_steps
    counts and over what the decay runs. training_step (verl): once per training step that
    updates the actor, the decay over trainer.total_steps; optimizer_step (TRL, transformers):
    once per optimizer step, over trainer.total_steps x the batch plan's optimizer steps per
    step."""
    warmup_steps: NonNegativeInt = 0
    """Steps (in step_unit) of linear warm-up from 0."""
    min_lr_ratio: float = Field(0.0, ge=0, le=1)
    """Where linear and cosine decay end, as a fraction of the lr."""


class Actor(Section):
    policy_loss: str = "vanilla"
    """Policy loss name (`rlrun components` lists them)."""
    clip_ratio: PositiveFloat = 0.2
    """PPO clip range of the importance ratio."""
    clip_ratio_low: PositiveFloat | None = None
    """Lower clip range; null = clip_ratio"""
    clip_ratio_high: PositiveFloat | None = None
    """Upper clip range; null = clip_ratio"""
    clip_ratio_c: float = Field(3.0, gt=1)
    """The dual-clip bound, > 1: a negative-advantage token's loss is at most -A·clip_ratio_c."""
    loss_agg_mode: LossAggMode = "token-mean"
    """How token losses become one number: token-mean | token-sum | seq-mean-token-sum | seq-mean-token-sum-norm | seq-mean-token-mean"""
    loss_kwargs: dict[str, Any] = Field(default_factory=dict)
    """extra keywords of the chosen policy loss"""
    kl_loss: KlLoss = KlLoss()
    """KL-to-reference term of the actor loss."""
    entropy_coef: float = 0.0
    """Weight of the entropy bonus (0 = off)."""
    optimizer: Optimizer = Optimizer()
    """AdamW settings."""
    lr_scheduler: LrScheduler = LrScheduler()
    """The learning-rate schedule (over trainer.total_steps, in its step_unit)."""
    frozen_steps: NonNegativeInt = 0
    """Training steps at the start without a policy update, with or without a critic (a critic
    trains in them: a critic warm-up); the lr schedule starts with the first update. verl's
    trainer.critic_warmup=c is c - 1 of them."""
    grad_clip: PositiveFloat | None = 1.0
    """max global grad norm; null = no clipping"""
    ppo_epochs: PositiveInt = 1
    """Passes over each step's samples (the critic makes as many)."""
    mini_batch_samples: PositiveInt = 128
    """samples per optimizer step (the critic's too)"""
    micro_batch_samples: PositiveInt = 128
    """samples per forward/backward (gradient accumulation); the critic's too"""
    micro_batch_tokens: PositiveInt | None = None
    """Instead of micro_batch_samples: padded tokens per forward/backward on one process, rows x
    (prompt + longest response), rows of similar length together; null = off."""
    padding_free: bool = True
    """Forward passes (policy, reference, teacher, critic) without pad tokens where that costs
    less compute than the padded layout: each distinct prompt once, its responses packed after
    it, each attending to the prompt and itself (in a multi-process run, by the costs summed
    over the processes, which must make the same forward calls). Equal to the padded layout to
    float rounding; false = the padded layout always. Models whose attention cannot take a
    custom mask (flash attention, a sliding window) always use the padded one."""
