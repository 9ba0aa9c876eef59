"""Advantage estimators: `fn(token_level_rewards, response_mask, index, **kw) -> (advantages, returns)`.

Numbers follow verl 0.9.1 (`core_algos.py`); the per-sample Python loops become group
statistics over dense group ids (`groups.py`) and GAE / discounted returns a reverse scan over T.
Every estimator accepts the uniform keyword set (`values, reward_baselines, gamma, lam, epsilon,
norm_adv_by_std_in_grpo`, ...) and ignores what it does not use. The score of a response is
`Σ_t token_level_rewards` over all positions, as in verl. Outputs have the rewards' dtype;
group statistics run in float64 (they are (B,)-sized).

Notes on verl and the papers:
- reinforce_plus_plus: at masked positions (interior gaps included) the running return carries
  through unchanged and `returns` is 0 there, as in current verl (its multi-turn fix); older
  verl reset the running return at every masked position.
- rloo keeps a singleton's raw score (verl's loop form; its vectorized variant zeroes it) and
  uses `n/(n-1)·(r - mean)`, equal to the paper's leave-one-out baseline.
- grpo (std-norm) divides by `std + ε` (verl), not `std` as in the GRPO paper; Dr.GRPO is
  `norm_adv_by_std_in_grpo=False` (advantage = r - mean, no std), as in the Dr.GRPO paper.
- opo: a group whose responses are all empty gets baseline 0 (verl divides 0 by 0).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch

from rlrun.algorithms.groups import STAT_DTYPE, Groups
from rlrun.algorithms.masked import (
    acc_dtype,
    as_bool,
    broadcast_rows,
    mask_count,
    masked_whiten,
    masked_whiten_rows,
    zero_outside,
    zero_outside_,
)
from rlrun.algorithms.registries import register_advantage

AdvantageOutput = tuple[torch.Tensor, torch.Tensor]


# --- shared pieces ---------------------------------------------------------------------------


def response_scores(token_level_rewards: torch.Tensor) -> torch.Tensor:
    """Score of each response, `Σ_t rewards` (float32 sum as in verl), as float64 for group stats."""
    return token_level_rewards.sum(dim=-1, dtype=acc_dtype(token_level_rewards.dtype)).to(STAT_DTYPE)


def _groups(index: Any, token_level_rewards: torch.Tensor) -> Groups:
    if index is None:
        raise ValueError("this advantage estimator needs `index` (the group id of each response)")
    return Groups.from_index(index, device=token_level_rewards.device)


def _centred(scores: torch.Tensor, groups: Groups) -> tuple[torch.Tensor, torch.Tensor]:
    """`(r - group mean, group mean per group)` with a singleton's mean taken as 0 (verl)."""
    mean = groups.mean(scores)
    baseline = torch.where(groups.counts == 1, torch.zeros_like(mean), mean)
    return scores - baseline[groups.ids], mean


def grpo_scalars(
    scores: torch.Tensor, groups: Groups, epsilon: float, norm_adv_by_std_in_grpo: bool
) -> torch.Tensor:
    """Per-response GRPO advantage: `(r - mean)/(std + ε)`, or `r - mean`; singleton: mean 0, std 1."""
    centred, mean = _centred(scores, groups)
    if not norm_adv_by_std_in_grpo:
        return centred
    std = torch.where(groups.counts == 1, torch.ones_like(mean), groups.std(scores, mean))
    return centred / (std[groups.ids] + epsilon)


def _outcome(
    row_advantages: torch.Tensor, token_level_rewards: torch.Tensor, response_mask: torch.Tensor
) -> AdvantageOutput:
    advantages = broadcast_rows(row_advantages, response_mask, token_level_rewards.dtype)
    return advantages, advantages


def _reverse_cumsum(values: torch.Tensor) -> torch.Tensor:
    """`Σ_{s≥t} x_s` along the last dim (the flipped copy is summed in place)."""
    return values.flip(-1).cumsum_(-1).flip(-1)


