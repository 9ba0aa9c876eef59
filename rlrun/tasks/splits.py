"""Which split a generated problem belongs to: a hash of the problem itself, never of the seed,
so the train and validation splits of a task are disjoint whatever the seeds and sizes."""

from __future__ import annotations

import numpy as np

HASH_BUCKETS = 1000  # val_permille counts these


def in_validation(keys: np.ndarray, val_permille: int) -> np.ndarray:
    """Whether each problem (an integer key that identifies it) is a validation problem."""
    return mix64(keys.astype(np.uint64)) % np.uint64(HASH_BUCKETS) < np.uint64(val_permille)


def mix64(x: np.ndarray) -> np.ndarray:
    """splitmix64 finaliser: a well-spread, platform-independent integer hash."""
    with np.errstate(over="ignore"):
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return x ^ (x >> np.uint64(31))
