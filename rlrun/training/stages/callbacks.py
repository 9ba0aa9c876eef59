"""The callbacks' rollout event as a stage: it runs only in a run trained with callbacks
(`rlrun.train(..., callbacks=[...])`), right after the responses are sampled and scored."""

from __future__ import annotations

from typing import Any

from rlrun.training import callbacks
from rlrun.training.context import StepContext
from rlrun.training.stages.base import register_stage


@register_stage(
    "rollout_callbacks",
    reads=("experience",),
    after="sample",
    when=lambda r, needs: callbacks.current() is not None,
)
def rollout_callbacks(ctx: StepContext, b: Any) -> None:
    """Each callback's `on_rollout` with the step's prompts, completions and rewards."""
    exp, hooks = b.experience, callbacks.current()
    prompts = ctx.generation.train_data.take(exp.prompts).prompts
    rollout = callbacks.Rollout(
        step=b.step,
        prompts=[prompts[i // exp.n] for i in range(exp.num_rows)],
        completions=list(exp.completions),
        rewards=[float(score) for score in exp.scores],
    )
    hooks.dispatch("rollout", rollout)
