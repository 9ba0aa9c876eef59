import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from rlrun.algorithms import ADVANTAGES
from rlrun.algorithms.advantages import discounted_returns
from rlrun.algorithms.masked import masked_whiten

EPS = 1e-6
GROUP_ESTIMATORS = ("grpo", "rloo", "opo", "gpg", "reinforce_plus_plus_baseline", "gdpo")


def outcome_batch():
    """Six responses: group 'a' = rows 0, 2, 5 (not consecutive), 'b' = rows 1, 3, singleton 'c' = row 4.

    Scores a: 1, 0, 1; b: 2, 4; c: 5. Lengths 2, 1, 3, 3, 2, 0 (row 5 is empty), T = 3.
    """
    lengths = torch.tensor([2, 1, 3, 3, 2, 0])
    mask = (torch.arange(3)[None, :] < lengths[:, None]).float()
    scores = torch.tensor([1.0, 2.0, 0.0, 4.0, 5.0, 1.0])
    rewards = torch.zeros(6, 3)
    rewards[torch.arange(6), (lengths - 1).clamp(min=0)] = scores
    index = torch.tensor([10, 20, 10, 20, 30, 10])
    return rewards, mask, index


def expand(row_values, mask):
    return torch.tensor(row_values, dtype=torch.float32)[:, None] * mask


def run(name, rewards, mask, index, old_log_probs=None, sum_pi_squared=None, **kw):
    if old_log_probs is not None:  # the optimal token baselines' extra inputs
        kw |= {"old_log_probs": old_log_probs, "sum_pi_squared": sum_pi_squared}
    advantages, returns = ADVANTAGES.get(name)(rewards, mask, index, **kw)
    return advantages, returns


def test_grpo_hand_computed():
    rewards, mask, index = outcome_batch()
    std_a, std_b = math.sqrt(1 / 3), math.sqrt(2)
    expected = [
        (1 - 2 / 3) / (std_a + EPS),
        (2 - 3) / (std_b + EPS),
        (0 - 2 / 3) / (std_a + EPS),
        (4 - 3) / (std_b + EPS),
        5 / (1 + EPS),  # singleton: mean 0, std 1
        (1 - 2 / 3) / (std_a + EPS),
    ]
    advantages, returns = run("grpo", rewards, mask, index)
    assert torch.allclose(advantages, expand(expected, mask), rtol=1e-6)
    assert returns is advantages
    assert advantages[5].abs().sum() == 0  # empty row


def test_dr_grpo_drops_the_std():
    rewards, mask, index = outcome_batch()
    expected = [1 / 3, -1, -2 / 3, 1, 5, 1 / 3]
    advantages, _ = run("grpo", rewards, mask, index, norm_adv_by_std_in_grpo=False)
    assert torch.allclose(advantages, expand(expected, mask), atol=1e-6)


def test_grpo_zero_std_group_gives_exact_zeros():
    rewards = torch.full((4, 2), 0.05)  # score 0.1 everywhere
    advantages, _ = run("grpo", rewards, torch.ones(4, 2), torch.zeros(4, dtype=torch.long))
    assert advantages.abs().max().item() == 0.0


def test_rloo_hand_computed():
    rewards, mask, index = outcome_batch()
    # a: n=3, 3/2·(r - 2/3); b: 2·(r - 3); singleton keeps its reward
    expected = [0.5, -2.0, -1.0, 2.0, 5.0, 0.5]
    assert torch.allclose(run("rloo", rewards, mask, index)[0], expand(expected, mask), atol=1e-6)


def test_opo_hand_computed():
    rewards, mask, index = outcome_batch()
    # a: lengths 2, 3, 0 and scores 1, 0, 1 -> b = (2·1 + 3·0 + 0·1)/5; b: lengths 1, 3 -> b = (2 + 12)/4
    expected = [1 - 0.4, 2 - 3.5, 0 - 0.4, 4 - 3.5, 5.0, 1 - 0.4]
    assert torch.allclose(run("opo", rewards, mask, index)[0], expand(expected, mask), atol=1e-6)


