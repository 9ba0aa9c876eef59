"""TRL's reward conventions: `None` is "not applicable", factories build the function, and
TRL's own `get_soft_overlong_punishment` / `get_repetition_penalty_reward` score from token ids.

`trl_other_rewards` below reproduces trl/rewards/other_rewards.py of TRL 1.16.0 (its two
factories' signatures and formulas), so the tests run without TRL; the last test runs TRL's own
functions where TRL is installed."""

import textwrap

import pytest
import torch

from rlrun.errors import RecipeError
from rlrun.recipes import load_recipe
from rlrun.rewards import RewardCombiner, RewardError, TrlContext
from rlrun.rewards.styles import is_factory, missing_factory_arguments
from rlrun.schema.reward import RewardFunction

NAN = float("nan")


@pytest.fixture
def trl_modules(tmp_path, monkeypatch):
    (tmp_path / "trl_other_rewards.py").write_text(
        textwrap.dedent("""
        # TRL 1.16.0, trl/rewards/other_rewards.py: the same signatures and formulas
        class _SoftOverlongPunishment:
            def __init__(self, max_completion_len, soft_punish_cache):
                self.max_completion_len, self.soft_punish_cache = max_completion_len, soft_punish_cache

            def __call__(self, completion_ids: list[list[int]], **kwargs) -> list[float]:
                start = self.max_completion_len - self.soft_punish_cache
                return [
                    0.0 if len(ids) <= start
                    else (start - len(ids)) / self.soft_punish_cache if len(ids) <= self.max_completion_len
                    else -1.0
                    for ids in completion_ids
                ]

        def get_soft_overlong_punishment(max_completion_len: int, soft_punish_cache: int):
            return _SoftOverlongPunishment(max_completion_len, soft_punish_cache)

        class _RepetitionPenalty:
            def __init__(self, ngram_size, max_penalty):
                self.ngram_size, self.max_penalty = ngram_size, max_penalty

            def __call__(self, completion_ids: list[list[int]], **kwargs) -> list[float]:
                rewards = []
                for ids in completion_ids:
                    if len(ids) < self.ngram_size:
                        rewards.append(0.0)
                        continue
                    ngrams = list(zip(*[ids[i:] for i in range(self.ngram_size)]))
                    scaling = 1 - len(set(ngrams)) / len(ngrams)
                    rewards.append(scaling * self.max_penalty if scaling else 0.0)
                return rewards

        def get_repetition_penalty_reward(ngram_size: int = 3, max_penalty: float = -1.0):
            return _RepetitionPenalty(ngram_size, max_penalty)
        """)
    )
    (tmp_path / "maybe_rewards.py").write_text(
        textwrap.dedent("""
        def first(completions, **kwargs):
            return [1.0, None, 0.0, None]

        def second(completions, **kwargs):
            return [None, 2.0, None, 3.0]
        """)
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_none_is_not_applicable_as_in_trl(trl_modules):
    """TRL: rewards = nansum(weights x per-function rewards), each function's logged mean a nanmean.
    Weighted 1 and 0.5: [1, -, 0, -] and [-, 2, -, 3] -> [1, 1, 0, 1.5]; means 0.5 and 2.5."""
    combiner = RewardCombiner(
        [RewardFunction(fn="maybe_rewards:first"), RewardFunction(fn="maybe_rewards:second", weight=0.5)]
    )
    out = combiner(["p"] * 4, ["a", "b", "c", "d"], ["x"] * 4)
    torch.testing.assert_close(out.scores, torch.tensor([1.0, 1.0, 0.0, 1.5]))
    torch.testing.assert_close(out.components["first"], torch.tensor([1.0, NAN, 0.0, NAN]), equal_nan=True)
    assert out.components["first"].nanmean().item() == 0.5
    assert out.components["second"].nanmean().item() == 2.5
    torch.testing.assert_close(out.acc, torch.tensor([1.0, 0.0, 0.0, 0.0]))  # not applicable is not correct


def test_a_sample_no_function_applies_to_is_an_error(trl_modules):
    combiner = RewardCombiner([RewardFunction(fn="maybe_rewards:first")])
    with pytest.raises(
        RewardError, match="every reward function returned None .* for 2 samples, first sample 1"
    ):
        combiner(["p"] * 4, ["a", "b", "c", "d"], ["x"] * 4)


def test_soft_overlong_punishment_scores_from_token_ids(trl_modules):
    """L_max 10, cache 4: lengths 5, 6 -> 0; 8 -> (6 - 8) / 4 = -0.5; 10 -> -1.0; 12 -> -1."""
    entry = RewardFunction(
        fn="trl_other_rewards:get_soft_overlong_punishment",
        kwargs={"max_completion_len": 10, "soft_punish_cache": 4},
    )
    ids = [[1] * n for n in (5, 6, 8, 10, 12)]
    out = RewardCombiner([entry])(["p"] * 5, ["c"] * 5, ["a"] * 5, context=TrlContext(completion_ids=ids))
    torch.testing.assert_close(out.scores, torch.tensor([0.0, 0.0, -0.5, -1.0, -1.0]))


def test_repetition_penalty_scores_from_token_ids(trl_modules):
    """Trigrams of [1,2,3,1,2,3]: 4, of which 3 distinct -> (1 - 3/4) x -1 = -0.25; [1,2,3,4]: none repeat."""
    entry = RewardFunction(fn="trl_other_rewards:get_repetition_penalty_reward")
    ids = [[1, 2, 3, 1, 2, 3], [1, 2, 3, 4], [1]]
    out = RewardCombiner([entry])(["p"] * 3, ["c"] * 3, ["a"] * 3, context=TrlContext(completion_ids=ids))
    torch.testing.assert_close(out.scores, torch.tensor([-0.25, 0.0, 0.0]))


def test_a_factory_missing_an_argument_is_refused_at_validation(trl_modules):
    from trl_other_rewards import get_repetition_penalty_reward, get_soft_overlong_punishment

    assert is_factory(get_soft_overlong_punishment) and is_factory(get_repetition_penalty_reward)
    assert missing_factory_arguments(get_soft_overlong_punishment, {"max_completion_len": 8}) == [
        "soft_punish_cache"
    ]
    entry = "[{fn: trl_other_rewards:get_soft_overlong_punishment, kwargs: {max_completion_len: 8}}]"
    with pytest.raises(RecipeError) as info:
        load_recipe("grpo", [f"reward.functions={entry}"])
    (issue,) = info.value.issues
    assert issue.code == "reward-kwargs" and "soft_punish_cache" in issue.message


def test_trls_own_reward_functions():
    """TRL's real functions, where TRL is installed (`pip install trl==1.16.0`)."""
    pytest.importorskip("trl.rewards")
    entries = [
        RewardFunction(
            fn="trl.rewards:get_soft_overlong_punishment",
            kwargs={"max_completion_len": 10, "soft_punish_cache": 4},
        ),
        RewardFunction(fn="trl.rewards:get_repetition_penalty_reward", weight=2.0),
    ]
    ids = [[1, 2, 3, 1, 2, 3, 1, 2], [1, 2, 3]]  # 8 tokens: -0.5; trigrams 6, 3 distinct: -0.5 x 2
    out = RewardCombiner(entries)(["p"] * 2, ["c"] * 2, ["a"] * 2, context=TrlContext(completion_ids=ids))
    torch.testing.assert_close(out.scores, torch.tensor([-0.5 - 1.0, 0.0]))
