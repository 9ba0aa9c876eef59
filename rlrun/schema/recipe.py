"""The whole recipe: one field per section, each with every default of `recipes/base.yaml`."""

from __future__ import annotations

from typing import Literal

from rlrun.schema.actor import Actor
from rlrun.schema.agent import Agent
from rlrun.schema.algorithm import Algorithm
from rlrun.schema.base import Section
from rlrun.schema.critic import Critic, Reference
from rlrun.schema.data import Data
from rlrun.schema.distillation import Distillation
from rlrun.schema.logs import Logging
from rlrun.schema.model import Model
from rlrun.schema.reward import Reward
from rlrun.schema.rollout import Rollout
from rlrun.schema.trainer import Trainer

SCHEMA_VERSION = 1


class Recipe(Section):
    """A resolved recipe (after `extends` and overrides)."""

    schema_version: Literal[1] = SCHEMA_VERSION
    """The recipe format's version; 1 is the only one."""
    description: str = ""
    """Free text: what this recipe is for (`rlrun recipes` shows it)."""
    model: Model = Model()
    """The policy being trained."""
    data: Data = Data()
    """Where prompts and answers come from."""
    rollout: Rollout = Rollout()
    """How responses are sampled."""
    reward: Reward = Reward()
    """The weighted reward functions and overlong shaping."""
    agent: Agent = Agent()
    """Multi-turn episodes (docs/agents.md): tools, environments, their format and limits; a response is then the whole episode."""
    algorithm: Algorithm = Algorithm()
    """Advantage estimation, in-reward KL, group filtering, plugins."""
    actor: Actor = Actor()
    """The policy loss, its KL and entropy terms, optimisation and batch sizes."""
    critic: Critic = Critic()
    """The value model (needed by estimators that declare a critic, e.g. gae)."""
    reference: Reference = Reference()
    """The KL anchor."""
    distillation: Distillation = Distillation()
    """On-policy distillation from a teacher that scores the student's tokens."""
    trainer: Trainer = Trainer()
    """How long, on what, with which evaluation and checkpoints."""
    logging: Logging = Logging()
    """Where metrics go: console, metrics.jsonl, Weights & Biases."""
