"""Finding and normalising the final answer in a model's completion."""

from __future__ import annotations

import re
from fractions import Fraction

_NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?(?:/\d+)?|-?\.\d+")
_WRAPPERS = re.compile(r"\\text\{([^{}]*)\}|\\mathrm\{([^{}]*)\}")


def extract_answer(text: str) -> str | None:
    """The last ``\\boxed{...}``, else what follows the last ``####``, else the last number."""
    boxed = _last_boxed(text)
    if boxed is not None:
        return boxed
    if "####" in text:
        tail = text.rsplit("####", 1)[1].strip()
        return tail.splitlines()[0].strip() if tail else None
    numbers = _NUMBER.findall(text)
    return numbers[-1] if numbers else None


def normalize_answer(answer: str) -> str:
    """Strip LaTeX wrappers, dollar signs, spaces, thousands separators and a trailing period."""
    answer = _WRAPPERS.sub(lambda m: m.group(1) or m.group(2) or "", answer)
    answer = answer.replace("$", "").replace("\\!", "").replace(" ", "").strip().rstrip(".")
    if re.fullmatch(r"-?\d{1,3}(,\d{3})+(\.\d+)?", answer):
        answer = answer.replace(",", "")
    return answer


def answers_equal(predicted: str, truth: str) -> bool:
    """Equal as normalised strings, or as exact numbers (``0.5`` == ``1/2`` == ``\\frac{1}{2}``)."""
    p, t = normalize_answer(predicted), normalize_answer(truth)
    if p == t:
        return True
    pv, tv = _as_number(p), _as_number(t)
    return pv is not None and pv == tv


def _as_number(text: str) -> Fraction | None:
    frac = re.fullmatch(r"(-?)\\d?frac\{(-?\d+)\}\{(\d+)\}", text)
    if frac:
        text = f"{frac.group(1)}{frac.group(2)}/{frac.group(3)}"
    try:
        return Fraction(text)
    except (ValueError, ZeroDivisionError):
        return None


def _last_boxed(text: str) -> str | None:
    start = text.rfind("\\boxed")
    if start < 0:
        return None
    open_brace = text.find("{", start)
    if open_brace < 0:
        return None
    depth = 0
    for i in range(open_brace, len(text)):
        depth += {"{": 1, "}": -1}.get(text[i], 0)
        if depth == 0:
            return text[open_brace + 1 : i]
    return None
