import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from rlrun.algorithms import POLICY_LOSSES

LN = math.log
NAN = float("nan")


def ppo_tokens():
    """One row, four valid tokens + one padded token holding NaN.

    ratios 1.1, 1.5, 0.5, 4.0 with advantages 1, 1, -1, -1.
    """
    log_ratio = torch.tensor([[LN(1.1), LN(1.5), LN(0.5), LN(4.0), NAN]])
    old = torch.tensor([[-1.0, -2.0, -0.5, -3.0, NAN]])
    advantages = torch.tensor([[1.0, 1.0, -1.0, -1.0, NAN]])
    mask = torch.tensor([[1, 1, 1, 1, 0]])
    return old, old + log_ratio, advantages, mask


def loss_of(name, old, log_prob, advantages, mask, mode="token-mean", **kw):
    return POLICY_LOSSES.get(name)(old, log_prob, advantages, mask, mode, **kw)


def test_vanilla_hand_computed():
    old, lp, adv, mask = ppo_tokens()
    loss, metrics = loss_of("vanilla", old, lp, adv, mask)
    # token losses: -1.1 (inside the clip); -1.2 (clipped at 1+0.2); max(0.5, 0.8) = 0.8 (clipped at 1-0.2);
    # max(4, 1.2) = 4 capped by the dual clip at clip_ratio_c = 3
    assert loss.item() == pytest.approx((-1.1 - 1.2 + 0.8 + 3.0) / 4, rel=1e-6)
    assert metrics["actor/pg_clipfrac"].item() == pytest.approx(0.5)
    assert metrics["actor/pg_clipfrac_lower"].item() == pytest.approx(0.25)
    assert metrics["actor/ppo_kl"].item() == pytest.approx(
        -(LN(1.1) + LN(1.5) + LN(0.5) + LN(4.0)) / 4, rel=1e-5
    )
    assert all(v.dim() == 0 and not v.requires_grad for v in metrics.values())


def test_vanilla_asymmetric_clip_and_dual_clip_bound():
    old, lp, adv, mask = ppo_tokens()
    loss, _ = loss_of("vanilla", old, lp, adv, mask, clip_ratio_high=0.28, clip_ratio_c=10.0)
    assert loss.item() == pytest.approx((-1.1 - 1.28 + 0.8 + 4.0) / 4, rel=1e-6)
    with pytest.raises(ValueError, match="clip_ratio_c"):
        loss_of("vanilla", old, lp, adv, mask, clip_ratio_c=1.0)


def test_rollout_is_weights_scale_the_token_loss():
    old, lp, adv, mask = ppo_tokens()
    weights = torch.tensor([[2.0, 1.0, 1.0, 1.0, NAN]])
    loss, _ = loss_of("vanilla", old, lp, adv, mask, rollout_is_weights=weights)
    assert loss.item() == pytest.approx((-2.2 - 1.2 + 0.8 + 3.0) / 4, rel=1e-6)


def test_vanilla_gradient_only_through_unclipped_tokens():
    old, lp, adv, mask = ppo_tokens()
    lp = lp.clone().requires_grad_()
    loss_of("vanilla", old, lp, adv, mask)[0].backward()
    # d(-A·ρ)/dlogp = -A·ρ for the unclipped token, 0 for clipped ones and padding
    assert lp.grad[0].tolist() == pytest.approx([-1.1 / 4, 0, 0, 0, 0], rel=1e-6)


def test_gspo_sequence_ratio_with_token_gradients():
    old = torch.tensor([[-1.0, -1.0, NAN]])
    lp = (old + torch.tensor([[0.1, 0.3, 0.0]])).requires_grad_()
    adv = torch.tensor([[1.0, 2.0, 0.0]])
    mask = torch.tensor([[1, 1, 0]])
    loss, metrics = loss_of("gspo", old, lp, adv, mask, "seq-mean-token-mean", clip_ratio=0.3)
    s = math.exp(0.2)  # geometric mean of the token ratios, inside [0.7, 1.3]
    assert loss.item() == pytest.approx(-(1 + 2) * s / 2, rel=1e-6)
    loss.backward()
    # stop-gradient on the sequence ratio: each token's gradient is -A_t·s/len, not -mean(A)·s/len
    assert lp.grad[0, :2].tolist() == pytest.approx([-s / 2, -2 * s / 2], rel=1e-6)
    assert metrics["actor/pg_clipfrac"].item() == 0.0


