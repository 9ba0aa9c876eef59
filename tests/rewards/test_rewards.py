import sys
import textwrap

import pytest
import torch

from rlrun.rewards import REWARDS, RewardCombiner, RewardError, RewardSpecError, resolve_reward_fn
from rlrun.rewards.answers import answers_equal, extract_answer
from rlrun.schema.reward import RewardFunction


@pytest.fixture
def custom_rewards(tmp_path, monkeypatch):
    """A user module of reward functions, importable as `my_rewards`."""
    (tmp_path / "my_rewards.py").write_text(
        textwrap.dedent("""
        def length_penalty(prompts, completions, ground_truths):
            return [-0.1 * len(c) for c in completions]

        def with_extras(prompts, completions, ground_truths, data_source):
            return {"score": [1.0 if s == "a" else 0.0 for s in data_source], "acc": [1.0] * len(prompts)}

        def breaks_on_x(prompts, completions, ground_truths, **kwargs):
            return [float(int(c)) for c in completions]

        def wrong_length(prompts, completions, ground_truths):
            return [1.0]

        def not_finite(prompts, completions, ground_truths):
            return [float("nan")] * len(prompts)

        def one_string(prompts, completions, ground_truths):
            return "1.0"

        def strings(prompts, completions, ground_truths):
            return ["1.0"] * len(prompts)

        def compute_score(data_source, solution_str, ground_truth, extra_info=None):
            return "1.0"

        NOT_A_FUNCTION = 3
    """)
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    yield
    sys.modules.pop("my_rewards", None)


def test_builtins_are_registered():
    assert {"rlrun:exact_match", "rlrun:math_answer"} <= set(REWARDS.names())
    assert all(REWARDS.describe().values())


def test_exact_match():
    fn = resolve_reward_fn("rlrun:exact_match")
    assert fn(["1+1="] * 3, ["2", " 2 ", "20"], ["2", "2", "2"]) == [1.0, 1.0, 0.0]


@pytest.mark.parametrize(
    ("completion", "truth", "expected"),
    [
        ("so the answer is \\boxed{\\frac{1}{2}}.", "0.5", 1.0),
        ("work... #### 1,234", "1234", 1.0),
        ("3 apples and 4 pears: 7", "7", 1.0),
        ("\\boxed{12} but later 13", "12", 1.0),
        ("the answer is $42$.", "42.0", 1.0),
        ("no idea", "5", 0.0),
        ("#### 8", "9", 0.0),
    ],
)
def test_math_answer(completion, truth, expected):
    assert resolve_reward_fn("rlrun:math_answer")(["q"], [completion], [truth]) == [expected]


def test_answer_extraction_helpers():
    assert extract_answer("\\boxed{a{b}c} tail 7") == "a{b}c"
    assert extract_answer("nothing here") is None
    assert answers_equal("\\text{5}", "5") and not answers_equal("5", "6")


def test_resolve_errors_are_clear(custom_rewards):
    cases = {
        "rlrun:nope": "valid: rlrun:environment_reward, rlrun:exact_match, rlrun:gsm8k, rlrun:math_answer",
        "no_such_module:f": "cannot import module 'no_such_module'",
        "my_rewards:missing": "has no attribute 'missing'",
        "my_rewards:NOT_A_FUNCTION": "not a function",
        "just_a_name": "pkg.module:function",
    }
    for spec, message in cases.items():
        with pytest.raises(RewardSpecError, match=message):
            resolve_reward_fn(spec)


def test_weighted_combination_logs_each_function(custom_rewards):
    reward = RewardCombiner(
        [
            RewardFunction(fn="rlrun:exact_match", weight=1.0),
            RewardFunction(fn="my_rewards:length_penalty", weight=0.5),
            RewardFunction(fn="rlrun:exact_match", weight=2.0),
        ]
    )
    out = reward(["p0", "p1"], ["2", "123"], ["2", "4"], data_source=["x", "y"])
    assert reward.names == ["exact_match", "length_penalty", "exact_match_2"]
    torch.testing.assert_close(out.components["length_penalty"], torch.tensor([-0.1, -0.3]))
    torch.testing.assert_close(out.scores, torch.tensor([1 - 0.05 + 2, -0.15]))
    torch.testing.assert_close(out.acc, torch.tensor([1.0, 0.0]))  # the first function's score > 0


def test_dict_results_extra_fields_and_acc(custom_rewards):
    reward = RewardCombiner([RewardFunction(fn="my_rewards:with_extras", weight=2.0)])
    out = reward(["p0", "p1"], ["c", "c"], ["t", "t"], data_source=["a", "b"], unused_column=[1, 2])
    torch.testing.assert_close(out.scores, torch.tensor([2.0, 0.0]))
    torch.testing.assert_close(out.acc, torch.tensor([1.0, 1.0]))  # the function's own "acc"
    assert set(out.components) == {"with_extras", "with_extras/acc"}


def test_a_broken_reward_names_the_function_the_sample_and_the_prompt(custom_rewards):
    reward = RewardCombiner([RewardFunction(fn="my_rewards:breaks_on_x")])
    with pytest.raises(RewardError, match=r"'breaks_on_x' failed on sample 2 \(prompt '7\+7='\).*ValueError"):
        reward(["1+1=", "2+2=", "7+7="], ["2", "4", "x"], ["2", "4", "14"])


@pytest.mark.parametrize(
    ("fn", "message"),
    [
        ("wrong_length", "returned 1 values"),
        ("not_finite", "on sample 0"),
        # "1.0" is one value, not the 3 characters a list of it would make
        (
            "one_string",
            r"returned one str \('1.0'\) for 'score' where it must return one number per sample, a list of 2",
        ),
        (
            "strings",
            r"returned a str \('1.0'\) for 'score' on sample 0 \(prompt 'a'\); expected a finite number",
        ),
        ("compute_score", r"returned a str \('1.0'\) for 'score' on sample 0"),  # verl style, per sample
    ],
)
def test_unusable_results_are_reported(custom_rewards, fn, message):
    with pytest.raises(RewardError, match=message):
        RewardCombiner([RewardFunction(fn=f"my_rewards:{fn}")])(["a", "b"], ["1", "2"], ["1", "2"])