def test_opo_group_of_empty_responses_has_zero_baseline():
    rewards = torch.tensor([[1.0], [2.0]])
    advantages, _ = run("opo", rewards, torch.zeros(2, 1), torch.zeros(2, dtype=torch.long))
    assert advantages.tolist() == [[0.0], [0.0]]


def test_gpg_hand_computed():
    rewards, mask, index = outcome_batch()
    alpha = 6 / 5  # six responses, five non-zero scores
    expected = [alpha * v for v in (1 / 3, -1, -2 / 3, 1, 5, 1 / 3)]
    assert torch.allclose(run("gpg", rewards, mask, index)[0], expand(expected, mask), atol=1e-6)
    expected_f = [v / 2 for v in expected]
    assert torch.allclose(
        run("gpg", rewards, mask, index, f_norm=2.0)[0], expand(expected_f, mask), atol=1e-6
    )


def test_grpo_passk_only_the_best_gets_the_gap():
    rewards = torch.tensor([[1.0], [3.0], [5.0], [2.0], [5.0], [3.0]])
    index = torch.tensor([0, 0, 1, 0, 1, 1])  # group 0: 1, 3, 2; group 1: 5, 5, 3 (tie at the top)
    advantages, _ = run("grpo_passk", rewards, torch.ones(6, 1), index)
    assert advantages[:, 0].tolist() == pytest.approx([0, 1 / (1 + EPS), 0, 0, 0, 0])
    plain, _ = run("grpo_passk", rewards, torch.ones(6, 1), index, norm_adv_by_std_in_grpo=False)
    assert plain[:, 0].tolist() == [0, 1, 0, 0, 0, 0]


def test_grpo_passk_first_index_wins_a_tie():
    rewards = torch.tensor([[4.0], [4.0], [1.0]])
    advantages, _ = run(
        "grpo_passk",
        rewards,
        torch.ones(3, 1),
        torch.zeros(3, dtype=torch.long),
        norm_adv_by_std_in_grpo=False,
    )
    assert advantages[:, 0].tolist() == [0, 0, 0]  # r_max - r_second = 0 for the tie


def test_grpo_passk_rejects_small_groups():
    with pytest.raises(ValueError, match="at least 2"):
        run("grpo_passk", torch.ones(3, 1), torch.ones(3, 1), torch.tensor([0, 0, 1]))


def test_reinforce_plus_plus_baseline_hand_computed():
    rewards = torch.tensor([[0.0, 1.0], [3.0, 0.0], [0.0, 5.0]])
    mask = torch.tensor([[1, 1], [1, 0], [1, 1]]).float()
    # centred: group 0 (rows 0, 1) mean 2 -> -1, 1; singleton -> 5. Tokens -1, -1, 1, 5, 5
    mean, var = 1.8, 36.8 / 4
    tokens = torch.tensor([[-1.0, -1.0], [1.0, 0.0], [5.0, 5.0]])
    expected = (tokens - mean) / math.sqrt(var + 1e-8) * mask
    advantages, _ = run("reinforce_plus_plus_baseline", rewards, mask, torch.tensor([0, 0, 1]))
    assert torch.allclose(advantages, expected, atol=1e-6)


def test_reinforce_plus_plus_carries_through_interior_gaps():
    rewards = torch.tensor([[1.0, 2.0, 9.0, 4.0]])
    mask = torch.tensor([[1, 1, 0, 1]])
    # γ = 0.5: G3 = 4, masked t=2 carries 4 (returns 0 there), G1 = 2 + 2 = 4, G0 = 1 + 2 = 3
    assert discounted_returns(rewards, mask, 0.5).tolist() == [[3.0, 4.0, 0.0, 4.0]]
    assert discounted_returns(rewards, mask, 1.0).tolist() == [[7.0, 6.0, 0.0, 4.0]]
    advantages, returns = run("reinforce_plus_plus", rewards, mask, None, gamma=0.5)
    std = math.sqrt(1 / 3 + 1e-8)  # valid returns 3, 4, 4: mean 11/3, unbiased var 1/3
    expected = torch.tensor([[(3 - 11 / 3) / std, (4 - 11 / 3) / std, 0.0, (4 - 11 / 3) / std]])
    assert torch.allclose(advantages, expected, atol=1e-6)
    assert returns.tolist() == [[3.0, 4.0, 0.0, 4.0]]


