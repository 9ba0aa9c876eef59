import numpy as np
import pytest
import torch

from rlrun.algorithms.reward_shaping import group_filter, overlong_penalty


def test_overlong_penalty_ramp():
    lengths = torch.tensor([3, 6, 8, 10])
    penalty = overlong_penalty(lengths, max_response_length=10, buffer_length=4, penalty_factor=1.0)
    assert penalty.tolist() == [0.0, 0.0, -0.5, -1.0]
    assert overlong_penalty(lengths, 10, 4, penalty_factor=0.5).tolist() == [0.0, 0.0, -0.25, -0.5]


@pytest.mark.parametrize(("max_len", "buffer"), [(10, 0), (10, 11), (10, -1)])
def test_overlong_penalty_requires_a_valid_buffer(max_len, buffer):
    with pytest.raises(ValueError, match="buffer_length"):
        overlong_penalty(torch.tensor([1]), max_len, buffer)


def test_group_filter_keeps_informative_and_singleton_groups():
    metric = torch.tensor([1.0, 0.0, 1.0, 1.0, 1.0, 0.0])
    index = np.array(["a", "b", "a", "b", "c", "d"], dtype=object)
    # a: 1, 1 (constant, dropped); b: 0, 1 (kept); c and d: singletons (kept)
    assert group_filter(metric, index).tolist() == [False, True, False, True, True, True]


def test_group_filter_constant_floats_are_dropped():
    metric = torch.full((3,), 0.1, dtype=torch.float64)
    assert group_filter(metric, torch.zeros(3, dtype=torch.long)).tolist() == [False, False, False]
