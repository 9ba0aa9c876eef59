"""rlrun:math_dapo, rlrun:math_verl and rlrun:verl_default score exactly as verl 0.9.1's own
functions (a copy of them is a test fixture: fixtures/verl_reward_score/README.md), on a fuzz
set of completions and answers built to reach their odd corners."""

import contextlib
import importlib.util
import io
import itertools
import random
from pathlib import Path

import pytest

from rlrun.rewards.scorers import math_dapo, math_verl, verl_default
from rlrun.rewards.verl_math import math_dapo_score, math_verl_score

FIXTURES = Path(__file__).parent / "fixtures" / "verl_reward_score"


def _verl(name: str):
    spec = importlib.util.spec_from_file_location(f"verl_fixture_{name}", FIXTURES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


VERL_DAPO, VERL_MATH = _verl("math_dapo"), _verl("math_reward")

ANSWERS = [
    "4",
    "-3",
    "0.5",
    ".5",
    "1/2",
    "3/4",
    " 3/4",
    "\\frac12",
    "\\frac{1}{2}",
    "\\dfrac{1}{2}",
    "\\tfrac34",
    "\\frac1{72}",
    "\\frac",
    "\\frac1",
    "\\sqrt2",
    "\\sqrt{2}",
    "2\\sqrt3",
    "\\sqrt",
    "1,000",
    "1,000,000",
    "10\\%",
    "50\\\\%",
    "30^\\circ",
    "30^{\\circ}",
    "\\$5",
    "5 dollars",
    "12 inches",
    "x=3",
    "k = 7",
    "y_1=2",
    "abc=5",
    "\\text{(B)}",
    "(B)",
    "\\textbf{C}",
    "\\left( 1, 2 \\right)",
    "(1,2)",
    "\\pi",
    "2\\pi",
    "\\infty",
    "",
    " ",
    "\\text{ cm}",
    "5\\text{ cm}",
    "5\\text{ cm}\\text{ m}",
    "\\$\\$",
    "a $b$ c",
    "$4$",
    "\\overline{3}",
    "\\boxed{7}",
    "3.",
    "3.0",
    "03",
    "+3",
    "3_0",
    "1/0",
    "a/b",
    "\\mbox{and}",
    "1 \\text{and} 2",
    "\\!5",
    "\\\\frac{1}{2}",
    "7 sue",
    "\\ldots",
    "{,}1",
    "1{,}000",
    "[INVALID]",
    "an apple",
    "a 5",
    "5.$",
    "\\text{s}",
    "\\mathrm{th}",
    "4\nx",
    '"4"',
    "٣",
]
FRAMES = [
    "{a}",
    "The answer is \\boxed{{{a}}}.",
    "so \\boxed{{{a}}} and \\boxed{{{b}}}",
    "\\boxed {a}$ done",
    "\\boxed{a} end",
    "\\fbox{{{a}}}",
    "\\boxed{{{a}",
    "\\boxedx{{{a}}}",
    "Answer: {a}",
    "answer : {a}\nmore",
    "ANSWER:{a}",
    "Answer: {a}\nAnswer: {b}",
    "Final Answer: $\\boxed{{{a}}}$",
    "reasoning... \\boxed{{{a}}}\nAnswer: {b}",
    "{pad}Answer: {a}",
    "Answer: {a}{pad}",
    "{pad}\\boxed{{{a}}}",
    "\\boxed{{{a}}}{pad}",
    "Answer:\n{a}",
    "x = {a}, so \\boxed{{x = {b}}}",
]


def fuzz_set(size: int = 1500) -> list[tuple[str, str]]:
    """(completion, truth) pairs: every frame with answers drawn from ANSWERS (seeded)."""
    rng = random.Random(0)
    pairs = []
    for frame, (a, b) in zip(
        itertools.cycle(FRAMES), iter(lambda: (rng.choice(ANSWERS), rng.choice(ANSWERS)), None)
    ):
        pad = " filler" * rng.choice([0, 5, 20, 60])
        completion = frame.format(a=a, b=b, pad=pad)
        truth = rng.choice([a, b, rng.choice(ANSWERS)])
        pairs.append((completion, truth))
        if len(pairs) == size:
            return pairs
    return pairs


FUZZ = fuzz_set()


def test_the_fuzz_set_is_large_and_varied():
    assert len(FUZZ) >= 1000
    scores = {VERL_DAPO.compute_score(c, t)["score"] for c, t in FUZZ}
    with contextlib.redirect_stdout(io.StringIO()):  # verl prints the exceptions it swallows
        math = [VERL_MATH.compute_score(c, t) for c, t in FUZZ]
    assert scores == {1.0, -1.0} and set(math) == {0.0, 1.0}
    assert sum(math) >= 100  # right answers, not only wrong ones


def test_math_dapo_equals_verls_on_the_fuzz_set():
    disagree = []
    for completion, truth in FUZZ:
        theirs = VERL_DAPO.compute_score(completion, truth)
        score, correct, predicted = math_dapo_score(completion, truth)
        if (score, correct, predicted) != (theirs["score"], theirs["acc"], theirs["pred"]):
            disagree.append((completion, truth, theirs, (score, correct, predicted)))
    assert disagree == []


def test_math_verl_equals_verls_on_the_fuzz_set():
    disagree = []
    with contextlib.redirect_stdout(io.StringIO()):
        for completion, truth in FUZZ:
            if math_verl_score(completion, truth) != VERL_MATH.compute_score(completion, truth):
                disagree.append((completion, truth))
    assert disagree == []


def test_the_batch_rewards_and_verl_routing():
    completions = ["Answer: 4", "\\boxed{\\frac12}", "#### 4", "Answer: 5"]
    truths = ["4", "\\frac{1}{2}", "4", "4"]
    assert math_dapo([""] * 4, completions, truths) == {"score": [1.0, -1.0, -1.0, -1.0], "acc": [1, 0, 0, 0]}
    assert math_verl([""] * 4, completions, truths) == [0.0, 1.0, 0.0, 0.0]
    sources = ["aime2024", "DigitalLearningGmbH/MATH-lighteval", "openai/gsm8k", "math_dapo"]
    assert verl_default([""] * 4, completions, truths, data_source=sources) == [1.0, 1.0, 1.0, -1.0]
    with pytest.raises(ValueError, match="no scorer for data_source 'numina_olympiads'"):
        verl_default([""], ["x"], ["1"], data_source=["numina_olympiads"])