def test_remax_hand_computed():
    rewards = torch.tensor([[0.0, 0.0, 1.0, 7.0]])
    mask = torch.tensor([[1, 1, 1, 0]])
    advantages, returns = run("remax", rewards, mask, None, reward_baselines=torch.tensor([0.25]))
    assert returns.tolist() == [[1.0, 1.0, 1.0, 0.0]]
    assert advantages.tolist() == [[0.75, 0.75, 0.75, 0.0]]
    with pytest.raises(ValueError, match="reward_baselines"):
        run("remax", rewards, mask, None)


def test_gae_hand_computed():
    rewards = torch.tensor([[0.0, 0.0, 1.0]])
    values = torch.tensor([[0.5, 0.2, 0.1]])
    mask = torch.ones(1, 3)
    # δ2 = 1 - .1 = .9; δ1 = .1 - .2 = -.1 -> A1 = .8; δ0 = .2 - .5 = -.3 -> A0 = .5
    advantages, returns = run("gae", rewards, mask, None, values=values, gamma=1.0, lam=1.0)
    assert torch.allclose(returns, torch.ones(1, 3))
    raw = torch.tensor([[0.5, 0.8, 0.9]])
    assert torch.allclose(advantages, masked_whiten(raw, mask))


def test_gae_interior_gap_carries_value_and_advantage():
    rewards = torch.tensor([[0.0, 0.0, 1.0], [0.0, 0.0, 0.0]])
    values = torch.tensor([[0.5, float("nan"), 0.1], [0.0, 0.0, 0.0]])
    mask = torch.tensor([[1, 0, 1], [1, 1, 0]])
    advantages, returns = run("gae", rewards, mask, None, values=values, gamma=0.9, lam=0.8)
    # row 0: A2 = .9; t=1 masked carries A = .9, V_next = .1; δ0 = .9·.1 - .5 = -.41, A0 = -.41 + .72·.9
    a0 = -0.41 + 0.72 * 0.9
    raw = torch.tensor([[a0, 0.9, 0.9], [0.0, 0.0, 0.0]])
    assert torch.allclose(advantages, masked_whiten(raw, mask), atol=1e-6)
    assert returns[0, 0].item() == pytest.approx(a0 + 0.5) and returns[0, 2].item() == pytest.approx(1.0)
    with pytest.raises(ValueError, match="values"):
        run("gae", rewards, mask, None)


def test_gdpo_weighted_components_then_whitened():
    mask = torch.ones(4, 2)
    index = torch.tensor([0, 0, 1, 1])
    components = {"correct": torch.tensor([1.0, 0.0, 1.0, 0.0]), "format": torch.tensor([1.0, 1.0, 0.0, 0.0])}
    advantages, _ = run(
        "gdpo", torch.zeros(4, 2), mask, index, reward_components=components, reward_weights={"format": 2.0}
    )
    # "format" is constant within each group -> 0; "correct" gives ±a in every group; whitening -> ±sqrt(7/8)
    expected = torch.tensor([1.0, -1.0, 1.0, -1.0])[:, None] * math.sqrt(7 / 8) * mask
    assert torch.allclose(advantages, expected, atol=1e-5)
    with pytest.raises(ValueError, match="unknown"):
        run(
            "gdpo",
            torch.zeros(4, 2),
            mask,
            index,
            reward_components=components,
            reward_weights={"lenght": 1.0},
        )


def test_gdpo_single_component_is_whitened_grpo():
    rewards, mask, index = outcome_batch()
    grpo, _ = run("grpo", rewards, mask, index)
    gdpo, _ = run("gdpo", rewards, mask, index)
    assert torch.allclose(gdpo, masked_whiten(grpo, mask) * mask, atol=1e-5)


