"""Truncated importance-sampling weights for a rollout engine whose log-probs differ from the trainer's.

Follows verl's `rollout_corr_helper.compute_rollout_correction_weights` (TIS): with
`log_ratio = old_log_prob - rollout_log_prob` (trainer over rollout policy), token level
`w_t = exp(clamp(log_ratio_t, ±20))`, sequence level `w = exp(clamp(Σ_t log_ratio_t·m, ±20))` on
every token of the row; weights are 0 on padding, truncated at `threshold` and detached.
`mode="mask"` sets a weight above `threshold` to 0 instead (TRL's `token_mask` /
`sequence_mask`: w = exp(log_ratio) if w <= threshold else 0). Batch normalisation of the
weights is not implemented.

Metrics (detached 0-d tensors) are named `sampling/*`; the fractions above the threshold and
below its reciprocal are measured before truncation, as in verl.
"""

from __future__ import annotations

import math

import torch

from rlrun.algorithms.masked import as_bool, masked_mean, masked_sum, zero_outside

IS_LEVELS = ("token", "sequence")
IS_MODES = ("truncate", "mask")
LOG_RATIO_CLAMP = 20.0


def truncated_is_weights(
    old_log_prob: torch.Tensor,
    rollout_log_prob: torch.Tensor,
    response_mask: torch.Tensor,
    level: str = "token",
    threshold: float = 2.0,
    mode: str = "truncate",
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """Truncated (or masked) IS weights π_trainer/π_rollout, (B, T), and their `sampling/*` metrics."""
    if level not in IS_LEVELS:
        raise ValueError(f"unknown importance-sampling level {level!r}; valid: {', '.join(IS_LEVELS)}")
    if mode not in IS_MODES:
        raise ValueError(f"unknown importance-sampling mode {mode!r}; valid: {', '.join(IS_MODES)}")
    if threshold <= 0:
        raise ValueError(f"importance-sampling threshold must be > 0, got {threshold}")
    valid = as_bool(response_mask)
    log_ratio = zero_outside(old_log_prob - rollout_log_prob, valid).detach()
    if level == "token":
        level_log_ratio = log_ratio
    else:
        level_log_ratio = (
            masked_sum(log_ratio, valid, dim=-1).to(log_ratio.dtype).unsqueeze(-1).expand_as(log_ratio)
        )
    raw = zero_outside(torch.exp(torch.clamp(level_log_ratio, -LOG_RATIO_CLAMP, LOG_RATIO_CLAMP)), valid)
    weights = torch.clamp(raw, max=threshold) if mode == "truncate" else raw.masked_fill(raw > threshold, 0.0)
    row_weight = masked_mean(weights, valid, dim=-1)
    non_empty = valid.any(dim=-1)
    metrics = {
        "sampling/is_mean": masked_mean(weights, valid),
        "sampling/is_max": torch.where(valid, weights, -torch.inf).amax(),
        "sampling/is_min": torch.where(valid, weights, torch.inf).amin(),
        "sampling/is_fraction_high": masked_mean((level_log_ratio > math.log(threshold)).float(), valid),
        "sampling/is_fraction_low": masked_mean((level_log_ratio < -math.log(threshold)).float(), valid),
        "sampling/is_seq_mean": masked_mean(row_weight, non_empty),
        "sampling/mismatch_kl": masked_mean(-log_ratio, valid),
    }
    return weights, {name: value.detach() for name, value in metrics.items()}