def test_gspo_clips_the_sequence_ratio():
    old = torch.tensor([[-1.0, -1.0]])
    lp = (old + torch.tensor([[0.1, 0.3]])).requires_grad_()
    loss, metrics = loss_of("gspo", old, lp, torch.ones(1, 2), torch.ones(1, 2), clip_ratio=0.2)
    assert loss.item() == pytest.approx(-1.2)
    assert metrics["actor/pg_clipfrac"].item() == 1.0
    loss.backward()
    assert lp.grad.abs().sum() == 0


def test_cispo_stops_the_gradient_of_the_clipped_weight():
    old = torch.tensor([[-1.0, -1.0]])
    lp = (old + torch.tensor([[LN(1.5), LN(1.1)]])).requires_grad_()
    adv = torch.tensor([[2.0, -1.0]])
    loss, metrics = loss_of("cispo", old, lp, adv, torch.ones(1, 2))
    expected = (-1.2 * 2.0 * lp[0, 0].item() - 1.1 * -1.0 * lp[0, 1].item()) / 2
    assert loss.item() == pytest.approx(expected, rel=1e-6)
    loss.backward()
    assert lp.grad[0].tolist() == pytest.approx([-1.2 * 2.0 / 2, 1.1 / 2], rel=1e-6)  # no d(ratio)/dlogp term
    assert metrics["actor/pg_clipfrac"].item() == 0.5


def test_sapo_soft_gate_and_fixed_aggregation():
    old = torch.zeros(2, 3)
    lp = torch.zeros(2, 3)  # ratio 1: gate = sigmoid(0)·4/τ = 2/τ
    adv = torch.tensor([[1.0, 1.0, 1.0], [-1.0, 0.0, 0.0]])
    mask = torch.tensor([[1, 1, 1], [1, 0, 0]])
    loss, metrics = loss_of("sapo", old, lp, adv, mask, "token-mean")  # mode ignored: seq-mean-token-mean
    row0, row1 = -2.0, 2.0 / 1.05
    assert loss.item() == pytest.approx((row0 + row1) / 2, rel=1e-5)
    assert metrics["actor/pg_clipfrac"].item() == 0.0


def test_geo_mean_hand_computed():
    old = torch.zeros(2, 2)
    lp = torch.tensor([[0.1, 0.5], [-0.5, 0.1]])
    adv = torch.tensor([[1.0, 1.0], [-1.0, -1.0]])
    loss, metrics = loss_of("geo_mean", old, lp, adv, torch.ones(2, 2))
    # row 0 (A > 0): log-ratios 0.1, min(0.5, 0.2) -> ratio e^0.15; row 1 (A < 0): max(-0.5, -0.2), 0.1 -> e^-0.05
    assert loss.item() == pytest.approx((-math.exp(0.15) + math.exp(-0.05)) / 2, rel=1e-6)
    assert metrics["actor/pg_clipfrac"].item() == 0.25
    assert metrics["actor/pg_clipfrac_lower"].item() == 0.25


def test_gpg_is_plain_policy_gradient():
    lp = torch.tensor([[-1.0, -2.0, NAN]])
    adv = torch.tensor([[1.0, 3.0, NAN]])
    loss, metrics = loss_of("gpg", torch.zeros(1, 3), lp, adv, torch.tensor([[1, 1, 0]]))
    assert loss.item() == pytest.approx((1.0 + 6.0) / 2)
    assert metrics == {}


def test_dro_quadratic_penalty():
    old = torch.tensor([[-1.0, -2.0]])
    lp = torch.tensor([[-0.5, -2.0]])
    adv = torch.tensor([[1.0, -1.0]])
    loss, _ = loss_of("dro", old, lp, adv, torch.ones(1, 2), dro_beta=0.2)
    token0 = -(-0.5 * 1.0 - 0.5 * 0.2 * 0.25)
    token1 = -(-2.0 * -1.0)
    assert loss.item() == pytest.approx((token0 + token1) / 2)
    with pytest.raises(ValueError, match="dro_beta"):
        loss_of("dro", old, lp, adv, torch.ones(1, 2), dro_beta=0.0)


