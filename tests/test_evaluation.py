"""Evaluation on the real shipped models."""

import pytest
from transformers import AutoModelForCausalLM, AutoTokenizer

from rlrun.data import load_prompt_datasets
from rlrun.embedded import resolve_model_path
from rlrun.evaluation import evaluate
from rlrun.rewards import RewardCombiner
from rlrun.rollout import ROLLOUT_ENGINES
from rlrun.rollout.engine import SamplingParams
from rlrun.schema.data import Data
from rlrun.schema.reward import RewardFunction


@pytest.fixture(scope="module")
def setup():
    path = resolve_model_path("rlrun:tiny-base")
    model, tok = AutoModelForCausalLM.from_pretrained(path), AutoTokenizer.from_pretrained(path)
    _, val = load_prompt_datasets(Data.model_validate({"source": "rlrun:arithmetic"}), tok)
    return ROLLOUT_ENGINES.get("hf")(model, tok), tok, val


def test_k_sample_metrics_are_ordered(setup):
    engine, tok, val = setup
    result = evaluate(engine, tok, val, sampling=SamplingParams(n=8, seed=0), limit=100)
    assert result.num_prompts == 100 and result.k == 8
    assert 0 < result.mean_at_k < result.pass_at_k <= 1  # the base is right sometimes, and not always
    assert result.mean_at_k <= result.maj_at_k <= result.pass_at_k
    assert set(result.metrics()) == {
        "val/accuracy",
        "val/mean@8",
        "val/pass@8",
        "val/maj@8",
        "val/response_length/mean",
        "val/response_length/max",
        "val/reward/score/mean",
        "val/reward/exact_match/mean",
    }
    assert result.metrics()["val/accuracy"] == result.mean_at_k
    # one reward of weight 1 whose score is its acc: score, component and mean@k coincide
    assert result.reward_means == {"score": result.mean_at_k, "exact_match": result.mean_at_k}
    assert 1 <= result.response_length_mean <= result.response_length_max <= 8


def test_greedy_k1_all_metrics_agree_and_are_deterministic(setup):
    engine, tok, val = setup
    first = evaluate(engine, tok, val, limit=200)
    assert first.mean_at_k == first.pass_at_k == first.maj_at_k
    assert evaluate(engine, tok, val, limit=200) == first
    with pytest.raises(ValueError, match="greedy"):
        evaluate(engine, tok, val, sampling=SamplingParams(n=4, greedy=True))


def test_sampled_evaluation_is_reproducible_under_a_seed(setup):
    engine, tok, val = setup
    sampling = SamplingParams(seed=3)
    assert evaluate(engine, tok, val, sampling=sampling, limit=200) == evaluate(
        engine, tok, val, sampling=sampling, limit=200
    )


def test_a_custom_reward_decides_correctness(setup):
    engine, tok, val = setup
    always_wrong = RewardCombiner(
        [RewardFunction(fn="rlrun:exact_match", weight=-1.0), RewardFunction(fn="rlrun:math_answer")]
    )
    # acc follows the first function: exact_match > 0, whatever the weights
    custom, plain = (
        evaluate(engine, tok, val, limit=50, reward=always_wrong),
        evaluate(engine, tok, val, limit=50),
    )
    assert custom.mean_at_k == plain.mean_at_k
    # the weighted sum: -1 x exact match + 1 x math answer (equal on these bare answers) = 0
    assert custom.reward_means == {
        "score": 0.0,
        "exact_match": plain.mean_at_k,
        "math_answer": plain.mean_at_k,
    }


def test_a_sampled_evaluation_takes_its_own_sampling_settings(monkeypatch):
    """trainer.eval.temperature/top_p/top_k (verl's val_kwargs); unset, the rollout's."""
    from rlrun import evaluation
    from rlrun.schema import Recipe

    seen = {}
    monkeypatch.setattr(evaluation, "evaluate", lambda *a, **kw: seen.update(kw))
    own = {"greedy": False, "temperature": 0.6, "top_p": 0.7, "top_k": 20, "prompts": None}
    recipe = Recipe.model_validate({"rollout": {"temperature": 1.0, "top_p": 1.0}, "trainer": {"eval": own}})
    evaluation.evaluate_recipe(None, None, None, recipe, None)
    sampling = seen["sampling"]
    assert (sampling.temperature, sampling.top_p, sampling.top_k, seen["limit"]) == (0.6, 0.7, 20, None)
    evaluation.evaluate_recipe(
        None, None, None, Recipe.model_validate({"rollout": {"temperature": 0.9}}), None
    )
    sampling = seen["sampling"]
    assert (sampling.temperature, sampling.top_p, sampling.top_k, seen["limit"]) == (0.9, 1.0, 0, 500)


def test_an_agents_evaluation_is_pass_at_k_over_episodes():
    """Scripted episodes of the Guess environment (secret 7, then 3), two per prompt, at most two
    turns, scored on their final answers: prompt 0 is solved by one of its episodes, prompt 1 by
    none, so mean@2 = 1/4 and pass@2 = 1/2; lengths count the observations between turns."""
    from rlrun.agents.spec import build_agent
    from rlrun.schema.agent import Agent
    from tests.rollout.test_episodes import ENVS, TOKENIZER
    from tests.rollout.test_responses import ScriptedEngine, guessing

    _, _, data = guessing({r: ["0", "0"] for r in range(4)})
    agent = build_agent(Agent(enabled=True, environment=f"{ENVS}:Guess", max_turns=2), tokenizer=TOKENIZER)
    engine = ScriptedEngine({0: ["7"], 1: ["3", "5"], 2: ["1", "2"], 3: ["9", "8"]})
    result = evaluate(
        engine, TOKENIZER, data, sampling=SamplingParams(n=2, seed=0, max_tokens=40), agent=agent
    )
    assert (result.k, result.num_prompts) == (2, 2)
    assert (result.mean_at_k, result.pass_at_k) == (1 / 4, 1 / 2)
    # "7" EOS = 2 tokens; "3" EOS "Higher." "5" EOS = 11; "1" EOS "Higher." "2" EOS = 11; "9" EOS "Lower." "8" EOS = 10
    assert result.response_length_max == 11 and result.response_length_mean == (2 + 11 + 11 + 10) / 4
