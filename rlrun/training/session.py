"""Everything one run is made of, built from the recipe: the Accelerator, models, optimizers,
rollout engine, data, rewards and algorithm components — and their checkpointed state.

`loop.py` reads the algorithm; this module answers "where does each piece come from" and
"what must be saved to continue exactly where we stopped".
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import numpy as np
import torch
from accelerate import Accelerator
from accelerate.utils import set_seed
from transformers.utils import logging as hf_logging

from rlrun.algorithms.kl import AdaptiveKLController, FixedKLController, KLController
from rlrun.algorithms.registries import ADVANTAGES, POLICY_LOSSES
from rlrun.data import PromptDataset, PromptSampler, load_prompt_datasets
from rlrun.errors import ConfigIssue, RecipeError
from rlrun.evaluation import evaluate_recipe
from rlrun.recipes.batch_plan import batch_plan, schedule_steps
from rlrun.records import checkpoint as ckpt
from rlrun.rewards import RewardCombiner
from rlrun.rollout import SamplingParams
from rlrun.schema import Recipe
from rlrun.training.experience import ExperienceCollector
from rlrun.training.models import ValueModel, load_causal_lm, load_tokenizer, with_lora
from rlrun.training.optim import build_optimizer, build_scheduler
from rlrun.training.precision import TrainerForward
from rlrun.training.rollout_engine import build_rollout_engine
from rlrun.training.sharding import (
    full_optimizer_state,
    full_weights,
    gathered,
    load_full_optimizer_state,
    load_full_weights,
    shard,
    shards_itself,
    strategy_in_effect,
)

# Resuming with a different value under any of these keys would continue a different run.
RESUME_LOCKED_KEYS = ("model", "data")


def step_seed(seed: int, step: int, stream: int) -> int:
    """A seed for one purpose (`stream`) at one step, independent of every other: generation and
    shuffling depend only on (seed, step), so a resumed run draws exactly what it would have."""
    return int(np.random.SeedSequence([seed, step, stream]).generate_state(1)[0])


GEN_STREAM, SHUFFLE_STREAM = 0, 1  # the critic shuffles with SHUFFLE_STREAM + 1
LOSS_STREAM = 3  # random draws of a policy loss that declares `draws_random` (clip_cov)


@dataclass
class Needs:
    """Which optional passes this recipe's algorithm needs (nothing else is computed)."""

    reference: bool
    critic: bool
    teacher: bool
    greedy_baseline: bool
    recompute_old_log_probs: bool
    sum_pi_squared: bool


def needs_of(recipe: Recipe) -> Needs:
    advantage = ADVANTAGES.needs(recipe.algorithm.advantage)  # what the estimator declared
    return Needs(
        reference=recipe.algorithm.kl_in_reward.enabled or recipe.actor.kl_loss.enabled,
        critic=recipe.critic.enabled,
        teacher=recipe.distillation.enabled,
        greedy_baseline=advantage.needs_greedy_baseline,
        # The sampler's log-probs are the old policy's when the engine computes them as the
        # trainer does (hf, float32, no autocast) and the policy has not moved since sampling.
        recompute_old_log_probs=(
            batch_plan(recipe).optimizer_steps > 1
            or recipe.rollout.engine != "hf"
            or recipe.model.dtype != "float32"
            or recipe.trainer.autocast is not None
            or recipe.rollout.importance_sampling.level != "off"
        ),
        sum_pi_squared=advantage.needs_sum_pi_squared,
    )


def on_cpu(recipe: Recipe) -> bool:
    """Whether the run trains on CPU. Every Accelerate state of the process must be built with
    the same answer: a `PartialState()` followed by `Accelerator(cpu=True)` silently drops the
    distributed setup, and every launched process would then train alone."""
    return recipe.trainer.device == "cpu" or not torch.cuda.is_available()


