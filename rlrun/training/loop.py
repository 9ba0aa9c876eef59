"""The training loop: one algorithm for every recipe, composed from the components it names.

    for step in 1..total_steps:
        prompts  <- next prompts_per_step prompts of the (shuffled, epoch-cycled) train set
        rollouts <- n sampled responses per prompt, scored by the reward functions
                    (+ DAPO overlong shaping; + dynamic sampling: refill until enough groups vary)
        ref      <- reference log-probs            (only with a KL penalty or KL loss)
        old      <- policy log-probs before update (recomputed only when the sampler's won't do)
        Σπ²      <- Σ_v π(v)² per response token   (only when the estimator declares it: OTB)
        values   <- critic values                  (only with a critic)
        rewards  <- score at the last token, - β·KL(old‖ref) with in-reward KL
        adv      <- advantage estimator(rewards, groups, values, greedy baselines for ReMax,
                    what else it declared, algorithm.advantage_kwargs),
                    over all processes' rows (batch whitening sees the whole batch)
        critic   <- PPO epochs of clipped value loss                     (only with a critic)
        policy   <- PPO epochs over shuffled mini-batches, micro-batch gradient accumulation,
                    loss = policy loss (actor.loss_kwargs; a seeded generator if it draws random
                    numbers) - entropy bonus + KL loss (+ distillation against a teacher),
                    normalised over the whole mini-batch; clip grad norm; AdamW; lr schedule
        sync the new weights to the rollout engine
        stop (nothing of the step saved) if the weights blew up or the logits are no longer finite

Everything else (where the pieces come from, checkpoints, logging) lives elsewhere: `session`
builds the pieces, `run.train` drives the steps and records them (rlrun.records); this file is
the algorithm.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from contextlib import nullcontext
from dataclasses import replace
from functools import partial
from typing import Any

import torch

from rlrun.algorithms.aggregation import agg_loss
from rlrun.algorithms.distillation import distillation_loss
from rlrun.algorithms.importance_sampling import truncated_is_weights
from rlrun.algorithms.kl import apply_kl_penalty, kl_penalty
from rlrun.algorithms.masked import sum_pi_squared
from rlrun.algorithms.value_loss import compute_value_loss
from rlrun.schema import Recipe
from rlrun.training.batching import MiniBatch, UpdateMetrics, plan_minibatches
from rlrun.training.distributed import global_advantages
from rlrun.training.experience import Experience
from rlrun.training.metrics import across_processes, batch_metrics
from rlrun.training.profiling import Timer
from rlrun.training.sequences import (
    Sequences,
    forward_batched,
    forward_in_parts,
    response_log_probs,
    response_logits,
    response_values,
)
from rlrun.training.session import GEN_STREAM, LOSS_STREAM, SHUFFLE_STREAM, Session, step_seed
from rlrun.training.sharding import gathered, held_state_bytes


class TooManySkippedUpdates(RuntimeError):
    """More non-finite updates than `trainer.max_skipped_updates`."""


class NonFiniteModel(RuntimeError):
    """The policy's weights or outputs are no longer finite numbers."""


PROBE_ROWS = 4  # sequences of the step re-scored after its update to check the policy's logits
# One step that multiplies the size of the weights by this much has blown the model up (a sound
# update changes the L2 norm of all weights by well under 1 %).
MAX_WEIGHT_GROWTH = 10.0
SAMPLING_NON_FINITE = "probability tensor contains"  # torch.multinomial's message for inf/nan probabilities


