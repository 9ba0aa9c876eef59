"""Policy losses: `fn(old_log_prob, log_prob, advantages, response_mask, loss_agg_mode, **kw) -> (loss, metrics)`.

Numbers follow verl 0.9.1 (`core_algos.py`). Every loss takes the uniform keyword set
(`clip_ratio, clip_ratio_low, clip_ratio_high, clip_ratio_c, rollout_is_weights, agg_kwargs,
generator`) plus its own hyper-parameters, and ignores what it does not use. `rollout_is_weights`
multiplies the per-token loss before aggregation; `agg_kwargs` (dp_size, batch_num_tokens,
global_batch_size, loss_scale_factor) goes to `agg_loss`.

Metrics use verl's names (`actor/pg_clipfrac`, `actor/ppo_kl`, `actor/pg_clipfrac_lower`) and
are detached 0-d tensors (no host sync per micro-batch; call `.item()` when logging).

Inputs are zeroed at padded positions first, so NaN or garbage there changes neither the loss
nor the gradients (verl multiplies by the mask, which lets NaN through).

Where this differs from verl or a paper:
- gspo aggregates with the mode it is given, as current verl does (older verl forced
  seq-mean-token-mean; the GSPO paper's recipe is seq-mean-token-mean); sapo always uses
  seq-mean-token-mean, as in verl.
- geo_mean averages over rows with `torch.mean` and ignores `agg_kwargs`, as verl does.
- dppo_tv / dppo_kl read the divergence thresholds from clip_ratio(_low/_high) and truncate the
  IS ratio at `clip_ratio_c`, as verl does (the DPPO paper recommends a large threshold).
- clip_cov / kl_cov draw / rank tokens like verl; clip_cov's draw uses `generator` when given.
- dro: `-(logp·A - ½·β·(logp - old)²)` per token (Richemond et al.; verl's docs/algo/dro.md),
  aggregated with the given mode; β = `dro_beta` > 0 (the default 0.1 is rlrun's choice; None or
  a non-positive β is a ValueError, as in verl).
- kl_cov ranks tokens with `topk`: it draws no random numbers (only clip_cov does).
"""

from __future__ import annotations

from typing import Any

import torch

from rlrun.algorithms.aggregation import agg_loss
from rlrun.algorithms.importance_sampling import truncated_is_weights
from rlrun.algorithms.masked import as_bool, mask_count, masked_mean, masked_sum
from rlrun.algorithms.registries import register_policy_loss

LossOutput = tuple[torch.Tensor, dict[str, torch.Tensor]]

RATIO_LOG_CLAMP = 20.0
GSPO_LOG_RATIO_MAX = 10.0


# --- shared pieces ---------------------------------------------------------------------------


def _valid(mask: torch.Tensor, *tensors: torch.Tensor) -> list[torch.Tensor]:
    """Each tensor with padded positions set to 0 (value and gradient)."""
    m = as_bool(mask)
    return [torch.where(m, t, torch.zeros((), dtype=t.dtype, device=t.device)) for t in tensors]


def _bounds(
    clip_ratio: float, clip_ratio_low: float | None, clip_ratio_high: float | None
) -> tuple[float, float]:
    low = clip_ratio if clip_ratio_low is None else clip_ratio_low
    high = clip_ratio if clip_ratio_high is None else clip_ratio_high
    return low, high


def _clamped_log_ratio(log_prob: torch.Tensor, old_log_prob: torch.Tensor) -> torch.Tensor:
    """`logπ - logπ_old` clamped to ±20 before anyone exponentiates it (verl's stability clamp)."""
    return torch.clamp(log_prob - old_log_prob, min=-RATIO_LOG_CLAMP, max=RATIO_LOG_CLAMP)


def _aggregate(
    pg_losses: torch.Tensor,
    response_mask: torch.Tensor,
    loss_agg_mode: str,
    rollout_is_weights: torch.Tensor | None,
    agg_kwargs: dict[str, Any] | None,
) -> torch.Tensor:
    if rollout_is_weights is not None:
        pg_losses = pg_losses * rollout_is_weights
    return agg_loss(pg_losses, response_mask, loss_agg_mode, **(agg_kwargs or {}))


