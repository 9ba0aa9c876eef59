"""The built-in rewards, registered as ``rlrun:<name>``."""

from __future__ import annotations

from typing import Any

from rlrun.rewards import REWARDS
from rlrun.rewards.answers import answers_equal, extract_answer

try:  # optional: symbolic equivalence for competition-style answers
    import math_verify
except ImportError:
    math_verify = None


@REWARDS.register("rlrun:exact_match")
def exact_match(
    prompts: list[str], completions: list[str], ground_truths: list[str], **_: Any
) -> list[float]:
    """1 when the completion, stripped of surrounding whitespace, equals the ground truth."""
    return [float(c.strip() == str(g).strip()) for c, g in zip(completions, ground_truths)]


@REWARDS.register("rlrun:math_answer")
def math_answer(
    prompts: list[str], completions: list[str], ground_truths: list[str], **_: Any
) -> list[float]:
    """1 when the extracted final answer (\\boxed{}, ####, last number) equals the ground truth."""
    return [float(_math_equal(c, str(g))) for c, g in zip(completions, ground_truths)]


def _math_equal(completion: str, truth: str) -> bool:
    predicted = extract_answer(completion)
    if predicted is None:
        return False
    if answers_equal(predicted, truth):
        return True
    if math_verify is not None:
        return bool(math_verify.verify(math_verify.parse(f"${truth}$"), math_verify.parse(f"${predicted}$")))
    return False
