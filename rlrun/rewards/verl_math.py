"""verl's two math scorers, rule for rule, so a converted verl run gets verl's rewards:

- ``math_dapo_score`` = verl 0.9's ``math_dapo.compute_score`` (DAPO, AIME data): +1 / -1. The
  answer is the last ``Answer: ...`` line (case-insensitive) of the completion's last 300
  characters, normalised (units and words dropped, ``\\frac12`` -> ``\\frac{1}{2}``, thousands
  commas removed, the part after the last ``=``) and compared with the normalised truth. Without
  such a line, the last ``\\boxed{...}`` of the last 100 characters is compared with the truth
  exactly as written.
- ``math_verl_score`` = verl's ``math_reward.compute_score`` (MATH data): 1 / 0. The last
  ``\\boxed{...}`` (or ``\\boxed x``, ``\\fbox{...}``) compared with the truth after the MATH
  benchmark's string normalisation (``\\left``/``\\right``, ``\\dfrac``, units in ``\\text{ }``,
  ``a/b`` -> ``\\frac{a}{b}``, ``0.5`` -> ``\\frac{1}{2}``, a short ``k=`` prefix dropped).
  Where verl's normalisation fails on odd input, it compares the raw strings, and so does this.

tests/rewards/test_verl_math.py checks both against a copy of verl's own functions on a fuzz set.
"""

from __future__ import annotations

import re

# --- DAPO -----------------------------------------------------------------------------------

_DAPO_REPLACE = (
    ("an ", ""),
    ("a ", ""),
    (".$", "$"),
    ("\\$", ""),
    ("\\ ", ""),
    (" ", ""),
    ("mbox", "text"),
    (",\\text{and}", ","),
    ("\\text{and}", ","),
    ("\\text{m}", "\\text{}"),
)
# Units and words an answer may carry, removed in this order (order matters: "\\text{}" last).
_DAPO_DROP = [
    "square",
    "ways",
    "integers",
    "dollars",
    "mph",
    "inches",
    "hours",
    "km",
    "units",
    "\\ldots",
    "sue",
    "points",
    "feet",
    "minutes",
    "digits",
    "cents",
    "degrees",
    "cm",
    "gm",
    "pounds",
    "meters",
    "meals",
    "edges",
    "students",
    "childrentickets",
    "multiples",
] + [
    "\\text{s}",
    "\\text{.}",
    "\\text{\ns}",
    "\\text{}^2",
    "\\text{}^3",
    "\\text{\n}",
    "\\text{}",
    "\\mathrm{th}",
    "^\\circ",
    "^{\\circ}",
    "\\;",
    ",\\!",
    "{,}",
    '"',
    "\\dots",
]
_DAPO_ANSWER = re.compile(r"(?i)Answer\s*:\s*([^\n]+)")
INVALID = "[INVALID]"


def dapo_normalize(answer: str) -> str:
    """An answer as DAPO compares it (module docstring)."""
    answer = answer.split("=")[-1]
    for old, new in _DAPO_REPLACE:
        answer = answer.replace(old, new)
    for word in _DAPO_DROP:
        answer = answer.replace(word, "")
    answer = re.sub(r"(.*?)(\$)(.*?)(\$)(.*)", "$\\3$", answer)  # the first $...$ only
    for command in ("text", "textbf", "overline"):
        answer = re.sub(r"(\\" + command + r"\{)(.*?)(\})", "\\2", answer)
    answer = re.sub(r"(\\boxed\{)(.*)(\})", "\\2", answer)
    answer = re.sub(r"(frac)([^{])(.)", "frac{\\2}{\\3}", answer)
    answer = re.sub(r"(sqrt)([^{])", "sqrt{\\2}", answer)
    answer = answer.replace("$", "")
    if answer.replace(",", "").isdigit():
        answer = answer.replace(",", "")
    return answer.strip()


def _last_boxed_braced(text: str) -> str | None:
    """The content of the last ``\\boxed{...}`` with its braces balanced, or None."""
    start = text.rfind("\\boxed{")
    end = _closing_brace(text, start) if start >= 0 else None
    return None if end is None else text[start + len("\\boxed{") : end]


def _closing_brace(text: str, start: int) -> int | None:
    """Where the `}` that brings the brace depth counted from `start` back to 0 is, or None."""
    depth = 0
    for i in range(start, len(text)):
        depth += {"{": 1, "}": -1}.get(text[i], 0)
        if text[i] == "}" and depth == 0:
            return i
    return None


