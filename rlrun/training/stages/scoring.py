"""The stages that score the sampled tokens with the models beside the sampler: the reference,
the policy before its update, Σπ², the teacher and the critic."""

from __future__ import annotations

from typing import Any

import torch

from rlrun.algorithms.masked import sum_pi_squared as sum_of_squares
from rlrun.training.context import StepContext
from rlrun.training.minibatches import actor_shuffle, minibatch_plan
from rlrun.training.sequences import (
    Sequences,
    forward_batched,
    forward_in_parts,
    response_log_probs,
    response_values,
)
from rlrun.training.sharding import gathered
from rlrun.training.stages.base import register_stage


def _scored_as_in_update(recipe: Any, needs: Any) -> bool:
    return needs.reference or needs.old_log_probs == "recompute"


@register_stage("update_parts", reads=("experience",), writes=("update_parts",), when=_scored_as_in_update)
def update_parts(ctx: StepContext, b: Any) -> None:
    """The rows of each micro-batch of the actor's first epoch, in order: the reference and the
    old policy score the rows in these shapes, so their log-probs equal the policy's to the bit
    while the policy still equals them (a KL of exactly 0, a ratio of exactly 1). Other shapes
    differ in the last bits, and AdamW turns a KL gradient of pure float noise into a full step."""
    plan = minibatch_plan(ctx, b.experience.seq, actor_shuffle(ctx.recipe, b.step))
    b.update_parts = [rows for mb in plan for rows in mb.micro]


def _log_probs(ctx: StepContext, model: Any, seq: Sequences, **kwargs: Any) -> Any:
    r = ctx.recipe
    return response_log_probs(model, seq, r.rollout.temperature, padding_free=r.actor.padding_free, **kwargs)


def _batched(ctx: StepContext, fn: Any, seq: Sequences) -> torch.Tensor:
    """`fn` over the rows in micro-batches of the actor's size."""
    a = ctx.recipe.actor
    return forward_batched(fn, seq=seq, chunk=a.micro_batch_samples, chunk_tokens=a.micro_batch_tokens)


@register_stage(
    "reference",
    reads=("experience", "update_parts"),
    writes=("ref_log_probs",),
    when=lambda r, needs: needs.reference,
    phase="ref",
)
def reference(ctx: StepContext, b: Any) -> None:
    """The reference policy's log-probs of the sampled tokens (for a KL penalty)."""
    with ctx.models.reference_model() as model:
        b.ref_log_probs = forward_in_parts(
            lambda q: _log_probs(ctx, model, q)[0], seq=b.experience.seq, parts=b.update_parts
        )


@register_stage(
    "old_log_probs",
    reads=("experience", "update_parts"),
    writes=("old_log_probs",),
    when=lambda r, needs: needs.old_log_probs == "recompute",
    phase="old_log_prob",
)
def old_log_probs(ctx: StepContext, b: Any) -> None:
    """The policy's log-probs before this step's updates, recomputed by the trainer: they are
    read before the update (an in-reward KL, an estimator that declares them, an importance-
    sampling correction) or by several updates, and the sampler's will not do (another engine
    or precision, or the policy moved)."""
    m = ctx.models
    with gathered(m.policy):
        b.old_log_probs = forward_in_parts(
            lambda q: _log_probs(ctx, m.policy_forward, q)[0], seq=b.experience.seq, parts=b.update_parts
        )


@register_stage(
    "sampler_log_probs",
    reads=("experience",),
    writes=("old_log_probs",),
    when=lambda r, needs: needs.old_log_probs == "sampler",
)
def sampler_log_probs(ctx: StepContext, b: Any) -> None:
    """The sampler's log-probs as the old policy's: the engine computed them with the training
    model as the trainer does, and the policy has not moved since."""
    b.old_log_probs = b.experience.rollout_log_probs


@register_stage(
    "sum_pi_squared",
    reads=("experience",),
    writes=("sum_pi_squared",),
    when=lambda r, needs: needs.sum_pi_squared,
    phase="sum_pi_squared",
)
def sum_pi_squared(ctx: StepContext, b: Any) -> None:
    """Σ_v π(v)² at each response position, for an estimator that declared it needs it."""
    m = ctx.models
    with gathered(m.policy):
        b.sum_pi_squared = _batched(
            ctx,
            lambda q: sum_of_squares(_log_probs(ctx, m.policy_forward, q, return_logits=True)[2]),
            b.experience.seq,
        )


@register_stage(
    "teacher",
    reads=("experience",),
    writes=("teacher",),
    when=lambda r, needs: needs.teacher,
    phase="teacher",
)
@torch.no_grad()
def teacher(ctx: StepContext, b: Any) -> None:
    """The teacher's view of the student's tokens: log-probs of the sampled tokens, or its
    top-k log-probs and ids for a distillation loss over the teacher's top-k."""
    model, seq, needs_topk = (
        ctx.models.teacher,
        b.experience.seq,
        ctx.components.distillation_needs.needs_teacher_topk,
    )
    with gathered(model):
        if not needs_topk:
            b.teacher = {"teacher_log_probs": _batched(ctx, lambda q: _log_probs(ctx, model, q)[0], seq)}
            return
        logits = _log_probs(ctx, model, seq, return_logits=True)[2]
    temperature = ctx.recipe.rollout.temperature
    top = (
        (logits / temperature)
        .log_softmax(-1)
        .topk(min(ctx.recipe.distillation.topk, logits.shape[-1]), dim=-1)
    )
    b.teacher = {"teacher_topk_log_probs": top.values, "teacher_topk_ids": top.indices}


@register_stage(
    "values", reads=("experience",), writes=("values",), when=lambda r, needs: needs.critic, phase="values"
)
def values(ctx: StepContext, b: Any) -> None:
    """The critic's value of each response position."""
    m, padding_free = ctx.models, ctx.recipe.actor.padding_free
    with gathered(m.critic):
        b.values = _batched(
            ctx, lambda q: response_values(m.critic_forward, q, padding_free=padding_free), b.experience.seq
        )
