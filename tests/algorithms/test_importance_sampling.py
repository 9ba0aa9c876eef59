import math

import pytest
import torch

from rlrun.algorithms.importance_sampling import truncated_is_weights

LN = math.log


def batch():
    rollout = torch.tensor([[-1.0, -1.0, -1.0, -1.0]])
    trainer = rollout + torch.tensor([[LN(0.5), LN(3.0), LN(1.5), float("nan")]])
    return trainer, rollout, torch.tensor([[1, 1, 1, 0]])


def test_token_level_weights_are_truncated_and_zero_on_padding():
    trainer, rollout, mask = batch()
    weights, metrics = truncated_is_weights(trainer, rollout, mask, "token", threshold=2.0)
    assert weights[0].tolist() == pytest.approx([0.5, 2.0, 1.5, 0.0])
    assert metrics["sampling/is_fraction_high"].item() == pytest.approx(1 / 3)
    assert metrics["sampling/is_fraction_low"].item() == 0.0  # 0.5 is not below 1/2
    assert metrics["sampling/is_mean"].item() == pytest.approx(4 / 3)
    assert metrics["sampling/is_max"].item() == 2.0 and metrics["sampling/is_min"].item() == 0.5


def test_sequence_level_weight_is_the_truncated_product():
    trainer, rollout, mask = batch()
    weights, _ = truncated_is_weights(trainer, rollout, mask, "sequence", threshold=3.0)
    assert weights[0].tolist() == pytest.approx([2.25, 2.25, 2.25, 0.0])  # 0.5 · 3 · 1.5
    capped, _ = truncated_is_weights(trainer, rollout, mask, "sequence", threshold=2.0)
    assert capped[0].tolist() == pytest.approx([2.0, 2.0, 2.0, 0.0])


def test_weights_carry_no_gradient():
    trainer, rollout, mask = batch()
    trainer = trainer.clone().requires_grad_()
    weights, _ = truncated_is_weights(trainer, rollout, mask)
    assert not weights.requires_grad


def test_invalid_arguments():
    trainer, rollout, mask = batch()
    with pytest.raises(ValueError, match="level"):
        truncated_is_weights(trainer, rollout, mask, "geometric")
    with pytest.raises(ValueError, match="threshold"):
        truncated_is_weights(trainer, rollout, mask, "token", threshold=0.0)


def test_mask_mode_zeroes_a_weight_above_the_cap_as_trl_does():
    """TRL's token_mask / sequence_mask: w if w <= cap else 0 (its truncate modes cut to cap)."""
    trainer, rollout, mask = batch()
    token, _ = truncated_is_weights(trainer, rollout, mask, "token", threshold=2.0, mode="mask")
    assert token[0].tolist() == pytest.approx([0.5, 0.0, 1.5, 0.0])
    sequence, _ = truncated_is_weights(trainer, rollout, mask, "sequence", threshold=2.0, mode="mask")
    assert sequence[0].tolist() == [0.0, 0.0, 0.0, 0.0]  # 2.25 > 2
    kept, _ = truncated_is_weights(trainer, rollout, mask, "sequence", threshold=3.0, mode="mask")
    assert kept[0].tolist() == pytest.approx([2.25, 2.25, 2.25, 0.0])