def discounted_returns(
    token_level_rewards: torch.Tensor, response_mask: torch.Tensor, gamma: float
) -> torch.Tensor:
    """`G_t = r_t + γ·G_{t+1}` over valid tokens; masked tokens carry G through and get 0."""
    rewards = zero_outside(token_level_rewards, response_mask)
    if gamma == 1.0:  # undiscounted: a reverse cumulative sum, no scan needed
        return zero_outside_(_reverse_cumsum(rewards), response_mask)
    dtype = acc_dtype(rewards.dtype)
    rewards_t = rewards.to(dtype).T.contiguous()
    valid_t = as_bool(response_mask).T.contiguous()
    returns_t = torch.empty_like(rewards_t)
    running = torch.zeros_like(rewards_t[0])
    for t in reversed(range(rewards_t.shape[0])):
        candidate = torch.add(rewards_t[t], running, alpha=gamma)
        running = torch.where(valid_t[t], candidate, running, out=returns_t[t])
    return zero_outside_(returns_t.T.contiguous(), response_mask).to(token_level_rewards.dtype)


# --- estimators ------------------------------------------------------------------------------


@register_advantage("gae", needs_critic=True)
@torch.no_grad()
def gae(
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    index: Any = None,
    *,
    values: torch.Tensor | None = None,
    gamma: float = 1.0,
    lam: float = 1.0,
    **_: Any,
) -> AdvantageOutput:
    """GAE with a critic: reverse scan of TD errors, whitened over the batch (PPO)."""
    if values is None:
        raise ValueError("gae needs `values` from a critic")
    dtype = acc_dtype(token_level_rewards.dtype)
    values_t = values.to(dtype).T.contiguous()
    # δ_t = (r_t - V_t) + γ·V_next: the first part for all t at once, the scan adds the rest
    reward_minus_value_t = (token_level_rewards.to(dtype) - values.to(dtype)).T.contiguous()
    valid_t = as_bool(response_mask).T.contiguous()
    advantages_t = torch.empty_like(values_t)
    next_value = torch.zeros_like(values_t[0])
    last_advantage = torch.zeros_like(values_t[0])
    for t in reversed(range(values_t.shape[0])):
        delta = torch.add(reward_minus_value_t[t], next_value, alpha=gamma)
        # masked positions (padding and interior gaps) carry V_next and A_next through unchanged
        candidate = delta.add_(last_advantage, alpha=gamma * lam)
        last_advantage = torch.where(valid_t[t], candidate, last_advantage, out=advantages_t[t])
        next_value = torch.where(valid_t[t], values_t[t], next_value)
    advantages = advantages_t.T.contiguous()
    returns = (advantages + values.to(dtype)).to(token_level_rewards.dtype)
    return masked_whiten(advantages, response_mask).to(token_level_rewards.dtype), returns


@register_advantage("grpo", needs_groups=True, unnormalised_agg_mode="seq-mean-token-sum-norm")
@torch.no_grad()
def grpo(
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    index: Any = None,
    *,
    epsilon: float = 1e-6,
    norm_adv_by_std_in_grpo: bool = True,
    **_: Any,
) -> AdvantageOutput:
    """GRPO: (r - group mean)/(group std + ε); Dr.GRPO without the std (norm_adv_by_std_in_grpo=False)."""
    groups = _groups(index, token_level_rewards)
    scalars = grpo_scalars(response_scores(token_level_rewards), groups, epsilon, norm_adv_by_std_in_grpo)
    return _outcome(scalars, token_level_rewards, response_mask)


@register_advantage("rloo", needs_groups=True)
@torch.no_grad()
def rloo(
    token_level_rewards: torch.Tensor, response_mask: torch.Tensor, index: Any = None, **_: Any
) -> AdvantageOutput:
    """RLOO: reward minus the mean of the other responses of the prompt, n/(n-1)·(r - mean)."""
    groups = _groups(index, token_level_rewards)
    scores = response_scores(token_level_rewards)
    n = groups.row_counts()
    leave_one_out = n / (n - 1) * (scores - groups.mean(scores)[groups.ids])
    return _outcome(torch.where(n > 1, leave_one_out, scores), token_level_rewards, response_mask)