def training_step(s: Session, step: int) -> tuple[dict[str, float], Experience]:
    """One step of the algorithm (rollout → advantages → updates); returns its metrics and the
    experience it trained on."""
    r, needs = s.recipe, s.needs
    timer = Timer()
    with timer("step"):
        with gathered(s.policy):  # processes sample until EOS: different numbers of passes
            exp, gen_batches = s.collector.collect(
                r.trainer.prompts_per_step // s.accelerator.num_processes,
                step_seed(r.trainer.seed, step, GEN_STREAM),
                timer=timer,
            )
        seq, mask = exp.seq, exp.seq.response_mask
        baselines = None
        if needs.greedy_baseline:  # ReMax: the reward of one greedy response per prompt
            with gathered(s.policy):
                greedy = s.collector.generate(exp.prompts, replace(s.sampling, n=1, greedy=True), timer=timer)
            baselines = greedy.scores.repeat_interleave(exp.n)

        forward = partial(
            forward_batched,
            seq=seq,
            chunk=r.actor.micro_batch_samples,
            chunk_tokens=r.actor.micro_batch_tokens,
        )
        temperature, padding_free = r.rollout.temperature, r.actor.padding_free
        # The reference and the old policy score the rows in the micro-batches of the actor's
        # first epoch: the same shapes give log-probs equal to the bit while the policy still
        # equals them (a KL of exactly 0, a ratio of exactly 1). Other shapes differ in the last
        # bits, and AdamW turns a KL gradient of pure float noise into a full-size step.
        scored_as_in_update = needs.reference or needs.recompute_old_log_probs
        parts = first_epoch_micro_batches(s, seq, step) if scored_as_in_update else []
        as_in_update = partial(forward_in_parts, seq=seq, parts=parts)
        ref_log_probs, old_log_probs, values, teacher = None, exp.rollout_log_probs, None, {}
        if needs.reference:
            with timer("ref"), s.reference_model() as reference:
                ref_log_probs = as_in_update(
                    lambda q: response_log_probs(reference, q, temperature, padding_free=padding_free)[0]
                )
        if needs.recompute_old_log_probs:
            with timer("old_log_prob"), gathered(s.policy):
                old_log_probs = as_in_update(
                    lambda q: response_log_probs(s.policy_forward, q, temperature, padding_free=padding_free)[
                        0
                    ]
                )
        token_inputs = {}  # what the estimator declared it needs beyond the usual inputs
        if needs.sum_pi_squared:
            with timer("sum_pi_squared"), gathered(s.policy):
                policy_logits = partial(
                    response_log_probs,
                    s.policy_forward,
                    temperature=temperature,
                    return_logits=True,
                    padding_free=padding_free,
                )
                token_inputs["sum_pi_squared"] = forward(lambda q: sum_pi_squared(policy_logits(q)[2]))
        if needs.teacher:
            with timer("teacher"), gathered(s.teacher):
                teacher = teacher_scores(s, seq)
        if needs.critic:
            with timer("values"), gathered(s.critic):
                values = forward(lambda q: response_values(s.critic_forward, q, padding_free=padding_free))

        with timer("adv"):
            metrics: dict[str, Any] = {}
            token_level_scores = scores_at_last_token(exp.scores, mask)
            token_level_rewards = token_level_scores
            if r.algorithm.kl_in_reward.enabled:
                token_level_rewards, kl_metrics = apply_kl_penalty(
                    token_level_scores,
                    old_log_probs,
                    ref_log_probs,
                    mask,
                    s.kl_ctrl,
                    r.algorithm.kl_in_reward.estimator,
                )
                metrics |= kl_metrics
            is_weights = None
            if r.rollout.importance_sampling.level != "off":
                is_weights, is_metrics = truncated_is_weights(
                    old_log_probs,
                    exp.rollout_log_probs,
                    mask,
                    r.rollout.importance_sampling.level,
                    r.rollout.importance_sampling.cap,
                    r.rollout.importance_sampling.mode,
                )
                metrics |= is_metrics
            if s.advantage_needs.needs_old_log_probs:
                token_inputs["old_log_probs"] = old_log_probs
                if is_weights is not None:
                    token_inputs["rollout_is_weights"] = is_weights
            advantages, returns = global_advantages(
                s.accelerator,
                s.advantage_fn,
                token_level_rewards,
                mask,
                exp.index,
                values=values,
                reward_baselines=baselines,
                gamma=r.algorithm.gamma,
                lam=r.algorithm.lam,
                norm_adv_by_std_in_grpo=r.algorithm.norm_adv_by_std_in_grpo,
                reward_components={k: v.to(mask.device) for k, v in exp.reward.components.items()},
                token_inputs=token_inputs,
                **r.algorithm.advantage_kwargs,
            )

        if needs.critic:
            with timer("update_critic"):
                metrics |= update_critic(s, seq, values, returns, step)
        lr = s.scheduler.get_last_lr()[0]  # the rate of this step's first update
        if step > r.actor.frozen_steps:
            with timer("update_actor"):
                metrics |= update_actor(
                    s,
                    seq,
                    old_log_probs,
                    advantages,
                    step,
                    ref_log_probs=ref_log_probs,
                    is_weights=is_weights,
                    teacher=teacher,
                )
            advance_schedule(s, "training_step")
        with timer("sync"):
            s.engine.sync_weights(s.unwrapped_policy)

    metrics |= batch_metrics(exp, token_level_scores, token_level_rewards, advantages, returns, values)
    metrics |= {
        "frac_reward_zero_std": s.collector.frac_zero_std,
        "gen_batches": gen_batches,
        "actor/lr": lr,
        "training/skipped_updates": s.skipped_updates,
    }
    metrics |= {f"timing_s/{k}": v for k, v in timer.seconds.items()}
    held = held_state_bytes([s.policy, s.critic, s.reference, s.teacher], [s.optimizer, s.critic_optimizer])
    metrics["memory/held_state_mib"] = held / 2**20  # per process: the mean over processes
    tokens = seq.attention_mask.sum().item()
    metrics["perf/throughput"] = tokens / timer.seconds["step"]
    metrics["perf/completion_tokens_per_s"] = mask.sum().item() / timer.seconds["step"]
    dp = s.accelerator.num_processes
    s.samples_seen += exp.num_rows * dp  # every process trains on an equal share
    metrics["samples"] = s.samples_seen
    metrics = {k: float(v) for k, v in metrics.items()}
    if dp == 1:
        return metrics, exp
    return across_processes(metrics, lambda x, op: s.accelerator.reduce(x, reduction=op), dp), exp