def _metrics(**values: torch.Tensor | float) -> dict[str, torch.Tensor]:
    """verl metric names for the given values, as detached 0-d tensors."""
    return {f"actor/{name}": torch.as_tensor(value).detach() for name, value in values.items()}


def _seq_token_mean(values: torch.Tensor, response_mask: torch.Tensor) -> torch.Tensor:
    """Per-row mean over valid tokens, `Σ x·m / (len + 1e-8)` (verl's GMPO form)."""
    total = masked_sum(values, response_mask, dim=-1)
    return total / (mask_count(response_mask, dim=-1, dtype=total.dtype) + 1e-8)


def _fraction(condition: torch.Tensor, response_mask: torch.Tensor) -> torch.Tensor:
    """Share of valid tokens where `condition` holds (bool ops: no float copy of the condition)."""
    hits = torch.count_nonzero(condition & as_bool(response_mask)).to(torch.float32)
    return hits / (mask_count(response_mask) + 1e-8)


def _ppo_kl(log_ratio: torch.Tensor, response_mask: torch.Tensor) -> torch.Tensor:
    """verl's `actor/ppo_kl`: the token mean of -(logπ - logπ_old)."""
    return -masked_mean(log_ratio, response_mask)


# --- losses ----------------------------------------------------------------------------------


@register_policy_loss("vanilla")
def vanilla(
    old_log_prob: torch.Tensor,
    log_prob: torch.Tensor,
    advantages: torch.Tensor,
    response_mask: torch.Tensor,
    loss_agg_mode: str = "token-mean",
    *,
    clip_ratio: float = 0.2,
    clip_ratio_low: float | None = None,
    clip_ratio_high: float | None = None,
    clip_ratio_c: float = 3.0,
    rollout_is_weights: torch.Tensor | None = None,
    agg_kwargs: dict[str, Any] | None = None,
    **_: Any,
) -> LossOutput:
    """PPO clipped surrogate with asymmetric clip and dual-clip for negative advantages."""
    if clip_ratio_c <= 1.0:
        raise ValueError(f"clip_ratio_c (dual-clip lower bound) must be > 1.0, got {clip_ratio_c}")
    low, high = _bounds(clip_ratio, clip_ratio_low, clip_ratio_high)
    old_log_prob, log_prob, advantages = _valid(response_mask, old_log_prob, log_prob, advantages)
    log_ratio = _clamped_log_ratio(log_prob, old_log_prob)
    ratio = torch.exp(log_ratio)
    neg_advantages = -advantages
    unclipped = neg_advantages * ratio
    clipped = neg_advantages * torch.clamp(ratio, 1 - low, 1 + high)
    clip_max = torch.maximum(unclipped, clipped)
    dual = neg_advantages * clip_ratio_c
    negative = advantages < 0
    pg_losses = torch.where(negative, torch.minimum(dual, clip_max), clip_max)
    loss = _aggregate(pg_losses, response_mask, loss_agg_mode, rollout_is_weights, agg_kwargs)
    return loss, _metrics(
        pg_clipfrac=_fraction(clipped > unclipped, response_mask),
        ppo_kl=_ppo_kl(log_ratio, response_mask),
        pg_clipfrac_lower=_fraction((clip_max > dual) & negative, response_mask),
    )