def test_every_estimator_takes_the_uniform_keyword_set():
    rewards, mask, _ = outcome_batch()
    index = torch.tensor([0, 0, 1, 1, 2, 2])
    uniform = {
        "values": torch.zeros(6, 3),
        "reward_baselines": torch.zeros(6),
        "gamma": 1.0,
        "lam": 1.0,
        "epsilon": 1e-6,
        "norm_adv_by_std_in_grpo": True,
        "old_log_probs": torch.zeros(6, 3),
        "sum_pi_squared": torch.zeros(6, 3),
        "unknown_future_key": 3,
    }
    built_in = [name for name in ADVANTAGES.names() if ADVANTAGES.get(name).__module__.startswith("rlrun.")]
    for name in built_in:  # (other tests register plugins)
        advantages, returns = ADVANTAGES.get(name)(
            token_level_rewards=rewards, response_mask=mask, index=index, **uniform
        )
        assert advantages.shape == returns.shape == (6, 3), name


def test_string_and_numpy_group_ids():
    rewards, mask, index = outcome_batch()
    expected, _ = run("grpo", rewards, mask, index)
    names = {10: "uid-a", 20: "uid-b", 30: "uid-c"}
    as_strings = [names[i] for i in index.tolist()]
    assert torch.equal(run("grpo", rewards, mask, as_strings)[0], expected)
    assert torch.equal(run("grpo", rewards, mask, np.array(as_strings, dtype=object))[0], expected)


@pytest.mark.parametrize("dtype", [torch.float64, torch.bfloat16])
@pytest.mark.parametrize("name", ADVANTAGES.names())
def test_dtypes_are_kept(name, dtype):
    rewards, mask, _ = outcome_batch()
    index = torch.tensor([0, 0, 1, 1, 2, 2])
    token_inputs = {"old_log_probs": torch.full((6, 3), -1.0), "sum_pi_squared": torch.full((6, 3), 0.3)}
    advantages, _ = ADVANTAGES.get(name)(
        rewards.to(dtype),
        mask,
        index,
        values=torch.zeros(6, 3, dtype=dtype),
        reward_baselines=torch.zeros(6, dtype=dtype),
        **{k: v.to(dtype) for k, v in token_inputs.items()},
    )
    reference, _ = ADVANTAGES.get(name)(
        rewards, mask, index, values=torch.zeros(6, 3), reward_baselines=torch.zeros(6), **token_inputs
    )
    assert advantages.dtype == dtype
    assert torch.allclose(advantages.float(), reference, atol=0.05 if dtype == torch.bfloat16 else 1e-6)


# --- properties ------------------------------------------------------------------------------


@st.composite
def grouped_batches(draw):
    n_rows = draw(st.integers(2, 10))
    length = draw(st.integers(1, 5))
    groups = draw(st.lists(st.integers(0, 3), min_size=n_rows, max_size=n_rows))
    lengths = draw(st.lists(st.integers(1, length), min_size=n_rows, max_size=n_rows))
    scores = draw(st.lists(st.sampled_from([0.0, 0.5, 1.0, 2.0]), min_size=n_rows, max_size=n_rows))
    perm = draw(st.permutations(range(n_rows)))
    lengths_t = torch.tensor(lengths)
    mask = (torch.arange(length)[None, :] < lengths_t[:, None]).float()
    rewards = torch.zeros(n_rows, length)
    rewards[torch.arange(n_rows), lengths_t - 1] = torch.tensor(scores)
    return rewards, mask, torch.tensor(groups), torch.tensor(perm)


@settings(max_examples=40, deadline=None)
@given(
    batch=grouped_batches(), name=st.sampled_from(GROUP_ESTIMATORS + ("gae", "reinforce_plus_plus", "remax"))
)
def test_permuting_rows_permutes_advantages(batch, name):
    rewards, mask, index, perm = batch
    if mask.sum() < 2 and name in ("reinforce_plus_plus_baseline", "gdpo", "gae", "reinforce_plus_plus"):
        return  # whitening needs two tokens
    values = torch.linspace(-1, 1, rewards.numel()).view_as(rewards)
    baselines = torch.linspace(0, 1, len(rewards))
    kw = {"gamma": 0.9, "lam": 0.8}
    expected = run(name, rewards, mask, index, values=values, reward_baselines=baselines, **kw)
    permuted = run(
        name,
        rewards[perm],
        mask[perm],
        index[perm],
        values=values[perm],
        reward_baselines=baselines[perm],
        **kw,
    )
    for got, want in zip(permuted, expected):
        assert torch.allclose(got, want[perm], atol=1e-5)


