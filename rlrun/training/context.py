"""What the stages of a training step work with, each part owned by one object.

`Session` builds these from the recipe; a stage receives them all as one `StepContext` and
reads or changes only the parts it needs: the models, their optimizers and schedules, the
run's counters, the process group, the algorithm's components, and what generates and scores
the experience.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import torch
from accelerate import Accelerator

from rlrun.agents.spec import AgentSpec
from rlrun.algorithms.kl import KLController
from rlrun.data import PromptDataset, PromptSampler
from rlrun.registry import ComponentNeeds
from rlrun.rewards import RewardCombiner
from rlrun.rollout import RolloutEngine, SamplingParams
from rlrun.schema import Recipe
from rlrun.training.experience import ExperienceCollector
from rlrun.training.sharding import gathered


@dataclass
class Counters:
    """Where the run stands (checkpointed with it)."""

    step: int = 0  # the last completed training step (0 before the first)
    skipped_updates: int = 0  # updates skipped for a non-finite gradient so far
    samples_seen: int = 0  # responses trained on so far, over all processes


class ProcessGroup:
    """The run's data-parallel processes. With one process every collective is the identity, so
    a one-process run makes no collective calls."""

    def __init__(self, accelerator: Accelerator):
        self.accelerator = accelerator

    @property
    def size(self) -> int:
        return self.accelerator.num_processes

    @property
    def rank(self) -> int:
        return self.accelerator.process_index

    @property
    def device(self) -> torch.device:
        return self.accelerator.device

    def all(self, flag: bool) -> bool:
        """True on every process when `flag` is true on all of them (a collective)."""
        if self.size == 1:
            return flag
        count = self.accelerator.reduce(torch.tensor(int(flag), device=self.device), reduction="sum")
        return int(count) == self.size

    def reduce(self, x: torch.Tensor, op: str) -> torch.Tensor:
        """`x` reduced over the processes (`op`: "sum" | "mean" | "max")."""
        return x if self.size == 1 else self.accelerator.reduce(x, reduction=op)

    def sum(self, x: torch.Tensor) -> torch.Tensor:
        return self.reduce(x, "sum")


@dataclass
class Models:
    """The policy and the models the algorithm needs beside it (None where it needs none).
    `policy` and `critic` are as their optimizers train them (wrapped for data parallelism);
    the `*_forward` callables are how the trainer's passes call them (autocast, compile)."""

    policy: torch.nn.Module
    policy_forward: Callable[..., Any]
    reference: Callable[..., Any] | None
    teacher: Callable[..., Any] | None
    critic: torch.nn.Module | None
    critic_forward: Callable[..., Any] | None
    unwrap: Callable[[torch.nn.Module], torch.nn.Module]  # the model inside its parallel wrapper
    frozen_forward: Callable[[torch.nn.Module], Callable[..., Any]]  # a model scored without grad

    @property
    def unwrapped_policy(self) -> torch.nn.Module:
        return self.unwrap(self.policy)

    @contextmanager
    def reference_model(self) -> Iterator[Callable[..., Any]]:
        """The reference policy for the KL terms: the frozen copy, or the policy with its LoRA
        adapters disabled for the duration of the block."""
        if self.reference is not None:
            with gathered(self.reference):
                yield self.reference
            return
        with self.unwrapped_policy.disable_adapter():
            yield self.frozen_forward(self.unwrapped_policy)


@dataclass
class Optimization:
    """The optimizers and the learning-rate schedule."""

    optimizer: torch.optim.Optimizer
    scheduler: torch.optim.lr_scheduler.LRScheduler
    critic_optimizer: torch.optim.Optimizer | None


@dataclass
class Components:
    """The algorithm's registered components, with what each declared it needs."""

    advantage_fn: Callable[..., tuple[torch.Tensor, torch.Tensor]]
    advantage_needs: ComponentNeeds
    policy_loss_fn: Callable[..., tuple[torch.Tensor, dict[str, Any]]]
    policy_loss_needs: ComponentNeeds
    distillation_needs: ComponentNeeds
    kl_ctrl: KLController  # the in-reward KL coefficient (adaptive or fixed)


@dataclass
class Generation:
    """What produces a step's experience: the data, the rollout engine and the rewards."""

    tokenizer: Any
    train_data: PromptDataset
    val_data: PromptDataset | None
    prompts: PromptSampler  # the seeded, resumable order of the training prompts
    engine: RolloutEngine
    reward_fn: RewardCombiner
    sampling: SamplingParams  # the recipe's rollout settings
    collector: ExperienceCollector
    agent: AgentSpec | None  # an agent's tools, environments and format (None: single responses)


@dataclass
class StepContext:
    """Everything a stage may use; the parts are shared with the session that built them."""

    recipe: Recipe
    group: ProcessGroup
    models: Models
    optim: Optimization
    components: Components
    generation: Generation
    counters: Counters
    warn: Callable[[str], None]  # a console note (a skipped update) that does not stop the run