@register_policy_loss("gspo", loss_agg_mode="seq-mean-token-mean")
def gspo(
    old_log_prob: torch.Tensor,
    log_prob: torch.Tensor,
    advantages: torch.Tensor,
    response_mask: torch.Tensor,
    loss_agg_mode: str = "seq-mean-token-mean",
    *,
    clip_ratio: float = 0.2,
    clip_ratio_low: float | None = None,
    clip_ratio_high: float | None = None,
    rollout_is_weights: torch.Tensor | None = None,
    agg_kwargs: dict[str, Any] | None = None,
    **_: Any,
) -> LossOutput:
    """GSPO: clipped sequence-level ratio (geometric mean of token ratios), token gradients."""
    low, high = _bounds(clip_ratio, clip_ratio_low, clip_ratio_high)
    old_log_prob, log_prob, advantages = _valid(response_mask, old_log_prob, log_prob, advantages)
    log_ratio = log_prob - old_log_prob
    lengths = mask_count(response_mask, dim=-1).clamp(min=1)
    seq_log_ratio = masked_sum(log_ratio, response_mask, dim=-1) / lengths
    # value sg(s_i), gradient of log π per token: logp - sg(logp) + sg(s_i)
    token_log_ratio = log_prob - log_prob.detach() + seq_log_ratio.detach().unsqueeze(-1)
    ratio = torch.exp(torch.clamp(token_log_ratio, max=GSPO_LOG_RATIO_MAX))
    unclipped = -advantages * ratio
    clipped = -advantages * torch.clamp(ratio, 1 - low, 1 + high)
    pg_losses = torch.maximum(unclipped, clipped)
    loss = _aggregate(pg_losses, response_mask, loss_agg_mode, rollout_is_weights, agg_kwargs)
    return loss, _metrics(
        pg_clipfrac=_fraction(clipped > unclipped, response_mask),
        ppo_kl=_ppo_kl(log_ratio, response_mask),
        pg_clipfrac_lower=0.0,
    )


@register_policy_loss("gpg")
def gpg(
    old_log_prob: torch.Tensor,
    log_prob: torch.Tensor,
    advantages: torch.Tensor,
    response_mask: torch.Tensor,
    loss_agg_mode: str = "token-mean",
    *,
    rollout_is_weights: torch.Tensor | None = None,
    agg_kwargs: dict[str, Any] | None = None,
    **_: Any,
) -> LossOutput:
    """GPG: plain policy gradient -logπ·A, no ratio and no clipping."""
    log_prob, advantages = _valid(response_mask, log_prob, advantages)
    loss = _aggregate(-log_prob * advantages, response_mask, loss_agg_mode, rollout_is_weights, agg_kwargs)
    return loss, {}


@register_policy_loss("cispo")
def cispo(
    old_log_prob: torch.Tensor,
    log_prob: torch.Tensor,
    advantages: torch.Tensor,
    response_mask: torch.Tensor,
    loss_agg_mode: str = "token-mean",
    *,
    clip_ratio: float = 0.2,
    clip_ratio_low: float | None = None,
    clip_ratio_high: float | None = None,
    rollout_is_weights: torch.Tensor | None = None,
    agg_kwargs: dict[str, Any] | None = None,
    **_: Any,
) -> LossOutput:
    """CISPO: -sg(clip(ratio))·A·logπ; clipping bounds the weight, never drops the gradient."""
    low, high = _bounds(clip_ratio, clip_ratio_low, clip_ratio_high)
    old_log_prob, log_prob, advantages = _valid(response_mask, old_log_prob, log_prob, advantages)
    log_ratio = _clamped_log_ratio(log_prob, old_log_prob)
    ratio = torch.exp(log_ratio)
    clipped_ratio = torch.clamp(ratio, 1 - low, 1 + high)
    pg_losses = -clipped_ratio.detach() * advantages * log_prob
    loss = _aggregate(pg_losses, response_mask, loss_agg_mode, rollout_is_weights, agg_kwargs)
    return loss, _metrics(
        pg_clipfrac=_fraction(ratio != clipped_ratio, response_mask),
        ppo_kl=_ppo_kl(log_ratio, response_mask),
        pg_clipfrac_lower=0.0,
    )


