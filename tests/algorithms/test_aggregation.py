import pytest
import torch

from rlrun.algorithms.aggregation import LOSS_AGG_MODES, agg_loss

NAN = float("nan")
# row 0: tokens 1, 2, 3; row 1: token 4 (then padding); row 2: empty
LOSS = torch.tensor([[1.0, 2.0, 3.0], [4.0, NAN, 9.0], [NAN, NAN, NAN]])
MASK = torch.tensor([[1, 1, 1], [1, 0, 0], [0, 0, 0]])


@pytest.mark.parametrize(
    ("mode", "expected"),
    [
        ("token-mean", 10 / 4),
        ("token-sum", 10.0),
        ("seq-mean-token-sum", (6 + 4) / 2),  # the empty row is not a sequence
        ("seq-mean-token-sum-norm", (6 + 4) / 2 / 3),  # ÷ T (padded length)
        ("seq-mean-token-mean", (2 + 4) / 2),
    ],
)
def test_modes_hand_computed(mode, expected):
    assert agg_loss(LOSS, MASK, mode).item() == pytest.approx(expected)


def test_loss_scale_factor_replaces_the_padded_length():
    assert agg_loss(LOSS, MASK, "seq-mean-token-sum-norm", loss_scale_factor=10).item() == pytest.approx(0.5)


def test_unknown_mode_names_the_valid_ones():
    with pytest.raises(ValueError) as info:
        agg_loss(LOSS, MASK, "token_mean")
    assert all(mode in str(info.value) for mode in LOSS_AGG_MODES)


@pytest.mark.parametrize("mode", ["token-mean", "seq-mean-token-sum", "seq-mean-token-mean"])
def test_data_parallel_needs_global_counts(mode):
    with pytest.raises(ValueError, match="required when dp_size > 1"):
        agg_loss(LOSS, MASK, mode, dp_size=2)


@pytest.mark.parametrize("mode", LOSS_AGG_MODES)
def test_global_counts_make_micro_batches_add_up_to_the_full_mean(mode):
    g = torch.Generator().manual_seed(0)
    loss = torch.randn(8, 5, generator=g)
    mask = torch.rand(8, 5, generator=g) > 0.3
    mask[3] = False
    full = agg_loss(loss, mask, mode)
    counts = {"batch_num_tokens": mask.sum(), "global_batch_size": mask.any(-1).sum(), "dp_size": 2}
    # two ranks, each with two micro-batches; DDP averages over ranks, micro-batches accumulate
    ranks = [[slice(0, 2), slice(2, 4)], [slice(4, 7), slice(7, 8)]]
    per_rank = [sum(agg_loss(loss[s], mask[s], mode, **counts) for s in micro) for micro in ranks]
    assert (sum(per_rank) / 2).item() == pytest.approx(full.item(), rel=1e-5)


@pytest.mark.parametrize("mode", LOSS_AGG_MODES)
def test_no_valid_token_gives_zero_with_a_gradient(mode):
    x = torch.randn(2, 3, requires_grad=True)
    loss = agg_loss(x, torch.zeros(2, 3), mode)
    assert loss.item() == 0.0
    loss.backward()
    assert torch.all(x.grad == 0)


def test_zero_global_count_gives_zero():
    assert agg_loss(LOSS, MASK, "token-mean", batch_num_tokens=torch.tensor(0)).item() == 0.0
    assert agg_loss(LOSS, MASK, "seq-mean-token-mean", global_batch_size=0).item() == 0.0


def test_bfloat16_losses_accumulate_in_float32():
    loss = torch.full((4, 1000), 0.1, dtype=torch.bfloat16)
    assert agg_loss(loss, torch.ones(4, 1000), "token-mean").item() == pytest.approx(0.1, rel=1e-2)
    assert agg_loss(loss, torch.ones(4, 1000), "token-mean").dtype == torch.float32


# An agent's episode: the model's turns are trained, the tool results and observations between
# them are not (mask holes). Row 0: turn [1, 2], a result (50, 60), turn [3]; row 1: turn [4],
# an observation (70), turn [5, 6] cut by padding; row 2: one turn [7].
EPISODE_LOSS = torch.tensor(
    [[1.0, 2.0, 50.0, 60.0, 3.0], [4.0, 70.0, 5.0, 6.0, NAN], [7.0, NAN, NAN, NAN, NAN]]
)
EPISODE_MASK = torch.tensor([[1, 1, 0, 0, 1], [1, 0, 1, 1, 0], [1, 0, 0, 0, 0]])


@pytest.mark.parametrize(
    ("mode", "expected"),
    [
        ("token-mean", (1 + 2 + 3 + 4 + 5 + 6 + 7) / 7),
        ("token-sum", 28.0),
        ("seq-mean-token-sum", (6 + 15 + 7) / 3),
        ("seq-mean-token-sum-norm", (6 + 15 + 7) / 3 / 5),  # ÷ T: the episode's width, holes included
        ("seq-mean-token-mean", (6 / 3 + 15 / 3 + 7 / 1) / 3),  # each episode's own sampled tokens
    ],
)
def test_an_episodes_results_and_observations_never_count_hand_computed(mode, expected):
    assert agg_loss(EPISODE_LOSS, EPISODE_MASK, mode).item() == pytest.approx(expected)
    anything = EPISODE_LOSS.masked_fill(EPISODE_MASK == 0, 1e6)  # what sits in the holes: irrelevant
    assert agg_loss(anything, EPISODE_MASK, mode).item() == pytest.approx(expected)
