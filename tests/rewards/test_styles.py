"""verl- and TRL-style reward functions, named in a recipe, are called as those stacks call them."""

import sys
import textwrap

import pytest
import torch

from rlrun.errors import RecipeError
from rlrun.recipes import load_recipe
from rlrun.rewards import RewardCombiner, RewardError, TrainerState, TrlContext, resolve_reward_fn
from rlrun.rewards.styles import as_batch_reward, detect_style
from rlrun.schema.reward import RewardFunction


@pytest.fixture
def other_stacks(tmp_path, monkeypatch):
    """A user module with reward functions written to verl's and TRL's exact signatures."""
    (tmp_path / "stack_rewards.py").write_text(
        textwrap.dedent("""
        import re

        def compute_score(data_source, solution_str, ground_truth, extra_info=None):
            # verl: one sample; ground_truth as stored in reward_model.ground_truth
            found = re.findall(r"-?\\d+", solution_str)
            pred = found[-1] if found else None
            acc = pred == str(ground_truth)
            bonus = 0.5 if (extra_info or {}).get("split") == "train" else 0.0
            gsm8k = data_source == "gsm8k"
            return {"score": float(acc) + bonus, "acc": acc, "pred": pred, "source_is_gsm8k": gsm8k}

        def verl_float(data_source, solution_str, ground_truth, extra_info=None, scale=1.0):
            return scale * len(solution_str)

        def verl_list_truth(data_source, solution_str, ground_truth, extra_info=None):
            return float(solution_str in ground_truth)  # a list of accepted answers stays a list

        def verl_mixed_keys(data_source, solution_str, ground_truth, extra_info=None):
            return {"score": 1.0, "acc": True} if solution_str == "a" else {"score": 0.0}

        def trl_accuracy(prompts, completions, answer, **kwargs):
            texts = [c[0]["content"] if isinstance(c, list) else c for c in completions]
            return [float(t.strip() == a) for t, a in zip(texts, answer)]

        def trl_only_completions(completions, **kwargs):
            return [float(len(kwargs["difficulty"][i]) + len(c)) for i, c in enumerate(completions)]

        def trl_named_columns(completions, difficulty):
            return [1.0 if d == "easy" else 0.0 for d in difficulty]

        def trl_seen(prompts, completions, **kwargs):
            trl_seen.calls.append({"prompts": prompts, "completions": completions, **kwargs})
            return [0.0] * len(completions)
        trl_seen.calls = []

        def answers_named_otherwise(prompts, completions, answers):
            return [float(c == a) for c, a in zip(completions, answers)]

        def rlrun_native(prompts, completions, ground_truths, offset=0.0):
            return [offset + float(c == g) for c, g in zip(completions, ground_truths)]
    """)
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    yield
    sys.modules.pop("stack_rewards", None)


@pytest.mark.parametrize(
    ("name", "style"),
    [
        ("compute_score", "verl"),
        ("verl_float", "verl"),
        ("trl_accuracy", "trl"),
        ("trl_only_completions", "trl"),
        ("trl_named_columns", "trl"),
        ("rlrun_native", "rlrun"),
    ],
)
def test_style_is_read_from_the_signature(other_stacks, name, style):
    assert detect_style(resolve_reward_fn(f"stack_rewards:{name}")) == style
    assert detect_style(resolve_reward_fn("rlrun:exact_match")) == "rlrun"


def test_verl_compute_score_gets_verl_columns_and_its_dict_becomes_components(other_stacks):
    reward = RewardCombiner([RewardFunction(fn="stack_rewards:compute_score")])
    out = reward(
        ["q1", "q2", "q3"],
        ["so 12", "it is 7", "no number"],
        ["12", "8", "3"],  # rlrun's text answers; verl's reward_model.ground_truth wins
        data_source=["gsm8k", "gsm8k", "math"],
        reward_model=[{"ground_truth": "12", "style": "rule"}, {"ground_truth": 7, "style": "rule"}, {}],
        extra_info=[{"split": "train"}, {"split": "test"}, {"split": "test"}],
        ability=["math", "math", "math"],
    )
    # sample 0: right (1) + train bonus (0.5); sample 1: "7" == str(7); sample 2: no number
    torch.testing.assert_close(out.scores, torch.tensor([1.5, 1.0, 0.0]))
    torch.testing.assert_close(out.acc, torch.tensor([1.0, 1.0, 0.0]))  # verl's "acc" key
    torch.testing.assert_close(out.components["compute_score/source_is_gsm8k"], torch.tensor([1.0, 1.0, 0.0]))
    assert "compute_score/pred" not in out.components  # text (and None): not a metric


def test_verl_function_without_verl_columns_and_with_reward_kwargs(other_stacks):
    reward = RewardCombiner([RewardFunction(fn="stack_rewards:verl_float", kwargs={"scale": 0.5})])
    torch.testing.assert_close(
        reward(["q", "q"], ["abcd", "ab"], ["x", "y"]).scores, torch.tensor([2.0, 1.0])
    )


def test_verl_ground_truth_keeps_its_type(other_stacks):
    reward = RewardCombiner([RewardFunction(fn="stack_rewards:verl_list_truth")])
    out = reward(["q", "q"], ["b", "z"], ["['a', 'b']"] * 2, reward_model=[{"ground_truth": ["a", "b"]}] * 2)
    torch.testing.assert_close(out.scores, torch.tensor([1.0, 0.0]))


def test_verl_results_with_different_keys_per_sample_are_an_error(other_stacks):
    reward = RewardCombiner([RewardFunction(fn="stack_rewards:verl_mixed_keys")])
    with pytest.raises(RewardError, match="every sample must return the same keys"):
        reward(["q", "q"], ["a", "b"], ["x", "x"])


def test_trl_function_gets_columns_as_keyword_lists(other_stacks):
    reward = RewardCombiner([RewardFunction(fn="stack_rewards:trl_accuracy")])
    out = reward(["1+1=", "2+2="], ["2", " 5"], ["2", "4"], difficulty=["easy", "hard"])
    torch.testing.assert_close(out.scores, torch.tensor([1.0, 0.0]))
    only = RewardCombiner([RewardFunction(fn="stack_rewards:trl_only_completions")])
    torch.testing.assert_close(only(["p"], ["abc"], ["t"], difficulty=["easy"]).scores, torch.tensor([7.0]))
    named = RewardCombiner([RewardFunction(fn="stack_rewards:trl_named_columns")])
    out = named(["p", "p"], ["a", "b"], ["t", "t"], difficulty=["easy", "hard"], other=[1, 2])
    torch.testing.assert_close(out.scores, torch.tensor([1.0, 0.0]))


def test_trl_function_sees_chat_completions_and_the_answer_under_its_column_name(other_stacks):
    """As TRL's GRPO trainer calls it: chat prompts as their messages, the completions' token
    ids, the trainer state and the two logging callbacks, besides the dataset's columns."""
    seen = resolve_reward_fn("stack_rewards:trl_seen")
    messages = [[{"role": "user", "content": "q"}]]
    combiner = RewardCombiner(
        [RewardFunction(fn="stack_rewards:trl_seen")], answer_key="reward_model.ground_truth", chat=True
    )
    combiner.trainer_state.global_step, combiner.trainer_state.max_steps = 3, 10
    combiner(
        ["<user>q"],
        ["42"],
        ["42"],
        context=TrlContext(completion_ids=[[52, 50, 2]], prompt_messages=messages),
        data_source=["gsm8k"],
    )
    call = seen.calls[-1]
    assert call.pop("log_extra")("column", [1]) is None and call.pop("log_metric")("m", 1.0) is None
    assert call == {
        "prompts": messages,
        "completions": [[{"role": "assistant", "content": "42"}]],
        "completion_ids": [[52, 50, 2]],
        "trainer_state": TrainerState(global_step=3, max_steps=10),
        "ground_truth": ["42"],
        "data_source": ["gsm8k"],
    }
    RewardCombiner([RewardFunction(fn="stack_rewards:trl_seen")])(
        ["q"], ["42"], ["42"], context=TrlContext(completion_ids=[[7]])
    )
    call = seen.calls[-1]
    assert call["prompts"] == ["q"] and call["completions"] == ["42"] and call["answer"] == ["42"]
    assert call["completion_ids"] == [[7]]


def test_a_stated_style_overrides_detection(other_stacks):
    # `completions` without `ground_truths` reads as TRL; stated as rlrun, the answers come third
    spec = RewardFunction(fn="stack_rewards:answers_named_otherwise")
    assert detect_style(resolve_reward_fn(spec.fn)) == "trl"
    with pytest.raises(RewardError, match="missing 1 required positional argument: 'answers'"):
        RewardCombiner([spec])(["p"], ["a"], ["a"])
    out = RewardCombiner([spec.model_copy(update={"style": "rlrun"})])(["p", "p"], ["a", "b"], ["a", "a"])
    torch.testing.assert_close(out.scores, torch.tensor([1.0, 0.0]))


def test_rlrun_function_with_kwargs(other_stacks):
    reward = RewardCombiner([RewardFunction(fn="stack_rewards:rlrun_native", kwargs={"offset": 1.0})])
    out = reward(["p", "p"], ["a", "b"], ["a", "a"], unrelated=[0, 0])  # a column it does not take
    torch.testing.assert_close(out.scores, torch.tensor([2.0, 1.0]))


def test_an_unknown_style_is_an_error(other_stacks):
    with pytest.raises(ValueError, match="reward style must be one of auto, rlrun, verl, trl"):
        as_batch_reward(resolve_reward_fn("stack_rewards:rlrun_native"), "openrlhf")


def test_reward_kwargs_are_checked_before_training(other_stacks):
    entries = (
        "[{fn: rlrun:gsm8k, kwargs: {methd: flexible}}, {fn: stack_rewards:verl_float, kwargs: {scale: 2}}]"
    )
    with pytest.raises(RecipeError) as info:
        load_recipe("grpo", [f"reward.functions={entries}"])
    (issue,) = info.value.issues  # gsm8k's `**_` takes dataset columns, not kwargs; scale exists
    assert issue.key == "reward.functions.0.kwargs.methd" and issue.code == "reward-kwargs"
    assert load_recipe("grpo", ["reward.functions=[{fn: rlrun:gsm8k, kwargs: {method: flexible}}]"])
