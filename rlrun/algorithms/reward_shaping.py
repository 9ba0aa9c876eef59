"""DAPO reward shaping: overlong penalty and the dynamic-sampling group filter.

Overlong shaping follows verl's DAPO reward manager: with buffer `Lb` and maximum response
length `Lmax`, a response of length L gets `min(-(L - (Lmax - Lb))/Lb · penalty_factor, 0)`,
a linear ramp from 0 at `Lmax - Lb` to `-penalty_factor` at `Lmax`.

The group filter keeps every group whose metric is not constant, and every singleton group
(verl's dynamic sampling). "Constant" is decided by max == min rather than verl's `np.std > 0`,
which can call a group of equal floats (e.g. three 0.1) non-constant through rounding.
"""

from __future__ import annotations

from typing import Any

import torch

from rlrun.algorithms.groups import Groups


def overlong_penalty(
    response_lengths: torch.Tensor, max_response_length: int, buffer_length: int, penalty_factor: float = 1.0
) -> torch.Tensor:
    """Per-response penalty (≤ 0, float32) to add to the reward of each response."""
    if not 0 < buffer_length <= max_response_length:
        raise ValueError(
            f"overlong shaping needs 0 < buffer_length <= max_response_length, got {buffer_length} and {max_response_length}"
        )
    expected = max_response_length - buffer_length
    excess = response_lengths.to(torch.float32) - expected
    return torch.clamp(-excess / buffer_length * penalty_factor, max=0.0)


def group_filter(metric_values: torch.Tensor, index: Any) -> torch.Tensor:
    """Bool keep-mask over rows: groups with a non-constant metric, and singleton groups."""
    groups = Groups.from_index(index, device=metric_values.device)
    varies = groups.amax(metric_values) > groups.amin(metric_values)
    return (varies | (groups.counts == 1))[groups.ids]
