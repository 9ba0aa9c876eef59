"""The one batch plan and what follows from it: the lr schedule's horizon."""

from rlrun.recipes import load_recipe
from rlrun.recipes.batch_plan import batch_plan, schedule_steps


def test_the_schedule_spans_training_or_optimizer_steps():
    # 16 prompts x 8 samples in mini-batches of 32, two epochs: 4 x 2 optimizer steps per step
    plan = ["trainer.total_steps=50", "actor.mini_batch_samples=32", "actor.micro_batch_samples=32", "actor.ppo_epochs=2"]  # fmt: skip
    by_step = load_recipe("grpo", plan).recipe
    assert batch_plan(by_step).optimizer_steps == 8 and schedule_steps(by_step) == 50
    by_update = load_recipe("grpo", [*plan, "actor.lr_scheduler.step_unit=optimizer_step"]).recipe
    assert schedule_steps(by_update) == 50 * 8
