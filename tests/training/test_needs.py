"""What a recipe needs computed comes from what its components declared, never their names."""

from __future__ import annotations

import pytest

from rlrun.algorithms.registries import DISTILLATION_LOSSES
from rlrun.recipes import load_recipe
from rlrun.rollout import ROLLOUT_ENGINES
from rlrun.training.needs import needs_of


def test_the_hf_engine_declares_trainer_log_probs_and_vllm_does_not():
    assert (
        ROLLOUT_ENGINES.needs("hf").trainer_log_probs and not ROLLOUT_ENGINES.needs("vllm").trainer_log_probs
    )


ONE_UPDATE = ["actor.mini_batch_samples=128"]  # the base recipe's 16 prompts x 8 samples: one optimizer step
TWO_UPDATES = ["actor.mini_batch_samples=64", "actor.micro_batch_samples=64"]


@pytest.mark.parametrize(
    ("overrides", "source"),
    [
        (ONE_UPDATE, "update"),  # on-policy: the update's own log-probs, detached
        ([*ONE_UPDATE, "rollout.engine=vllm"], "update"),  # no recomputed forward on vLLM either
        ([*ONE_UPDATE, "model.dtype=bfloat16"], "update"),
        ([*ONE_UPDATE, "actor.kl_loss.enabled=true"], "update"),  # the KL loss reads the reference, not them
        ([*ONE_UPDATE, "algorithm.kl_in_reward.enabled=true"], "sampler"),  # read before the update
        ([*ONE_UPDATE, "algorithm.kl_in_reward.enabled=true", "rollout.engine=vllm"], "recompute"),
        ([*ONE_UPDATE, "algorithm.kl_in_reward.enabled=true", "trainer.autocast=bfloat16"], "recompute"),
        (
            [*ONE_UPDATE, "rollout.importance_sampling.level=token"],
            "recompute",
        ),  # compares them with the sampler's
        (TWO_UPDATES, "recompute"),  # the policy moves between the updates
        ([*ONE_UPDATE, "actor.ppo_epochs=2"], "recompute"),
    ],
)
def test_where_the_old_policys_log_probs_come_from(overrides, source):
    recipe = load_recipe("grpo", ["actor.kl_loss.enabled=false", *overrides], environment=False).recipe
    assert needs_of(recipe).old_log_probs == source


def test_an_estimator_that_reads_old_log_probs_gets_them_before_the_update():
    from rlrun.algorithms.registries import ADVANTAGES

    readers = ADVANTAGES.names_where(lambda n: n.needs_old_log_probs)
    assert readers  # a built-in one declares it
    recipe = load_recipe("grpo", [*ONE_UPDATE, f"algorithm.advantage={readers[0]}"], environment=False).recipe
    assert needs_of(recipe).old_log_probs == "sampler"


def test_a_distillation_loss_that_declares_top_k_gets_the_teachers_top_k():
    assert DISTILLATION_LOSSES.needs("forward_kl_topk").needs_teacher_topk
    assert needs_of(load_recipe("opd", ["distillation.loss=forward_kl_topk"]).recipe).teacher_topk
    assert not needs_of(load_recipe("opd", ["distillation.loss=k3"]).recipe).teacher_topk
