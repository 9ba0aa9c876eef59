"""The training loop: one algorithm for every recipe, composed from the components it names.

    for step in 1..total_steps:
        for each registered stage that the recipe needs, in order:
            sample            prompts_per_step prompts of the (shuffled, epoch-cycled) train set,
                              n sampled responses (an agent's episodes) each, scored by the
                              reward functions (+ DAPO overlong shaping; + dynamic sampling:
                              refill until enough groups vary)
            rollout_callbacks the Python callbacks see the rollout   (rlrun.train(callbacks=...))
            greedy_baseline   the reward of one greedy response per prompt        (ReMax)
            update_parts      the rows of the actor's first-epoch micro-batches, which the
                              scoring passes below reuse            (with a reference or old pass)
            reference         reference log-probs              (a KL penalty or KL loss)
            old_log_probs     the policy's log-probs before the update, recomputed (read before
                              it or by several updates, and the sampler's will not do)
            sampler_log_probs — or the sampler's, equal to the trainer's; with neither, the
                              update's own log-probs, detached, are the old ones (one update)
            sum_pi_squared    Σ_v π(v)² per response token     (an estimator that declares it: OTB)
            teacher           the teacher's log-probs or top-k (distillation)
            values            critic values                    (with a critic)
            token_rewards     score at the last sampled token (+ an environment's per-turn rewards
                              at each turn's last)              — or, with an in-reward KL,
            kl_rewards        those minus β·KL(old‖ref) at every sampled token
            is_weights        truncated importance weights     (rollout.importance_sampling)
            advantages        the estimator(rewards, groups, values, baselines, what else it
                              declared, algorithm.advantage_kwargs) over all processes' rows
            update_critic     PPO epochs of clipped value loss (with a critic)
            update_actor      PPO epochs over shuffled mini-batches, micro-batch gradient
                              accumulation: policy loss - entropy bonus + KL loss
                              (+ distillation), normalised over the whole mini-batch; clip grad
                              norm; AdamW (none in the first actor.frozen_steps steps)
            lr_schedule       advance the lr schedule (per training step; per optimizer step it
                              advances in the update)
            sync_weights      the new weights to the rollout engine
            batch_metrics     what the batch looked like
            episode_metrics   what an agent's episodes did: turns, calls, errors, endings
        stop (nothing of the step saved) if the weights blew up or the logits are no longer finite

Each stage declares where it registers when it runs and what it reads and writes
(`training.stages`); this function only runs them. Where the pieces come from is `session`;
`run.train` drives the steps and records them (rlrun.records).
"""

from __future__ import annotations

import math

import torch

from rlrun.training.experience import Experience
from rlrun.training.metrics import across_processes
from rlrun.training.profiling import Timer
from rlrun.training.sequences import Sequences, response_logits
from rlrun.training.session import Session
from rlrun.training.sharding import gathered, held_state_bytes
from rlrun.training.stages import StepBatch


class NonFiniteModel(RuntimeError):
    """The policy's weights or outputs are no longer finite numbers."""


PROBE_ROWS = 4  # sequences of the step re-scored after its update to check the policy's logits
# One step that multiplies the size of the weights by this much has blown the model up (a sound
# update changes the L2 norm of all weights by well under 1 %).
MAX_WEIGHT_GROWTH = 10.0
SAMPLING_NON_FINITE = "probability tensor contains"  # torch.multinomial's message for inf/nan probabilities


def training_step(s: Session, step: int) -> tuple[dict[str, float], Experience]:
    """One step: the recipe's stages in order (module docstring); returns the step's metrics and
    the experience it trained on."""
    batch = StepBatch(step=step, timer=Timer())
    with batch.timer("step"):
        for stage in s.pipeline:
            view = batch.view(stage)
            if stage.phase is None:
                stage.run(s.context, view)
            else:
                with batch.timer(stage.phase):
                    stage.run(s.context, view)
    return step_metrics(s, batch), batch.experience


def step_metrics(s: Session, batch: StepBatch) -> dict[str, float]:
    """The stages' metrics with the step's time, throughput, memory and sample count, as the
    mean (or sum, max, min) over the processes."""
    m, exp, seconds = s.models, batch.experience, batch.timer.seconds
    metrics = batch.metrics | {f"timing_s/{k}": v for k, v in seconds.items()}
    held = held_state_bytes(
        [m.policy, m.critic, m.reference, m.teacher], [s.optim.optimizer, s.optim.critic_optimizer]
    )
    metrics["memory/held_state_mib"] = held / 2**20  # per process: the mean over processes
    metrics["perf/throughput"] = exp.seq.attention_mask.sum().item() / seconds["step"]
    metrics["perf/completion_tokens_per_s"] = exp.seq.response_mask.sum().item() / seconds["step"]
    dp = s.group.size
    s.counters.samples_seen += exp.num_rows * dp  # every process trains on an equal share
    metrics["samples"] = s.counters.samples_seen
    metrics = {k: float(v) for k, v in metrics.items()}
    return metrics if dp == 1 else across_processes(metrics, s.group.reduce, dp)


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
    policy = s.models.unwrapped_policy
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
    if not s.group.all(problem is None):
        raise NonFiniteModel(broken_model_message(problem or "logits stopped being finite numbers", step, lr))
    return norm


def broken_model_message(problem: str, step: int, lr: float) -> str:
    return (
        f"in step {step} the policy's {problem} (learning rate {lr:g}). The likely cause is a learning "
        "rate too high for this model: lower actor.optimizer.lr. Nothing of this step was saved: the "
        "checkpoints hold the model from before it"
    )
