"""Responses: an agent's episodes in the shape training and evaluation score and train on (the
sampled tokens trained, the results and observations between them context), the reward
functions' arguments, per-turn rewards on the turns' last tokens, and the episode metrics, with a
scripted stand-in for the model."""

from __future__ import annotations

import math

import pytest
import torch

from rlrun.agents.spec import build_agent
from rlrun.data.dataset import PromptDataset
from rlrun.rollout.engine import SamplingParams
from rlrun.rollout.episodes import FINISH_ENV_DONE, FINISH_MAX_TURNS
from rlrun.rollout.responses import episode_metrics, sample_responses
from rlrun.schema.agent import Agent
from tests.rollout.test_episodes import ENVS, EOS, TOKENIZER, ScriptedModel, encode


class ScriptedEngine:
    """An engine whose conversations are a ScriptedModel over each prompt's `n` rows."""

    def __init__(self, script):
        self.model = ScriptedModel(script)
        self.opened: list[tuple[list[list[int]], int]] = []

    def conversation(self, prompt_ids, n, *, max_tokens):
        self.opened.append(([list(p) for p in prompt_ids], n))
        return self.model.open([p for p in prompt_ids for _ in range(n)], max_tokens)


def guessing(script, environment="Guess", **columns):
    """Two prompts, two episodes each, of `environment` (at most two turns)."""
    data = PromptDataset(
        prompts=["Play.", "Go."],
        prompt_ids=[encode("Play."), encode("Go.")],
        ground_truths=["7", "3"],
        extra={"secret": ["7", "3"], **columns},
    )
    agent = build_agent(
        Agent(enabled=True, environment=f"{ENVS}:{environment}", max_turns=2), tokenizer=TOKENIZER
    )
    engine = ScriptedEngine(script)
    responses = sample_responses(
        engine, TOKENIZER, data, SamplingParams(n=2, max_tokens=40, seed=5), agent=agent
    )
    return responses, engine, data


# Row 0 guesses 7 (right); row 1 guesses 3 (told "Higher.") then 7; rows 2-3 play for secret 3:
# row 2 guesses 3, row 3 guesses 5 and 1 and runs out of turns.
SCRIPT = {0: ["7"], 1: ["3", "7"], 2: ["3"], 3: ["5", "1"]}


def test_the_policys_turns_train_and_the_observations_between_them_are_context():
    responses, _, _ = guessing(SCRIPT)
    row1 = [encode("3")[0], EOS, *encode("Higher."), encode("7")[0], EOS]
    assert responses.response_ids[1, : len(row1)].tolist() == row1
    assert responses.response_mask[1].tolist()[: len(row1)] == [1, 1, 0, 0, 0, 0, 0, 0, 0, 1, 1]
    assert responses.response_attention[1].tolist()[: len(row1)] == [1] * 11
    assert responses.response_mask[0].tolist()[:3] == [1, 1, 0] and responses.response_attention[0, 2] == 0
    # the sampler's log-probs sit on the sampled tokens only (ScriptedModel: -(k+1)/100 at its k-th)
    expected = [-0.01, -0.02] + [0.0] * 7 + [-0.03, -0.04]
    assert responses.log_probs[1, :11].tolist() == pytest.approx(expected)
    assert responses.completions == ["7", "7", "3", "1"]  # each episode's final answer
    assert responses.completion_ids[1] == row1
    assert responses.truncated.tolist() == [False] * 4  # out of turns is an ending, not a cut
    e = responses.episodes
    assert e.finish_reasons == [FINISH_ENV_DONE, FINISH_ENV_DONE, FINISH_ENV_DONE, FINISH_MAX_TURNS]
    assert e.turn_ends[1] == [1, 10] and e.turn_rewards[1] == [0.0, 1.0]


def test_per_turn_rewards_land_on_each_turns_last_token():
    responses, _, _ = guessing(SCRIPT)
    rewards = responses.episodes.token_rewards(12)
    expected = torch.zeros(4, 12)
    expected[0, 1] = expected[1, 10] = expected[2, 1] = 1.0  # the turn that guessed right
    assert torch.equal(rewards, expected)


def test_a_groups_rows_that_share_their_prompt_share_its_prefill():
    responses, engine, _ = guessing(SCRIPT)
    reset = encode("Play.\nGuess a digit."), encode("Go.\nGuess a digit.")
    assert engine.opened == [([*reset], 2)]
    assert responses.prompt_rows == 2 and responses.prompt_ids == [*reset]


def test_rows_whose_environments_wrote_their_own_prompts_keep_them():
    script = {r: ["0"] for r in range(4)}
    responses, engine, _ = guessing(script, environment="SeededText")
    ((opened, n),) = engine.opened
    assert n == 1 and len(opened) == 4 and len({tuple(p) for p in opened}) > 1
    assert responses.prompt_rows == 1 and responses.prompt_ids == opened


def test_reward_functions_get_the_final_answer_the_transcript_and_the_environment():
    responses, _, data = guessing(SCRIPT)
    args = responses.reward_arguments(data)
    assert args["prompts"] == ["Play.", "Play.", "Go.", "Go."]
    assert args["ground_truths"] == ["7", "7", "3", "3"] and args["secret"] == ["7", "7", "3", "3"]
    assert args["completions"] == ["7", "7", "3", "1"]
    assert [(m["role"], m["content"]) for m in args["transcript"][1]] == [
        ("user", "Play."),
        ("environment", "Guess a digit."),
        ("assistant", "3"),
        ("environment", "Higher."),
        ("assistant", "7"),
        ("environment", "Right."),
    ]
    assert all(math.isnan(r) for r in args["environment_reward"])  # Guess has no get_reward()
    assert [env.secret for env in args["environments"]] == [7, 7, 3, 3]


def test_episode_metrics_hand_computed_with_the_same_keys_at_every_step():
    responses, _, _ = guessing(SCRIPT)
    metrics = episode_metrics(responses.episodes)
    assert metrics["episode/turns/mean"] == (1 + 2 + 1 + 2) / 4 and metrics["episode/turns/max"] == 2
    assert metrics["episode/finish/env_done"] == 3 / 4 and metrics["episode/finish/max_turns"] == 1 / 4
    assert metrics["episode/tool_calls/mean"] == 0 and metrics["episode/tool_errors/mean"] == 0
    other = episode_metrics(guessing({r: ["0", "0"] for r in range(4)})[0].episodes)
    assert other.keys() == metrics.keys() and other["episode/finish/env_done"] == 0