def test_dppo_tv_drops_tokens_outside_the_tv_bound():
    old = torch.tensor([[LN(0.5), LN(0.5), LN(0.5)]])
    lp = torch.tensor([[LN(0.8), LN(0.6), LN(0.2)]])  # Δp = +0.3, +0.1, -0.3
    adv = torch.tensor([[1.0, 1.0, -1.0]])
    loss, metrics = loss_of("dppo_tv", old, lp, adv, torch.ones(1, 3))
    # token 0 moved up past 0.2 with A > 0, token 2 moved down past 0.2 with A < 0: both dropped
    assert loss.item() == pytest.approx(-1.2 * LN(0.6) / 3, rel=1e-6)
    assert metrics["actor/pg_clipfrac"].item() == pytest.approx(2 / 3)


def test_dppo_kl_binary_kl_bound():
    old = torch.tensor([[LN(0.5), LN(0.5)]])
    lp = torch.tensor([[LN(0.9), LN(0.55)]])
    adv = torch.tensor([[1.0, 1.0]])
    loss, metrics = loss_of("dppo_kl", old, lp, adv, torch.ones(1, 2), clip_ratio=0.05)

    def binary_kl(p, q):
        return q * math.log(q / p) + (1 - q) * math.log((1 - q + 1e-8) / (1 - p + 1e-8))

    assert binary_kl(0.9, 0.5) > 0.05 > binary_kl(0.55, 0.5)
    assert loss.item() == pytest.approx(-1.1 * LN(0.55) / 2, rel=1e-5)
    assert metrics["actor/pg_clipfrac"].item() == 0.5


def cov_batch():
    adv = torch.tensor([[3.0, 0.0, 0.0, 0.0]])
    lp = torch.tensor([[-0.1, -1.1, -1.1, -1.1]])
    return adv, lp  # covariance per token: 1.6875, 0.1875, 0.1875, 0.1875


def test_clip_cov_cuts_the_high_covariance_token():
    adv, lp = cov_batch()
    loss, metrics = loss_of(
        "clip_cov", lp, lp, adv, torch.ones(1, 4), generator=torch.Generator().manual_seed(0)
    )
    assert loss.item() == 0.0  # token 0 (the only one with cov in (1, 5)) is cut; the rest have A = 0
    assert metrics["actor/pg_clipfrac"].item() == 0.25
    wide, _ = loss_of("clip_cov", lp, lp, adv, torch.ones(1, 4), clip_cov_lb=5.0)
    assert wide.item() == pytest.approx(-3 / 4)


def test_clip_cov_is_reproducible_with_a_generator():
    g = torch.Generator().manual_seed(1)
    adv, lp = torch.randn(16, 32, generator=g), -torch.rand(16, 32, generator=g)
    kwargs = {"clip_cov_ratio": 0.1, "clip_cov_lb": 0.0, "clip_cov_ub": 100.0}
    runs = [
        loss_of(
            "clip_cov", lp, lp, adv, torch.ones(16, 32), generator=torch.Generator().manual_seed(s), **kwargs
        )[0]
        for s in (7, 7, 8)
    ]
    assert runs[0].item() == runs[1].item() != runs[2].item()


def test_kl_cov_penalises_the_top_covariance_token():
    adv, lp = cov_batch()
    old = lp - torch.tensor([[0.1, 0.0, 0.0, 0.0]])
    loss, metrics = loss_of("kl_cov", old, lp, adv, torch.ones(1, 4))
    assert loss.item() == pytest.approx((-3 * math.exp(0.1) + 0.1) / 4, rel=1e-6)
    assert metrics["actor/ppo_kl"].item() == pytest.approx(0.1 / 4, rel=1e-5)