@register_advantage("opo", needs_groups=True)
@torch.no_grad()
def opo(
    token_level_rewards: torch.Tensor, response_mask: torch.Tensor, index: Any = None, **_: Any
) -> AdvantageOutput:
    """OPO: reward minus the length-weighted group mean reward (optimal baseline)."""
    groups = _groups(index, token_level_rewards)
    scores = response_scores(token_level_rewards)
    lengths = mask_count(response_mask, dim=-1, dtype=STAT_DTYPE)
    total_length = groups.sum(lengths)
    weighted = groups.sum(lengths * scores) / total_length
    baseline = torch.where((groups.counts == 1) | (total_length == 0), torch.zeros_like(weighted), weighted)
    return _outcome(scores - baseline[groups.ids], token_level_rewards, response_mask)


@register_advantage("reinforce_plus_plus")
@torch.no_grad()
def reinforce_plus_plus(
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    index: Any = None,
    *,
    gamma: float = 1.0,
    **_: Any,
) -> AdvantageOutput:
    """REINFORCE++: discounted token returns, whitened over the batch."""
    returns = discounted_returns(token_level_rewards, response_mask, gamma)
    return zero_outside_(masked_whiten(returns, response_mask), response_mask), returns


@register_advantage("reinforce_plus_plus_baseline", needs_groups=True)
@torch.no_grad()
def reinforce_plus_plus_baseline(
    token_level_rewards: torch.Tensor, response_mask: torch.Tensor, index: Any = None, **_: Any
) -> AdvantageOutput:
    """REINFORCE++-baseline: reward minus group mean, then whitened over the batch's tokens."""
    centred, _ = _centred(response_scores(token_level_rewards), _groups(index, token_level_rewards))
    advantages = masked_whiten_rows(centred, response_mask, token_level_rewards.dtype)
    return advantages, advantages


@register_advantage("remax", needs_greedy_baseline=True)
@torch.no_grad()
def remax(
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    index: Any = None,
    *,
    reward_baselines: torch.Tensor | None = None,
    **_: Any,
) -> AdvantageOutput:
    """ReMax: reward-to-go minus the reward of the prompt's greedy response."""
    if reward_baselines is None:
        raise ValueError("remax needs `reward_baselines` (the reward of one greedy response per prompt)")
    returns = _reverse_cumsum(zero_outside(token_level_rewards, response_mask))
    baselines = broadcast_rows(reward_baselines, response_mask, returns.dtype)  # fresh: subtract into it
    return torch.sub(returns, baselines, out=baselines), returns


@register_advantage("gpg", needs_groups=True)
@torch.no_grad()
def gpg(
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    index: Any = None,
    *,
    f_norm: float = 1.0,
    **_: Any,
) -> AdvantageOutput:
    """GPG: α·(r - group mean)/f_norm with α = B / #non-zero rewards; no std normalisation."""
    scores = response_scores(token_level_rewards)
    alpha = scores.numel() / max(int(torch.count_nonzero(scores).item()), 1)
    centred, _ = _centred(scores, _groups(index, token_level_rewards))
    return _outcome(alpha * centred / f_norm, token_level_rewards, response_mask)


