import math

import pytest
import torch

from rlrun.algorithms.masked import (
    entropy_from_logits,
    mask_count,
    masked_mean,
    masked_sum,
    masked_var,
    masked_whiten,
    masked_whiten_rows,
    zero_outside,
    zero_outside_,
)

NAN = float("nan")
VALUES = torch.tensor([[1.0, 2.0, NAN], [4.0, NAN, 100.0]])
MASK = torch.tensor([[1, 1, 0], [1, 0, 0]])


def test_masked_sum_ignores_nan_and_garbage_outside_the_mask():
    assert masked_sum(VALUES, MASK).item() == 7.0
    assert masked_sum(VALUES, MASK, dim=-1).tolist() == [3.0, 4.0]


@pytest.mark.parametrize("mask_dtype", [torch.bool, torch.int64, torch.float32, torch.bfloat16])
def test_masked_mean_any_mask_dtype(mask_dtype):
    assert masked_mean(VALUES, MASK.to(mask_dtype)).item() == pytest.approx(7 / 3)
    assert masked_mean(VALUES, MASK.to(mask_dtype), dim=-1).tolist() == pytest.approx([1.5, 4.0])


def test_masked_mean_of_empty_mask_is_zero():
    assert masked_mean(VALUES, torch.zeros_like(MASK)).item() == 0.0
    assert masked_mean(VALUES, MASK, dim=0).tolist() == pytest.approx([2.5, 2.0, 0.0])


def test_masked_var_unbiased_and_biased():
    # values 1, 2, 4: mean 7/3, squared deviations 16/9 + 1/9 + 25/9 = 42/9
    assert masked_var(VALUES, MASK).item() == pytest.approx(42 / 9 / 2)
    assert masked_var(VALUES, MASK, unbiased=False).item() == pytest.approx(42 / 9 / 3)


@pytest.mark.parametrize("n_valid", [0, 1])
def test_masked_var_needs_two_valid_entries(n_valid):
    mask = torch.zeros(2, 3)
    mask[0, :n_valid] = 1
    with pytest.raises(ValueError, match="at least 2"):
        masked_var(torch.ones(2, 3), mask)


def test_masked_whiten_applies_to_every_position():
    values = torch.tensor([[1.0, 2.0, 50.0], [4.0, -7.0, 100.0]])
    std = math.sqrt(42 / 9 / 2 + 1e-8)
    expected = (values - 7 / 3) / std
    assert torch.allclose(masked_whiten(values, MASK), expected)
    assert torch.allclose(masked_whiten(values, MASK, shift_mean=False), expected + 7 / 3)


@pytest.mark.parametrize("mask_dtype", [torch.bool, torch.int64, torch.float32])
def test_zero_outside_in_place_matches_out_of_place(mask_dtype):
    values = VALUES.clone()
    expected = zero_outside(values, MASK.to(mask_dtype))
    result = zero_outside_(values, MASK.to(mask_dtype))
    assert result.data_ptr() == values.data_ptr()
    assert torch.equal(result, expected)


def test_masked_var_stays_differentiable():
    values = torch.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], requires_grad=True)
    mask = torch.tensor([[1, 1, 0], [1, 0, 1]])
    masked_var(values, mask).backward()
    assert values.grad is not None and values.grad[0, 2] == 0.0 and values.grad[0, 0] != 0.0


def test_masked_whiten_rows_equals_token_level_whitening():
    rows = torch.tensor([0.5, -1.0, 3.0, 2.0])
    mask = torch.tensor([[1, 1, 0], [1, 0, 0], [1, 1, 1], [0, 0, 0]]).float()
    expected = masked_whiten(rows[:, None] * mask, mask) * mask
    assert torch.allclose(masked_whiten_rows(rows, mask), expected, atol=1e-6)
    assert torch.allclose(masked_whiten_rows(rows, mask.bool()), expected, atol=1e-6)


def test_token_counts_stay_exact_in_bfloat16():
    mask = torch.ones(1, 1000, dtype=torch.bfloat16)
    assert mask_count(mask).item() == 1000
    assert masked_mean(torch.ones(1, 1000, dtype=torch.bfloat16), mask).item() == pytest.approx(1.0, abs=1e-6)


def test_masked_whiten_keeps_dtype():
    for dtype in (torch.float64, torch.bfloat16):
        values = torch.randn(3, 4, dtype=dtype)
        assert masked_whiten(values, torch.ones(3, 4)).dtype == dtype


def test_entropy_from_logits():
    assert entropy_from_logits(torch.zeros(4)).item() == pytest.approx(math.log(4))
    p = torch.tensor([0.25, 0.75])
    assert entropy_from_logits(p.log()).item() == pytest.approx(-(p * p.log()).sum().item())
    assert entropy_from_logits(torch.tensor([[100.0, 0.0, 0.0]])).item() == pytest.approx(0.0, abs=1e-6)
    assert entropy_from_logits(torch.randn(2, 5, 7)).shape == (2, 5)


def test_masked_whiten_is_differentiable():
    values = torch.tensor([[1.0, 2.0, 4.0], [3.0, 5.0, 0.0]], dtype=torch.float64, requires_grad=True)
    mask = torch.tensor([[1, 1, 1], [1, 1, 0]])
    assert torch.autograd.gradcheck(lambda v: masked_whiten(v, mask), (values,))
