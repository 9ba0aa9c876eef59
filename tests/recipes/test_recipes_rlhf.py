"""The RLHF recipes: a learned reward model is the reward, the rule is logged beside it at
weight 0, and a short run raises the reward model's score."""

from __future__ import annotations

import json
import statistics

import pytest

from rlrun.recipes import load_recipe
from rlrun.training.run import RunOptions, train


@pytest.mark.parametrize("name", ["rlhf_grpo", "rlhf_ppo"])
def test_the_reward_model_is_the_reward_and_the_rule_a_weight_0_metric(name):
    loaded = load_recipe(name, strict=True)
    assert loaded.notices == []
    rule, learned = loaded.recipe.reward.functions
    assert (rule.fn, rule.weight) == ("rlrun:exact_match", 0.0)  # first: it decides `acc`
    assert (learned.model, learned.weight, learned.score) == ("rlrun:tiny-reward", 1.0, "probability")
    assert loaded.recipe.algorithm.advantage == {"rlhf_grpo": "grpo", "rlhf_ppo": "gae"}[name]


@pytest.mark.slow
def test_rlhf_grpo_raises_the_reward_models_score_while_true_accuracy_falls(tmp_path):
    overrides = [
        "trainer.total_steps=20",
        "trainer.eval.every_steps=0",
        "trainer.eval.prompts=100",
        "logging.console.enabled=false",
    ]
    train(load_recipe("rlhf_grpo", overrides), RunOptions(run_dir=tmp_path / "run"), say=lambda _: None)
    rows = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    steps = [r for r in rows if "reward/tiny-reward/mean" in r]
    assert len(steps) == 20
    assert all(
        r["reward/acc/mean"] == r["reward/exact_match/mean"] for r in steps
    )  # the rule is the accuracy
    assert all(
        r["critic/score/mean"] == pytest.approx(r["reward/tiny-reward/mean"]) for r in steps
    )  # weight 0
    early = statistics.fmean(r["reward/tiny-reward/mean"] for r in steps[:5])
    late = statistics.fmean(r["reward/tiny-reward/mean"] for r in steps[-5:])
    assert late - early >= 0.02, (early, late)  # measured: 0.72 -> 0.75 (docs/rewards-and-evaluation.md)
    accuracy = [statistics.fmean(r["reward/acc/mean"] for r in part) for part in (steps[:5], steps[-5:])]
    assert accuracy[1] < accuracy[0] - 0.1, accuracy  # measured: 0.33 -> 0.03: the policy games the reward
    evaluations = [r for r in rows if "val/accuracy" in r]
    assert {"val/reward/tiny-reward/mean", "val/reward/exact_match/mean"} <= set(evaluations[-1])