@dataclass
class TrainState:
    """What a checkpoint's `trainer_state.pt` holds besides the weights: all a resumed run needs
    to continue exactly where it stopped. Saved as a plain dict of these fields (tensors and plain
    values only, so it loads with `torch.load(..., weights_only=True)`, and without rlrun)."""

    step: int  # the last completed training step
    skipped_updates: int  # updates skipped for a non-finite gradient so far
    samples_seen: int  # responses trained on so far
    optimizer: dict[str, Any]
    scheduler: dict[str, Any]
    critic_optimizer: dict[str, Any] | None  # None without a critic
    rng: dict[str, Any]  # Python, numpy and torch generator states (checkpoint.capture_rng_state)
    data: dict[str, Any]  # the prompt sampler's position
    kl_controller: dict[str, Any]  # the in-reward KL coefficient, for an adaptive controller
    wandb_run_id: str | None  # a resumed run continues the same W&B run
    tokenizer_fingerprint: str  # resuming with another tokenizer is refused

    def to_dict(self) -> dict[str, Any]:
        return {field.name: getattr(self, field.name) for field in fields(self)}

    @classmethod
    def from_dict(cls, saved: dict[str, Any]) -> TrainState:
        return cls(**{field.name: saved[field.name] for field in fields(cls)})


def tokenizer_fingerprint(tokenizer: Any) -> str:
    vocab = json.dumps(sorted(tokenizer.get_vocab().items()))
    return hashlib.sha256(vocab.encode()).hexdigest()[:16]


