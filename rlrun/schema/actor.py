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
    estimator: str = "low_var_kl"
    coef: NonNegativeFloat = 0.001


class LrScheduler(Section):
    name: Literal["constant", "linear", "cosine"] = "constant"
    warmup_steps: NonNegativeInt = 0
    min_lr_ratio: float = Field(0.0, ge=0, le=1)


class Actor(Section):
    policy_loss: str = "vanilla"
    clip_ratio: PositiveFloat = 0.2
    clip_ratio_low: PositiveFloat | None = None
    clip_ratio_high: PositiveFloat | None = None
    clip_ratio_c: float = Field(3.0, gt=1)
    loss_agg_mode: LossAggMode = "token-mean"
    loss_kwargs: dict[str, Any] = Field(default_factory=dict)
    kl_loss: KlLoss = KlLoss()
    entropy_coef: float = 0.0
    optimizer: Optimizer = Optimizer()
    lr_scheduler: LrScheduler = LrScheduler()
    grad_clip: PositiveFloat | None = 1.0
    ppo_epochs: PositiveInt = 1
    mini_batch_samples: PositiveInt = 128
    micro_batch_samples: PositiveInt = 128
    # Padded tokens per forward/backward on one process (rows x (prompt + longest response)),
    # instead of micro_batch_samples: rows of similar length are batched together. null = off.
    micro_batch_tokens: PositiveInt | None = None
