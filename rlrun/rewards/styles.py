"""Reward functions written for verl or TRL, called the way those stacks call them.

A recipe's reward entry names any of three calling conventions (``style``), or leaves ``auto``
to read it from the function's parameters:

- ``rlrun``: ``fn(prompts, completions, ground_truths, **columns)`` on the whole batch.
- ``verl``: ``compute_score(data_source, solution_str, ground_truth, extra_info=None)`` once per
  sample, with the values verl takes from its parquet layout: the ``data_source`` column,
  ``reward_model.ground_truth`` as stored (a list or number stays one; when ``data.answer_key``
  points inside ``reward_model`` that column is not passed, and the answer text is used), the
  ``extra_info`` column (``{}`` where the dataset has none, as in verl). It returns a number or
  a dict holding ``"score"`` (verl's ``{"score", "acc", "pred"}``).
- ``trl``: ``fn(prompts=..., completions=..., completion_ids=..., **columns)`` on the whole
  batch, as TRL's GRPO trainer calls it: every dataset column as a keyword list (the answer
  column under the last part of ``data.answer_key``: ``answer`` by default, ``ground_truth``
  for ``reward_model.ground_truth``). For chat data (prompts that are message lists)
  ``prompts`` are the messages and ``completions`` are ``[{"role": "assistant", "content":
  ...}]``; otherwise both are text. ``completion_ids`` are each completion's token ids (up to
  and with its EOS). ``trainer_state`` has ``global_step`` (rlrun's step, counted from 1) and
  ``max_steps``; ``log_extra`` and ``log_metric`` are accepted and do nothing (rlrun logs
  ``reward/<function>/mean`` and samples itself). ``None`` for a sample means "not
  applicable", as in TRL: it counts as 0 in the weighted sum and is left out of that
  function's logged mean (`combine`).
  A function with none of these batch arguments and no ``**kwargs`` (TRL's
  ``get_soft_overlong_punishment(max_completion_len, soft_punish_cache)``,
  ``get_repetition_penalty_reward``) is a factory: rlrun calls it once with the entry's
  ``kwargs`` and scores with the function it returns.

``auto`` picks ``verl`` when the function has a ``solution_str`` parameter, ``trl`` when it has
``completions`` but not ``ground_truths``, and ``rlrun`` otherwise.
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rlrun.schema.reward import RewardStyle

STYLES: tuple[str, ...] = typing.get_args(RewardStyle)
_VERL_ARGUMENTS = ("data_source", "solution_str", "ground_truth", "extra_info")
# What TRL's GRPO trainer passes besides the dataset's columns.
TRL_ARGUMENTS = ("prompts", "completions", "completion_ids", "trainer_state", "log_extra", "log_metric")
_BATCH_ARGUMENTS = ("prompts", "completions", "completion_ids", "ground_truths", "solution_str")
# Per-sample values the combiner hands TRL-style functions under these column names.
COMPLETION_IDS, PROMPT_MESSAGES = "completion_ids", "prompt_messages"


@dataclass
class TrainerState:
    """The part of TRL's ``TrainerState`` a reward function may read: rlrun's step (from 1; 0
    before training and in evaluation) and the run's steps."""

    global_step: int = 0
    max_steps: int = 0


@dataclass(frozen=True)
class TrlContext:
    """Per-batch values TRL-style functions receive besides the dataset's columns."""

    completion_ids: list[list[int]] | None = None
    prompt_messages: list[list[dict[str, Any]]] | None = None  # None: the prompts were text

    @classmethod
    def of_rollout(cls, response_ids: Any, response_mask: Any, messages: list[Any] | None) -> TrlContext:
        """From a rollout's (rows, T) response ids and mask (EOS included, as in TRL) and the
        rows' prompt messages (None for text prompts)."""
        ids = [row[mask.bool()].tolist() for row, mask in zip(response_ids, response_mask)]
        return cls(completion_ids=ids, prompt_messages=messages)


def _no_op(*args: Any, **kwargs: Any) -> None:
    """TRL's log_extra / log_metric: rlrun logs each function's mean and samples itself."""


def detect_style(fn: Callable[..., Any]) -> str:
    """The calling convention `fn`'s parameters show (rules in the module docstring)."""
    names = _parameter_names(fn)
    if "solution_str" in names:
        return "verl"
    if ("completions" in names or "completion_ids" in names) and "ground_truths" not in names:
        return "trl"
    return "rlrun"


def is_factory(fn: Callable[..., Any]) -> bool:
    """Whether `fn` builds a reward function rather than scoring (module docstring)."""
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return False
    if any(p.kind in (inspect.Parameter.VAR_KEYWORD, inspect.Parameter.VAR_POSITIONAL) for p in params):
        return False
    return not any(p.name in _BATCH_ARGUMENTS for p in params)


def missing_factory_arguments(fn: Callable[..., Any], kwargs: Mapping[str, Any]) -> list[str]:
    """The required parameters of a factory that the entry's `kwargs` do not give."""
    if not is_factory(fn):
        return []
    params = inspect.signature(fn).parameters.values()
    return [p.name for p in params if p.default is inspect.Parameter.empty and p.name not in kwargs]