def test_bypass_mode():
    old, lp, adv, mask = ppo_tokens()
    assert (
        loss_of("bypass_mode", old, lp, adv, mask)[0].item()
        == loss_of("vanilla", old, lp, adv, mask)[0].item()
    )
    lp = lp.clone().requires_grad_()
    loss, metrics = loss_of("bypass_mode", old, lp, adv, mask, loss_type="reinforce", rollout_is="token")
    weights = torch.tensor([1.1, 1.5, 0.5, 2.0])  # truncated at 2
    valid_lp = lp.detach()[0, :4]
    assert loss.item() == pytest.approx((-adv[0, :4] * valid_lp * weights).mean().item(), rel=1e-6)
    loss.backward()
    assert lp.grad[0, :4].tolist() == pytest.approx((-adv[0, :4] * weights / 4).tolist(), rel=1e-6)
    assert "sampling/is_mean" in metrics
    with pytest.raises(ValueError, match="loss_type"):
        loss_of("bypass_mode", old, lp, adv, mask, loss_type="other")


@pytest.mark.parametrize("name", POLICY_LOSSES.names())
def test_every_loss_takes_the_uniform_keyword_set(name):
    g = torch.Generator().manual_seed(0)
    old = -torch.rand(3, 4, generator=g)
    uniform = {
        "clip_ratio": 0.2,
        "clip_ratio_low": None,
        "clip_ratio_high": 0.28,
        "clip_ratio_c": 3.0,
        "rollout_is_weights": torch.ones(3, 4),
        "agg_kwargs": {"dp_size": 1},
        "generator": g,
    }
    loss, _metrics = POLICY_LOSSES.get(name)(
        old, old + 0.1, torch.randn(3, 4, generator=g), torch.ones(3, 4), "token-mean", **uniform
    )
    assert loss.dim() == 0 and torch.isfinite(loss)


@pytest.mark.parametrize("dtype", [torch.float64, torch.bfloat16])
@pytest.mark.parametrize("name", POLICY_LOSSES.names())
def test_dtypes(name, dtype):
    g = torch.Generator().manual_seed(0)
    old = -torch.rand(3, 4, generator=g)
    lp, adv = old + 0.05, torch.randn(3, 4, generator=g)
    ref, _ = POLICY_LOSSES.get(name)(old, lp, adv, torch.ones(3, 4))
    lp_d = lp.to(dtype).requires_grad_()
    loss, _ = POLICY_LOSSES.get(name)(old.to(dtype), lp_d, adv.to(dtype), torch.ones(3, 4))
    loss.backward()
    assert lp_d.grad.dtype == dtype
    assert loss.item() == pytest.approx(ref.item(), rel=0.05, abs=0.02)


def test_gradient_checks_in_float64():
    g = torch.Generator().manual_seed(3)
    old = -torch.rand(2, 3, generator=g, dtype=torch.float64)
    lp = (old + 0.05 * torch.randn(2, 3, generator=g, dtype=torch.float64)).requires_grad_()
    adv = torch.randn(2, 3, generator=g, dtype=torch.float64)
    mask = torch.tensor([[1, 1, 0], [1, 1, 1]])
    for name in ("vanilla", "gpg", "sapo", "dro", "geo_mean"):
        assert torch.autograd.gradcheck(
            lambda x, n=name: POLICY_LOSSES.get(n)(old, x, adv, mask)[0], (lp,)
        ), name


# --- property: padded positions never matter ----------------------------------------------------

DETERMINISTIC = [n for n in POLICY_LOSSES.names() if n != "clip_cov"]


@settings(max_examples=30, deadline=None)
@given(
    name=st.sampled_from(POLICY_LOSSES.names()),
    seed=st.integers(0, 2**16),
    garbage=st.sampled_from([NAN, float("inf"), -1e30, 7.0]),
    mode=st.sampled_from(
        ["token-mean", "seq-mean-token-sum", "seq-mean-token-mean", "seq-mean-token-sum-norm"]
    ),
)
def test_masked_positions_never_change_loss_or_gradient(name, seed, garbage, mode):
    g = torch.Generator().manual_seed(seed)
    old = -torch.rand(4, 6, generator=g)
    lp = old + 0.2 * torch.randn(4, 6, generator=g)
    adv = torch.randn(4, 6, generator=g)
    lengths = torch.randint(0, 7, (4,), generator=g)
    lengths[0] = 6
    mask = torch.arange(6)[None, :] < lengths[:, None]

    def evaluate(fill):
        tensors = [torch.where(mask, t, fill) for t in (old, lp, adv)]
        x = tensors[1].clone().requires_grad_()
        loss, _ = POLICY_LOSSES.get(name)(
            tensors[0], x, tensors[2], mask, mode, generator=torch.Generator().manual_seed(0)
        )
        loss.backward()
        return loss.detach(), x.grad

    clean_loss, clean_grad = evaluate(torch.tensor(0.0))
    dirty_loss, dirty_grad = evaluate(torch.tensor(garbage))
    assert torch.allclose(clean_loss, dirty_loss, equal_nan=False)
    assert torch.allclose(clean_grad, dirty_grad) and torch.all(dirty_grad[~mask] == 0)


