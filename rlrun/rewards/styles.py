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
- ``trl``: ``fn(prompts=..., completions=..., **columns)`` on the whole batch, as TRL's GRPO
  trainer calls it: every dataset column as a keyword list (the answer column under the last
  part of ``data.answer_key``: ``answer`` by default, ``ground_truth`` for
  ``reward_model.ground_truth``).
  ``completions`` are strings, or ``[{"role": "assistant", "content": ...}]`` when the
  dataset's prompts are chat messages; ``prompts`` are the prompt texts the model saw.
  ``None`` for a sample (TRL's "not applicable") is not accepted: rlrun needs a score.
  TRL's ``completion_ids`` and ``trainer_state`` are not passed; a function that names them
  without a default fails with a "missing argument" error.

``auto`` picks ``verl`` when the function has a ``solution_str`` parameter, ``trl`` when it has
``completions`` but not ``ground_truths``, and ``rlrun`` otherwise.
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from rlrun.schema.reward import RewardStyle

STYLES: tuple[str, ...] = typing.get_args(RewardStyle)
_VERL_ARGUMENTS = ("data_source", "solution_str", "ground_truth", "extra_info")


def detect_style(fn: Callable[..., Any]) -> str:
    """The calling convention `fn`'s parameters show (rules in the module docstring)."""
    names = _parameter_names(fn)
    if "solution_str" in names:
        return "verl"
    if "completions" in names and "ground_truths" not in names:
        return "trl"
    return "rlrun"


def as_batch_reward(
    fn: Callable[..., Any],
    style: str = "auto",
    *,
    kwargs: Mapping[str, Any] | None = None,
    answer_key: str = "answer",
    chat: bool = False,
) -> Callable[..., Any]:
    """`fn` as an rlrun-style batch function ``(prompts, completions, ground_truths, **columns)``.

    ``kwargs`` are passed on every call (verl's ``reward_kwargs``); ``answer_key`` names the
    answer column for TRL functions; ``chat``: the dataset's prompts were chat messages.
    """
    if style not in STYLES:
        raise ValueError(f"reward style must be one of {', '.join(STYLES)}, got {style!r}")
    style = detect_style(fn) if style == "auto" else style
    fixed = dict(kwargs or {})
    if style == "verl":
        return _verl_caller(fn, fixed)
    if style == "trl":
        return _trl_caller(fn, fixed, answer_key.rpartition(".")[2], chat)
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
    fn: Callable[..., Any], fixed: dict[str, Any], answer_name: str, chat: bool
) -> Callable[..., Any]:
    takes_all = _takes_var_keyword(fn)
    names = _parameter_names(fn)

    def call_trl(prompts: list[str], completions: list[str], ground_truths: list[Any], **columns: Any) -> Any:
        shown = [[{"role": "assistant", "content": c}] for c in completions] if chat else completions
        offered = {answer_name: ground_truths, **columns, **fixed}
        extra = offered if takes_all else {k: v for k, v in offered.items() if k in names}
        if "prompts" in names or takes_all:
            extra["prompts"] = prompts
        return fn(completions=shown, **extra)

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
