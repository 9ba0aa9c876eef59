"""`rlrun:math_answer` on LaTeX-equivalent answers: with math-verify (the `math` extra) and with
the fallback that needs nothing (math-verify forced off)."""

import pytest

from rlrun.rewards import resolve_reward_fn, scorers
from rlrun.rewards.answers import answers_equal, extract_answer, normalize_answer

# (completion, ground truth): equal answers
EQUIVALENT = [
    ("\\boxed{\\frac34}", "\\frac{3}{4}"),
    ("\\boxed{\\frac34}", "0.75"),
    ("\\boxed{\\dfrac{1}{2}}", "0.5"),
    ("\\boxed{\\frac3{4}}", "3/4"),
    ("\\boxed{\\sqrt{8}}", "2\\sqrt{2}"),
    ("\\boxed{-\\sqrt{12}}", "-2\\sqrt3"),
    ("\\boxed{x=2}", "2"),
    ("\\boxed{90^\\circ}", "90"),
    ("\\boxed{90^{\\circ}}", "90"),
    ("\\boxed{10\\%}", "10"),
    ("\\boxed{\\$5}", "5"),
    ("\\boxed{\\left(1, 2\\right)}", "(1,2)"),
    ("\\boxed{\\text{(B)}}", "B"),
    ("\\boxed{1,000}", "1000"),
    ("\\boxed{5.}", "5"),
    ("\\boxed{\\text{5}}", "5"),
    ("#### 1,234", "1234"),
    ("the answer is $42$.", "42.0"),
    ("\\boxed{y = -3}", "-3"),
]
DIFFERENT = [
    ("\\boxed{3}", "4"),
    ("\\boxed{\\sqrt{8}}", "2\\sqrt{3}"),
    ("\\boxed{\\frac{3}{4}}", "0.7"),
    ("no idea", "5"),
]
ONLY_MATH_VERIFY = [  # symbolic equivalence the fallback does not attempt
    ("\\boxed{\\frac{\\pi}{2}}", "\\pi/2"),
    ("\\boxed{0.1}", "10\\%"),
    ("\\boxed{\\frac{\\sqrt{3}}{2}}", "\\frac{\\sqrt3}{2}"),
]


@pytest.fixture(params=["math-verify", "fallback"])
def path(request, monkeypatch):
    if request.param == "math-verify":
        pytest.importorskip("math_verify")
    else:
        monkeypatch.setattr(scorers, "math_verify", None)
    return request.param


def score(completion, truth):
    return resolve_reward_fn("rlrun:math_answer")(["q"], [completion], [truth])[0]


@pytest.mark.parametrize(("completion", "truth"), EQUIVALENT)
def test_equivalent_answers_are_paid(path, completion, truth):
    assert score(completion, truth) == 1.0


@pytest.mark.parametrize(("completion", "truth"), DIFFERENT)
def test_different_answers_are_not(path, completion, truth):
    assert score(completion, truth) == 0.0


@pytest.mark.parametrize(("completion", "truth"), ONLY_MATH_VERIFY)
def test_symbolic_equivalence_needs_math_verify(path, completion, truth):
    assert score(completion, truth) == (1.0 if path == "math-verify" else 0.0)


def test_helpers():
    assert extract_answer("\\boxed{a{b}c} tail 7") == "a{b}c"
    assert extract_answer("\\fbox{9} then 7") == "9"
    assert extract_answer("nothing here") is None
    assert normalize_answer("\\left( \\dfrac12 , 3 \\right)") == "(\\frac{1}{2},3)"
    assert answers_equal("\\sqrt{18}", "3\\sqrt{2}") and not answers_equal("\\sqrt{18}", "3")