def math_dapo_score(completion: str, truth: str) -> tuple[float, bool, str | None]:
    """(score +1/-1, correct, the answer read) by DAPO's rules (module docstring)."""
    tail = completion[-300:]
    lines = _DAPO_ANSWER.findall(tail)
    predicted = dapo_normalize(lines[-1] if lines else INVALID)
    correct = predicted == dapo_normalize(truth)
    if predicted == INVALID:
        boxed = _last_boxed_braced(tail[-100:])
        if boxed is not None:
            correct, predicted = boxed == truth, boxed
    return (1.0 if correct else -1.0), correct, predicted


# --- MATH (Hendrycks) -------------------------------------------------------------------------


class _Unreadable(Exception):
    """verl's normalisation fails on this string; it then compares raw strings."""


def _last_boxed_any(text: str) -> str | None:
    """The answer in the last ``\\boxed x`` (to the next ``$``), ``\\boxed{...}`` or ``\\fbox{...}``;
    None when there is none (or its braces never close)."""
    if "\\boxed " in text:
        return text.split("\\boxed ")[-1].split("$")[0]
    start = text.rfind("\\boxed")
    if start < 0:
        start = text.rfind("\\fbox")
        if start < 0:
            return None
    end = _closing_brace(text, start)
    if end is None:
        return None
    whole = text[start : end + 1]
    # verl strips a "\boxed{" prefix and a "}" suffix and fails otherwise (\fbox, \boxed{}x)
    if not whole.startswith("\\boxed{"):
        raise _Unreadable(whole)
    return whole[len("\\boxed{") : -1]


def _fracs(text: str) -> str:
    """``\\frac12`` -> ``\\frac{1}{2}``, ``\\frac1{2}`` -> ``\\frac{1}{2}``; unchanged when a
    ``\\frac`` has one character after it, _Unreadable when it has none (as verl fails there)."""
    first, *rest = text.split("\\frac")
    out = [first]
    for part in rest:
        if not part:
            raise _Unreadable(text)
        if part[0] == "{":
            out.append("\\frac" + part)
        elif len(part) < 2:
            return text
        elif part[1] != "{":
            out.append("\\frac{" + part[0] + "}{" + part[1] + "}" + part[2:])
        else:
            out.append("\\frac{" + part[0] + "}" + part[1:])
    return "".join(out)


def _slash_fraction(text: str) -> str:
    """``3/4`` -> ``\\frac{3}{4}`` when both sides are integers written plainly."""
    parts = text.split("/")
    if len(parts) != 2:
        return text
    try:
        a, b = int(parts[0]), int(parts[1])
    except ValueError:
        return text
    return f"\\frac{{{a}}}{{{b}}}" if text == f"{a}/{b}" else text


def _sqrts(text: str) -> str:
    if "\\sqrt" not in text:
        return text
    first, *rest = text.split("\\sqrt")
    out = [first]
    for part in rest:
        if not part:
            raise _Unreadable(text)
        out.append("\\sqrt" + part if part[0] == "{" else "\\sqrt{" + part[0] + "}" + part[1:])
    return "".join(out)


def math_normalize(text: str) -> str:
    """A MATH answer as verl compares it (module docstring); _Unreadable where verl's fails."""
    for old, new in (
        ("\n", ""),
        ("\\!", ""),
        ("\\\\", "\\"),
        ("tfrac", "frac"),
        ("dfrac", "frac"),
        ("\\left", ""),
        ("\\right", ""),
        ("^{\\circ}", ""),
        ("^\\circ", ""),
        ("\\$", ""),
    ):
        text = text.replace(old, new)
    if "\\text{ " in text:  # units, on the right
        pieces = text.split("\\text{ ")
        if len(pieces) != 2:
            raise _Unreadable(text)
        text = pieces[0]
    text = text.replace("\\\\%", "").replace("\\%", "")
    text = text.replace(" .", " 0.").replace("{.", "{0.")
    if not text:
        return text
    if text[0] == ".":
        text = "0" + text
    sides = text.split("=")
    if len(sides) == 2 and len(sides[0]) <= 2:
        text = sides[1]
    text = _sqrts(text).replace(" ", "")
    text = _fracs(text)
    if text == "0.5":
        text = "\\frac{1}{2}"
    return _slash_fraction(text)


def math_verl_score(completion: str, truth: str) -> float:
    """1.0 when the last boxed answer equals `truth` by the MATH rules, else 0.0."""
    try:
        answer = _last_boxed_any(completion)
    except _Unreadable:
        return 0.0
    if answer is None:
        return 0.0
    try:
        equal = math_normalize(answer) == math_normalize(truth)
    except (_Unreadable, IndexError):
        equal = answer == truth
    return 1.0 if equal else 0.0
