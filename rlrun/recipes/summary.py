"""What `rlrun validate` shows of a valid recipe: the run at a glance and its batch plan, as rich
tables or as JSON."""

from __future__ import annotations

from typing import Any

from rich.table import Table

from rlrun.errors import ConfigIssue
from rlrun.recipes.agent import episode_plan
from rlrun.recipes.batch_plan import algorithm_summary, batch_plan, engine_summary
from rlrun.recipes.loader import LoadedRecipe


def unchecked_notices(loaded: LoadedRecipe) -> list[ConfigIssue]:
    """What `validate` (and `train --dry-run`, whose step runs in one process) cannot check, said
    as notices (never errors, even with `--strict`): they know no process count, which a
    sharding `trainer.strategy` needs to be more than one."""
    strategy = loaded.recipe.trainer.strategy
    if strategy == "ddp":  # one process or several: both run
        return []
    return [
        loaded.provenance.issue(
            ("trainer", "strategy"),
            f"{strategy} needs several processes, a number `rlrun validate` does not know (and `train "
            "--dry-run` takes its step in one process, unsharded): `rlrun train` checks it, and that "
            "trainer.prompts_per_step and actor.mini_batch_samples and micro_batch_samples split evenly "
            "over the processes, before anything loads",
            code="checked-at-launch",
            fix="train with --num-processes N (N > 1, the processes on all machines)",
        )
    ]


def validation_json(loaded: LoadedRecipe, here: bool = True) -> dict[str, Any]:
    """`here`: the recipe was checked against this machine (not `--portable`)."""
    recipe = loaded.recipe
    return {
        "valid": True,
        "recipe": str(loaded.source_path),
        "algorithm": algorithm_summary(recipe),
        "model": recipe.model.path,
        "data": recipe.data.source,
        "rollout": engine_summary(recipe, here),
        "batch_plan": batch_plan(recipe).to_dict(),
        "episode_plan": plan.to_dict() if (plan := episode_plan(recipe)) is not None else None,
        "errors": [],
        "notices": [issue.to_dict() for issue in [*loaded.notices, *unchecked_notices(loaded)]],
    }


def summary_table(loaded: LoadedRecipe, here: bool = True) -> Table:
    recipe = loaded.recipe
    table = Table(show_header=False, box=None, padding=(0, 2))
    table.add_row("algorithm", algorithm_summary(recipe)["text"])
    table.add_row(
        "model", f"{recipe.model.path} ({recipe.model.dtype}" + (", LoRA)" if recipe.model.lora else ")")
    )
    source = recipe.data.source
    table.add_row("data", ", ".join(source) if isinstance(source, list) else source)
    rewards = ", ".join(f"{f.shown} × {f.weight:g}" for f in recipe.reward.functions)
    table.add_row("reward", rewards)
    table.add_row("rollout", engine_summary(recipe, here))
    table.add_row(
        "steps", f"{recipe.trainer.total_steps} on {recipe.trainer.device} (seed {recipe.trainer.seed})"
    )
    return table


def batch_plan_table(loaded: LoadedRecipe) -> Table:
    plan = batch_plan(loaded.recipe)
    table = Table(title="Batch plan per step", title_justify="left", show_lines=False)
    table.add_column("stage")
    table.add_column("count", justify="right")
    table.add_column("each")
    table.add_row("prompts", str(plan.prompts), f"{plan.samples_per_prompt} samples")
    table.add_row(
        "samples", str(plan.samples), f"≤ {loaded.recipe.rollout.max_response_tokens} response tokens"
    )
    table.add_row(
        "mini-batches", str(plan.mini_batches), f"{plan.mini_batch_samples} samples, one optimizer step"
    )
    if plan.micro_batch_tokens is None:
        micro = (f"{plan.micro_batches_per_mini_batch} per mini-batch", f"{plan.micro_batch_samples} samples")
    else:
        micro = ("by length", f"≤ {plan.micro_batch_tokens} padded tokens")
    table.add_row("micro-batches", micro[0], f"{micro[1]}, one forward/backward")
    table.add_row("optimizer steps", str(plan.optimizer_steps), f"per rollout ({plan.ppo_epochs} epoch(s))")
    return table


def episode_plan_table(loaded: LoadedRecipe) -> Table | None:
    """The episodes of one step (an agent recipe), or None."""
    plan = episode_plan(loaded.recipe)
    if plan is None:
        return None
    table = Table(title="Episode plan per step", title_justify="left", show_lines=False)
    table.add_column("stage")
    table.add_column("count", justify="right")
    table.add_column("each")
    acts_on = ", ".join([*plan.tools, *plan.environments])
    table.add_row("episodes", str(plan.episodes), f"{plan.format} format: {acts_on}")
    table.add_row("model turns", f"≤ {plan.max_turns}", f"≤ {plan.max_turn_tokens} sampled tokens")
    table.add_row(
        "response",
        f"≤ {plan.max_episode_tokens}",
        f"tokens after the prompt: turns with results and observations (≤ {plan.max_sampled_tokens} sampled)",
    )
    table.add_row("trained", "", plan.trained)
    return table
