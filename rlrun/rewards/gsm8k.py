"""GSM8K answers as verl's ``gsm8k`` scorer reads them, so rewards match verl's runs.

Both methods look only at the last 300 characters of the completion (verl's speed shortcut):

- ``strict`` (verl's default): the last ``#### `` (four hashes and one space) directly followed
  by a run of digits, dots and commas (a leading minus allowed); commas are removed. So
  ``#### 12 eggs`` gives ``12``, while ``#### $1250`` and ``The answer is 42`` give nothing.
- ``flexible``: the last run of digits, dots and commas (a leading minus allowed) that is not
  just ``.``, kept as written (``1,234`` stays ``1,234``, ``42.`` stays ``42.``).

The answer must then equal the ground truth as a string: ``950.00`` is not ``950``.
"""

from __future__ import annotations

import re
from typing import Literal

GSM8KMethod = Literal["strict", "flexible"]
TAIL_CHARS = 300
_STRICT = re.compile(r"#### (-?[0-9.,]+)")
_NUMBER_RUN = re.compile(r"-?[0-9.,]+")


def extract_gsm8k_answer(completion: str, method: GSM8KMethod = "strict") -> str | None:
    """The completion's answer by verl's rules for ``method`` (module docstring), or None."""
    tail = completion[-TAIL_CHARS:]
    if method == "strict":
        found = _STRICT.findall(tail)
        return found[-1].replace(",", "") if found else None
    if method == "flexible":
        runs = _NUMBER_RUN.findall(tail)
        numbers = [run for run in runs if run != "."]
        # Only lone dots: verl returns one (wrong, yet "formatted": it earns format_score).
        return numbers[-1] if numbers else (runs[0] if runs else None)
    raise ValueError(f"method must be 'strict' or 'flexible', got {method!r}")


def gsm8k_score(
    completion: str, truth: str, method: GSM8KMethod = "strict", format_score: float = 0.0, score: float = 1.0
) -> float:
    """``score`` when the answer equals ``truth``, ``format_score`` when an answer was found but
    differs, 0 when none was found (verl's payoff)."""
    answer = extract_gsm8k_answer(completion, method)
    if answer is None:
        return 0.0
    return score if answer == truth else format_score