@register_advantage("grpo_passk", needs_groups=True)
@torch.no_grad()
def grpo_passk(
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    index: Any = None,
    *,
    epsilon: float = 1e-6,
    norm_adv_by_std_in_grpo: bool = True,
    **_: Any,
) -> AdvantageOutput:
    """Pass@k GRPO: only each group's best response gets r_max - r_second (÷ std + ε)."""
    groups = _groups(index, token_level_rewards)
    if bool((groups.counts < 2).any()):
        raise ValueError("grpo_passk needs at least 2 responses in every group")
    scores = response_scores(token_level_rewards)
    rows = torch.arange(scores.numel(), device=scores.device)
    is_max = scores == groups.amax(scores)[groups.ids]
    best_row = groups.amin(torch.where(is_max, rows, scores.numel()))  # first index on ties
    is_best = rows == best_row[groups.ids]
    runner_up = groups.amax(torch.where(is_best, torch.full_like(scores, -torch.inf), scores))
    gap = scores - runner_up[groups.ids]
    if norm_adv_by_std_in_grpo:
        gap = gap / (groups.std(scores)[groups.ids] + epsilon)
    return _outcome(torch.where(is_best, gap, torch.zeros_like(gap)), token_level_rewards, response_mask)


@register_advantage("gdpo", needs_groups=True)
@torch.no_grad()
def gdpo(
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    index: Any = None,
    *,
    reward_components: Mapping[str, torch.Tensor] | None = None,
    reward_weights: Mapping[str, float] | Sequence[float] | None = None,
    epsilon: float = 1e-6,
    norm_adv_by_std_in_grpo: bool = True,
    **_: Any,
) -> AdvantageOutput:
    """GDPO: GRPO on each named reward component, weighted sum, whitened over the batch."""
    groups = _groups(index, token_level_rewards)
    components = dict(reward_components) if reward_components else {"reward": token_level_rewards}
    weights = _component_weights(list(components), reward_weights)
    total = torch.zeros(groups.ids.numel(), dtype=STAT_DTYPE, device=token_level_rewards.device)
    for name, component in components.items():
        scores = response_scores(component) if component.dim() == 2 else component.to(STAT_DTYPE)
        total = total + weights[name] * grpo_scalars(
            scores.to(total.device), groups, epsilon, norm_adv_by_std_in_grpo
        )
    advantages = masked_whiten_rows(total, response_mask, token_level_rewards.dtype)
    return advantages, advantages


def _component_weights(
    names: list[str], weights: Mapping[str, float] | Sequence[float] | None
) -> dict[str, float]:
    if weights is None:
        return dict.fromkeys(names, 1.0)
    if isinstance(weights, Mapping):
        unknown = set(weights) - set(names)
        if unknown:
            raise ValueError(
                f"gdpo reward_weights name unknown components {sorted(unknown)}; components: {names}"
            )
        return {name: float(weights.get(name, 1.0)) for name in names}
    if len(weights) != len(names):
        raise ValueError(f"gdpo got {len(weights)} reward_weights for {len(names)} components")
    return {name: float(w) for name, w in zip(names, weights)}


# --- verl's vectorized forms and the optimal token baseline ----------------------------------


@register_advantage("grpo_vectorized", needs_groups=True)
@torch.no_grad()
def grpo_vectorized(
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    index: Any = None,
    *,
    epsilon: float = 1e-6,
    norm_adv_by_std_in_grpo: bool = True,
    **_: Any,
) -> AdvantageOutput:
    """GRPO as verl's vectorized form: (r - group mean)/(group std + ε); singleton mean 0, std 1.

    verl takes the group statistics in float32 (its `group_mean_std`, variance floor 0); here they
    are float64 like every group statistic in rlrun, so the two agree to float32 rounding, and
    this equals `grpo` on the same inputs.
    """
    scores = response_scores(token_level_rewards).to(torch.float32)
    groups = _groups(index, token_level_rewards)
    scalars = grpo_scalars(scores, groups, epsilon, norm_adv_by_std_in_grpo)
    return _outcome(scalars, token_level_rewards, response_mask)


