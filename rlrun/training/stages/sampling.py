"""The stages that produce a step's experience: sampled, scored responses (and ReMax's greedy
baseline)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from rlrun.training.context import StepContext
from rlrun.training.seeds import GEN_STREAM, step_seed
from rlrun.training.sharding import gathered
from rlrun.training.stages.base import register_stage


@register_stage("sample", writes=("experience", "gen_batches"))
def sample(ctx: StepContext, b: Any) -> None:
    """n responses to each of this process's share of the step's prompts, scored (timed as gen
    and reward; dynamic sampling draws more prompts until enough groups are informative)."""
    r, g = ctx.recipe, ctx.generation
    with gathered(ctx.models.policy):  # processes sample until EOS: different numbers of passes
        b.experience, b.gen_batches = g.collector.collect(
            r.trainer.prompts_per_step // ctx.group.size,
            step_seed(r.trainer.seed, b.step, GEN_STREAM),
            timer=b.timer,
        )


@register_stage(
    "greedy_baseline",
    reads=("experience",),
    writes=("baselines",),
    when=lambda r, needs: needs.greedy_baseline,
)
def greedy_baseline(ctx: StepContext, b: Any) -> None:
    """ReMax's baseline: the reward of one greedy response per prompt, for each of its rows."""
    g, exp = ctx.generation, b.experience
    with gathered(ctx.models.policy):
        greedy = g.collector.generate(exp.prompts, replace(g.sampling, n=1, greedy=True), timer=b.timer)
    b.baselines = greedy.scores.repeat_interleave(exp.n)
