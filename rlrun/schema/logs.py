"""`logging`: where metrics go (console table, metrics.jsonl, Weights & Biases)."""

from __future__ import annotations

from typing import Literal

from rlrun.schema.base import NonNegativeInt, PositiveInt, Section


class Console(Section):
    enabled: bool = True
    table_every_steps: PositiveInt = 10


class Wandb(Section):
    enabled: bool = False
    mode: Literal["online", "offline", "disabled"] = "offline"
    project: str = "rlrun"
    entity: str | None = None


class Logging(Section):
    console: Console = Console()
    jsonl: bool = True
    samples_every_steps: NonNegativeInt = 10
    wandb: Wandb = Wandb()