@register_advantage("rloo_vectorized", needs_groups=True)
@torch.no_grad()
def rloo_vectorized(
    token_level_rewards: torch.Tensor, response_mask: torch.Tensor, index: Any = None, **_: Any
) -> AdvantageOutput:
    """RLOO as verl's vectorized form: (c·r - Σ_group r)/(c - 1), and 0 for a singleton group.

    The loop form (`rloo`) keeps a singleton's raw score instead; with every group of size > 1
    the two are equal.
    """
    groups = _groups(index, token_level_rewards)
    scores = response_scores(token_level_rewards)
    c = groups.row_counts()
    leave_one_out = (c * scores - groups.sum(scores)[groups.ids]) / (c - 1).clamp(min=1)
    return _outcome(torch.where(c > 1, leave_one_out, 0.0), token_level_rewards, response_mask)


def _token_baseline(
    returns: torch.Tensor,
    cumulative_w: torch.Tensor,
    mask: torch.Tensor,
    groups: Groups,
    counted: torch.Tensor,
    handle_zero_tail: bool,
    epsilon: float,
) -> torch.Tensor:
    """Per group and position t: `B_t = Σ_i G_it·W_it·m_it / (Σ_i W_it·m_it + ε)` over the group's
    counted rows (`counted`, (B,) bool), the same for each member; 0 for a group of one counted
    row. With `handle_zero_tail`, a group's strictly longest row gets B = 0 from the
    second-longest length on."""
    weight = cumulative_w * mask * counted.unsqueeze(-1)
    num = returns.new_zeros(groups.num_groups, returns.shape[-1]).index_add_(0, groups.ids, returns * weight)
    den = returns.new_zeros(groups.num_groups, returns.shape[-1]).index_add_(0, groups.ids, weight)
    size = groups.sum(counted.to(STAT_DTYPE))
    baseline = torch.where((size > 1).unsqueeze(-1), num / (den + epsilon), 0.0)[groups.ids]
    if handle_zero_tail:
        lengths = torch.where(counted, mask_count(mask, dim=-1, dtype=STAT_DTYPE), -1.0)
        longest = groups.amax(lengths)
        at_longest = counted & (lengths == longest[groups.ids])
        second = groups.amax(torch.where(at_longest, -1.0, lengths))  # -1: no other counted row
        unique_longest = at_longest & (groups.sum(at_longest.to(STAT_DTYPE)) == 1)[groups.ids]
        unique_longest &= (size > 1)[groups.ids]
        positions = torch.arange(returns.shape[-1], device=returns.device)
        tail = unique_longest.unsqueeze(-1) & (positions >= second[groups.ids].unsqueeze(-1))
        baseline = baseline.masked_fill(tail, 0.0)
    return baseline