@register_policy_loss("sapo")
def sapo(
    old_log_prob: torch.Tensor,
    log_prob: torch.Tensor,
    advantages: torch.Tensor,
    response_mask: torch.Tensor,
    loss_agg_mode: str = "seq-mean-token-mean",
    *,
    tau_pos: float = 1.0,
    tau_neg: float = 1.05,
    rollout_is_weights: torch.Tensor | None = None,
    agg_kwargs: dict[str, Any] | None = None,
    **_: Any,
) -> LossOutput:
    """SAPO: soft sigmoid gate on the ratio instead of a hard clip (always seq-mean-token-mean)."""
    old_log_prob, log_prob, advantages = _valid(response_mask, old_log_prob, log_prob, advantages)
    log_ratio = _clamped_log_ratio(log_prob, old_log_prob)
    ratio = torch.exp(log_ratio)
    tau = torch.where(advantages > 0, tau_pos, tau_neg).to(ratio.dtype)
    gates = torch.sigmoid(tau * (ratio - 1.0)) * (4.0 / tau)
    loss = _aggregate(
        -gates * advantages, response_mask, "seq-mean-token-mean", rollout_is_weights, agg_kwargs
    )
    return loss, _metrics(pg_clipfrac=0.0, ppo_kl=_ppo_kl(log_ratio, response_mask), pg_clipfrac_lower=0.0)


@register_policy_loss("geo_mean")
def geo_mean(
    old_log_prob: torch.Tensor,
    log_prob: torch.Tensor,
    advantages: torch.Tensor,
    response_mask: torch.Tensor,
    loss_agg_mode: str = "token-mean",
    *,
    clip_ratio: float = 0.2,
    clip_ratio_low: float | None = None,
    clip_ratio_high: float | None = None,
    rollout_is_weights: torch.Tensor | None = None,
    **_: Any,
) -> LossOutput:
    """GMPO: geometric mean of token-clipped ratios per sequence times the mean advantage."""
    low, high = _bounds(clip_ratio, clip_ratio_low, clip_ratio_high)
    old_log_prob, log_prob, advantages = _valid(response_mask, old_log_prob, log_prob, advantages)
    log_ratio = log_prob - old_log_prob
    sign = torch.sign(advantages)
    clamped = torch.clamp(log_ratio, -low, high)
    pessimistic = sign * torch.minimum(sign * log_ratio, sign * clamped)
    seq_ratio = torch.exp(_seq_token_mean(pessimistic, response_mask))
    pg_losses = -_seq_token_mean(advantages, response_mask) * seq_ratio
    if rollout_is_weights is not None:  # geometric mean of token weights, one per sequence
        pg_losses = pg_losses * torch.exp(
            _seq_token_mean(torch.log(rollout_is_weights + 1e-10), response_mask)
        )
    was_clipped = log_ratio != clamped
    return pg_losses.mean(), _metrics(
        pg_clipfrac=_fraction(was_clipped & (advantages > 0), response_mask),
        ppo_kl=_ppo_kl(log_ratio, response_mask),
        pg_clipfrac_lower=_fraction(was_clipped & (advantages < 0), response_mask),
    )


