"""Stages: the parts of a training step, each declaring when it runs and what it reads and writes.

A stage is a function `(ctx: StepContext, batch: StepBatch) -> None` registered with
`register_stage`. It declares from the recipe and the registered components' needs whether it
runs (`when`), the `StepBatch` fields it reads (`reads`: an earlier stage must write them;
`uses`: read when an earlier stage wrote them, None otherwise) and the ones it writes, and the
`timing_s/*` phase its seconds add to. The step (`loop.training_step`) runs a recipe's `Pipeline`: the
registered stages whose `when` holds, in registration order, each seeing only the fields it
declared (`StepBatch.view`). A new stage, or a component with other needs, is added by
registering a stage, never by editing the step: `after=` places it behind a stage already
registered, and the pipeline is checked when it is built (every field a stage reads is written
by an earlier stage that runs).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, fields
from typing import Any

import torch

from rlrun.schema import Recipe
from rlrun.training.context import StepContext
from rlrun.training.experience import Experience
from rlrun.training.needs import Needs
from rlrun.training.profiling import Timer


@dataclass
class StepBatch:
    """What one step's stages read and write. `step`, `timer` and `metrics` are every stage's;
    the other fields are written by the stage that declares them (None until then), and a
    plugin stage's own fields live in `extra`, under the names it declared."""

    step: int
    timer: Timer
    metrics: dict[str, float] = field(default_factory=dict)  # the step's numbers, by metric name
    experience: Experience | None = None  # the scored rollouts (the prompts' groups of n rows)
    gen_batches: int | None = None  # generation batches it took (more with dynamic sampling)
    baselines: torch.Tensor | None = None  # (N,) a greedy response's reward per row (ReMax)
    update_parts: list[torch.Tensor] | None = None  # the rows of each micro-batch of the first epoch
    ref_log_probs: torch.Tensor | None = None  # (N, T) the reference policy's
    old_log_probs: torch.Tensor | None = None  # (N, T) the policy's before this step's updates
    sum_pi_squared: torch.Tensor | None = None  # (N, T) Σ_v π(v)² at each response position
    teacher: dict[str, torch.Tensor] | None = None  # the teacher's scores of the sampled tokens
    values: torch.Tensor | None = None  # (N, T) the critic's values
    token_level_scores: torch.Tensor | None = None  # (N, T) each response's score on its last token
    token_level_rewards: torch.Tensor | None = None  # (N, T) the scores less an in-reward KL
    is_weights: torch.Tensor | None = None  # (N, T) truncated importance weights (rollout vs trainer)
    advantages: torch.Tensor | None = None  # (N, T)
    returns: torch.Tensor | None = None  # (N, T)
    lr: float | None = None  # the learning rate this step's updates used
    extra: dict[str, Any] = field(default_factory=dict)  # plugin stages' fields

    def view(self, stage: Stage) -> _StageView:
        return _StageView(self, stage)


SHARED_FIELDS = frozenset({"step", "timer", "metrics"})  # every stage may use these
BATCH_FIELDS = frozenset(f.name for f in fields(StepBatch)) - {"extra"}


class _StageView:
    """The batch as one stage sees it: the fields it declared, nothing else (a read or write of
    an undeclared field is an error naming the stage)."""

    def __init__(self, batch: StepBatch, stage: Stage):
        object.__setattr__(self, "_batch", batch)
        object.__setattr__(self, "_stage", stage)

    def __getattr__(self, name: str) -> Any:
        stage = self._stage
        if name not in SHARED_FIELDS | stage.reads | stage.uses | stage.writes:
            raise AttributeError(f"stage {stage.name!r} reads {name!r}, which it did not declare in reads=")
        return getattr(self._batch, name) if name in BATCH_FIELDS else self._batch.extra.get(name)

    def __setattr__(self, name: str, value: Any) -> None:
        stage = self._stage
        if name not in stage.writes and name != "metrics":
            raise AttributeError(f"stage {stage.name!r} writes {name!r}, which it did not declare in writes=")
        if name in BATCH_FIELDS:
            setattr(self._batch, name, value)
        else:
            self._batch.extra[name] = value


StageFn = Callable[[StepContext, Any], None]  # (ctx, the batch as the stage sees it)
When = Callable[[Recipe, Needs], bool]


@dataclass(frozen=True)
class Stage:
    name: str
    run: StageFn
    when: When  # whether a recipe runs this stage, from the recipe and its components' needs
    reads: frozenset[str]  # written by an earlier stage of the pipeline
    uses: frozenset[str]  # read when an earlier stage wrote them (None otherwise)
    writes: frozenset[str]
    phase: str | None  # the `timing_s/<phase>` its seconds add to (None: it times its own parts)

    @property
    def description(self) -> str:
        doc = (self.run.__doc__ or "").strip()
        return doc.splitlines()[0] if doc else ""


def always(recipe: Recipe, needs: Needs) -> bool:
    return True


STAGES: list[Stage] = []  # registered stages, in the order a step runs them


def register_stage(
    name: str,
    *,
    reads: tuple[str, ...] = (),
    uses: tuple[str, ...] = (),
    writes: tuple[str, ...] = (),
    when: When = always,
    phase: str | None = None,
    after: str | None = None,
) -> Callable[[StageFn], StageFn]:
    """Decorator: register a stage. It runs after the stages registered before it, or right
    after the stage named `after`. A plugin module (`algorithm.plugins`) registers its stages
    when the recipe imports it."""

    def decorate(fn: StageFn) -> StageFn:
        if any(s.name == name for s in STAGES):
            raise ValueError(f"a stage {name!r} is already registered")
        stage = Stage(name, fn, when, frozenset(reads), frozenset(uses), frozenset(writes), phase)
        if after is None:
            STAGES.append(stage)
        else:
            position = next((i for i, s in enumerate(STAGES) if s.name == after), None)
            if position is None:
                raise ValueError(f"stage {name!r} is to run after {after!r}, which is not registered")
            STAGES.insert(position + 1, stage)
        return fn

    return decorate


class PipelineError(ValueError):
    """A stage reads a field that no earlier stage of the pipeline writes."""


@dataclass(frozen=True)
class Pipeline:
    """The stages one recipe runs, in order."""

    stages: tuple[Stage, ...]

    @classmethod
    def build(cls, recipe: Recipe, needs: Needs, registered: list[Stage] | None = None) -> Pipeline:
        chosen = tuple(s for s in (STAGES if registered is None else registered) if s.when(recipe, needs))
        written: set[str] = set(SHARED_FIELDS)
        for stage in chosen:
            missing = stage.reads - written
            if missing:
                raise PipelineError(
                    f"stage {stage.name!r} reads {', '.join(sorted(missing))}, which no stage before it writes "
                    f"in this recipe's pipeline ({' -> '.join(s.name for s in chosen)})"
                )
            written |= stage.writes
        return cls(chosen)

    def __iter__(self) -> Iterator[Stage]:
        return iter(self.stages)

    def names(self) -> list[str]:
        return [s.name for s in self.stages]
