"""verl's `default_compute_score` routing: the data_source values it scores with a rule, and the
rlrun built-in that scores them the same way (the converter routes to them; `rlrun:verl_default`
applies the routing row by row)."""

from __future__ import annotations

VERL_SCORERS = {
    "openai/gsm8k": "rlrun:gsm8k",
    "lighteval/MATH": "rlrun:math_verl",
    "DigitalLearningGmbH/MATH-lighteval": "rlrun:math_verl",
    "HuggingFaceH4/MATH-500": "rlrun:math_verl",
    "math_dapo": "rlrun:math_dapo",
    "math": "rlrun:math_dapo",
    "math_dapo_reasoning": "rlrun:math_dapo",
}


def verl_scorer(data_source: str) -> str | None:
    """The rlrun scorer verl's default_compute_score uses for `data_source` (`aime*` included),
    or None when verl scores it with a function rlrun does not ship."""
    if data_source.startswith("aime"):
        return "rlrun:math_dapo"
    return VERL_SCORERS.get(data_source)
