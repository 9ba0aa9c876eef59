"""Guess-a-number: a stateful multi-turn environment and its prompts, e.g. ``Guess a number from 1 to 63.``

The model finds a secret integer in ``[low, high]`` with a ``guess(number)`` tool answering
``higher`` or ``lower`` with the numbers the answers so far leave (``higher 33-63``), or
``correct``. Later turns depend on earlier observations: the game keeps the interval, and a good
player guesses inside the last one it stated. Bisection (its middle, ``(low + high) // 2``)
finds every secret within ``(high - low + 1).bit_length()`` guesses, the default limit; a
random guess inside the interval wins about half the games of 1 to 63 in 6 guesses (49 %), so
the strategy decides success.

The secret comes from the dataset row (``GuessNumberTask``), as TRL passes a row's columns to
``reset(**row)``: episodes are reproducible. Both splits draw secrets from the whole range: the
prompt is the same for every secret and never shows it, so a game holds nothing to remember
but the strategy. Splitting the numbers instead taught a prior: with a quarter of them held out
for validation, training success rose (0.20 to 0.34 in 120 steps) while validation success
fell (0.16 to 0.10), the policy learning to avoid the held-out numbers.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

DATA_SOURCE = "rlrun:guess_number"  # `data.source` naming this task
HIGHER, LOWER, CORRECT = "higher", "lower", "correct"
GAME_OVER = "game over"  # the answer to the last allowed guess when it misses
GUESS_COST = 0.05  # reward given up per guess after the first


def bisection_guesses(low: int, high: int) -> int:
    """The most guesses bisection needs for a secret in ``[low, high]``."""
    return (high - low + 1).bit_length()


def prompt_text(low: int, high: int) -> str:
    return f"Guess a number from {low} to {high}."


def answer_text(direction: str, low: int, high: int) -> str:
    """``higher`` or ``lower`` and the numbers the secret can still be, e.g. ``higher 33-63``."""
    return f"{direction} {low}-{high}"


class GuessNumber:
    """Find the secret number (a TRL-style environment: its one public method, ``guess``, is
    the tool). ``reset`` takes the secret and the rules from the dataset row; ``get_reward``
    is ``1 - GUESS_COST * (guesses - 1)`` once found within ``max_guesses``, else 0. Every call
    of ``guess`` counts, one that raises (not an integer, outside the range) too. The game
    keeps the interval ``[left_low, left_high]`` the answers so far leave, and states it."""

    def __init__(self) -> None:
        self._secret = self._low = self._high = self._max_guesses = self._guesses = 0
        self._left_low = self._left_high = 0
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
        self._left_low, self._left_high = low, high
        self._guesses, self._found = 0, False

    def guess(self, number: int) -> str:
        """Guess the secret number.

        Args:
            number: The guess, an integer in the range the prompt states.

        Returns:
            "higher" if the secret is higher, "lower" if it is lower, each with the numbers the
            secret can still be ("higher 33-63"); "correct" when it is the secret, "game over"
            when the last allowed guess misses.
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
        if self._secret > number:
            self._left_low = max(self._left_low, number + 1)
            return answer_text(HIGHER, self._left_low, self._left_high)
        self._left_high = min(self._left_high, number - 1)
        return answer_text(LOWER, self._left_low, self._left_high)

    def get_reward(self) -> float:
        """1 for a secret found at the first guess, ``GUESS_COST`` less per further guess; 0 unfound."""
        return 1.0 - GUESS_COST * (self._guesses - 1) if self._found else 0.0


@dataclass(frozen=True)
class GuessNumberTask:
    """Rows for ``GuessNumber``: a secret in ``[low, high]`` and the rules, as dataset columns.

    ``max_guesses`` None is the bisection worst case. Training secrets are drawn uniformly with
    replacement; validation secrets are distinct (every number of the range once, in a seeded
    order, when ``size`` allows), so that success on them is the game's success rate.
    """

    low: int = 1
    high: int = 63
    max_guesses: int | None = None
    seed: int = 1234

    def __post_init__(self) -> None:
        if not 0 <= self.low < self.high:
            raise ValueError(f"the range needs 0 <= low < high, got low={self.low}, high={self.high}")
        if self.max_guesses is not None and self.max_guesses < 1:
            raise ValueError(f"max_guesses must be >= 1, got {self.max_guesses}")

    @property
    def guesses_allowed(self) -> int:
        return self.max_guesses or bisection_guesses(self.low, self.high)

    def train(self, size: int) -> list[dict[str, Any]]:
        """``size`` training rows (secrets drawn with replacement)."""
        return self._rows(np.random.default_rng([self.seed, 0]).choice(self._numbers(), size))

    def validation(self, size: int) -> list[dict[str, Any]]:
        """``size`` rows with distinct secrets (fewer when the range is smaller)."""
        return self._rows(np.random.default_rng([self.seed, 1]).permutation(self._numbers())[:size])

    def _numbers(self) -> np.ndarray:
        return np.arange(self.low, self.high + 1, dtype=np.int64)

    def _rows(self, secrets: np.ndarray) -> list[dict[str, Any]]:
        rules = {"low": self.low, "high": self.high, "max_guesses": self.guesses_allowed}
        prompt = prompt_text(self.low, self.high)
        return [
            {"prompt": prompt, "answer": str(s), "secret": s, **rules, "data_source": DATA_SOURCE}
            for s in secrets.tolist()
        ]