@settings(max_examples=40, deadline=None)
@given(
    batch=grouped_batches(),
    name=st.sampled_from(GROUP_ESTIMATORS),
    mapping=st.permutations(range(4)),
    offset=st.integers(-50, 50),
)
def test_relabelling_group_ids_changes_nothing(batch, name, mapping, offset):
    rewards, mask, index, _ = batch
    if mask.sum() < 2 and name in ("reinforce_plus_plus_baseline", "gdpo"):
        return
    expected, _ = run(name, rewards, mask, index)
    relabelled = torch.tensor(mapping)[index] * 7 + offset  # any injective map of the ids
    assert torch.allclose(run(name, rewards, mask, relabelled)[0], expected, atol=1e-6)
    as_strings = [f"prompt-{i}" for i in relabelled.tolist()]
    assert torch.allclose(run(name, rewards, mask, as_strings)[0], expected, atol=1e-6)


# --- verl 0.9.1's vectorized forms and the optimal token baseline -------------------------------


def test_grpo_vectorized_hand_computed():
    rewards, mask, index = outcome_batch()
    advantages, returns = run("grpo_vectorized", rewards, mask, index)
    # a: 1, 0, 1 -> mean 2/3, unbiased std sqrt(1/3); b: 2, 4 -> mean 3, std sqrt(2); c: singleton 5
    std_a, std_b = math.sqrt(1 / 3), math.sqrt(2)
    rows = [
        (1 / 3) / (std_a + EPS),
        -1 / (std_b + EPS),
        (-2 / 3) / (std_a + EPS),
        1 / (std_b + EPS),
        5 / (1 + EPS),
        0,
    ]
    torch.testing.assert_close(advantages, expand(rows, mask))
    assert torch.equal(advantages, returns)
    dr, _ = run("grpo_vectorized", rewards, mask, index, norm_adv_by_std_in_grpo=False)
    torch.testing.assert_close(dr, expand([1 / 3, -1, -2 / 3, 1, 5, 0], mask))


def test_rloo_vectorized_zeroes_a_singleton_group():
    rewards, mask, index = outcome_batch()
    advantages, returns = run("rloo_vectorized", rewards, mask, index)
    # (c·r - Σ_group r)/(c - 1): a (sum 2): 0.5, -1, 0.5; b (sum 6): -2, 2; c: 0 (loop rloo keeps 5)
    torch.testing.assert_close(advantages, expand([0.5, -2.0, -1.0, 2.0, 0.0, 0.5], mask))
    assert torch.equal(advantages, returns)
    assert run("rloo", rewards, mask, index)[0][4, 0] == 5.0


def otb_batch():
    """Rows 0, 1 form one group, row 2 is alone. Lengths 3, 2, 1; scores 1 (t=2), 2 (t=1), 3 (t=0).

    π(a_t) = 0.5 and Σπ² = 0.5 everywhere except row 1 at t=0 (π = 0.25): w = 1 - 2π + Σπ² is 0.5,
    and 1.0 there; W = cumsum(w·m): row 0 [0.5, 1, 1.5], row 1 [1, 1.5, 1.5].
    """
    mask = torch.tensor([[1.0, 1, 1], [1, 1, 0], [1, 0, 0]])
    rewards = torch.tensor([[0.0, 0, 1], [0, 2, 0], [3, 0, 0]])
    pi = torch.full((3, 3), 0.5)
    pi[1, 0] = 0.25
    return rewards, mask, torch.tensor([7, 7, 8]), pi.log(), torch.full((3, 3), 0.5)


def test_optimal_token_baseline_hand_computed():
    advantages, returns = run("optimal_token_baseline", *otb_batch())
    # G: row 0 [1, 1, 1], row 1 [2, 2, 0], row 2 [3, 0, 0]
    torch.testing.assert_close(returns, torch.tensor([[1.0, 1, 1], [2, 2, 0], [3, 0, 0]]))
    # B_t = Σ G·W·m / (Σ W·m + 1e-8): t0 (0.5 + 2)/1.5, t1 (1 + 3)/2.5, t2 1.5/1.5 -- but row 0 is
    # the group's only longest row, so its baseline is 0 from the second-longest length (2) on;
    # row 2 is a group of one: baseline 0.
    b0, b1 = 2.5 / 1.5, 4.0 / 2.5
    expected = torch.tensor([[1 - b0, 1 - b1, 1.0], [2 - b0, 2 - b1, 0], [3, 0, 0]])
    torch.testing.assert_close(advantages, expected)
    kept_tail, _ = run("optimal_token_baseline", *otb_batch(), handle_zero_tail=False)
    torch.testing.assert_close(kept_tail[0, 2], torch.tensor(0.0))  # 1 - 1.5/1.5


