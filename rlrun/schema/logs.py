"""`logging`: where metrics go (console table, metrics.jsonl, Weights & Biases)."""

from __future__ import annotations

from typing import Literal

from rlrun.schema.base import NonNegativeInt, PositiveInt, Section


class Console(Section):
    enabled: bool = True
    """A progress bar with the key figures."""
    table_every_steps: PositiveInt = 10
    """Print a table of the key metrics every this many steps."""


class Wandb(Section):
    enabled: bool = False
    """Log to Weights & Biases."""
    mode: Literal["online", "offline", "disabled"] = "offline"
    """online | offline | disabled (WANDB_MODE overrides)"""
    project: str = "rlrun"
    """W&B project."""
    entity: str | None = None
    """W&B entity (user or team); null = your default."""


class Logging(Section):
    console: Console = Console()
    """The console progress bar and tables."""
    jsonl: bool = True
    """Write metrics.jsonl in the run directory."""
    samples_every_steps: NonNegativeInt = 10
    """Write sampled completions to samples.jsonl every this many steps; 0 = never."""
    wandb: Wandb = Wandb()
    """Weights & Biases."""
