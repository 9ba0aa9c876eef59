"""Clipped critic loss (verl's `compute_value_loss`, PPO's value clipping).

`vclip = clamp(v, values - c, values + c)`; loss = `½·agg(max((v - R)², (vclip - R)²))`;
`critic/vf_clipfrac` = share of valid tokens where the clipped error is the larger one.
Padded positions are zeroed first, so garbage there changes neither loss nor gradient.
"""

from __future__ import annotations

from typing import Any

import torch

from rlrun.algorithms.aggregation import agg_loss
from rlrun.algorithms.masked import masked_mean, zero_outside


def compute_value_loss(
    vpreds: torch.Tensor,
    returns: torch.Tensor,
    values: torch.Tensor,
    response_mask: torch.Tensor,
    cliprange_value: float = 0.5,
    loss_agg_mode: str = "token-mean",
    agg_kwargs: dict[str, Any] | None = None,
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """Clipped value loss and `{"critic/vf_clipfrac": 0-d tensor}`."""
    vpreds, returns, values = (zero_outside(t, response_mask) for t in (vpreds, returns, values))
    vpred_clipped = torch.clamp(vpreds, values - cliprange_value, values + cliprange_value)
    unclipped = (vpreds - returns) ** 2
    clipped = (vpred_clipped - returns) ** 2
    loss = 0.5 * agg_loss(
        torch.maximum(unclipped, clipped), response_mask, loss_agg_mode, **(agg_kwargs or {})
    )
    return loss, {"critic/vf_clipfrac": masked_mean((clipped > unclipped).float(), response_mask).detach()}