def test_optimal_token_baseline_squares_the_is_weights():
    weights = torch.ones(3, 3)
    weights[1, 0] = 2.0  # w there becomes 1.0·4: W row 1 = [4, 4.5, 4.5]
    advantages, _ = run("optimal_token_baseline", *otb_batch(), rollout_is_weights=weights)
    b0, b1 = (0.5 + 2 * 4) / 4.5, (1.0 + 2 * 4.5) / 5.5
    torch.testing.assert_close(advantages[1, :2], torch.tensor([2 - b0, 2 - b1]))


def tir_batch():
    """Group 1: row 0 valid at t = 0, 2, 3 (a hole at 1), row 1 at t = 0, 1, row 2 empty; group 2:
    row 3 valid at t = 1, 3 alone; group 3: row 4 valid at t = 0, 1 with the empty row 5.
    Scores on the last valid token: 1, 2, -, 4, 1. π = 0.5, Σπ² = 0.5: w = 0.5 everywhere."""
    mask = torch.tensor(
        [[1.0, 0, 1, 1], [1, 1, 0, 0], [0, 0, 0, 0], [0, 1, 0, 1], [1, 1, 0, 0], [0, 0, 0, 0]]
    )
    rewards = torch.zeros(6, 4)
    rewards[0, 3], rewards[1, 1], rewards[3, 3], rewards[4, 1] = 1.0, 2.0, 4.0, 1.0
    index = torch.tensor([1, 1, 1, 2, 3, 3])
    return rewards, mask, index, torch.full((6, 4), math.log(0.5)), torch.full((6, 4), 0.5)


def test_tir_optimal_token_baseline_packs_each_response_to_the_left():
    advantages, returns = run("tir_optimal_token_baseline", *tir_batch())
    # packed G: row 0 [1, 1, 1], row 1 [2, 2]; packed W: row 0 [0.5, 1, 1.5], row 1 [0.5, 1]
    # B_p: p0 (0.5 + 1)/1 = 1.5, p1 (1 + 2)/2 = 1.5, p2 1.5/1.5 but zero tail on row 0 (3 > 2) -> 0
    expected = torch.tensor(
        [
            [1 - 1.5, 0, 1 - 1.5, 1],  # packed [-0.5, -0.5, 1] back at t = 0, 2, 3
            [0.5, 0.5, 0, 0],
            [0, 0, 0, 0],
            [0, 4, 0, 4],  # alone: no baseline
            [1, 1, 0, 0],  # its group's other row is empty: counted alone, no baseline
            [0, 0, 0, 0],
        ]
    )
    torch.testing.assert_close(advantages, expected)
    torch.testing.assert_close(returns[0], torch.tensor([1.0, 1, 1, 1]))  # reward-to-go of r·m, unmasked
    # without the zero tail, the padded-position form counts the empty row 5 as a member, so row 4
    # gets the baseline G·W/(W + 1e-8) ≈ its own return; the packed form still sees a group of one
    otb, _ = run("optimal_token_baseline", *tir_batch(), handle_zero_tail=False)
    torch.testing.assert_close(otb[4], torch.zeros(4), atol=1e-6, rtol=0)
    tir, _ = run("tir_optimal_token_baseline", *tir_batch(), handle_zero_tail=False)
    torch.testing.assert_close(tir[4], torch.tensor([1.0, 1, 0, 0]))


def test_optimal_token_baselines_need_their_inputs():
    rewards, mask, index = outcome_batch()
    for name in ("optimal_token_baseline", "tir_optimal_token_baseline"):
        with pytest.raises(ValueError, match="sum_pi_squared"):
            run(name, rewards, mask, index)