@register_policy_loss("clip_cov", draws_random=True)
def clip_cov(
    old_log_prob: torch.Tensor,
    log_prob: torch.Tensor,
    advantages: torch.Tensor,
    response_mask: torch.Tensor,
    loss_agg_mode: str = "token-mean",
    *,
    clip_ratio: float = 0.2,
    clip_ratio_low: float | None = None,
    clip_ratio_high: float | None = None,
    clip_cov_ratio: float = 0.0002,
    clip_cov_lb: float = 1.0,
    clip_cov_ub: float = 5.0,
    rollout_is_weights: torch.Tensor | None = None,
    agg_kwargs: dict[str, Any] | None = None,
    generator: torch.Generator | None = None,
    **_: Any,
) -> LossOutput:
    """Clip-Cov: PPO clip, plus gradients cut on a random few tokens of high advantage·logπ covariance."""
    if clip_cov_ratio <= 0:
        raise ValueError(f"clip_cov_ratio must be > 0, got {clip_cov_ratio}")
    low, high = _bounds(clip_ratio, clip_ratio_low, clip_ratio_high)
    valid = as_bool(response_mask)
    old_log_prob, log_prob, advantages = _valid(response_mask, old_log_prob, log_prob, advantages)
    log_ratio = log_prob - old_log_prob
    ratio = torch.exp(log_ratio)
    unclipped = -advantages * ratio
    clipped = -advantages * torch.clamp(ratio, 1 - low, 1 + high)
    clipped_by_ppo = (clipped > unclipped) & valid
    cov = (advantages - masked_mean(advantages, valid)) * (log_prob - masked_mean(log_prob.detach(), valid))
    candidates = torch.nonzero((cov > clip_cov_lb) & (cov < clip_cov_ub) & valid & ~clipped_by_ppo)
    n_cut = max(int(clip_cov_ratio * int(valid.sum().item())), 1)
    draw_device = generator.device if generator is not None else torch.device("cpu")
    order = torch.randperm(candidates.shape[0], generator=generator, device=draw_device).to(cov.device)
    cut = candidates[order[:n_cut]]
    keep = torch.ones_like(valid)
    keep[cut[:, 0], cut[:, 1]] = False
    pg_losses = torch.maximum(unclipped, clipped) * keep
    loss = _aggregate(pg_losses, response_mask, loss_agg_mode, rollout_is_weights, agg_kwargs)
    return loss, _metrics(pg_clipfrac=_fraction(~keep, response_mask), ppo_kl=_ppo_kl(log_ratio, valid))


@register_policy_loss("kl_cov")
def kl_cov(
    old_log_prob: torch.Tensor,
    log_prob: torch.Tensor,
    advantages: torch.Tensor,
    response_mask: torch.Tensor,
    loss_agg_mode: str = "token-mean",
    *,
    kl_cov_ratio: float = 0.0002,
    ppo_kl_coef: float = 1.0,
    rollout_is_weights: torch.Tensor | None = None,
    agg_kwargs: dict[str, Any] | None = None,
    **_: Any,
) -> LossOutput:
    """KL-Cov: policy gradient with a |log-ratio| penalty on the top tokens by advantage·logπ covariance."""
    if kl_cov_ratio <= 0:
        raise ValueError(f"kl_cov_ratio must be > 0, got {kl_cov_ratio}")
    valid = as_bool(response_mask)
    old_log_prob, log_prob, advantages = _valid(response_mask, old_log_prob, log_prob, advantages)
    log_ratio = log_prob - old_log_prob
    abs_kl = log_ratio.abs()
    ratio = torch.exp(log_ratio)
    pg_losses = -advantages * ratio
    valid_flat = torch.nonzero(valid.reshape(-1)).squeeze(-1)
    if valid_flat.numel() > 0:
        adv = advantages.detach().reshape(-1)[valid_flat]
        logp = log_prob.detach().reshape(-1)[valid_flat]
        cov = (adv - adv.mean()) * (logp - logp.mean())
        top = torch.topk(cov, max(1, int(valid_flat.numel() * kl_cov_ratio)), largest=True).indices
        penalised = torch.zeros_like(valid).reshape(-1)
        penalised[valid_flat[top]] = True
        pg_losses = torch.where(penalised.view_as(valid), pg_losses + ppo_kl_coef * abs_kl, pg_losses)
    loss = _aggregate(pg_losses, response_mask, loss_agg_mode, rollout_is_weights, agg_kwargs)
    return loss, _metrics(ppo_kl=masked_mean(abs_kl, valid))


