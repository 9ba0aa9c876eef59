"""The stages that change the models: the critic's and the actor's PPO epochs over shuffled
mini-batches (one optimizer step each, gradients accumulated over micro-batches), the
learning-rate schedule, and the new weights handed to the rollout engine."""

from __future__ import annotations

from functools import partial
from typing import Any

import torch

from rlrun.algorithms.aggregation import agg_loss
from rlrun.algorithms.distillation import distillation_loss
from rlrun.algorithms.kl import kl_penalty
from rlrun.algorithms.value_loss import compute_value_loss
from rlrun.training.batching import UpdateMetrics
from rlrun.training.context import StepContext
from rlrun.training.minibatches import accumulated_micro_batches, actor_shuffle
from rlrun.training.seeds import LOSS_STREAM, SHUFFLE_STREAM, step_seed
from rlrun.training.sequences import response_log_probs, response_values
from rlrun.training.stages.base import register_stage


@register_stage(
    "update_critic",
    reads=("experience", "values", "returns"),
    when=lambda r, needs: needs.critic,
    phase="update_critic",
)
def update_critic(ctx: StepContext, b: Any) -> None:
    """Clipped value-loss regression onto the returns, over the actor's mini-batch plan."""
    r, m = ctx.recipe, ctx.models
    c = r.critic
    generator = torch.Generator().manual_seed(step_seed(r.trainer.seed, b.step, SHUFFLE_STREAM + 1))
    out = UpdateMetrics()
    for mb, q, take in accumulated_micro_batches(
        ctx, b.experience.seq, generator, m.critic, ctx.optim.critic_optimizer, c.grad_clip, out, "critic"
    ):
        mask = q.response_mask
        loss, vf_metrics = compute_value_loss(
            response_values(m.critic_forward, q, padding_free=r.actor.padding_free),
            take(b.returns),
            take(b.values),
            mask,
            c.cliprange_value,
            c.loss_agg_mode,
            agg_kwargs=mb.agg_kwargs,
        )
        ctx.group.accelerator.backward(loss)
        out.add(sums={"critic/vf_loss": loss.detach()}, means=vf_metrics, weight=mask.sum() / mb.tokens)
    b.metrics |= out.result()


@register_stage(
    "update_actor",
    reads=("experience", "advantages"),
    uses=("old_log_probs", "ref_log_probs", "is_weights", "teacher"),
    writes=("lr",),
    phase="update_actor",
)
def update_actor(ctx: StepContext, b: Any) -> None:
    """PPO epochs over shuffled mini-batches, micro-batch gradient accumulation: loss = policy
    loss (actor.loss_kwargs; a seeded generator if it draws random numbers) - entropy bonus + KL
    loss (+ distillation against a teacher), normalised over the whole mini-batch; clip the grad
    norm; AdamW. Without old log-probs (`Needs.old_log_probs == "update"`) the update is the
    step's only one and its own detached log-probs are the old policy's (a ratio of exactly 1).
    Skipped in the first `actor.frozen_steps` steps (a critic's warm-up)."""
    r = ctx.recipe
    b.lr = ctx.optim.scheduler.get_last_lr()[0]  # the rate of this step's first update
    if b.step <= r.actor.frozen_steps:
        return
    a, d = r.actor, r.distillation
    ppo_kwargs = {
        "clip_ratio": a.clip_ratio,
        "clip_ratio_low": a.clip_ratio_low,
        "clip_ratio_high": a.clip_ratio_high,
        "clip_ratio_c": a.clip_ratio_c,
    }
    draws = {}  # a loss that draws random numbers gets its own stream: resume draws the same
    if ctx.components.policy_loss_needs.draws_random:
        draws["generator"] = torch.Generator().manual_seed(step_seed(r.trainer.seed, b.step, LOSS_STREAM))
    task_loss = not d.enabled or d.use_task_rewards
    grad_entropy = a.entropy_coef != 0
    topk = ctx.components.distillation_needs.needs_teacher_topk
    teacher = b.teacher or {}
    out = UpdateMetrics()
    for mb, q, take in accumulated_micro_batches(
        ctx,
        b.experience.seq,
        actor_shuffle(r, b.step),
        ctx.models.policy,
        ctx.optim.optimizer,
        a.grad_clip,
        out,
        "actor",
    ):
        mask = q.response_mask
        agg = partial(agg_loss, loss_mask=mask, loss_agg_mode=a.loss_agg_mode, **mb.agg_kwargs)
        log_probs, entropy, logits = response_log_probs(
            ctx.models.policy_forward,
            q,
            r.rollout.temperature,
            entropy="grad" if grad_entropy else "detached",
            return_logits=topk,
            padding_free=a.padding_free,
        )
        old = take(b.old_log_probs) if b.old_log_probs is not None else log_probs.detach()
        loss = torch.zeros((), device=mask.device)
        weight = mask.sum() / mb.tokens
        if task_loss:
            pg_loss, pg_metrics = ctx.components.policy_loss_fn(
                old,
                log_probs,
                take(b.advantages),
                mask,
                a.loss_agg_mode,
                rollout_is_weights=take(b.is_weights) if b.is_weights is not None else None,
                agg_kwargs=mb.agg_kwargs,
                **ppo_kwargs,
                **draws,
                **a.loss_kwargs,
            )
            loss = loss + pg_loss
            out.add(sums={"actor/pg_loss": pg_loss.detach()}, means=pg_metrics, weight=weight)
        if d.enabled:
            kd_loss, kd_metrics = distillation_loss(
                d.loss,
                log_probs,
                mask,
                student_logits=logits,
                old_log_prob=old,
                use_policy_gradient=d.use_policy_gradient,
                loss_agg_mode=a.loss_agg_mode,
                loss_max_clamp=d.loss_max_clamp,
                agg_kwargs=mb.agg_kwargs,
                **{k: take(v) for k, v in teacher.items()},
                **(ppo_kwargs if d.use_policy_gradient else {}),
            )
            loss = loss + (d.coef if task_loss else 1.0) * kd_loss
            out.add(sums={"distillation/loss": kd_loss.detach()}, means=kd_metrics, weight=weight)
        entropy_loss = agg(entropy)
        loss = loss - a.entropy_coef * entropy_loss if grad_entropy else loss
        out.add(sums={"actor/entropy": entropy_loss.detach()})
        if a.kl_loss.enabled:
            kl = agg(kl_penalty(log_probs, take(b.ref_log_probs), a.kl_loss.estimator))
            loss = loss + a.kl_loss.coef * kl
            out.add(sums={"actor/kl_loss": kl.detach()})
        ctx.group.accelerator.backward(loss)
    b.metrics |= out.result()


@register_stage("lr_schedule", when=lambda r, needs: r.actor.lr_scheduler.step_unit == "training_step")
def lr_schedule(ctx: StepContext, b: Any) -> None:
    """Advance the schedule once per training step that updated the actor (verl's unit; in
    optimizer steps it advances with each one, `minibatches.optimizer_step`)."""
    if b.step > ctx.recipe.actor.frozen_steps:
        ctx.optim.scheduler.step()


@register_stage("sync_weights", phase="sync")
def sync_weights(ctx: StepContext, b: Any) -> None:
    """Hand the updated policy's weights to the rollout engine."""
    ctx.generation.engine.sync_weights(ctx.models.unwrapped_policy)