class Session:
    """The built run. `step` is the last completed training step (0 before the first)."""

    def __init__(
        self, recipe: Recipe, *, accelerator: Accelerator | None = None, warn: Callable[[str], None] = print
    ):
        self.recipe = r = recipe
        hf_logging.disable_progress_bar()  # loading bars would drown the run's own progress bar
        self.accelerator = accelerator or Accelerator(cpu=on_cpu(r), step_scheduler_with_optimizer=False)
        set_seed(r.trainer.seed)
        self.device = self.accelerator.device
        self.strategy = strategy_in_effect(self.accelerator, r.trainer.strategy)  # the one that runs
        self.needs = needs_of(r)
        self.step = 0  # last completed training step
        self.skipped_updates = 0
        self.samples_seen = 0  # responses trained on so far
        self.warn = warn  # a console note (a skipped update) that does not stop the run
        # In this order: each builder uses what the ones before made, and the seeded RNG is drawn
        # from in this order (a critic's value head is initialised randomly).
        self._setup_data()
        self._setup_models()
        self._setup_components()
        self._setup_rollout()

    def _setup_data(self) -> None:
        """The tokenizer, the train and validation prompts, and the sampler drawing from them."""
        r = self.recipe
        self.tokenizer = load_tokenizer(r.model.tokenizer or r.model.path, r.model.trust_remote_code)
        self.train_data, val_data = load_prompt_datasets(r.data, self.tokenizer)
        self.val_data: PromptDataset | None = val_data
        self.sampler = PromptSampler(len(self.train_data), shuffle=r.data.shuffle, seed=r.data.seed)

    def _setup_models(self) -> None:
        """The policy and its optimizer and schedule; the reference, teacher and critic the
        algorithm needs (and nothing else)."""
        r = self.recipe
        policy = load_causal_lm(r.model.path, r.model.dtype, r.model.trust_remote_code)
        policy = (with_lora(policy, r.model.lora) if r.model.lora else policy).to(self.device)
        if r.model.gradient_checkpointing:
            policy.gradient_checkpointing_enable()
            if r.model.lora:  # frozen embeddings: checkpointed blocks need inputs that carry grad
                policy.enable_input_require_grads()
        self.policy, self.optimizer = self._prepare_trained(policy, r.actor.optimizer)
        self.policy_forward = self._forward(self.policy, compile=r.trainer.compile)
        self.scheduler = build_scheduler(self.optimizer, r.actor.lr_scheduler, schedule_steps(r))

        # With LoRA the reference is the policy with its adapters disabled: no second copy.
        self.reference = (
            self._frozen(r.reference.path or r.model.path)
            if self.needs.reference and not r.model.lora
            else None
        )
        self.teacher = self._frozen(r.distillation.teacher) if self.needs.teacher else None
        self.critic = self.critic_optimizer = self.critic_forward = None
        if self.needs.critic:
            critic = ValueModel.from_pretrained(
                r.critic.model_path or r.model.path, r.model.dtype, r.model.trust_remote_code
            ).to(self.device)
            self.critic, self.critic_optimizer = self._prepare_trained(critic, r.critic.optimizer)
            self.critic_forward = self._forward(self.critic, compile=r.trainer.compile)

    def _prepare_trained(
        self, model: torch.nn.Module, optimizer_config: Any
    ) -> tuple[torch.nn.Module, torch.optim.Optimizer]:
        """A trained model and its optimizer, distributed as `trainer.strategy` says: by
        Accelerate, or sharded by rlrun where Accelerate does not run FSDP2 (CPU)."""
        if shards_itself(self.accelerator, self.recipe.trainer.strategy):
            model = shard(model, self.accelerator)  # before the optimizer: it holds the shards
            return model, self.accelerator.prepare(build_optimizer(model.parameters(), optimizer_config))
        return self.accelerator.prepare(model, build_optimizer(model.parameters(), optimizer_config))

    def _setup_components(self) -> None:
        """The algorithm's registered components (with what they declared they need) and the
        in-reward KL controller."""
        r = self.recipe
        self.advantage_fn = ADVANTAGES.get(r.algorithm.advantage)
        self.policy_loss_fn = POLICY_LOSSES.get(r.actor.policy_loss)
        self.advantage_needs = ADVANTAGES.needs(r.algorithm.advantage)
        self.policy_loss_needs = POLICY_LOSSES.needs(r.actor.policy_loss)
        kl = r.algorithm.kl_in_reward
        self.kl_ctrl: KLController = (
            AdaptiveKLController(kl.coef, kl.target_kl, kl.horizon)
            if kl.controller == "adaptive"
            else FixedKLController(kl.coef)
        )

    def _setup_rollout(self) -> None:
        """The rollout engine on the policy's weights, the reward functions, and the collector
        that samples and scores each step's experience."""
        r = self.recipe
        self.engine = build_rollout_engine(r, self.unwrapped_policy, self.tokenizer)
        self.reward_fn = RewardCombiner(
            r.reward.functions,
            answer_key=r.data.answer_key,
            chat=self.train_data.chat,
        )
        self.sampling = SamplingParams.from_rollout(r.rollout)
        self.collector = ExperienceCollector(
            engine=self.engine,
            tokenizer=self.tokenizer,
            dataset=self.train_data,
            sampler=self.sampler,
            reward_fn=self.reward_fn,
            sampling=self.sampling,
            overlong=r.reward.overlong_shaping,
            group_filter=r.algorithm.group_filter,
            device=self.device,
            rank=self.accelerator.process_index,
            world=self.accelerator.num_processes,
            everywhere=self._on_every_process,
        )

    def _on_every_process(self, flag: bool) -> bool:
        if self.accelerator.num_processes == 1:
            return flag
        count = self.accelerator.reduce(torch.tensor(int(flag), device=self.device), reduction="sum")
        return int(count) == self.accelerator.num_processes

    def _frozen(self, path: str) -> torch.nn.Module:
        model = load_causal_lm(
            path, self.recipe.model.dtype, self.recipe.model.trust_remote_code, trainable=False
        ).to(self.device)
        if self.strategy == "fsdp2":  # Accelerate shards only the models it prepares
            model = shard(model, self.accelerator)
        return self._forward(model, compile=False)  # scored without grad, once a step

    def _forward(self, model: torch.nn.Module, *, compile: bool) -> TrainerForward:
        """`model` as the trainer's passes call it (`trainer.autocast`, `trainer.compile`)."""
        return TrainerForward(
            model, autocast=self.recipe.trainer.autocast, compile=compile, device_type=self.device.type
        )

    @property
    def unwrapped_policy(self) -> torch.nn.Module:
        return self.accelerator.unwrap_model(self.policy)

    @contextmanager
    def reference_model(self) -> Iterator[torch.nn.Module]:
        """The reference policy for the KL terms: the frozen copy, or the policy with its LoRA
        adapters disabled for the duration of the block."""
        if self.reference is not None:
            with gathered(self.reference):
                yield self.reference
            return
        with self.unwrapped_policy.disable_adapter():
            yield self._forward(self.unwrapped_policy, compile=False)

    def evaluate(self) -> dict[str, float]:
        """Held-out accuracy (`val/accuracy` = mean@k) on the validation split, and its seconds
        (`timing_s/eval`: a row's wall time less these is training time)."""
        if self.val_data is None:
            return {}
        start = time.perf_counter()
        with gathered(self.policy):
            result = evaluate_recipe(self.engine, self.tokenizer, self.val_data, self.recipe, self.reward_fn)
        return result.metrics() | {"timing_s/eval": time.perf_counter() - start}

    # --- checkpointed state ---------------------------------------------------------------

    def train_state(self, wandb_run_id: str | None) -> TrainState:
        """Under FSDP2 every process must call this (the optimizer states are gathered); the
        main process gets the whole state."""
        return TrainState(
            step=self.step,
            skipped_updates=self.skipped_updates,
            samples_seen=self.samples_seen,
            optimizer=full_optimizer_state(self.policy, self.optimizer),
            scheduler=self.scheduler.state_dict(),
            critic_optimizer=(
                full_optimizer_state(self.critic, self.critic_optimizer) if self.critic_optimizer else None
            ),
            rng=ckpt.capture_rng_state(),
            data=self.sampler.state_dict(),
            kl_controller=self.kl_ctrl.state_dict(),
            wandb_run_id=wandb_run_id,
            tokenizer_fingerprint=tokenizer_fingerprint(self.tokenizer),
        )

    def save_checkpoint(self, root: Path, wandb_run_id: str | None) -> Path | None:
        """Write the checkpoint of the current step (main process only; all processes wait, and
        under FSDP2 gather the whole weights and optimizer states for it)."""
        self.accelerator.wait_for_everyone()
        state = self.train_state(wandb_run_id).to_dict()
        weights = full_weights(self.policy)
        critic_weights = full_weights(self.critic) if self.critic is not None else None
        path = None
        if self.accelerator.is_main_process:
            critic = self.accelerator.unwrap_model(self.critic) if self.critic is not None else None
            path = ckpt.save_checkpoint(
                root,
                self.step,
                model=self.unwrapped_policy,
                tokenizer=self.tokenizer,
                state=state,
                critic=critic,
                weights=weights,
                critic_weights=critic_weights,
                keep_last=self.recipe.trainer.checkpoint.keep_last,
            )
        self.accelerator.wait_for_everyone()
        return path

    def load_checkpoint(self, path: Path) -> TrainState:
        """Restore weights and state from `path`; returns the trainer state (for the W&B id)."""
        try:
            state = TrainState.from_dict(ckpt.load_trainer_state(path))
        except KeyError as exc:
            raise ckpt.unreadable_state(
                path / ckpt.TRAINER_STATE, f"lacks the trainer state's {exc}"
            ) from None
        if state.tokenizer_fingerprint != tokenizer_fingerprint(self.tokenizer):
            raise RecipeError(
                [
                    ConfigIssue(
                        "the tokenizer differs from the one the run was trained with",
                        key="model.tokenizer",
                        code="resume-changed",
                        fix="resume with the run's own recipe, or start a new run",
                    )
                ]
            )
        load = load_full_weights if self.strategy == "fsdp2" else None
        ckpt.load_policy_weights(path, self.unwrapped_policy, load=load)
        if self.critic is not None:
            ckpt.load_critic_weights(path, self.accelerator.unwrap_model(self.critic), load=load)
            load_full_optimizer_state(self.critic, self.critic_optimizer, state.critic_optimizer)
        load_full_optimizer_state(self.policy, self.optimizer, state.optimizer)
        self.scheduler.load_state_dict(state.scheduler)
        self.sampler.load_state_dict(state.data)
        self.kl_ctrl.load_state_dict(state.kl_controller)
        ckpt.restore_rng_state(state.rng)
        self.step, self.skipped_updates, self.samples_seen = (
            state.step,
            state.skipped_updates,
            state.samples_seen,
        )
        self.engine.sync_weights(self.unwrapped_policy)
        return state


def locked_changes(saved: dict[str, Any], new: dict[str, Any]) -> list[ConfigIssue]:
    """Differences between a run's resolved recipe and the one it is resumed with that would
    make it a different run (model, tokenizer, data)."""
    issues = []
    for section in RESUME_LOCKED_KEYS:
        for key in sorted(set(saved.get(section, {})) | set(new.get(section, {}))):
            old, now = saved.get(section, {}).get(key), new.get(section, {}).get(key)
            if old != now:
                issues.append(
                    ConfigIssue(
                        f"resuming would change the {section} the run was trained with",
                        key=f"{section}.{key}",
                        code="resume-changed",
                        expected=json.dumps(old),
                        found=json.dumps(now),
                        fix="resume with the run's own recipe (`rlrun resume RUN_DIR`), or start a new run",
                    )
                )
    return issues
