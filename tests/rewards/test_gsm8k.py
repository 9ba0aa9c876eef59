"""`rlrun:gsm8k` scores as verl's gsm8k scorer does (expected values: verl's outcome)."""

import pytest

from rlrun.rewards import resolve_reward_fn
from rlrun.rewards.gsm8k import extract_gsm8k_answer

# (completion, ground truth, verl strict, verl flexible)
CASES = [
    ("... so she pays #### $1250", "1250", 0.0, 1.0),  # strict needs a digit right after "#### "
    ("#### 950.00", "950", 0.0, 0.0),  # compared as strings
    ("The answer is 42", "42", 0.0, 1.0),  # no ####
    ("The answer is 42.", "42", 0.0, 0.0),  # flexible keeps the period: "42."
    ("#### 12 eggs", "12", 1.0, 1.0),
    ("\\boxed{12}. #### 13", "12", 0.0, 0.0),  # the #### answer counts, not the box
    ("#### 1,234", "1234", 1.0, 0.0),  # strict drops commas, flexible keeps them
    ("####1250", "1250", 0.0, 1.0),  # no space after ####
    ("#### -5", "-5", 1.0, 1.0),
    ("#### 7\nwait, no: #### 8", "8", 1.0, 1.0),  # the last ####
    ("#### 8 " + "x" * 300, "8", 0.0, 0.0),  # only the last 300 characters are read
    ("3 apples + 4 pears = 7 fruit", "7", 0.0, 1.0),
    ("no digits at all", "3", 0.0, 0.0),
    ("#### 3.5", "3.5", 1.0, 1.0),
    ("#### .5", "0.5", 0.0, 0.0),  # ".5" is not "0.5" as a string
]


@pytest.mark.parametrize(("completion", "truth", "strict", "flexible"), CASES)
def test_gsm8k_matches_verl(completion, truth, strict, flexible):
    fn = resolve_reward_fn("rlrun:gsm8k")
    assert fn(["q"], [completion], [truth]) == [strict]
    assert fn(["q"], [completion], [truth], method="flexible") == [flexible]


def test_format_score_and_score_as_in_verl():
    fn = resolve_reward_fn("rlrun:gsm8k")
    # found but wrong -> format_score; not found -> 0; right -> score
    assert fn(["q"] * 3, ["#### 3", "none", "#### 4"], ["4"] * 3, format_score=0.1, score=2.0) == [
        0.1,
        0.0,
        2.0,
    ]


def test_extraction():
    assert extract_gsm8k_answer("#### 1,000,000") == "1000000"
    assert extract_gsm8k_answer("1,000,000 and then .", "flexible") == "1,000,000"
    assert extract_gsm8k_answer("only . here", "flexible") == "."  # verl returns the lone dot
    with pytest.raises(ValueError, match="strict' or 'flexible"):
        extract_gsm8k_answer("#### 1", "loose")
