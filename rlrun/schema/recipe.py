"""The whole recipe: one field per section, each with every default of `recipes/base.yaml`."""

from __future__ import annotations

from typing import Literal

from rlrun.schema.actor import Actor
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
    description: str = ""
    model: Model = Model()
    data: Data = Data()
    rollout: Rollout = Rollout()
    reward: Reward = Reward()
    algorithm: Algorithm = Algorithm()
    actor: Actor = Actor()
    critic: Critic = Critic()
    reference: Reference = Reference()
    distillation: Distillation = Distillation()
    trainer: Trainer = Trainer()
    logging: Logging = Logging()
