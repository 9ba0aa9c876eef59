"""The shape of a key table: another stack's config key -> the rlrun key it sets (or None, with
the reason), and how its value converts. Imports nothing from rlrun (`rlrun.recipes.keys` reads
the verl table for its hints)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

Settings = Mapping[str, Any]  # every key of the other stack -> its value (the user's, else its default)
Convert = Callable[[Any, Settings], Any]  # (the key's value, all settings) -> the rlrun value


@dataclass(frozen=True)
class KeyMap:
    rlrun: str | None  # the rlrun key; None: rlrun has no equivalent
    note: str = ""  # the unit change, or why there is no equivalent
    convert: Convert | None = None  # None: the value is the same
    # Values that change nothing (the stack's default); any other value is refused with `note`
    # as the reason. None: never refused.
    refused_unless: tuple[Any, ...] | None = None
    # Where the run's outputs go or are logged, not what is trained: a value unknown here (a shell
    # variable the script never sets) leaves the rlrun key at its default, reported, not refused.
    infrastructure: bool = False


def find(table: Mapping[str, KeyMap], key: str) -> tuple[str, KeyMap] | None:
    """The row for `key` (Hydra's `+`/`++` prefixes ignored): its own, else the nearest `.*`
    subtree row, as ``(row key, row)``; None when the table has neither."""
    key = key.lstrip("+")
    if key in table:
        return key, table[key]
    parts = key.split(".")
    for end in range(len(parts) - 1, 0, -1):
        pattern = ".".join(parts[:end]) + ".*"
        if pattern in table:
            return pattern, table[pattern]
    return None
