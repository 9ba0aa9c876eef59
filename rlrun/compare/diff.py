"""Config diff of resolved recipes, as flattened dotted keys.

Nested mappings flatten to `actor.optimizer.lr`; lists of mappings (reward functions) to
`reward.functions[0].fn`; other lists stay whole values (`actor.optimizer.betas`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any


class _Missing:
    def __repr__(self) -> str:
        return "<absent>"


MISSING: Any = _Missing()  # a key a recipe does not have


@dataclass(frozen=True)
class DiffRow:
    """One dotted key: its value in each run (reference first), and how each differs."""

    key: str
    values: list[Any]
    changes: list[str]  # per run: "ref" (the first), "same", "changed", "added", "removed", "unknown"

    @property
    def differs(self) -> bool:
        return any(change in ("changed", "added", "removed") for change in self.changes)


def flatten(mapping: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """`{"a": {"b": 1}}` -> `{"a.b": 1}`; empty mappings stay as leaves so they still show."""
    flat: dict[str, Any] = {}
    for key, value in mapping.items():
        path = f"{prefix}{key}"
        if isinstance(value, Mapping) and value:
            flat.update(flatten(value, f"{path}."))
        elif _is_record_list(value):
            for index, item in enumerate(value):
                flat.update(flatten(item, f"{path}[{index}].") if item else {f"{path}[{index}]": item})
        else:
            flat[path] = value
    return flat


def _is_record_list(value: Any) -> bool:
    return (
        isinstance(value, Sequence)
        and not isinstance(value, str)
        and bool(value)
        and all(isinstance(item, Mapping) for item in value)
    )


def diff_recipes(recipes: Sequence[Mapping[str, Any] | None], show_all: bool = False) -> list[DiffRow]:
    """Keys that differ between the first recipe (the reference) and any other, in recipe order.

    A run without a resolved recipe (None), or any run when the reference has none, is
    "unknown" for every key.
    """
    flats = [flatten(recipe) if recipe is not None else None for recipe in recipes]
    keys = _merged_order([flat for flat in flats if flat is not None])
    rows = []
    for key in keys:
        values = [flat.get(key, MISSING) if flat is not None else MISSING for flat in flats]
        changes = ["ref"] + [
            _change(values[0], value) if flat is not None and flats[0] is not None else "unknown"
            for value, flat in zip(values[1:], flats[1:])
        ]
        row = DiffRow(key, values, changes)
        if show_all or row.differs:
            rows.append(row)
    return rows


def _merged_order(flats: Sequence[Mapping[str, Any]]) -> list[str]:
    """All keys in recipe order: a key only a later recipe has goes after the key it follows there."""
    order: list[str] = []
    for flat in flats:
        position = 0
        for key in flat:
            if key in order:
                position = order.index(key) + 1
            else:
                order.insert(position, key)
                position += 1
    return order


def _change(ref: Any, value: Any) -> str:
    if ref is MISSING and value is MISSING:
        return "same"
    if ref is MISSING:
        return "added"
    if value is MISSING:
        return "removed"
    return "same" if ref == value else "changed"
