"""Several weighted reward functions scored as one, with per-function components and ``acc``.

A reward function has the signature::

    fn(prompts: list[str], completions: list[str], ground_truths: list[str], **extra_fields: list)
        -> list[float] | dict[str, list[float]]

or is written for verl or TRL (``styles`` adapts it). ``extra_fields`` are the dataset's other
columns (``data_source``, ...); a function receives those its signature names, or all of them
if it takes ``**kwargs``. A dict result must hold ``"score"``; its other numeric keys are logged
as ``<name>/<key>`` (keys holding text, like verl's ``pred``, are not), and an ``"acc"`` key
feeds DAPO's group filter. The combined score is the weighted sum of the functions' scores.
``acc`` is the ``"acc"`` of the first function that returns one, else whether the first
function's score is > 0.
An entry ``{"model": ...}`` instead of ``{"fn": ...}`` is a learned reward model
(``rlrun.rewards.reward_model``), scored like any function.

A score of ``None`` means "not applicable" (TRL's convention): the sample adds 0 to the
weighted sum, its component holds NaN, and the function's logged mean leaves it out (nanmean).
A sample every function skips is an error (`RewardError`): TRL leaves it out of its group's
baseline with advantage 0, which rlrun's estimators do not do. NaN and infinity returned as
numbers stay errors.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from rlrun.rewards.resolve import resolve_reward_fn, reward_name
from rlrun.rewards.reward_model import RewardModelScorer, reward_model_name
from rlrun.rewards.styles import COMPLETION_IDS, PROMPT_MESSAGES, TrainerState, TrlContext, as_batch_reward
from rlrun.schema.reward import RewardFunction, RewardModel


class RewardError(RuntimeError):
    """A reward function raised or returned something unusable for a sample."""


@dataclass
class RewardOutput:
    scores: torch.Tensor  # (N,) float32, the weighted sum
    components: dict[str, torch.Tensor]  # each function's (N,) scores, and its extra keys
    acc: torch.Tensor  # (N,) float32


@dataclass(frozen=True)
class _Term:
    name: str
    fn: Callable[..., Any]
    weight: float
    accepts: frozenset[str] | None  # extra field names it takes; None = all (**kwargs)
    trl: bool  # called TRL style: also gets completion ids and prompt messages


class RewardCombiner:
    """Callable over a batch: ``(prompts, completions, ground_truths, **extra) -> RewardOutput``."""

    def __init__(
        self,
        functions: Sequence[RewardFunction | RewardModel],
        *,
        answer_key: str = "answer",
        chat: bool = False,
    ):
        """``functions``: the recipe's ``reward.functions`` (functions and reward models);
        ``answer_key`` (``data.answer_key``) and ``chat`` (the prompts are chat messages) shape
        the arguments of TRL-style functions. ``trainer_state`` is what TRL-style functions see
        of the run; the training loop advances its ``global_step``."""
        if not functions:
            raise ValueError("at least one reward function is needed")
        self.trainer_state = TrainerState()
        self.terms: list[_Term] = []
        for entry in functions:
            trl = False
            if isinstance(entry, RewardModel):
                fn, name = RewardModelScorer(entry), reward_model_name(entry)
            else:
                resolved = resolve_reward_fn(entry.fn)
                fn = as_batch_reward(
                    resolved,
                    entry.style,
                    kwargs=entry.kwargs,
                    answer_key=answer_key,
                    chat=chat,
                    trainer_state=self.trainer_state,
                )
                trl = getattr(fn, "trl_style", False)
                name = reward_name(entry.fn)
            base = name
            copies = 1
            while name in self.names:  # the same function twice: exact_match, exact_match_2, ...
                copies += 1
                name = f"{base}_{copies}"
            self.terms.append(_Term(name, fn, entry.weight, _accepted_fields(fn), trl))

    @property
    def names(self) -> list[str]:
        return [t.name for t in self.terms]

    def __call__(
        self,
        prompts: list[str],
        completions: list[str],
        ground_truths: list[str],
        *,
        context: TrlContext | None = None,
        **extra: Sequence[Any],
    ) -> RewardOutput:
        """``context``: the completions' token ids and the prompts' messages, for TRL-style functions."""
        n = len(completions)
        trl_columns = {COMPLETION_IDS: (context.completion_ids if context else None) or [None] * n}
        if context is not None and context.prompt_messages is not None:
            trl_columns[PROMPT_MESSAGES] = context.prompt_messages
        components: dict[str, torch.Tensor] = {}
        scores = torch.zeros(n, dtype=torch.float32)
        acc: torch.Tensor | None = None
        for term in self.terms:
            kwargs = {k: v for k, v in extra.items() if term.accepts is None or k in term.accepts}
            if term.trl:
                kwargs |= trl_columns
            result = _call(term, prompts, completions, ground_truths, kwargs)
            named = result if isinstance(result, Mapping) else {"score": result}
            if "score" not in named:
                raise RewardError(
                    f"reward {term.name!r} returned a dict without 'score' (keys: {sorted(named)})"
                )
            columns = {
                key: _to_tensor(term.name, key, values, n, prompts)
                for key, values in named.items()
                if key in ("score", "acc") or not _is_text(values)
            }
            scores += term.weight * torch.nan_to_num(columns["score"], nan=0.0)  # None: not applicable
            components[term.name] = columns.pop("score")
            components.update({f"{term.name}/{key}": col for key, col in columns.items()})
            if acc is None and "acc" in columns:
                acc = columns["acc"]
        skipped = torch.stack([components[t.name].isnan() for t in self.terms]).all(dim=0).nonzero().flatten()
        if len(skipped):
            i = skipped[0].item()
            raise RewardError(
                f"every reward function returned None (not applicable) for {len(skipped)} samples, first sample "
                f"{i} (prompt {prompts[i]!r}); TRL leaves such a sample out of its group's baseline, rlrun cannot: "
                "return a score for it"
            )
        if acc is None:
            acc = (components[self.terms[0].name] > 0).float()  # NaN (not applicable) is not > 0
        return RewardOutput(scores, components, acc)


def _call(term: _Term, prompts: list[str], completions: list[str], truths: list[str], extra: dict) -> Any:
    try:
        return term.fn(prompts, completions, truths, **extra)
    except Exception as batch_err:
        # Find the first sample that fails on its own, to name it.
        for i in range(len(completions)):
            try:
                term.fn([prompts[i]], [completions[i]], [truths[i]], **{k: [v[i]] for k, v in extra.items()})
            except Exception as err:
                raise RewardError(
                    f"reward {term.name!r} failed on sample {i} (prompt {prompts[i]!r}): "
                    f"{type(err).__name__}: {err}"
                ) from err
        raise RewardError(
            f"reward {term.name!r} failed on the batch of {len(completions)} samples "
            f"(every sample alone succeeds): {type(batch_err).__name__}: {batch_err}"
        ) from batch_err


def _to_tensor(name: str, key: str, values: Any, n: int, prompts: list[str]) -> torch.Tensor:
    values = list(values)
    if len(values) != n:
        raise RewardError(f"reward {name!r} returned {len(values)} values for {key!r}, expected {n}")
    not_applicable = [i for i, v in enumerate(values) if v is None] if key == "score" else []
    values = [0.0 if v is None and key == "score" else v for v in values]
    try:
        column = torch.tensor(values, dtype=torch.float32)
        bad = (~torch.isfinite(column)).nonzero().flatten().tolist()
    except (TypeError, ValueError, RuntimeError):
        column, bad = None, [i for i, v in enumerate(values) if not isinstance(v, (int, float))]
    if column is None or bad:
        i = bad[0]
        raise RewardError(
            f"reward {name!r} returned {values[i]!r} for {key!r} on sample {i} (prompt {prompts[i]!r}); "
            "expected a finite number"
        )
    column[not_applicable] = torch.nan
    return column


def _is_text(values: Any) -> bool:
    """A result column that is not a metric: strings or None (verl's ``pred``)."""
    return isinstance(values, Sequence) and any(v is None or isinstance(v, str) for v in values)


def _accepted_fields(fn: Callable[..., Any]) -> frozenset[str] | None:
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):  # builtins without a signature: pass everything
        return None
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params):
        return None
    return frozenset(p.name for p in params if p.kind is not inspect.Parameter.VAR_POSITIONAL)
