"""The actor update's on-policy shortcut (rlrun/training/stages/updates.py): with one optimizer
step a rollout and nothing before the update reading the old log-probs, the update's own detached
log-probs stand in for the recomputed ones, a forward pass saved."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from rlrun.recipes import load_recipe
from rlrun.training.loop import training_step
from rlrun.training.session import Session
from rlrun.training.stages import Pipeline

ON_POLICY = [
    "actor.kl_loss.enabled=false",
    "trainer.prompts_per_step=4",
    "actor.mini_batch_samples=32",
    "actor.micro_batch_samples=16",  # two micro-batches: the accumulated gradient too
    "rollout.max_response_tokens=6",
]


def _one_step(old_log_probs: str | None):
    session = Session(load_recipe("grpo", ON_POLICY).recipe)
    if old_log_probs is not None:
        session.pipeline = Pipeline.build(session.recipe, replace(session.needs, old_log_probs=old_log_probs))
    grads = {}
    for name, p in session.models.policy.named_parameters():  # the gradient before the optimizer step
        p.register_hook(lambda g, name=name: grads.__setitem__(name, grads.get(name, 0) + g.detach().clone()))
    metrics, _ = training_step(session, 1)
    weights = {k: v.detach().clone() for k, v in session.models.unwrapped_policy.named_parameters()}
    return session.pipeline.names(), metrics, grads, weights


@pytest.mark.slow
def test_the_update_s_own_log_probs_give_the_recomputed_paths_loss_and_gradient():
    names, shortcut, grads, weights = _one_step(None)
    assert "old_log_probs" not in names and "sampler_log_probs" not in names
    recomputed_names, recomputed, recomputed_grads, recomputed_weights = _one_step("recompute")
    assert "old_log_probs" in recomputed_names and "timing_s/old_log_prob" not in shortcut
    # Equal to the bit: the recomputed pass scores the rows in the update's micro-batch shapes
    # (the update_parts stage), so its log-probs are the update's own.
    assert {k: v for k, v in shortcut.items() if not k.startswith(("timing_s/", "perf/"))} == {
        k: v for k, v in recomputed.items() if not k.startswith(("timing_s/", "perf/"))
    }
    assert shortcut["actor/ppo_kl"] == 0.0 and shortcut["actor/pg_clipfrac"] == 0.0  # a ratio of exactly 1
    assert grads.keys() == recomputed_grads.keys() and weights.keys() == recomputed_weights.keys()
    assert all(torch.equal(grads[name], recomputed_grads[name]) for name in grads)
    assert all(torch.equal(weights[name], recomputed_weights[name]) for name in weights)