def weight_norm(model: torch.nn.Module) -> float:
    """The L2 norm of all the model's weights, in float64 (no overflow below 1e150); NaN or inf
    if any weight is not finite."""
    with torch.no_grad():
        norms = torch.stack([torch.linalg.vector_norm(p.detach().double()) for p in model.parameters()])
    return float(torch.linalg.vector_norm(norms))


def check_policy_health(s: Session, seq: Sequences, step: int, *, lr: float, norm_before: float) -> float:
    """After a step's updates, before anything is logged or saved: stop the run if the policy's
    weights are no longer finite, grew more than `MAX_WEIGHT_GROWTH`-fold in the step, or give
    non-finite logits on a few of the step's sequences (a learning rate that blows the weights up
    leaves the gradients finite until sampling fails). Returns the weight norm for the next check."""
    policy = s.unwrapped_policy
    with gathered(policy):
        norm = weight_norm(policy)
        problem = None
        if not math.isfinite(norm):
            problem = "weights stopped being finite numbers"
        elif norm > MAX_WEIGHT_GROWTH * norm_before:
            problem = f"weights grew {norm / norm_before:.3g}-fold (L2 norm {norm_before:.4g} -> {norm:.4g})"
        else:
            rows = torch.arange(min(PROBE_ROWS, seq.input_ids.shape[0]), device=seq.input_ids.device)
            logits = response_logits(policy, seq.rows(rows), padding_free=s.recipe.actor.padding_free)
            if not torch.isfinite(logits).all():
                problem = "logits stopped being finite numbers"
    if not s.collector.everywhere(problem is None):
        raise NonFiniteModel(broken_model_message(problem or "logits stopped being finite numbers", step, lr))
    return norm


def broken_model_message(problem: str, step: int, lr: float) -> str:
    return (
        f"in step {step} the policy's {problem} (learning rate {lr:g}). The likely cause is a learning "
        "rate too high for this model: lower actor.optimizer.lr. Nothing of this step was saved: the "
        "checkpoints hold the model from before it"
    )


def scores_at_last_token(scores: torch.Tensor, response_mask: torch.Tensor) -> torch.Tensor:
    """(N, T) token-level scores: each response's score on its last token, 0 elsewhere."""
    last = (response_mask.sum(-1).long() - 1).clamp(min=0)
    out = torch.zeros_like(response_mask, dtype=torch.float32)
    return out.scatter_(1, last.unsqueeze(1), scores.float().unsqueeze(1)) * response_mask


@torch.no_grad()
def teacher_scores(s: Session, seq: Sequences) -> dict[str, torch.Tensor]:
    """The teacher's view of the student's tokens: log-probs of the sampled tokens, or its
    top-k log-probs and ids for `forward_kl_topk`."""
    d, temperature = s.recipe.distillation, s.recipe.rollout.temperature
    padding_free = s.recipe.actor.padding_free
    if d.loss != "forward_kl_topk":
        log_probs = forward_batched(
            lambda q: response_log_probs(s.teacher, q, temperature, padding_free=padding_free)[0],
            seq=seq,
            chunk=s.recipe.actor.micro_batch_samples,
            chunk_tokens=s.recipe.actor.micro_batch_tokens,
        )
        return {"teacher_log_probs": log_probs}
    logits = response_log_probs(s.teacher, seq, temperature, return_logits=True, padding_free=padding_free)[2]
    top = (logits / temperature).log_softmax(-1).topk(min(d.topk, logits.shape[-1]), dim=-1)
    return {"teacher_topk_log_probs": top.values, "teacher_topk_ids": top.indices}


