import math

import numpy as np
import pytest
import torch

from rlrun.algorithms.groups import Groups, dense_group_ids


@pytest.mark.parametrize(
    "index",
    [
        torch.tensor([7, 3, 7, 9]),
        [7, 3, 7, 9],
        np.array(["b", "a", "b", "c"], dtype=object),
        np.array([70, 30, 70, 90]),
        ["x", "y", "x", "z"],
    ],
)
def test_dense_ids_give_the_same_partition(index):
    ids = dense_group_ids(index)
    assert ids.dtype == torch.long
    assert ids[0] == ids[2] and len({ids[0].item(), ids[1].item(), ids[3].item()}) == 3
    assert sorted(set(ids.tolist())) == [0, 1, 2]


def test_dense_ids_of_unsortable_mixed_hashables():
    assert dense_group_ids(np.array([1, "a", 1, (2, 3)], dtype=object)).tolist() == [0, 1, 0, 2]
    assert dense_group_ids([(1, 2), (3, 4), (1, 2)]).tolist() == [0, 1, 0]


def test_group_statistics_over_non_consecutive_rows():
    groups = Groups.from_index(torch.tensor([5, 8, 5, 8, 2]))
    values = torch.tensor([1.0, 10.0, 3.0, 20.0, 4.0])
    assert groups.counts.tolist() == [1, 2, 2]  # dense ids follow sorted ids: 2, 5, 8
    assert groups.row_counts().tolist() == [2, 2, 2, 2, 1]
    assert groups.sum(values).tolist() == [4.0, 4.0, 30.0]
    assert groups.mean(values).tolist() == [4.0, 2.0, 15.0]
    std = groups.std(values)
    assert math.isnan(std[0]) and std[1:].tolist() == pytest.approx([math.sqrt(2), math.sqrt(50)])
    assert groups.amax(values).tolist() == [4.0, 3.0, 20.0]
    assert groups.amin(values).tolist() == [4.0, 1.0, 10.0]


def test_constant_group_has_exact_mean_and_zero_std():
    values = torch.full((3,), 0.1)
    groups = Groups.from_index(torch.zeros(3, dtype=torch.long))
    assert groups.mean(values).item() == values[0].double().item()
    assert groups.std(values).item() == 0.0
