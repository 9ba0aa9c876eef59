"""Guess-a-number: a stateful multi-turn environment and its prompts, e.g. ``Guess a number from 1 to 63.``

The model finds a secret integer in ``[low, high]`` with a ``guess(number)`` tool answering
``higher``, ``lower`` or ``correct``. Later turns depend on earlier observations: a good player
keeps the interval the answers leave and guesses inside it. Bisection finds every secret
within ``(high - low + 1).bit_length()`` guesses, the default limit; a random guess consistent
with the answers so far often needs more, so the strategy decides success.

The secret comes from the dataset row (``GuessNumberTask``), as TRL passes a row's columns to
``reset(**row)``: episodes are reproducible, and every secret belongs to one split (a hash of
the number), so no validation secret is ever a training secret.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from rlrun.tasks.splits import HASH_BUCKETS, in_validation

DATA_SOURCE = "rlrun:guess_number"  # `data.source` naming this task
HIGHER, LOWER, CORRECT = "higher", "lower", "correct"
GAME_OVER = "game over"  # the answer to the last allowed guess when it misses
GUESS_COST = 0.05  # reward given up per guess after the first


def bisection_guesses(low: int, high: int) -> int:
    """The most guesses bisection needs for a secret in ``[low, high]``."""
    return (high - low + 1).bit_length()


def prompt_text(low: int, high: int) -> str:
    return f"Guess a number from {low} to {high}."


class GuessNumber:
    """Find the secret number (a TRL-style environment: its one public method, ``guess``, is
    the tool). ``reset`` takes the secret and the rules from the dataset row; ``get_reward``
    is ``1 - GUESS_COST * (guesses - 1)`` once found within ``max_guesses``, else 0. Every call
    of ``guess`` counts, one that raises (not an integer, outside the range) too."""

    def __init__(self) -> None:
        self._secret = self._low = self._high = self._max_guesses = self._guesses = 0
        self._found = False

    def reset(self, *, secret: int, low: int, high: int, max_guesses: int, **row: Any) -> None:
        """Start a game for the row's ``secret`` in ``[low, high]``; the prompt already states the
        range, so nothing joins it (None). Other columns of the row are not the game's."""
        if not low <= secret <= high or max_guesses < 1:
            raise ValueError(
                f"a game needs low <= secret <= high and max_guesses >= 1, got secret={secret}, "
                f"low={low}, high={high}, max_guesses={max_guesses}"
            )
        self._secret, self._low, self._high, self._max_guesses = secret, low, high, max_guesses
        self._guesses, self._found = 0, False

    def guess(self, number: int) -> str:
        """Guess the secret number.

        Args:
            number: The guess, an integer in the range the prompt states.

        Returns:
            "higher" if the secret is higher, "lower" if it is lower, "correct" when it is the
            secret, "game over" when the last allowed guess misses.
        """
        if self._found or self._guesses >= self._max_guesses:
            raise ValueError("the game is over")
        self._guesses += 1
        if not isinstance(number, int) or isinstance(number, bool):
            raise TypeError(f"number must be an integer, got {number!r}")
        if not self._low <= number <= self._high:
            raise ValueError(f"{number} is outside {self._low} to {self._high}")
        if number == self._secret:
            self._found = True
            return CORRECT
        if self._guesses == self._max_guesses:
            return GAME_OVER
        return HIGHER if self._secret > number else LOWER

    def get_reward(self) -> float:
        """1 for a secret found at the first guess, ``GUESS_COST`` less per further guess; 0 unfound."""
        return 1.0 - GUESS_COST * (self._guesses - 1) if self._found else 0.0


@dataclass(frozen=True)
class GuessNumberTask:
    """Rows for ``GuessNumber``: a secret in ``[low, high]`` and the rules, as dataset columns.

    ``max_guesses`` None is the bisection worst case. ``val_permille`` of the numbers are
    validation secrets (a hash of the number: a secret keeps its split whatever the range).
    Training secrets are drawn with replacement; validation secrets are distinct, so there are
    at most about ``val_permille / 1000`` of the range's numbers.
    """

    low: int = 1
    high: int = 63
    max_guesses: int | None = None
    seed: int = 1234
    val_permille: int = 250

    def __post_init__(self) -> None:
        if not 0 <= self.low < self.high:
            raise ValueError(f"the range needs 0 <= low < high, got low={self.low}, high={self.high}")
        if self.max_guesses is not None and self.max_guesses < 1:
            raise ValueError(f"max_guesses must be >= 1, got {self.max_guesses}")
        if not 0 < self.val_permille < HASH_BUCKETS:
            raise ValueError(f"val_permille must be in (0, {HASH_BUCKETS}), got {self.val_permille}")
        numbers = self._numbers()
        if (
            in_validation(numbers, self.val_permille).all()
            or not in_validation(numbers, self.val_permille).any()
        ):
            raise ValueError(f"the range {self.low} to {self.high} is too small for two splits")

    @property
    def guesses_allowed(self) -> int:
        return self.max_guesses or bisection_guesses(self.low, self.high)

    def train(self, size: int) -> list[dict[str, Any]]:
        """``size`` training rows (secrets drawn with replacement)."""
        numbers = self._numbers()
        secrets = numbers[~in_validation(numbers, self.val_permille)]
        return self._rows(np.random.default_rng([self.seed, 0]).choice(secrets, size))

    def validation(self, size: int) -> list[dict[str, Any]]:
        """``size`` rows with distinct validation secrets (fewer if the split is smaller)."""
        numbers = self._numbers()
        secrets = numbers[in_validation(numbers, self.val_permille)]
        return self._rows(np.random.default_rng([self.seed, 1]).permutation(secrets)[:size])

    def _numbers(self) -> np.ndarray:
        return np.arange(self.low, self.high + 1, dtype=np.int64)

    def _rows(self, secrets: np.ndarray) -> list[dict[str, Any]]:
        rules = {"low": self.low, "high": self.high, "max_guesses": self.guesses_allowed}
        prompt = prompt_text(self.low, self.high)
        return [
            {"prompt": prompt, "answer": str(s), "secret": s, **rules, "data_source": DATA_SOURCE}
            for s in secrets.tolist()
        ]
