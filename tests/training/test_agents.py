"""An agent's episodes through the training step on the embedded tiny model (a reset/step
environment in the plain format: the tiny tokenizer has letters but no `<call>`), and TRL-style
tool and environment_factory recipes on SmolLM2: the trained tokens are the sampled ones, the
sampler's log-probs are the trainer's on them, every built-in algorithm trains on episodes or is
refused at validation, and a stopped run resumes to the same steps."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch

from rlrun.errors import RecipeError
from rlrun.recipes import builtin_names, load_recipe
from rlrun.training.profiling import Timer
from rlrun.training.run import RunOptions, train
from rlrun.training.sequences import response_log_probs
from rlrun.training.session import Session
from tests.training.test_end_to_end import records, without_clock

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
# Recheck (tests/agents/envs_fixture.py): answer; a wrong answer is told "No." and may try again;
# reward 1 on the turn that is right.
RETRY = [
    'agent={enabled: true, format: plain, environment: "tests.agents.envs_fixture:Recheck", max_turns: 3, max_turn_tokens: 8}',
    "rollout.max_response_tokens=64",
    "trainer.prompts_per_step=4",
    "trainer.eval.every_steps=0",
    "trainer.eval.prompts=8",
    "logging.console.enabled=false",
    "logging.samples_every_steps=1",
]
# the algorithm recipes (the agent recipes' own episodes train in tests/training/test_learning.py)
ALGORITHMS = [
    name for name in builtin_names() if name != "base" and "/" not in name and not name.startswith("agent_")
]


def small(recipe: str, *extra: str) -> list[str]:
    n = load_recipe(recipe).recipe.rollout.n
    return [*RETRY, f"actor.mini_batch_samples={2 * n}", f"actor.micro_batch_samples={n}", *extra]


@pytest.fixture(autouse=True)
def _from_the_repository(monkeypatch):
    monkeypatch.chdir(REPO)  # the recipes name examples.agents.envs by import path


def test_the_trained_tokens_are_the_sampled_ones_and_their_log_probs_the_trainers():
    s = Session(load_recipe("grpo", small("grpo", "rollout.n=4")).recipe)
    exp, _ = s.generation.collector.collect(4, seed=0, timer=Timer())
    seq, episodes = exp.seq, exp.episodes
    told = [i for i, ends in enumerate(episodes.turn_ends) if len(ends) > 1]
    assert told, "no episode got a second turn: nothing between turns to mask"
    for row in told:
        mask, attention = seq.response_mask[row], seq.response_attention[row]
        first_end = episodes.turn_ends[row][0]
        assert mask[first_end] == 1 and mask[first_end + 1] == 0 == 1 - attention[first_end + 1]
        holes = (attention == 1) & (mask == 0)
        assert holes.sum() == len(s.generation.tokenizer.encode("No.", add_special_tokens=False)) * (
            len(episodes.turn_ends[row]) - 1
        )
    assert torch.equal(
        exp.rollout_log_probs * (1 - seq.response_mask), torch.zeros_like(exp.rollout_log_probs)
    )
    with torch.no_grad():
        trainer = response_log_probs(s.models.unwrapped_policy.eval(), seq, s.recipe.rollout.temperature)[0]
    sampled = seq.response_mask.bool()
    torch.testing.assert_close(trainer[sampled], exp.rollout_log_probs[sampled], rtol=0, atol=1e-5)


@pytest.mark.parametrize("recipe", ALGORITHMS)
def test_every_built_in_algorithm_trains_on_episodes_or_is_refused_with_its_reason(recipe, tmp_path):
    overrides = small(recipe, "trainer.total_steps=1")
    try:
        loaded = load_recipe(recipe, overrides)
    except RecipeError as refused:
        (issue,) = refused.issues
        assert issue.code == "agent-estimator" and "episode" in issue.message, issue.message
        return
    run = train(loaded, RunOptions(run_dir=tmp_path / "r"), overrides=overrides)
    (row,) = [r for r in records(tmp_path / "r") if r["step"] == 1]
    assert run.status == "finished"
    assert all(math.isfinite(v) for k, v in row.items() if isinstance(v, float) and not k.startswith("val/"))
    assert row["episode/turns/mean"] >= 1 and "episode/finish/env_done" in row


def test_a_stopped_agent_run_resumes_to_the_steps_of_an_uninterrupted_one(tmp_path):
    """Stopped after step 2 (a run of 2 steps, at a constant lr so that its horizon changes
    nothing) and resumed to 4: the steps of a run of 4, evaluations aside (a run evaluates at
    its end)."""
    overrides = small(
        "grpo",
        "trainer.checkpoint.every_steps=2",
        "actor.lr_scheduler.name=constant",
        "actor.lr_scheduler.warmup_steps=0",
    )
    four, two = [*overrides, "trainer.total_steps=4"], [*overrides, "trainer.total_steps=2"]
    train(load_recipe("grpo", four), RunOptions(run_dir=tmp_path / "straight"), overrides=four)
    train(load_recipe("grpo", two), RunOptions(run_dir=tmp_path / "resumed"), overrides=two)
    train(load_recipe("grpo", four), RunOptions(run_dir=tmp_path / "resumed", resume=True), overrides=four)

    def steps(run: str) -> list[dict]:
        return [
            {k: v for k, v in r.items() if not k.startswith("val/")}
            for r in without_clock(records(tmp_path / run))
        ]

    assert [r["step"] for r in steps("resumed")] == [0, 1, 2, 3, 4]
    assert steps("resumed") == steps("straight")
    samples = (tmp_path / "resumed" / "samples.jsonl").read_text().splitlines()
    assert "transcript" in json.loads(samples[-1]) and json.loads(samples[-1])["finish"]


SMOLLM2 = [
    "agent.tools=[rlrun:calculator]",
    "trainer.total_steps=1",
    "trainer.prompts_per_step=2",
    "rollout.n=2",
    "actor.mini_batch_samples=4",
    "actor.micro_batch_samples=2",
    "trainer.eval.prompts=1",
    "logging.console.enabled=false",
    "rollout.max_response_tokens=96",
]


def test_a_trl_tool_function_and_environment_factory_train_unchanged_on_smollm2(tmp_path):
    """examples/agents/abacus.yaml (a TRL environment_factory class) given a typed function with a
    Google docstring too (rlrun:calculator), as TRL takes them, in the chat-template format with
    tools: one run for both (SmolLM2 on CPU costs minutes)."""
    run = train(
        load_recipe("examples/agents/abacus.yaml", SMOLLM2),
        RunOptions(run_dir=tmp_path / "r"),
        overrides=SMOLLM2,
    )
    assert run.status == "finished"
    (row,) = [r for r in records(tmp_path / "r") if r["step"] == 1]
    assert row["episode/turns/mean"] >= 1 and math.isfinite(row["actor/grad_norm"])