def _returns_and_path_variance(
    name: str,
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    old_log_probs: torch.Tensor | None,
    sum_pi_squared: torch.Tensor | None,
    rollout_is_weights: torch.Tensor | None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The optimal token baseline's inputs: `G` = reward-to-go of `r·m`, and `W_t = Σ_{s≤t} w_s·m_s`
    with `w = 1 - 2π(a_t) + Σ_v π(v)²` (times ρ̄² with IS weights), in the accumulation dtype."""
    if old_log_probs is None or sum_pi_squared is None:
        raise ValueError(
            f"{name} needs `old_log_probs` and `sum_pi_squared` (Σ_v π(v)² at each response position)"
        )
    dtype = acc_dtype(token_level_rewards.dtype)
    returns = _reverse_cumsum(zero_outside(token_level_rewards, response_mask).to(dtype))
    w = 1 - 2 * torch.exp(old_log_probs.to(dtype)) + sum_pi_squared.to(dtype)
    if rollout_is_weights is not None:
        w = w * rollout_is_weights.to(dtype).square()
    return returns, zero_outside(w, response_mask).cumsum(-1)


@register_advantage(
    "optimal_token_baseline",
    needs_groups=True,
    needs_old_log_probs=True,
    needs_sum_pi_squared=True,
    needs_contiguous_response=True,
)
@torch.no_grad()
def optimal_token_baseline(
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    index: Any = None,
    *,
    old_log_probs: torch.Tensor | None = None,
    sum_pi_squared: torch.Tensor | None = None,
    rollout_is_weights: torch.Tensor | None = None,
    handle_zero_tail: bool = True,
    epsilon: float = 1e-8,
    **_: Any,
) -> AdvantageOutput:
    """OTB: reward-to-go minus a per-token group baseline weighted by cumulative path variance.

    verl 0.9.1 `compute_optimal_token_baseline_advantage`: `G` = reward-to-go of `r·m`,
    `W_t = cumsum(w·m)` with `w = 1 - 2·exp(old_log_prob) + Σπ²` (·ρ̄² when rollout IS weights
    are given), per group and position `B_t = Σ G·W·m / (Σ W·m + ε)` (ε = `epsilon`, 1e-8 here,
    not GRPO's 1e-6), B = 0 for a singleton group, the zero tail of `handle_zero_tail`;
    advantages `(G - B)·m`, returns `G`. Positions are the padded ones: use
    `tir_optimal_token_baseline` when the mask has holes.
    """
    returns, cumulative_w = _returns_and_path_variance(
        "optimal_token_baseline",
        token_level_rewards,
        response_mask,
        old_log_probs,
        sum_pi_squared,
        rollout_is_weights,
    )
    groups = _groups(index, token_level_rewards)
    counted = torch.ones(returns.shape[0], dtype=torch.bool, device=returns.device)
    mask = response_mask.to(returns.dtype)
    baseline = _token_baseline(returns, cumulative_w, mask, groups, counted, handle_zero_tail, epsilon)
    advantages = (returns - baseline) * mask
    return advantages.to(token_level_rewards.dtype), returns.to(token_level_rewards.dtype)


@register_advantage(
    "tir_optimal_token_baseline", needs_groups=True, needs_old_log_probs=True, needs_sum_pi_squared=True
)
@torch.no_grad()
def tir_optimal_token_baseline(
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    index: Any = None,
    *,
    old_log_probs: torch.Tensor | None = None,
    sum_pi_squared: torch.Tensor | None = None,
    rollout_is_weights: torch.Tensor | None = None,
    handle_zero_tail: bool = True,
    epsilon: float = 1e-8,
    **_: Any,
) -> AdvantageOutput:
    """OTB for masks with holes (multi-turn tool use): baselines over each response's own tokens.

    verl 0.9.1 `compute_multi_turn_optimal_token_baseline_advantage`: `G` and `W` as in
    `optimal_token_baseline`, then each row's valid tokens are packed to the left, the baseline
    is taken over packed positions among the group's non-empty rows (a group with one non-empty
    row gets 0; `handle_zero_tail` uses the packed lengths), and `G - B` is scattered back to
    the valid positions; returns `G`.
    """
    returns, cumulative_w = _returns_and_path_variance(
        "tir_optimal_token_baseline",
        token_level_rewards,
        response_mask,
        old_log_probs,
        sum_pi_squared,
        rollout_is_weights,
    )
    valid = as_bool(response_mask)
    lengths = valid.sum(-1)
    width = int(lengths.max()) if lengths.numel() else 0
    rows, cols = valid.nonzero(as_tuple=True)
    packed_cols = valid.long().cumsum(-1)[rows, cols] - 1  # each valid token's place in its row
    packed_returns = returns.new_zeros(returns.shape[0], width)
    packed_w = torch.zeros_like(packed_returns)
    packed_returns[rows, packed_cols] = returns[rows, cols]
    packed_w[rows, packed_cols] = cumulative_w[rows, cols]
    packed_mask = (torch.arange(width, device=returns.device) < lengths.unsqueeze(-1)).to(returns.dtype)
    groups = _groups(index, token_level_rewards)
    baseline = _token_baseline(
        packed_returns, packed_w, packed_mask, groups, lengths > 0, handle_zero_tail, epsilon
    )
    advantages = torch.zeros_like(returns)
    advantages[rows, cols] = (packed_returns - baseline)[rows, packed_cols]
    return advantages.to(token_level_rewards.dtype), returns.to(token_level_rewards.dtype)
