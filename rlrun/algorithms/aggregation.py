"""Loss aggregation: a (B, T) per-token loss to a scalar (verl's `agg_loss`).

With data parallelism each rank passes the global mini-batch counts (`batch_num_tokens` for the
token modes, `global_batch_size` for the sequence modes) and its `dp_size`; gradients averaged
over ranks then equal those of the exact mean over the global mini-batch, whatever the
micro-batching. Without them the local counts are used (and `dp_size > 1` is an error).

Differences from verl: a zero count is handled without a host sync, and padded positions are
selected with `where`, so NaN there never reaches the loss.
"""

from __future__ import annotations

import torch

from rlrun.algorithms.masked import MEAN_EPS, mask_count, masked_sum

LOSS_AGG_MODES: tuple[str, ...] = (
    "token-mean",
    "token-sum",
    "seq-mean-token-sum",
    "seq-mean-token-sum-norm",
    "seq-mean-token-mean",
)

Count = int | float | torch.Tensor


def agg_loss(
    loss_mat: torch.Tensor,
    loss_mask: torch.Tensor,
    loss_agg_mode: str,
    dp_size: int = 1,
    batch_num_tokens: Count | None = None,
    global_batch_size: Count | None = None,
    loss_scale_factor: float | None = None,
) -> torch.Tensor:
    """Aggregate `loss_mat` over the valid tokens of `loss_mask` with one of `LOSS_AGG_MODES`."""
    if loss_agg_mode == "token-mean":
        if batch_num_tokens is None:
            _require_local(dp_size, "batch_num_tokens")
            batch_num_tokens = mask_count(loss_mask)
        return _mean(masked_sum(loss_mat, loss_mask), batch_num_tokens) * dp_size
    if loss_agg_mode == "token-sum":
        return masked_sum(loss_mat, loss_mask) * dp_size
    if loss_agg_mode in ("seq-mean-token-sum", "seq-mean-token-sum-norm", "seq-mean-token-mean"):
        seq_losses = masked_sum(loss_mat, loss_mask, dim=-1)
        lengths = mask_count(loss_mask, dim=-1, dtype=seq_losses.dtype)
        if loss_agg_mode == "seq-mean-token-mean":
            seq_losses = seq_losses / (lengths + MEAN_EPS)
        if global_batch_size is None:
            _require_local(dp_size, "global_batch_size")
            global_batch_size = mask_count(lengths > 0)  # empty rows do not count (their loss is 0)
        loss = _mean(seq_losses.sum(), global_batch_size) * dp_size
        if loss_agg_mode == "seq-mean-token-sum-norm":
            loss = loss / (loss_mask.shape[-1] if loss_scale_factor is None else loss_scale_factor)
        return loss
    raise ValueError(f"unknown loss_agg_mode {loss_agg_mode!r}; valid: {', '.join(LOSS_AGG_MODES)}")


def _require_local(dp_size: int, name: str) -> None:
    if dp_size > 1:
        raise ValueError(f"{name} (the global count) is required when dp_size > 1")


def _mean(total: torch.Tensor, count: Count) -> torch.Tensor:
    """`total / count`, or `0·total` (keeps the graph) when the count is 0, as in verl; no host sync."""
    if isinstance(count, torch.Tensor):
        empty = count == 0
        return torch.where(empty, total * 0, total / torch.where(empty, torch.ones_like(count), count))
    return total * 0 if count == 0 else total / count
