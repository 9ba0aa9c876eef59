"""Which optional passes a recipe's algorithm needs, from the recipe and what its registered
components declared (never from their names): the session loads only the models these need,
and each stage runs only when they say so."""

from __future__ import annotations

from dataclasses import dataclass

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
    recompute_old_log_probs: bool  # the sampler's log-probs will not do as the old policy's
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
        # The sampler's log-probs are the old policy's when the engine computes them as the
        # trainer does, in float32 without autocast, and the policy has not moved since sampling.
        recompute_old_log_probs=(
            batch_plan(recipe).optimizer_steps > 1
            or not engine.trainer_log_probs
            or recipe.model.dtype != "float32"
            or recipe.trainer.autocast is not None
            or recipe.rollout.importance_sampling.level != "off"
        ),
        sum_pi_squared=advantage.needs_sum_pi_squared,
    )
