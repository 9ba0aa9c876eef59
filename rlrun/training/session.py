"""Everything one run is made of, built from the recipe: the Accelerator, models, optimizers,
rollout engine, data, rewards and algorithm components — and their checkpointed state.

`loop.py` reads the algorithm; this module answers "where does each piece come from" and
"what must be saved to continue exactly where we stopped".
"""

from __future__ import annotations

import gc
import hashlib
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import torch
from accelerate import Accelerator
from accelerate.utils import set_seed
from transformers.utils import logging as hf_logging

from rlrun.algorithms.kl import AdaptiveKLController, FixedKLController
from rlrun.algorithms.registries import ADVANTAGES, DISTILLATION_LOSSES, POLICY_LOSSES
from rlrun.data import PromptDataset, PromptSampler, load_prompt_datasets
from rlrun.errors import ConfigIssue, RecipeError
from rlrun.evaluation import build_agent_spec, evaluate_recipe, reward_functions
from rlrun.recipes.batch_plan import schedule_steps
from rlrun.records import checkpoint as ckpt
from rlrun.rewards import RewardCombiner
from rlrun.rollout import SamplingParams
from rlrun.schema import Recipe
from rlrun.training.context import (
    Components,
    Counters,
    Generation,
    Models,
    Optimization,
    ProcessGroup,
    StepContext,
)
from rlrun.training.experience import ExperienceCollector
from rlrun.training.models import ValueModel, load_causal_lm, load_tokenizer, with_lora
from rlrun.training.needs import needs_of
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
from rlrun.training.stages import Pipeline

