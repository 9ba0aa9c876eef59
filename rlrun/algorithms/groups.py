"""Statistics over groups of rows (the n responses of one prompt), without loops over groups.

verl builds `id2score` dictionaries with a Python loop over samples; here group ids are mapped
to dense ids 0..G-1 once (`torch.unique(return_inverse=True)`) and every statistic is one
`index_add_` / `scatter_reduce_` over the batch. Rows of a group need not be consecutive.

Group statistics are computed in float64: they are (B,)-sized, so this costs nothing, and it
makes the mean of a constant group equal its value exactly, so zero-std groups give exactly
zero advantages, as verl's float32 loop does for the rewards RL uses.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

STAT_DTYPE = torch.float64


def dense_group_ids(
    index: torch.Tensor | np.ndarray | Sequence[Any], device: torch.device | None = None
) -> torch.Tensor:
    """Map arbitrary group ids (tensor, numpy array or list of hashables) to dense ids 0..G-1."""
    if isinstance(index, torch.Tensor):
        ids = index.to(device) if device is not None else index
        return torch.unique(ids.reshape(-1), return_inverse=True)[1]
    if isinstance(index, np.ndarray) and index.ndim == 1:
        try:
            inverse = np.unique(index, return_inverse=True)[1].reshape(-1)
            return torch.as_tensor(inverse, dtype=torch.long, device=device)
        except TypeError:  # object arrays of unsortable mixed types
            pass
    first_seen: dict[Any, int] = {}  # any hashables: numbered in first-seen order
    inverse = np.fromiter((first_seen.setdefault(k, len(first_seen)) for k in index), dtype=np.int64)
    return torch.as_tensor(inverse, dtype=torch.long, device=device)


@dataclass(frozen=True)
class Groups:
    """A partition of B rows into G groups: `ids` (B,) dense group id per row, `counts` (G,)."""

    ids: torch.Tensor
    counts: torch.Tensor

    @classmethod
    def from_index(cls, index: Any, device: torch.device | None = None) -> Groups:
        ids = dense_group_ids(index, device)
        return cls(ids=ids, counts=torch.bincount(ids))

    @property
    def num_groups(self) -> int:
        return self.counts.numel()

    def row_counts(self) -> torch.Tensor:
        """Size of each row's group, (B,) float64."""
        return self.counts.to(STAT_DTYPE)[self.ids]

    def sum(self, values: torch.Tensor) -> torch.Tensor:
        """Per-group sum of a (B,) tensor, (G,) float64."""
        out = torch.zeros(self.num_groups, dtype=STAT_DTYPE, device=values.device)
        return out.index_add_(0, self.ids, values.to(STAT_DTYPE))

    def mean(self, values: torch.Tensor) -> torch.Tensor:
        """Per-group mean, (G,) float64."""
        return self.sum(values) / self.counts.to(STAT_DTYPE)

    def std(self, values: torch.Tensor, mean: torch.Tensor | None = None) -> torch.Tensor:
        """Per-group unbiased std (`torch.std`), (G,) float64; NaN for singleton groups."""
        mean = self.mean(values) if mean is None else mean
        centred = values.to(STAT_DTYPE) - mean[self.ids]
        return (self.sum(centred * centred) / (self.counts.to(STAT_DTYPE) - 1)).sqrt()

    def amax(self, values: torch.Tensor) -> torch.Tensor:
        """Per-group maximum, (G,) in the input dtype."""
        return self._reduce(values, "amax")

    def amin(self, values: torch.Tensor) -> torch.Tensor:
        """Per-group minimum, (G,) in the input dtype."""
        return self._reduce(values, "amin")

    def _reduce(self, values: torch.Tensor, how: str) -> torch.Tensor:
        out = torch.empty(self.num_groups, dtype=values.dtype, device=values.device)
        return out.scatter_reduce_(0, self.ids, values, reduce=how, include_self=False)