def update_actor(
    s: Session,
    seq: Sequences,
    old_log_probs: torch.Tensor,
    advantages: torch.Tensor,
    step: int,
    *,
    ref_log_probs: torch.Tensor | None,
    is_weights: torch.Tensor | None,
    teacher: dict[str, torch.Tensor],
) -> dict[str, float]:
    """PPO epochs over shuffled mini-batches; one optimizer step per mini-batch."""
    r = s.recipe
    a, d = r.actor, r.distillation
    ppo_kwargs = {
        "clip_ratio": a.clip_ratio,
        "clip_ratio_low": a.clip_ratio_low,
        "clip_ratio_high": a.clip_ratio_high,
        "clip_ratio_c": a.clip_ratio_c,
    }
    generator = actor_shuffle(r, step)
    draws = {}  # a loss that draws random numbers gets its own stream: resume draws the same
    if s.policy_loss_needs.draws_random:
        draws["generator"] = torch.Generator().manual_seed(step_seed(r.trainer.seed, step, LOSS_STREAM))
    task_loss = not d.enabled or d.use_task_rewards
    grad_entropy = a.entropy_coef != 0
    out = UpdateMetrics()
    for mb, q, take in accumulated_micro_batches(
        s, seq, generator, s.policy, s.optimizer, a.grad_clip, out, "actor"
    ):
        m = q.response_mask
        agg = partial(agg_loss, loss_mask=m, loss_agg_mode=a.loss_agg_mode, **mb.agg_kwargs)
        log_probs, entropy, logits = response_log_probs(
            s.policy_forward,
            q,
            r.rollout.temperature,
            entropy="grad" if grad_entropy else "detached",
            return_logits=d.loss == "forward_kl_topk",
            padding_free=a.padding_free,
        )
        loss = torch.zeros((), device=m.device)
        if task_loss:
            pg_loss, pg_metrics = s.policy_loss_fn(
                take(old_log_probs),
                log_probs,
                take(advantages),
                m,
                a.loss_agg_mode,
                rollout_is_weights=take(is_weights) if is_weights is not None else None,
                agg_kwargs=mb.agg_kwargs,
                **ppo_kwargs,
                **draws,
                **a.loss_kwargs,
            )
            loss = loss + pg_loss
            out.add(
                sums={"actor/pg_loss": pg_loss.detach()},
                means=pg_metrics,
                weight=m.sum() / mb.tokens,
            )
        if d.enabled:
            kd_loss, kd_metrics = distillation_loss(
                d.loss,
                log_probs,
                m,
                student_logits=logits,
                old_log_prob=take(old_log_probs),
                use_policy_gradient=d.use_policy_gradient,
                loss_agg_mode=a.loss_agg_mode,
                loss_max_clamp=d.loss_max_clamp,
                agg_kwargs=mb.agg_kwargs,
                **{k: take(v) for k, v in teacher.items()},
                **(ppo_kwargs if d.use_policy_gradient else {}),
            )
            loss = loss + (d.coef if task_loss else 1.0) * kd_loss
            out.add(
                sums={"distillation/loss": kd_loss.detach()},
                means=kd_metrics,
                weight=m.sum() / mb.tokens,
            )
        entropy_loss = agg(entropy)
        loss = loss - a.entropy_coef * entropy_loss if grad_entropy else loss
        out.add(sums={"actor/entropy": entropy_loss.detach()})
        if a.kl_loss.enabled:
            kl = agg(kl_penalty(log_probs, take(ref_log_probs), a.kl_loss.estimator))
            loss = loss + a.kl_loss.coef * kl
            out.add(sums={"actor/kl_loss": kl.detach()})
        s.accelerator.backward(loss)
    return out.result()


def actor_shuffle(recipe: Recipe, step: int) -> torch.Generator:
    """The random stream that orders the actor's mini-batches in `step`."""
    return torch.Generator().manual_seed(step_seed(recipe.trainer.seed, step, SHUFFLE_STREAM))


def first_epoch_micro_batches(s: Session, seq: Sequences, step: int) -> list[torch.Tensor]:
    """The rows of each micro-batch of the actor's first epoch in `step`, in order (drawn from
    a stream of their own equal to the one `update_actor` draws them from)."""
    return [rows for mb in minibatch_plan(s, seq, actor_shuffle(s.recipe, step)) for rows in mb.micro]


