import pytest
import torch

from rlrun.algorithms.value_loss import compute_value_loss


def test_clipped_value_loss_hand_computed():
    vpreds = torch.tensor([[1.0, 0.2, float("nan")]])
    values = torch.tensor([[0.0, 0.0, 5.0]])
    returns = torch.tensor([[2.0, 0.0, float("nan")]])
    mask = torch.tensor([[1, 1, 0]])
    loss, metrics = compute_value_loss(vpreds, returns, values, mask, cliprange_value=0.5)
    # token 0: vclip = 0.5, max((1-2)², (0.5-2)²) = 2.25 (clipped); token 1: 0.04 both ways
    assert loss.item() == pytest.approx(0.5 * (2.25 + 0.04) / 2)
    assert metrics["critic/vf_clipfrac"].item() == 0.5


def test_value_loss_gradient_and_aggregation():
    vpreds = torch.tensor([[0.3, 0.1], [0.0, 0.0]], requires_grad=True)
    loss, _ = compute_value_loss(
        vpreds,
        torch.zeros(2, 2),
        torch.zeros(2, 2),
        torch.tensor([[1, 1], [0, 0]]),
        loss_agg_mode="seq-mean-token-sum",
    )
    assert loss.item() == pytest.approx(0.5 * (0.09 + 0.01))
    loss.backward()
    assert vpreds.grad.tolist() == [pytest.approx([0.3, 0.1]), [0.0, 0.0]]
