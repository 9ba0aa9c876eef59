"""Environments written to TRL's `environment_factory` contract (trl 1.16, GRPOTrainer's docstring:
public methods are tools, `reset(**kwargs) -> str | None`, optional `get_reward() -> float`) and to
rlrun's reset/step contract, for the agent tests. Imported by path as `envs_fixture:<Class>`."""

from __future__ import annotations

import time


class Counter:
    """A TRL environment: the model adds numbers to a running total; the reward is the total."""

    def __init__(self) -> None:
        self.total = 0
        self.seen: dict = {}

    def reset(self, **kwargs) -> str | None:
        self.seen = kwargs
        self.total = int(kwargs.get("start", 0))
        return f"Start at {self.total}."

    def add(self, amount: int) -> str:
        """Add to the running total.

        Args:
            amount: How much to add.
        """
        self.total += amount
        return str(self.total)

    @classmethod
    def unit(cls, name: str) -> str:
        """The unit of a quantity (a classmethod: TRL exposes it too).

        Args:
            name: The quantity.
        """
        return "items"

    @staticmethod
    def helper(x: int) -> int:  # a staticmethod is not a tool in TRL
        return x

    def _private(self) -> None:
        pass

    def get_reward(self) -> float:
        return float(self.total)


class Seeded(Counter):
    """Declares `seed`: rlrun passes the episode's seed."""

    def reset(self, seed: int, **kwargs) -> str | None:
        self.seed = seed
        return None


class Guess:
    """A step environment: guess the secret number; reward 1 on the turn it is guessed."""

    def __init__(self) -> None:
        self.secret = 0

    def reset(self, secret: str = "7", **kwargs) -> str:
        self.secret = int(secret)
        return "Guess a digit."

    def step(self, action: str) -> tuple[str | None, float, bool]:
        if action.strip() == str(self.secret):
            return "Right.", 1.0, True
        return "Higher." if action.strip() < str(self.secret) else "Lower.", 0.0, False


class BrokenReset(Counter):
    def reset(self, **kwargs) -> str | None:
        raise RuntimeError("no server")


class SlowStep(Guess):
    def step(self, action: str) -> tuple[str | None, float, bool]:
        time.sleep(60)
        return None, 0.0, False


class BadStep(Guess):
    def step(self, action: str):
        return "only two", 1.0


class BadReward(Counter):
    def get_reward(self) -> float:
        return float("nan")


class Undocumented:
    def reset(self, **kwargs) -> None:
        return None

    def move(self, where):  # no type hint: refused as a tool
        return where


class NoReset:
    def act(self, x: int) -> int:
        """Act.

        Args:
            x: X.
        """
        return x


class SeededText(Counter):
    """Its reset text depends on the episode's seed: the rows of one prompt start apart."""

    def reset(self, seed: int, **kwargs) -> str | None:
        return f"Seed {seed % 7}."


class Recheck:
    """A step environment on the arithmetic task's rows that adds nothing to the prompt: a right
    answer ends the episode with reward 1, a wrong one is told "No." and may be tried again."""

    def __init__(self) -> None:
        self.answer = ""

    def reset(self, answer: str = "", **row: object) -> None:
        self.answer = str(answer)

    def step(self, action: str) -> tuple[str | None, float, bool]:
        if action.strip() == self.answer:
            return None, 1.0, True
        return "No.", 0.0, False