@register_policy_loss("dro")
def dro(
    old_log_prob: torch.Tensor,
    log_prob: torch.Tensor,
    advantages: torch.Tensor,
    response_mask: torch.Tensor,
    loss_agg_mode: str = "token-mean",
    *,
    dro_beta: float = 0.1,
    rollout_is_weights: torch.Tensor | None = None,
    agg_kwargs: dict[str, Any] | None = None,
    **_: Any,
) -> LossOutput:
    """DRO: -(logπ·A - ½β(logπ - logπ_old)²), a quadratic penalty instead of ratio clipping."""
    if isinstance(dro_beta, bool) or not isinstance(dro_beta, (int, float)) or not dro_beta > 0:
        raise ValueError(
            f"dro needs `dro_beta` > 0 (a number; set it in actor.loss_kwargs), got {dro_beta!r}"
        )
    old_log_prob, log_prob, advantages = _valid(response_mask, old_log_prob, log_prob, advantages)
    log_ratio = log_prob - old_log_prob
    pg_losses = -(log_prob * advantages - 0.5 * dro_beta * log_ratio.square())
    loss = _aggregate(pg_losses, response_mask, loss_agg_mode, rollout_is_weights, agg_kwargs)
    return loss, _metrics(ppo_kl=_ppo_kl(log_ratio, response_mask))


def _dppo(
    divergence_ok: torch.Tensor,
    old_log_prob: torch.Tensor,
    log_prob: torch.Tensor,
    advantages: torch.Tensor,
    response_mask: torch.Tensor,
    loss_agg_mode: str,
    clip_ratio_c: float,
    rollout_is_weights: torch.Tensor | None,
    agg_kwargs: dict[str, Any] | None,
) -> LossOutput:
    """DPPO core: truncated-IS policy gradient on the tokens whose divergence stays in bounds."""
    log_ratio = _clamped_log_ratio(log_prob, old_log_prob)
    ratio = torch.exp(log_ratio)
    truncated = torch.clamp(ratio, max=clip_ratio_c).detach()
    in_bounds = divergence_ok.detach().to(log_prob.dtype)
    pg_losses = -advantages * truncated * log_prob * in_bounds
    loss = _aggregate(pg_losses, response_mask, loss_agg_mode, rollout_is_weights, agg_kwargs)
    return loss, _metrics(
        pg_clipfrac=masked_mean(1.0 - in_bounds, response_mask),
        ppo_kl=_ppo_kl(log_ratio, response_mask),
        pg_clipfrac_lower=masked_mean((ratio > clip_ratio_c).to(in_bounds.dtype) * in_bounds, response_mask),
    )


@register_policy_loss("dppo_tv")
def dppo_tv(
    old_log_prob: torch.Tensor,
    log_prob: torch.Tensor,
    advantages: torch.Tensor,
    response_mask: torch.Tensor,
    loss_agg_mode: str = "token-mean",
    *,
    clip_ratio: float = 0.2,
    clip_ratio_low: float | None = None,
    clip_ratio_high: float | None = None,
    clip_ratio_c: float = 3.0,
    rollout_is_weights: torch.Tensor | None = None,
    agg_kwargs: dict[str, Any] | None = None,
    **_: Any,
) -> LossOutput:
    """DPPO-Binary-TV: drop tokens whose probability moved more than the TV bound in the advantage's direction."""
    low, high = _bounds(clip_ratio, clip_ratio_low, clip_ratio_high)
    old_log_prob, log_prob, advantages = _valid(response_mask, old_log_prob, log_prob, advantages)
    shift = torch.exp(log_prob) - torch.exp(old_log_prob)
    ok = torch.where(advantages > 0, shift <= high, shift >= -low)
    return _dppo(
        ok,
        old_log_prob,
        log_prob,
        advantages,
        response_mask,
        loss_agg_mode,
        clip_ratio_c,
        rollout_is_weights,
        agg_kwargs,
    )


