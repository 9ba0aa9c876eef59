"""`rlrun.training.sharding` in one process: what a process holds between steps. Sharded runs
(2 processes over gloo) are in test_multiprocess.py."""

from __future__ import annotations

import torch

from rlrun.training.sharding import held_state_bytes


def test_held_state_counts_weights_and_adamw_state_once_each():
    torch.manual_seed(0)
    policy = torch.nn.Linear(3, 2)  # 3*2 + 2 = 8 float32 weights: 32 bytes
    reference = torch.nn.Linear(3, 2)  # another 32 bytes, frozen: no optimizer state
    tied = torch.nn.Sequential(policy)  # the same parameters again: not counted twice
    optimizer = torch.optim.AdamW(policy.parameters())
    assert held_state_bytes([policy, reference, tied], [optimizer, None]) == 32 + 32  # no state yet

    policy(torch.ones(1, 3)).sum().backward()
    optimizer.step()
    # AdamW per weight tensor: exp_avg and exp_avg_sq (8 floats in all, 32 bytes each) and a
    # float32 step count (4 bytes; two tensors); gradients are not held state.
    assert held_state_bytes([policy, reference, tied], [optimizer, None]) == 32 + 32 + 2 * 32 + 2 * 4
    assert held_state_bytes([None], [None]) == 0