# Resuming with a different value under any of these keys would continue a different run.
RESUME_LOCKED_KEYS = ("model", "data")


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
    """The built run: its parts (each owned by one object, see `training.context`), the stages
    its recipe runs, and its checkpointed state."""

    def __init__(
        self, recipe: Recipe, *, accelerator: Accelerator | None = None, warn: Callable[[str], None] = print
    ):
        self.recipe = r = recipe
        hf_logging.disable_progress_bar()  # loading bars would drown the run's own progress bar
        self.group = ProcessGroup(
            accelerator or Accelerator(cpu=on_cpu(r), step_scheduler_with_optimizer=False)
        )
        set_seed(r.trainer.seed)
        self.strategy = strategy_in_effect(self.group.accelerator, r.trainer.strategy)  # the one that runs
        self.needs = needs_of(r)
        self.pipeline = Pipeline.build(r, self.needs)
        self.counters = Counters()
        # In this order: each builder uses what the ones before made, and the seeded RNG is drawn
        # from in this order (a critic's value head is initialised randomly).
        tokenizer, train_data, val_data, prompts = self._data()
        self.models, self.optim = self._models()
        self.components = self._components()
        self.generation = self._generation(tokenizer, train_data, val_data, prompts)
        self.context = StepContext(
            recipe=r,
            group=self.group,
            models=self.models,
            optim=self.optim,
            components=self.components,
            generation=self.generation,
            counters=self.counters,
            warn=warn,
        )

    def _data(self) -> tuple[Any, PromptDataset, PromptDataset | None, PromptSampler]:
        """The tokenizer, the train and validation prompts, and the sampler drawing from them."""
        r = self.recipe
        tokenizer = load_tokenizer(r.model.tokenizer or r.model.path, r.model.trust_remote_code)
        train_data, val_data = load_prompt_datasets(r.data, tokenizer)
        return (
            tokenizer,
            train_data,
            val_data,
            PromptSampler(len(train_data), shuffle=r.data.shuffle, seed=r.data.seed),
        )

    def _models(self) -> tuple[Models, Optimization]:
        """The policy and its optimizer and schedule; the reference, teacher and critic the
        algorithm needs (and nothing else)."""
        r, device = self.recipe, self.group.device
        policy = load_causal_lm(r.model.path, r.model.dtype, r.model.trust_remote_code)
        policy = (with_lora(policy, r.model.lora) if r.model.lora else policy).to(device)
        if r.model.gradient_checkpointing:
            policy.gradient_checkpointing_enable()
            if r.model.lora:  # frozen embeddings: checkpointed blocks need inputs that carry grad
                policy.enable_input_require_grads()
        policy, optimizer = self._prepare_trained(policy, r.actor.optimizer)
        # With LoRA the reference is the policy with its adapters disabled: no second copy.
        reference = (
            self._frozen(r.reference.path or r.model.path)
            if self.needs.reference and not r.model.lora
            else None
        )
        critic = critic_optimizer = None
        if self.needs.critic:
            critic = ValueModel.from_pretrained(
                r.critic.model_path or r.model.path, r.model.dtype, r.model.trust_remote_code
            ).to(device)
            critic, critic_optimizer = self._prepare_trained(critic, r.critic.optimizer)
        models = Models(
            policy=policy,
            policy_forward=self._forward(policy, compile=r.trainer.compile),
            reference=reference,
            teacher=self._frozen(r.distillation.teacher) if self.needs.teacher else None,
            critic=critic,
            critic_forward=self._forward(critic, compile=r.trainer.compile) if critic is not None else None,
            unwrap=self.group.accelerator.unwrap_model,
            frozen_forward=lambda model: self._forward(model, compile=False),
        )
        scheduler = build_scheduler(optimizer, r.actor.lr_scheduler, schedule_steps(r))
        return models, Optimization(optimizer, scheduler, critic_optimizer)

    def _prepare_trained(
        self, model: torch.nn.Module, optimizer_config: Any
    ) -> tuple[torch.nn.Module, torch.optim.Optimizer]:
        """A trained model and its optimizer, distributed as `trainer.strategy` says: by
        Accelerate, or sharded by rlrun where Accelerate does not run FSDP2 (CPU)."""
        accelerator = self.group.accelerator
        if shards_itself(accelerator, self.recipe.trainer.strategy):
            model = shard(model, accelerator)  # before the optimizer: it holds the shards
            return model, accelerator.prepare(build_optimizer(model.parameters(), optimizer_config))
        return accelerator.prepare(model, build_optimizer(model.parameters(), optimizer_config))

    def _components(self) -> Components:
        """The algorithm's registered components (with what they declared they need) and the
        in-reward KL controller."""
        r = self.recipe
        kl = r.algorithm.kl_in_reward
        return Components(
            advantage_fn=ADVANTAGES.get(r.algorithm.advantage),
            advantage_needs=ADVANTAGES.needs(r.algorithm.advantage),
            policy_loss_fn=POLICY_LOSSES.get(r.actor.policy_loss),
            policy_loss_needs=POLICY_LOSSES.needs(r.actor.policy_loss),
            distillation_needs=DISTILLATION_LOSSES.needs(r.distillation.loss),
            kl_ctrl=(
                AdaptiveKLController(kl.coef, kl.target_kl, kl.horizon)
                if kl.controller == "adaptive"
                else FixedKLController(kl.coef)
            ),
        )

    def _generation(
        self,
        tokenizer: Any,
        train_data: PromptDataset,
        val_data: PromptDataset | None,
        prompts: PromptSampler,
    ) -> Generation:
        """The rollout engine on the policy's weights, the reward functions, and the collector
        that samples and scores each step's experience."""
        r = self.recipe
        engine = build_rollout_engine(r, self.models.unwrapped_policy, tokenizer)
        agent = build_agent_spec(r, tokenizer)
        reward_fn = RewardCombiner(
            reward_functions(r, agent), answer_key=r.data.answer_key, chat=train_data.chat
        )
        sampling = SamplingParams.from_rollout(r.rollout)
        collector = ExperienceCollector(
            engine=engine,
            tokenizer=tokenizer,
            dataset=train_data,
            sampler=prompts,
            reward_fn=reward_fn,
            sampling=sampling,
            overlong=r.reward.overlong_shaping,
            group_filter=r.algorithm.group_filter,
            device=self.group.device,
            rank=self.group.rank,
            world=self.group.size,
            everywhere=self.group.all,
            agent=agent,
        )
        return Generation(
            tokenizer, train_data, val_data, prompts, engine, reward_fn, sampling, collector, agent
        )

    def _frozen(self, path: str) -> torch.nn.Module:
        model = load_causal_lm(
            path, self.recipe.model.dtype, self.recipe.model.trust_remote_code, trainable=False
        ).to(self.group.device)
        if self.strategy == "fsdp2":  # Accelerate shards only the models it prepares
            model = shard(model, self.group.accelerator)
        return self._forward(model, compile=False)  # scored without grad, once a step

    def _forward(self, model: torch.nn.Module, *, compile: bool) -> TrainerForward:
        """`model` as the trainer's passes call it (`trainer.autocast`, `trainer.compile`)."""
        return TrainerForward(
            model, autocast=self.recipe.trainer.autocast, compile=compile, device_type=self.group.device.type
        )

    def evaluate(self) -> dict[str, float]:
        """Held-out accuracy (`val/accuracy` = mean@k) on the validation split, and its seconds
        (`timing_s/eval`: a row's wall time less these is training time)."""
        g = self.generation
        if g.val_data is None:
            return {}
        start = time.perf_counter()
        with gathered(self.models.policy):
            result = evaluate_recipe(
                g.engine, g.tokenizer, g.val_data, self.recipe, g.reward_fn, agent=g.agent
            )
        return result.metrics() | {"timing_s/eval": time.perf_counter() - start}

    # --- checkpointed state ---------------------------------------------------------------

    def train_state(self, wandb_run_id: str | None) -> TrainState:
        """Under FSDP2 every process must call this (the optimizer states are gathered); the
        main process gets the whole state."""
        m, o, c, g = self.models, self.optim, self.counters, self.generation
        return TrainState(
            step=c.step,
            skipped_updates=c.skipped_updates,
            samples_seen=c.samples_seen,
            optimizer=full_optimizer_state(m.policy, o.optimizer),
            scheduler=o.scheduler.state_dict(),
            critic_optimizer=full_optimizer_state(m.critic, o.critic_optimizer)
            if o.critic_optimizer
            else None,
            rng=ckpt.capture_rng_state(),
            data=g.prompts.state_dict(),
            kl_controller=self.components.kl_ctrl.state_dict(),
            wandb_run_id=wandb_run_id,
            tokenizer_fingerprint=tokenizer_fingerprint(g.tokenizer),
        )

    def save_checkpoint(self, root: Path, wandb_run_id: str | None) -> Path | None:
        """Write the checkpoint of the current step (main process only; all processes wait, and
        under FSDP2 gather the whole weights and optimizer states for it)."""
        accelerator, m = self.group.accelerator, self.models
        accelerator.wait_for_everyone()
        state = self.train_state(wandb_run_id).to_dict()
        weights = full_weights(m.policy)
        critic_weights = full_weights(m.critic) if m.critic is not None else None
        path = None
        if accelerator.is_main_process:
            path = ckpt.save_checkpoint(
                root,
                self.counters.step,
                model=m.unwrapped_policy,
                tokenizer=self.generation.tokenizer,
                state=state,
                critic=m.unwrap(m.critic) if m.critic is not None else None,
                weights=weights,
                critic_weights=critic_weights,
                keep_last=self.recipe.trainer.checkpoint.keep_last,
            )
        accelerator.wait_for_everyone()
        return path

    def close(self) -> None:
        """Let go of the models, optimizers, rollout engine and components (and the accelerator's
        references to them) and collect them now, once training is over: their memory comes back
        to a caller that goes on (`rlrun.train` in a notebook). The counters and the recipe
        stay."""
        self.group.accelerator.free_memory()
        del self.models, self.optim, self.components, self.generation, self.context
        gc.collect()

    def load_checkpoint(self, path: Path) -> TrainState:
        """Restore weights and state from `path`; returns the trainer state (for the W&B id)."""
        try:
            state = TrainState.from_dict(ckpt.load_trainer_state(path))
        except KeyError as exc:
            raise ckpt.unreadable_state(
                path / ckpt.TRAINER_STATE, f"lacks the trainer state's {exc}"
            ) from None
        m, o, g = self.models, self.optim, self.generation
        if state.tokenizer_fingerprint != tokenizer_fingerprint(g.tokenizer):
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
        ckpt.load_policy_weights(path, m.unwrapped_policy, load=load)
        if m.critic is not None:
            ckpt.load_critic_weights(path, m.unwrap(m.critic), load=load)
            load_full_optimizer_state(m.critic, o.critic_optimizer, state.critic_optimizer)
        load_full_optimizer_state(m.policy, o.optimizer, state.optimizer)
        o.scheduler.load_state_dict(state.scheduler)
        g.prompts.load_state_dict(state.data)
        self.components.kl_ctrl.load_state_dict(state.kl_controller)
        ckpt.restore_rng_state(state.rng)
        self.counters.step = state.step
        self.counters.skipped_updates = state.skipped_updates
        self.counters.samples_seen = state.samples_seen
        g.engine.sync_weights(m.unwrapped_policy)
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
