"""The built-in rewards, registered as ``rlrun:<name>``."""

from __future__ import annotations

from typing import Any

from rlrun.rewards.answers import answers_equal, extract_answer
from rlrun.rewards.gsm8k import GSM8KMethod, gsm8k_score
from rlrun.rewards.registry import REWARDS

try:  # optional (the `math` extra): symbolic equivalence for competition-style answers
    import math_verify
except ImportError:
    math_verify = None


@REWARDS.register("rlrun:exact_match")
def exact_match(
    prompts: list[str], completions: list[str], ground_truths: list[str], **_: Any
) -> list[float]:
    """1 when the completion, stripped of surrounding whitespace, equals the ground truth."""
    return [float(c.strip() == str(g).strip()) for c, g in zip(completions, ground_truths)]


@REWARDS.register("rlrun:gsm8k")
def gsm8k(
    prompts: list[str],
    completions: list[str],
    ground_truths: list[str],
    method: GSM8KMethod = "strict",
    format_score: float = 0.0,
    score: float = 1.0,
    **_: Any,
) -> list[float]:
    """verl's GSM8K scorer: `#### <number>` equal to the answer (kwargs: method strict | flexible)."""
    return [gsm8k_score(c, str(g), method, format_score, score) for c, g in zip(completions, ground_truths)]


@REWARDS.register("rlrun:math_answer")
def math_answer(
    prompts: list[str], completions: list[str], ground_truths: list[str], **_: Any
) -> list[float]:
    """1 when the final answer (last \\boxed{}, else after ####, else last number) equals the truth.

    Equal means: the same after normalisation (wrappers, spacing, $, degree and percent marks,
    a leading `x=`, thousands separators dropped); the same exact number (`0.5`, `1/2`,
    `\\frac{1}{2}`, `\\frac12`) or square root (`\\sqrt{8}`, `2\\sqrt{2}`); or, when math-verify
    is installed (`pip install 'rlrun[math]'`), symbolically equal by its `verify`.
    """
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