def test_ratio_clamps():
    old = torch.zeros(1, 2)
    adv = torch.ones(1, 2)
    # vanilla clamps the log-ratio to ±20 before exp: with no clipping at all the loss is -e^20
    lp = torch.tensor([[30.0, 30.0]])
    loss, _ = loss_of("vanilla", old, lp, adv, torch.ones(1, 2), clip_ratio=1e9)
    assert loss.item() == pytest.approx(-math.exp(20.0), rel=1e-5)
    # gspo clamps the token log-ratio at 10 (no lower clamp), which also stops its gradient
    lp = torch.tensor([[12.0, 12.0]], requires_grad=True)
    loss, _ = loss_of("gspo", old, lp, adv, torch.ones(1, 2), "token-mean", clip_ratio=1e9)
    assert loss.item() == pytest.approx(-math.exp(10.0), rel=1e-5)
    loss.backward()
    assert lp.grad.abs().sum() == 0


def reinforce_batch():
    """Two rows; row 1's second token is padding. -A·logπ·w per token: row 0 [1, 1], row 1 [-1]."""
    log_prob = torch.tensor([[-1.0, -2.0], [-0.5, NAN]], requires_grad=True)
    old = torch.tensor([[-1.3, -2.3], [-0.2, NAN]])
    advantages = torch.tensor([[1.0, 1.0], [-2.0, NAN]])
    weights = torch.tensor([[1.0, 0.5], [1.0, NAN]])
    return old, log_prob, advantages, torch.tensor([[1, 1], [1, 0]]), weights


def test_reinforce_hand_computed():
    old, log_prob, advantages, mask, weights = reinforce_batch()
    loss, metrics = POLICY_LOSSES.get("reinforce")(
        old, log_prob, advantages, mask, rollout_is_weights=weights
    )
    # default seq-mean-token-sum: row sums 2 and -1 over 2 rows
    torch.testing.assert_close(loss, torch.tensor(0.5))
    torch.testing.assert_close(metrics["actor/ppo_kl"], torch.tensor(-0.1))  # mean(-0.3, -0.3, 0.3)
    loss.backward()
    torch.testing.assert_close(log_prob.grad, torch.tensor([[-0.5, -0.25], [1.0, 0.0]]))
    token_mean, _ = loss_of("reinforce", old, log_prob, advantages, mask, rollout_is_weights=weights)
    torch.testing.assert_close(token_mean, torch.tensor(1 / 3))
    plain, _ = loss_of("reinforce", old, log_prob, advantages, mask)  # no weights: w = 1
    torch.testing.assert_close(plain, torch.tensor((1 + 2 - 1) / 3))


def test_bypass_reinforce_is_the_reinforce_loss_with_truncated_weights():
    old, log_prob, advantages, mask, _ = reinforce_batch()
    bypass, _ = loss_of("bypass_mode", old, log_prob, advantages, mask, loss_type="reinforce")
    direct, _ = loss_of("reinforce", old, log_prob, advantages, mask)
    torch.testing.assert_close(bypass, direct)


@pytest.mark.parametrize("beta", [None, 0.0, -1.0, "0.1"])
def test_dro_rejects_a_beta_that_is_not_a_positive_number(beta):
    old, log_prob, advantages, mask = ppo_tokens()
    with pytest.raises(ValueError, match="dro_beta"):
        loss_of("dro", old, log_prob, advantages, mask, dro_beta=beta)
