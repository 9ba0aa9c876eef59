"""The mini-batch plan of a step's updates and its optimizer steps: PPO epochs over shuffled
mini-batches (one optimizer step each), gradients accumulated over micro-batches. The updates
train in these shapes, and the scoring passes score the rows in the same shapes."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import nullcontext
from functools import partial

import torch

from rlrun.schema import Recipe
from rlrun.training.batching import MiniBatch, UpdateMetrics, plan_minibatches
from rlrun.training.context import StepContext
from rlrun.training.seeds import SHUFFLE_STREAM, step_seed
from rlrun.training.sequences import Sequences


class TooManySkippedUpdates(RuntimeError):
    """More non-finite updates than `trainer.max_skipped_updates`."""


def actor_shuffle(recipe: Recipe, step: int) -> torch.Generator:
    """The random stream that orders the actor's mini-batches in `step`."""
    return torch.Generator().manual_seed(step_seed(recipe.trainer.seed, step, SHUFFLE_STREAM))


def accumulated_micro_batches(
    ctx: StepContext,
    seq: Sequences,
    generator: torch.Generator,
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    grad_clip: float | None,
    out: UpdateMetrics,
    role: str,
) -> Iterator[tuple[MiniBatch, Sequences, Callable[[torch.Tensor], torch.Tensor]]]:
    """PPO epochs over shuffled mini-batches, each split into micro-batches for gradient
    accumulation: yields (mini-batch, micro-batch rows, `take` that cuts an (N, T) tensor to
    them). The caller's forward/backward runs inside DDP's `no_sync` until a mini-batch's last
    micro-batch; after it, one optimizer step (its grad norm logged as `<role>/grad_norm`)."""
    accelerator = ctx.group.accelerator
    for _ in range(ctx.recipe.actor.ppo_epochs):
        for mb in minibatch_plan(ctx, seq, generator):
            for i, rows in enumerate(mb.micro):
                q = seq.rows(rows)
                take = partial(_micro, rows=rows, width=q.response_mask.shape[1])
                with nullcontext() if i == len(mb.micro) - 1 else accelerator.no_sync(model):
                    yield mb, q, take
            out.end_minibatch({f"{role}/grad_norm": optimizer_step(ctx, model, optimizer, grad_clip)})


def optimizer_step(
    ctx: StepContext, model: torch.nn.Module, optimizer: torch.optim.Optimizer, grad_clip: float | None
) -> float:
    """Clip, then step — unless the gradient is not finite: then the update is skipped and
    counted, and past `trainer.max_skipped_updates` the run stops."""
    norm = float(ctx.group.accelerator.clip_grad_norm_(model.parameters(), grad_clip or float("inf")))
    counters, limit = ctx.counters, ctx.recipe.trainer.max_skipped_updates
    if torch.isfinite(torch.tensor(norm)):
        optimizer.step()
    else:
        counters.skipped_updates += 1
        ctx.warn(f"non-finite gradient (norm {norm}); update skipped ({counters.skipped_updates} so far)")
        if counters.skipped_updates > limit:
            raise TooManySkippedUpdates(
                f"{counters.skipped_updates} updates had non-finite gradients (limit trainer.max_skipped_updates = "
                f"{limit}); the last good checkpoint is kept. Lower the learning rate, enable grad_clip, or check "
                "the reward for NaN/inf"
            )
    optimizer.zero_grad(set_to_none=True)
    if optimizer is ctx.optim.optimizer and ctx.recipe.actor.lr_scheduler.step_unit == "optimizer_step":
        ctx.optim.scheduler.step()  # transformers' (TRL's) unit: a skipped update counts too
    return norm


def minibatch_plan(ctx: StepContext, seq: Sequences, generator: torch.Generator) -> list[MiniBatch]:
    """One epoch of this process's rows in shuffled mini-batches (the recipe's sample counts are
    global: each of the dp processes takes its share), normalised over the global mini-batch."""
    r, dp = ctx.recipe, ctx.group.size
    return plan_minibatches(
        seq.response_mask,
        mini_batch=r.actor.mini_batch_samples // dp,
        micro_batch=r.actor.micro_batch_samples // dp,
        generator=generator,
        dp_size=dp,
        loss_scale_factor=r.rollout.max_response_tokens,  # not a micro-batch's own (trimmed) width
        reduce_sum=ctx.group.sum,
        micro_batch_tokens=r.actor.micro_batch_tokens,
        prompt_width=seq.prompt_width,
        lengths=seq.response_attention.sum(-1),
    )


def _micro(x: torch.Tensor, *, rows: torch.Tensor, width: int) -> torch.Tensor:
    """A micro-batch's rows of a per-token (N, T) tensor, cut to its response width."""
    return x[rows, :width]
