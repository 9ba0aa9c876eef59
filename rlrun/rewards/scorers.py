"""The built-in rewards, registered as ``rlrun:<name>``."""

from __future__ import annotations

import math
from typing import Any

from rlrun.facts.verl_scorers import VERL_SCORERS, verl_scorer
from rlrun.rewards.answers import answers_equal, extract_answer
from rlrun.rewards.gsm8k import GSM8KMethod, gsm8k_score
from rlrun.rewards.reward_registry import REWARDS
from rlrun.rewards.verl_math import math_dapo_score, math_verl_score

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


ENVIRONMENT_REWARD = "environment_reward"  # the episodes' column of their environment's get_reward()


@REWARDS.register("rlrun:environment_reward")
def environment_reward(
    prompts: list[str], completions: list[str], ground_truths: list[str], environment_reward: list[float]
) -> list[float | None]:
    """An agent's episode scored by its environment's get_reward() (TRL's reward of an
    environment_factory); not applicable (None) to an episode whose environment has none."""
    return [None if math.isnan(r) else float(r) for r in environment_reward]


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


@REWARDS.register("rlrun:math_dapo")
def math_dapo(
    prompts: list[str], completions: list[str], ground_truths: list[str], **_: Any
) -> dict[str, list[float]]:
    """verl's DAPO scorer (math_dapo): +1 / -1, the last `Answer:` line (else the last \\boxed{})."""
    scored = [math_dapo_score(c, str(g)) for c, g in zip(completions, ground_truths)]
    return {"score": [score for score, _, _ in scored], "acc": [float(correct) for _, correct, _ in scored]}


@REWARDS.register("rlrun:math_verl")
def math_verl(prompts: list[str], completions: list[str], ground_truths: list[str], **_: Any) -> list[float]:
    """verl's MATH scorer (math_reward): 1 when the last \\boxed{} equals the truth by the MATH rules."""
    return [math_verl_score(c, str(g)) for c, g in zip(completions, ground_truths)]


# The scorers behind verl's data_source routing (the routing itself: rlrun.facts.verl_scorers).
_VERL_SCORERS = {
    "rlrun:gsm8k": gsm8k_score,
    "rlrun:math_verl": math_verl_score,
    "rlrun:math_dapo": lambda completion, truth: math_dapo_score(completion, truth)[0],
}


@REWARDS.register("rlrun:verl_default")
def verl_default(
    prompts: list[str],
    completions: list[str],
    ground_truths: list[str],
    data_source: list[str],
    **_: Any,
) -> list[float]:
    """verl's default reward: each row scored by its `data_source` column (gsm8k -> rlrun:gsm8k,
    MATH -> rlrun:math_verl, math_dapo / aime* -> rlrun:math_dapo); another data_source is an error."""
    scores = []
    for completion, truth, source in zip(completions, ground_truths, data_source):
        scorer = _VERL_SCORERS.get(verl_scorer(str(source)))
        if scorer is None:
            raise ValueError(
                f"rlrun:verl_default has no scorer for data_source {source!r} (it scores "
                f"{', '.join(sorted(VERL_SCORERS))} and aime*): name a reward function for it"
            )
        scores.append(float(scorer(completion, str(truth))))
    return scores
