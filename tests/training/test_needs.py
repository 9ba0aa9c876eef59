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
    assert not needs_of(load_recipe("grpo", []).recipe).recompute_old_log_probs
    vllm = load_recipe("grpo", ["rollout.engine=vllm"], environment=False).recipe
    assert needs_of(vllm).recompute_old_log_probs


@pytest.mark.parametrize(
    ("overrides", "recompute"),
    [
        ([], False),
        (
            ["actor.mini_batch_samples=64", "actor.micro_batch_samples=64"],
            True,
        ),  # two optimizer steps: the policy moves between them
        (["actor.ppo_epochs=2"], True),
        (["model.dtype=bfloat16"], True),
        (["trainer.autocast=bfloat16"], True),
        (["rollout.importance_sampling.level=token"], True),
    ],
)
def test_the_sampler_log_probs_serve_as_the_old_policys_only_while_they_equal_the_trainers(
    overrides, recompute
):
    assert needs_of(load_recipe("grpo", overrides).recipe).recompute_old_log_probs is recompute


def test_a_distillation_loss_that_declares_top_k_gets_the_teachers_top_k():
    assert DISTILLATION_LOSSES.needs("forward_kl_topk").needs_teacher_topk
    assert needs_of(load_recipe("opd", ["distillation.loss=forward_kl_topk"]).recipe).teacher_topk
    assert not needs_of(load_recipe("opd", ["distillation.loss=k3"]).recipe).teacher_topk
