"""A resolved recipe as YAML, section by section, optionally with each value's source."""

from __future__ import annotations

from typing import Any

import yaml

from rlrun.recipes.keys import KeyPath
from rlrun.recipes.provenance import Provenance

_NOTE_COLUMN = 48  # source comments align here; longer lines push theirs right


def to_yaml(data: dict[str, Any], provenance: Provenance | None = None) -> str:
    """Mappings as blocks, every other value in flow style (`[0.9, 0.99]`); with `provenance`,
    a trailing `# source` comment on each value."""
    rows: list[tuple[str, str]] = []
    _rows(data, (), rows, provenance)
    width = min(max((len(text) for text, note in rows if note), default=0), _NOTE_COLUMN)
    return "".join(f"{text.ljust(width)}  # {note}\n" if note else f"{text}\n" for text, note in rows)


def _rows(
    data: dict[str, Any], prefix: KeyPath, rows: list[tuple[str, str]], provenance: Provenance | None
) -> None:
    indent = "  " * len(prefix)
    for key, value in data.items():
        path = (*prefix, key)
        if isinstance(value, dict) and value:
            rows.append((f"{indent}{key}:", ""))
            _rows(value, path, rows, provenance)
        else:
            note = provenance.of(path).describe() if provenance else ""
            rows.append((f"{indent}{key}: {flow(value)}", note))


def flow(value: Any) -> str:
    """One value in YAML flow style, quoted where YAML 1.1 readers would misread it (`'off'`)."""
    text = yaml.safe_dump(value, default_flow_style=True, width=10**6, sort_keys=False)
    return text.removesuffix("\n").removesuffix("\n...")
