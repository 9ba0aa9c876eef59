"""The last stages: what the step's batch looked like, under verl's metric names, and what an
agent's episodes did."""

from __future__ import annotations

from typing import Any

from rlrun.rollout.responses import episode_metrics
from rlrun.training.context import StepContext
from rlrun.training.metrics import batch_metrics as batch_numbers
from rlrun.training.stages.base import register_stage


@register_stage(
    "batch_metrics",
    reads=(
        "experience",
        "gen_batches",
        "token_level_scores",
        "token_level_rewards",
        "advantages",
        "returns",
        "lr",
    ),
    uses=("values",),
)
def batch_metrics(ctx: StepContext, b: Any) -> None:
    """Scores, rewards, advantages, returns and values, lengths, accuracy and the reward
    functions' means; the learning rate; skipped updates so far."""
    exp = b.experience
    b.metrics |= batch_numbers(
        exp, b.token_level_scores, b.token_level_rewards, b.advantages, b.returns, b.values
    )
    b.metrics |= {
        "frac_reward_zero_std": ctx.generation.collector.frac_zero_std,
        "gen_batches": b.gen_batches,
        "actor/lr": b.lr,
        "training/skipped_updates": ctx.counters.skipped_updates,
    }


@register_stage("episode_metrics", reads=("experience",), when=lambda r, needs: r.agent.enabled)
def agent_metrics(ctx: StepContext, b: Any) -> None:
    """What the agent's episodes did: turns, tool calls and errors, how they ended, the seconds
    in tools and environments (part of timing_s/gen)."""
    b.metrics |= episode_metrics(b.experience.episodes)