@register_policy_loss("dppo_kl")
def dppo_kl(
    old_log_prob: torch.Tensor,
    log_prob: torch.Tensor,
    advantages: torch.Tensor,
    response_mask: torch.Tensor,
    loss_agg_mode: str = "token-mean",
    *,
    clip_ratio: float = 0.2,
    clip_ratio_low: float | None = None,
    clip_ratio_high: float | None = None,
    clip_ratio_c: float = 3.0,
    rollout_is_weights: torch.Tensor | None = None,
    agg_kwargs: dict[str, Any] | None = None,
    **_: Any,
) -> LossOutput:
    """DPPO-Binary-KL: drop tokens whose binary KL to the old policy exceeds the bound in the advantage's direction."""
    low, high = _bounds(clip_ratio, clip_ratio_low, clip_ratio_high)
    old_log_prob, log_prob, advantages = _valid(response_mask, old_log_prob, log_prob, advantages)
    prob, old_prob = torch.exp(log_prob), torch.exp(old_log_prob)
    binary_kl = old_prob * (old_log_prob - log_prob) + (1 - old_prob) * torch.log(
        (1.0 - old_prob + 1e-8) / (1.0 - prob + 1e-8)
    )
    ok = torch.where(
        advantages > 0, (binary_kl <= high) | (prob <= old_prob), (binary_kl <= low) | (prob >= old_prob)
    )
    return _dppo(
        ok,
        old_log_prob,
        log_prob,
        advantages,
        response_mask,
        loss_agg_mode,
        clip_ratio_c,
        rollout_is_weights,
        agg_kwargs,
    )


@register_policy_loss("reinforce")
def reinforce(
    old_log_prob: torch.Tensor,
    log_prob: torch.Tensor,
    advantages: torch.Tensor,
    response_mask: torch.Tensor,
    loss_agg_mode: str = "seq-mean-token-sum",
    *,
    rollout_is_weights: torch.Tensor | None = None,
    agg_kwargs: dict[str, Any] | None = None,
    **_: Any,
) -> LossOutput:
    """REINFORCE: agg(-A·logπ·w) with the caller's IS weights w (or 1); no ratio, no clipping.

    verl 0.9.1 `compute_policy_loss_reinforce`: `old_log_prob` is the rollout policy's and
    only feeds `actor/ppo_kl` (the token mean of logπ_rollout - logπ); the weights are
    treated as constants (detached)."""
    old_log_prob, log_prob, advantages = _valid(response_mask, old_log_prob, log_prob, advantages)
    weights = rollout_is_weights.detach() if rollout_is_weights is not None else None
    loss = _aggregate(-advantages * log_prob, response_mask, loss_agg_mode, weights, agg_kwargs)
    return loss, _metrics(ppo_kl=masked_mean(old_log_prob - log_prob, response_mask))


@register_policy_loss("bypass_mode")
def bypass_mode(
    old_log_prob: torch.Tensor,
    log_prob: torch.Tensor,
    advantages: torch.Tensor,
    response_mask: torch.Tensor,
    loss_agg_mode: str = "token-mean",
    *,
    loss_type: str = "ppo_clip",
    rollout_is: str | None = None,
    rollout_is_threshold: float = 2.0,
    agg_kwargs: dict[str, Any] | None = None,
    **kwargs: Any,
) -> LossOutput:
    """Bypass mode (old = rollout log-probs): PPO clip, or REINFORCE with truncated IS weights."""
    weights, metrics = (
        truncated_is_weights(log_prob.detach(), old_log_prob, response_mask, rollout_is, rollout_is_threshold)
        if rollout_is is not None
        else (None, {})
    )
    if loss_type == "ppo_clip":  # the ratio already is π/π_rollout: no extra IS weight
        loss, pg_metrics = vanilla(
            old_log_prob,
            log_prob,
            advantages,
            response_mask,
            loss_agg_mode,
            agg_kwargs=agg_kwargs,
            **{**kwargs, "rollout_is_weights": None},
        )
    elif loss_type == "reinforce":
        loss, pg_metrics = reinforce(
            old_log_prob,
            log_prob,
            advantages,
            response_mask,
            loss_agg_mode,
            rollout_is_weights=weights,
            agg_kwargs=agg_kwargs,
        )
    else:
        raise ValueError(f"bypass_mode loss_type must be 'ppo_clip' or 'reinforce', got {loss_type!r}")
    return loss, {**pg_metrics, **metrics}
