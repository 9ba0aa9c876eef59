"""Masked reductions over (B, T) response tensors, and entropy from logits.

Follows verl's `verl/utils/torch_functional.py`: `masked_sum` selects with `where` so NaN or
garbage at padded positions never leaks in; `masked_mean` divides by `Σm + 1e-8`; `masked_var`
is unbiased and refuses fewer than two valid entries; `masked_whiten` shifts and scales every
position, padding included (callers re-mask when they need zeros there).

Masks are binary (bool, int or float 0/1). Reductions accumulate in float32 (float64 inputs stay
float64), so bfloat16 inputs do not lose precision in token counts.
"""

from __future__ import annotations

import torch

MEAN_EPS = 1e-8
WHITEN_EPS = 1e-8


def as_bool(mask: torch.Tensor) -> torch.Tensor:
    """The mask as a bool tensor (no copy when it already is one)."""
    return mask if mask.dtype == torch.bool else mask != 0


def acc_dtype(dtype: torch.dtype) -> torch.dtype:
    """The dtype reductions accumulate in: float64 stays, everything else becomes float32."""
    return torch.float64 if dtype == torch.float64 else torch.float32


def zero_outside(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """`values` with every padded position set to 0 (NaN there included)."""
    return torch.where(as_bool(mask), values, torch.zeros((), dtype=values.dtype, device=values.device))


def zero_outside_(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """`zero_outside` written into `values` itself (for a fresh tensor the caller owns): no new B×T buffer.

    Out of place when autograd records `values` (`out=` is not differentiable)."""
    if values.requires_grad and torch.is_grad_enabled():
        return zero_outside(values, mask)
    zero = torch.zeros((), dtype=values.dtype, device=values.device)
    return torch.where(as_bool(mask), values, zero, out=values)


def masked_sum(values: torch.Tensor, mask: torch.Tensor, dim: int | None = None) -> torch.Tensor:
    """Sum of `values` where `mask` is set, over `dim` (all dims when None)."""
    selected = zero_outside(values, mask)
    dtype = acc_dtype(values.dtype)
    return selected.sum(dtype=dtype) if dim is None else selected.sum(dim=dim, dtype=dtype)


def mask_count(
    mask: torch.Tensor, dim: int | None = None, dtype: torch.dtype = torch.float32
) -> torch.Tensor:
    """Number of set entries of a binary mask, as a float tensor of `dtype`."""
    if mask.dtype == torch.bool and dim is None:
        return torch.count_nonzero(mask).to(dtype)  # far faster than summing bools
    # float32/float64/integer masks sum exactly in their own dtype (no conversion pass over B×T);
    # bool and half-precision masks accumulate in float32
    native = mask.dtype in (torch.float32, torch.float64) or not (
        mask.is_floating_point() or mask.dtype == torch.bool
    )
    acc = mask.dtype if native else torch.float32
    counts = mask.sum(dtype=acc) if dim is None else mask.sum(dim=dim, dtype=acc)
    return counts.to(dtype)


def masked_mean(values: torch.Tensor, mask: torch.Tensor, dim: int | None = None) -> torch.Tensor:
    """Mean of `values` where `mask` is set: `masked_sum / (Σm + 1e-8)` (0 for an empty mask)."""
    total = masked_sum(values, mask, dim)
    return total / (mask_count(mask, dim, total.dtype) + MEAN_EPS)


def masked_var(values: torch.Tensor, mask: torch.Tensor, unbiased: bool = True) -> torch.Tensor:
    """Variance of `values` over the mask (Bessel-corrected unless `unbiased=False`)."""
    return _mean_centred_var(values, mask, unbiased)[2]


def _mean_centred_var(
    values: torch.Tensor, mask: torch.Tensor, unbiased: bool
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Masked mean, `values - mean` at every position, and the masked variance."""
    mean = masked_mean(values, mask)
    centred = values - mean
    squares = zero_outside_(centred.square(), mask)  # masked in place: one B×T temporary, not two
    total = squares.sum(dtype=acc_dtype(squares.dtype))  # = masked_mean(centred², mask), as before
    del squares
    variance = total / (mask_count(mask, dtype=total.dtype) + MEAN_EPS)
    if unbiased:
        count = mask_count(mask, dtype=variance.dtype)
        _require_two(count)
        variance = variance * count / (count - 1)
    return mean, centred, variance


def _require_two(count: torch.Tensor) -> None:
    n = int(count.item())
    if n <= 1:
        raise ValueError(
            f"masked_var needs at least 2 valid entries, got {n}: the batch has too few response tokens"
        )


def masked_whiten(values: torch.Tensor, mask: torch.Tensor, shift_mean: bool = True) -> torch.Tensor:
    """`(values - μ)·rsqrt(var + 1e-8)` with μ, var over the mask, applied to every position."""
    mean, centred, var = _mean_centred_var(values, mask, unbiased=True)
    scale = torch.rsqrt(var + WHITEN_EPS)
    # `centred` is ours to scale in place, unless autograd saved it for var's backward.
    whitened = centred * scale if centred.requires_grad else centred.mul_(scale)
    if not shift_mean:
        whitened += mean
    return whitened


def masked_whiten_rows(
    row_values: torch.Tensor, mask: torch.Tensor, dtype: torch.dtype | None = None
) -> torch.Tensor:
    """`masked_whiten(row_values[:, None] * mask, mask) * mask` as a (B, T) tensor of `dtype` (default: rows').

    For a value that is constant along each row the token-level mean and variance follow from
    the per-row values and lengths, so this reads the mask once instead of whitening B×T tokens.
    """
    lengths = mask_count(mask, dim=-1, dtype=torch.float64)  # (B,)-sized statistics: float64 is free
    x = row_values.to(torch.float64)
    count = lengths.sum()
    _require_two(count)
    mean = (x * lengths).sum() / (count + MEAN_EPS)
    var = ((x - mean) ** 2 * lengths).sum() / (count + MEAN_EPS) * count / (count - 1)
    return broadcast_rows((x - mean) * torch.rsqrt(var + WHITEN_EPS), mask, dtype or row_values.dtype)


def broadcast_rows(
    row_values: torch.Tensor, mask: torch.Tensor, dtype: torch.dtype | None = None
) -> torch.Tensor:
    """A (B,) value spread over each row's valid tokens, 0 on padding, as a (B, T) tensor of `dtype`."""
    dtype = dtype or row_values.dtype
    rows = row_values.to(dtype).unsqueeze(-1)
    if mask.dtype == torch.bool:
        return torch.where(mask, rows, torch.zeros((), dtype=dtype, device=rows.device))
    return (rows * mask).to(dtype)  # one fused pass for float/int masks


def entropy_from_logits(logits: torch.Tensor) -> torch.Tensor:
    """Entropy of the softmax over the last dim: `logsumexp(z) - Σ softmax(z)·z`."""
    probs = torch.softmax(logits, dim=-1)
    return torch.logsumexp(logits, dim=-1) - (probs * logits).sum(dim=-1)


def sum_pi_squared(logits: torch.Tensor) -> torch.Tensor:
    """`Σ_v π(v)²` over the vocabulary at each position (the optimal token baseline's input)."""
    return logits.softmax(-1).square().sum(-1)
