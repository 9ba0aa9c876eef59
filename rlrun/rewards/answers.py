"""Finding and normalising the final answer in a model's completion (no dependencies: the
fallback of ``rlrun:math_answer`` when math-verify is not installed)."""

from __future__ import annotations

import math
import re
from fractions import Fraction

_NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?(?:/\d+)?|-?\.\d+")
_WRAPPERS = re.compile(r"\\(?:text|mathrm|textbf|mathbf)\{([^{}]*)\}")
# Spacing, sizing and unit marks that never change a value: \left( \, \! ^\circ \% ...
_NOISE = re.compile(r"\\left|\\right|\\[,;:! ]|\^\{?\\circ\}?|\\?%|\\?\$|\\displaystyle|\s+")
_SHORT_FRAC = re.compile(r"\\[dt]?frac(\d)(\d)")  # \frac34
_HALF_SHORT_FRAC = re.compile(r"\\[dt]?frac(\d)\{|\\[dt]?frac\{([^{}]*)\}(\d)")  # \frac3{4}, \frac{3}4
_ASSIGNMENT = re.compile(r"^[A-Za-z](?:_\{?\w+\}?)?=(?=[^=])")  # x=2, y_1=2
_FRACTION = re.compile(r"(-?)\\frac\{(-?[\d.]+)\}\{([\d.]+)\}")
_SQRT = re.compile(r"(-?[\d.]*)\\sqrt\{?(\d+)\}?")


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
    """The answer without what never changes its value: ``\\text{}`` wrappers, dollar signs,
    spacing commands, ``\\left``/``\\right``, degree and percent marks, a leading ``x=``,
    parentheses around a choice letter, thousands separators and a trailing period;
    ``\\dfrac``/``\\tfrac``/``\\frac34`` written as ``\\frac{3}{4}``."""
    answer = _WRAPPERS.sub(r"\1", answer)
    answer = _NOISE.sub("", answer).rstrip(".")
    answer = re.sub(r"\\[dt]frac", r"\\frac", answer)
    answer = _SHORT_FRAC.sub(r"\\frac{\1}{\2}", answer)
    answer = _HALF_SHORT_FRAC.sub(
        lambda m: f"\\frac{{{m.group(1)}}}{{" if m.group(1) else f"\\frac{{{m.group(2)}}}{{{m.group(3)}}}",
        answer,
    )
    answer = _ASSIGNMENT.sub("", answer)
    answer = re.sub(r"^\(([A-Za-z])\)$", r"\1", answer)  # a multiple-choice letter: (B) -> B
    if re.fullmatch(r"-?\d{1,3}(,\d{3})+(\.\d+)?", answer):
        answer = answer.replace(",", "")
    return answer


def answers_equal(predicted: str, truth: str) -> bool:
    """Equal as normalised strings, or as exact values: numbers (``0.5`` == ``1/2`` ==
    ``\\frac{1}{2}``) and square roots (``\\sqrt{8}`` == ``2\\sqrt{2}``)."""
    p, t = normalize_answer(predicted), normalize_answer(truth)
    if p == t:
        return True
    pv, tv = _as_value(p), _as_value(t)
    return pv is not None and pv == tv


def _as_value(text: str) -> tuple[Fraction, int] | None:
    """``c·√r`` as ``(c, r)`` with ``r`` square-free (``r == 1`` for a rational), or None."""
    text = _FRACTION.sub(lambda m: f"{m.group(1)}{m.group(2)}/{m.group(3)}", text)
    root = _SQRT.fullmatch(text)
    if root:
        coefficient, radicand = root.group(1), int(root.group(2))
        number = _as_fraction(coefficient + "1" if coefficient in ("", "-") else coefficient)
        return None if number is None else _simplify_root(number, radicand)
    number = _as_fraction(text)
    return None if number is None else (number, 1)


def _as_fraction(text: str) -> Fraction | None:
    numerator, _, denominator = text.partition("/")
    try:
        value = Fraction(numerator)
        return value / Fraction(denominator) if denominator else value
    except (ValueError, ZeroDivisionError):
        return None


def _simplify_root(coefficient: Fraction, radicand: int) -> tuple[Fraction, int]:
    """Move square factors out of the root: 1·√8 -> 2·√2."""
    if radicand == 0:
        return Fraction(0), 1
    for factor in range(math.isqrt(radicand), 1, -1):
        if radicand % (factor * factor) == 0:
            return coefficient * factor, radicand // (factor * factor)
    return coefficient, radicand


def _last_boxed(text: str) -> str | None:
    start = max(text.rfind("\\boxed"), text.rfind("\\fbox"))
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
