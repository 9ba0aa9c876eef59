"""Which prompts come next: epochs, seeded shuffling, and a position that survives a restart."""

from __future__ import annotations

from typing import Any

import numpy as np


class PromptSampler:
    """Yields dataset indices batch after batch, epoch after epoch.

    Each epoch's order is a permutation drawn from ``(seed, epoch)``, so the whole state is
    ``(epoch, position)``; a batch may span two epochs.
    """

    def __init__(self, size: int, *, shuffle: bool = True, seed: int = 0):
        if size < 1:
            raise ValueError("cannot sample from an empty dataset")
        self.size, self.shuffle, self.seed = size, shuffle, seed
        self.epoch, self.position = 0, 0
        self._order = self._epoch_order(0)

    def next_indices(self, count: int) -> list[int]:
        """The next ``count`` indices, advancing the position."""
        taken: list[np.ndarray] = []
        while count > 0:
            chunk = self._order[self.position : self.position + count]
            taken.append(chunk)
            count -= len(chunk)
            self.position += len(chunk)
            if self.position == self.size:
                self.epoch, self.position = self.epoch + 1, 0
                self._order = self._epoch_order(self.epoch)
        return np.concatenate(taken).tolist() if taken else []

    def state_dict(self) -> dict[str, Any]:
        return {
            "epoch": self.epoch,
            "position": self.position,
            "size": self.size,
            "shuffle": self.shuffle,
            "seed": self.seed,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        mine = (self.size, self.shuffle, self.seed)
        theirs = (state["size"], state["shuffle"], state["seed"])
        if mine != theirs:
            raise ValueError(
                f"the saved data position is for (size, shuffle, seed) = {theirs}, this dataset is {mine}"
            )
        self.epoch, self.position = state["epoch"], state["position"]
        self._order = self._epoch_order(self.epoch)

    def _epoch_order(self, epoch: int) -> np.ndarray:
        if not self.shuffle:
            return np.arange(self.size)
        return np.random.default_rng([self.seed, epoch]).permutation(self.size)
