"""Which optional passes a recipe's algorithm needs, from the recipe and what its registered
components declared (never from their names): the session loads only the models these need,
and each stage runs only when they say so."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from rlrun.algorithms.registries import ADVANTAGES, DISTILLATION_LOSSES
from rlrun.recipes.batch_plan import batch_plan
from rlrun.rollout import ROLLOUT_ENGINES
from rlrun.schema import Recipe


@dataclass(frozen=True)
class Needs:
    """What this recipe's algorithm needs computed (nothing else is)."""

    reference: bool  # reference log-probs: a KL penalty in the reward or the loss
    critic: bool  # values, and a critic update
    teacher: bool  # the teacher's scores of the sampled tokens (distillation)
    teacher_topk: bool  # ...as its top-k log-probs and ids, and the student's logits in the update
    greedy_baseline: bool  # one greedy response per prompt, scored (ReMax)
    # Where the old policy's log-probs come from: "update" — the update's own, detached (its one
    # optimizer step sees the policy that sampled, and nothing before it reads them: TRL's
    # one-iteration GRPO); "sampler" — the engine's, computed by the training model as the trainer
    # does; "recompute" — a trainer forward before the update.
    old_log_probs: Literal["update", "sampler", "recompute"]
    sum_pi_squared: bool  # Σ_v π(v)² at each response position (the optimal token baseline)


def needs_of(recipe: Recipe) -> Needs:
    advantage = ADVANTAGES.needs(recipe.algorithm.advantage)
    distillation = DISTILLATION_LOSSES.needs(recipe.distillation.loss)
    engine = ROLLOUT_ENGINES.needs(recipe.rollout.engine)
    return Needs(
        reference=recipe.algorithm.kl_in_reward.enabled or recipe.actor.kl_loss.enabled,
        critic=recipe.critic.enabled,
        teacher=recipe.distillation.enabled,
        teacher_topk=recipe.distillation.enabled and distillation.needs_teacher_topk,
        greedy_baseline=advantage.needs_greedy_baseline,
        old_log_probs=_old_log_probs(recipe, advantage.needs_old_log_probs, engine.trainer_log_probs),
        sum_pi_squared=advantage.needs_sum_pi_squared,
    )


def _old_log_probs(recipe: Recipe, estimator_reads_them: bool, trainer_log_probs: bool) -> str:
    """Where the old policy's log-probs come from (`Needs.old_log_probs`)."""
    one_update = batch_plan(recipe).optimizer_steps == 1  # the policy has not moved before it
    correction = recipe.rollout.importance_sampling.level != "off"  # compares them with the sampler's
    read_before_update = recipe.algorithm.kl_in_reward.enabled or estimator_reads_them or correction
    if one_update and not read_before_update:
        return "update"
    # The sampler's equal the trainer's when the engine runs the training model as the trainer
    # does, in float32 without autocast, and the policy has not moved since sampling.
    as_trainer = trainer_log_probs and recipe.model.dtype == "float32" and recipe.trainer.autocast is None
    return "sampler" if one_update and as_trainer and not correction else "recompute"
