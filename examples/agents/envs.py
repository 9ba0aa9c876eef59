"""Two environments for rlrun's agent examples (docs/agents.md), on the arithmetic task's rows
(`prompt` "23+58=", `answer` "81").

`Abacus` is written to TRL's `environment_factory` contract, so `GRPOTrainer(environment_factory=Abacus)`
takes it unchanged: its public methods are the model's tools, `reset` starts an episode from the
dataset row, `get_reward` scores it. `Retry` is a reset/step environment: it reads each model turn
and answers, with a reward per turn, until the answer is right.
"""

from __future__ import annotations

import re


class Abacus:
    """Add and multiply on an abacus, then submit the answer; rewarded 1 for a right submission."""

    def __init__(self) -> None:
        self.answer = ""
        self.submitted: str | None = None

    def reset(self, answer: str = "", **row: object) -> str | None:
        self.answer, self.submitted = str(answer), None
        return None  # nothing to add to the prompt

    def add(self, a: int, b: int) -> str:
        """Add two integers.

        Args:
            a: The first addend.
            b: The second addend.
        """
        return str(a + b)

    def multiply(self, a: int, b: int) -> str:
        """Multiply two integers.

        Args:
            a: The first factor.
            b: The second factor.
        """
        return str(a * b)

    def submit(self, answer: int) -> str:
        """Submit the final answer (only the first submission counts).

        Args:
            answer: The answer.
        """
        if self.submitted is None:
            self.submitted = str(answer)
        return "submitted"

    def get_reward(self) -> float:
        return float(self.submitted == self.answer)


class Retry:
    """Answer; a wrong answer is told so and may be tried again. Reward 1 on the turn it is right."""

    def __init__(self) -> None:
        self.answer = ""

    def reset(self, answer: str = "", **row: object) -> str:
        self.answer = str(answer)
        return "Answer with a number."

    def step(self, action: str) -> tuple[str | None, float, bool]:
        numbers = re.findall(r"-?\d+", action)
        if numbers and numbers[-1] == self.answer:
            return None, 1.0, True
        return "Not quite. Try again.", 0.0, False