def as_batch_reward(
    fn: Callable[..., Any],
    style: str = "auto",
    *,
    kwargs: Mapping[str, Any] | None = None,
    answer_key: str = "answer",
    chat: bool = False,
    trainer_state: TrainerState | None = None,
) -> Callable[..., Any]:
    """`fn` as an rlrun-style batch function ``(prompts, completions, ground_truths, **columns)``.

    ``kwargs`` are passed on every call (verl's ``reward_kwargs``), or build the function when
    `fn` is a factory; ``answer_key`` names the answer column for TRL functions; ``chat``: the
    dataset's prompts were chat messages; ``trainer_state``: what TRL functions see of the run.
    """
    if style not in STYLES:
        raise ValueError(f"reward style must be one of {', '.join(STYLES)}, got {style!r}")
    fixed = dict(kwargs or {})
    if is_factory(fn):
        fn, fixed = fn(**fixed), {}
    style = detect_style(fn) if style == "auto" else style
    if style == "verl":
        return _verl_caller(fn, fixed)
    if style == "trl":
        return _trl_caller(fn, fixed, answer_key.rpartition(".")[2], chat, trainer_state or TrainerState())
    if not fixed:
        return fn

    def call_rlrun(
        prompts: list[str], completions: list[str], ground_truths: list[str], **columns: Any
    ) -> Any:
        return fn(prompts, completions, ground_truths, **{**columns, **fixed})

    call_rlrun.__signature__ = _without(inspect.signature(fn), fixed)  # keeps column selection exact
    return call_rlrun


def unaccepted_kwargs(fn: Callable[..., Any], kwargs: Mapping[str, Any]) -> list[str]:
    """The names in a reward entry's `kwargs` that `fn` has no parameter for (none if it takes
    ``**kwargs``; ``**_``, which the built-ins use to ignore dataset columns, takes none)."""
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return []
    if any(p.kind is inspect.Parameter.VAR_KEYWORD and p.name != "_" for p in params):
        return []
    names = {p.name for p in params}
    return [name for name in kwargs if name not in names]


def _verl_caller(fn: Callable[..., Any], fixed: dict[str, Any]) -> Callable[..., Any]:
    names = _parameter_names(fn)
    takes_all = _takes_var_keyword(fn)
    passed = [a for a in _VERL_ARGUMENTS if takes_all or a in names]

    def call_verl(
        prompts: list[str], completions: list[str], ground_truths: list[Any], **columns: Sequence[Any]
    ) -> list[float] | dict[str, list[Any]]:
        n = len(completions)
        sources = columns.get("data_source", [None] * n)
        infos = columns.get("extra_info", [{}] * n)
        truths = [
            _verl_ground_truth(m, g) for m, g in zip(columns.get("reward_model", [None] * n), ground_truths)
        ]
        results = []
        for i in range(n):
            values = {
                "data_source": sources[i],
                "solution_str": completions[i],
                "ground_truth": truths[i],
                "extra_info": infos[i],
            }
            results.append(fn(**{a: values[a] for a in passed}, **fixed))
        return per_sample_to_columns(results)

    return call_verl


def _verl_ground_truth(reward_model: Any, answer: Any) -> Any:
    """verl scores against ``reward_model["ground_truth"]`` as stored (rlrun's answer column is text)."""
    if isinstance(reward_model, Mapping) and "ground_truth" in reward_model:
        return reward_model["ground_truth"]
    return answer


def _trl_caller(
    fn: Callable[..., Any], fixed: dict[str, Any], answer_name: str, chat: bool, state: TrainerState
) -> Callable[..., Any]:
    takes_all = _takes_var_keyword(fn)
    names = _parameter_names(fn)

    def call_trl(prompts: list[str], completions: list[str], ground_truths: list[Any], **columns: Any) -> Any:
        ids, messages = columns.pop(COMPLETION_IDS, None), columns.pop(PROMPT_MESSAGES, None)
        shown = [[{"role": "assistant", "content": c}] for c in completions] if chat else completions
        offered = {
            answer_name: ground_truths,
            **columns,
            **fixed,
            "prompts": messages if chat and messages is not None else prompts,
            "completion_ids": ids,
            "trainer_state": state,
            "log_extra": _no_op,
            "log_metric": _no_op,
        }
        extra = offered if takes_all else {k: v for k, v in offered.items() if k in names}
        extra.pop("completions", None)
        return fn(completions=shown, **extra) if "completions" in names or takes_all else fn(**extra)

    call_trl.trl_style = True  # type: ignore[attr-defined]  # the combiner hands it TRL's extras
    return call_trl


def per_sample_to_columns(results: list[Any]) -> list[float] | dict[str, list[Any]]:
    """Per-sample results (numbers, or dicts with ``"score"``) as one list, or a dict of columns."""
    if not any(isinstance(r, Mapping) for r in results):
        return results
    rows = [r if isinstance(r, Mapping) else {"score": r} for r in results]
    keys = list(rows[0])
    for i, row in enumerate(rows):
        if set(row) != set(keys):
            raise ValueError(
                f"sample {i} returned the keys {sorted(row)}, sample 0 {sorted(keys)}: "
                "every sample must return the same keys"
            )
    return {key: [row[key] for row in rows] for key in keys}


def _parameter_names(fn: Callable[..., Any]) -> set[str]:
    try:
        return set(inspect.signature(fn).parameters)
    except (TypeError, ValueError):  # builtins without a signature
        return set()


def _takes_var_keyword(fn: Callable[..., Any]) -> bool:
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return True
    return any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params)


def _without(signature: inspect.Signature, names: Mapping[str, Any]) -> inspect.Signature:
    return signature.replace(parameters=[p for p in signature.parameters.values() if p.name not in names])
