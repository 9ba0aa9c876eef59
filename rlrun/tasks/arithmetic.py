"""Integer arithmetic prompts, e.g. ``23+58=`` -> ``81``, generated from a seed.

Every problem ``(a, op, b)`` belongs to exactly one split, decided by a hash of the problem
itself (not of the seed), so the train and validation splits never overlap whatever the
seed and sizes. Training problems are drawn with replacement (the space may be smaller than
``train_size``); validation problems are distinct.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from rlrun.tasks.splits import HASH_BUCKETS, in_validation

OPERATORS = ("+", "-", "*")
DATA_SOURCE = "rlrun:arithmetic"  # `data.source` naming this task (the default)
_ENUMERATE_LIMIT = 4_000_000  # problem spaces up to this size are enumerated, larger ones sampled


@dataclass(frozen=True)
class ArithmeticTask:
    """Operands of up to ``digits`` digits (0 .. 10**digits - 1) joined by one of ``operators``.

    ``val_permille`` of the problem space is reserved for validation. The default difficulty
    (2 digits, ``+``) leaves the shipped tiny base model room to improve while the tiny
    teacher is near perfect.
    """

    digits: int = 2
    operators: tuple[str, ...] = ("+",)
    seed: int = 1234
    val_permille: int = 100

    def __post_init__(self) -> None:
        if self.digits < 1:
            raise ValueError(f"digits must be >= 1, got {self.digits}")
        unknown = [op for op in self.operators if op not in OPERATORS]
        if unknown or not self.operators:
            raise ValueError(
                f"operators must be a non-empty subset of {OPERATORS}, got {list(self.operators)}"
            )
        if not 0 < self.val_permille < HASH_BUCKETS:
            raise ValueError(f"val_permille must be in (0, {HASH_BUCKETS}), got {self.val_permille}")
        object.__setattr__(self, "operators", tuple(self.operators))

    @property
    def space_size(self) -> int:
        return len(self.operators) * (10**self.digits) ** 2

    def train(self, size: int) -> list[dict[str, str]]:
        """``size`` training records (with replacement)."""
        rng = np.random.default_rng([self.seed, 0])
        keys = np.empty(0, dtype=np.int64)
        while len(keys) < size:
            draw = rng.integers(0, self.space_size, size=2 * (size - len(keys)) + 64)
            keys = np.concatenate([keys, draw[~self._is_validation(draw)]])
        return self._records(keys[:size])

    def validation(self, size: int) -> list[dict[str, str]]:
        """``size`` distinct validation records (fewer if the validation split is smaller)."""
        rng = np.random.default_rng([self.seed, 1])
        if self.space_size <= _ENUMERATE_LIMIT:
            region = np.arange(self.space_size, dtype=np.int64)
            region = region[self._is_validation(region)]
            return self._records(rng.permutation(region)[:size])
        keys = np.empty(0, dtype=np.int64)
        while len(keys) < size:  # the space is huge: collisions are rare, dedupe keeping draw order
            draw = rng.integers(0, self.space_size, size=4 * size * HASH_BUCKETS // self.val_permille)
            keys = np.concatenate([keys, draw[self._is_validation(draw)]])
            _, first = np.unique(keys, return_index=True)
            keys = keys[np.sort(first)]
        return self._records(keys[:size])

    def _is_validation(self, keys: np.ndarray) -> np.ndarray:
        return in_validation(keys, self.val_permille)

    def _records(self, keys: np.ndarray) -> list[dict[str, str]]:
        base = 10**self.digits
        op_index, rest = np.divmod(keys, base * base)
        a, b = np.divmod(rest, base)
        results = {"+": a + b, "-": a - b, "*": a * b}
        answers = np.select(
            [op_index == i for i in range(len(self.operators))], [results[op] for op in self.operators]
        )
        return [
            {"prompt": f"{x}{self.operators[o]}{y}=", "answer": str(z), "data_source": DATA_SOURCE}
            for x, o, y, z in zip(a.tolist(), op_index.tolist(), b.tolist(), answers.tolist())
        ]