def update_critic(
    s: Session, seq: Sequences, values: torch.Tensor, returns: torch.Tensor, step: int
) -> dict[str, float]:
    """Clipped value-loss regression onto the returns, over the same mini-batch plan."""
    r = s.recipe
    c = r.critic
    generator = torch.Generator().manual_seed(step_seed(r.trainer.seed, step, SHUFFLE_STREAM + 1))
    out = UpdateMetrics()
    for mb, q, take in accumulated_micro_batches(
        s, seq, generator, s.critic, s.critic_optimizer, c.grad_clip, out, "critic"
    ):
        m = q.response_mask
        loss, vf_metrics = compute_value_loss(
            response_values(s.critic_forward, q, padding_free=r.actor.padding_free),
            take(returns),
            take(values),
            m,
            c.cliprange_value,
            c.loss_agg_mode,
            agg_kwargs=mb.agg_kwargs,
        )
        s.accelerator.backward(loss)
        out.add(sums={"critic/vf_loss": loss.detach()}, means=vf_metrics, weight=m.sum() / mb.tokens)
    return out.result()


def accumulated_micro_batches(
    s: Session,
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
    for _ in range(s.recipe.actor.ppo_epochs):
        for mb in minibatch_plan(s, seq, generator):
            for i, rows in enumerate(mb.micro):
                q = seq.rows(rows)
                take = partial(_micro, rows=rows, width=q.response_mask.shape[1])
                with nullcontext() if i == len(mb.micro) - 1 else s.accelerator.no_sync(model):
                    yield mb, q, take
            out.end_minibatch({f"{role}/grad_norm": optimizer_step(s, model, optimizer, grad_clip)})


def optimizer_step(
    s: Session, model: torch.nn.Module, optimizer: torch.optim.Optimizer, grad_clip: float | None
) -> float:
    """Clip, then step — unless the gradient is not finite: then the update is skipped and
    counted, and past `trainer.max_skipped_updates` the run stops."""
    norm = float(s.accelerator.clip_grad_norm_(model.parameters(), grad_clip or float("inf")))
    if torch.isfinite(torch.tensor(norm)):
        optimizer.step()
    else:
        s.skipped_updates += 1
        s.warn(f"non-finite gradient (norm {norm}); update skipped ({s.skipped_updates} so far)")
        if s.skipped_updates > s.recipe.trainer.max_skipped_updates:
            raise TooManySkippedUpdates(
                f"{s.skipped_updates} updates had non-finite gradients (limit trainer.max_skipped_updates = "
                f"{s.recipe.trainer.max_skipped_updates}); the last good checkpoint is kept. Lower the learning "
                "rate, enable grad_clip, or check the reward for NaN/inf"
            )
    optimizer.zero_grad(set_to_none=True)
    if optimizer is s.optimizer:
        advance_schedule(s, "optimizer_step")
    return norm


def advance_schedule(s: Session, unit: str) -> None:
    """Step the actor's lr schedule at the end of one `unit` (training_step | optimizer_step)
    when that is what it counts: verl's once per step that updates the actor, transformers'
    (TRL's) once per optimizer step, a skipped (non-finite) one included."""
    if s.recipe.actor.lr_scheduler.step_unit == unit:
        s.scheduler.step()


def minibatch_plan(s: Session, seq: Sequences, generator: torch.Generator) -> list[MiniBatch]:
    """One epoch of this process's rows in shuffled mini-batches (the recipe's sample counts are
    global: each of the dp processes takes its share), normalised over the global mini-batch."""
    r, dp = s.recipe, s.accelerator.num_processes
    return plan_minibatches(
        seq.response_mask,
        mini_batch=r.actor.mini_batch_samples // dp,
        micro_batch=r.actor.micro_batch_samples // dp,
        generator=generator,
        dp_size=dp,
        loss_scale_factor=r.rollout.max_response_tokens,  # not a micro-batch's own (trimmed) width
        reduce_sum=_reduce_sum(s),
        micro_batch_tokens=r.actor.micro_batch_tokens,
        prompt_width=seq.prompt_width,
    )


def _micro(x: torch.Tensor, *, rows: torch.Tensor, width: int) -> torch.Tensor:
    """A micro-batch's rows of a per-token (N, T) tensor, cut to its response width."""
    return x[rows, :width]


def _reduce_sum(s: Session) -> Callable[[torch.Tensor], torch.Tensor]:
    if s.accelerator.num_processes == 1:
        return lambda x: x
    return lambda x: s.accelerator.reduce(x, reduction="sum")
