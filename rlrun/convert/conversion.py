"""Another stack's settings through its key table into an rlrun recipe, with a report.

effective <- the stack's defaults (where they differ from rlrun's) updated by the settings
recipe    <- each key through the table (same value, a unit change, or none), plus fixed values
report    <- what mapped, what changed unit, what has no equivalent, what key is unknown
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import yaml

from rlrun.facts.key_table import KeyMap, find
from rlrun.recipes.keys import all_keys, dotted
from rlrun.recipes.yaml_dump import flow, to_yaml
from rlrun.recipes.yaml_io import RecipeLoader, parse_value
from rlrun.schema import Recipe

# Relative paths become absolute, so the recipe reads the same files wherever it is put.
PATH_KEYS = ("data.source", "data.val_source")


class ConvertError(ValueError):
    """The input is not a configuration of the other stack that can be read."""


@dataclass(frozen=True)
class Row:
    """One key's fate."""

    key: str
    value: Any
    origin: str  # "set" (by the user) | "default" (the other stack's)
    kind: str  # mapped | converted (value or unit changed) | no value | no equivalent | ignored | unknown
    rlrun_key: str | None = None
    rlrun_value: Any = None
    note: str = ""


@dataclass
class Conversion:
    stack: str  # verl | trl
    source: str
    recipe: dict[str, Any]
    rows: list[Row] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # things the user must know (processes, paths)
    describes: str = ""  # the version of the other stack whose defaults and semantics the tables hold

    def report(self) -> str:
        """What mapped, what changed unit, what has no equivalent, as text."""
        lines: list[str] = [f"read as {self.describes} runs it"] if self.describes else []
        sections = [
            ("converted (the value or its unit changes)", "converted"),
            ("mapped", "mapped"),
            ("not converted: no value could be worked out here", "no value"),
            ("no rlrun equivalent (left out)", "no equivalent"),
            (
                "ignored: cannot change the numbers, or the other stack's default that rlrun does too",
                "ignored",
            ),
            (f"not a {self.stack} key rlrun knows (left out)", "unknown"),
        ]
        for title, kind in sections:
            rows = [r for r in self.rows if r.kind == kind]
            if not rows:
                continue
            lines.append(f"{title}: {len(rows)}")
            for r in rows:
                text = f"{r.key}={flow(r.value)}" + (f" ({self.stack} default)" if r.origin != "set" else "")
                if kind in ("mapped", "converted"):
                    text += f" -> {r.rlrun_key}: {flow(r.rlrun_value)}"
                elif kind == "no value":
                    text += f" -> {r.rlrun_key}"
                lines.append(f"  {text}" + (f"  [{r.note}]" if r.note and kind != "mapped" else ""))
        lines += [f"note: {n}" for n in self.notes]
        return "\n".join(lines)

    def to_yaml(self) -> str:
        """The recipe, headed by a comment on where it came from and what did not carry over."""
        semantics = f" ({self.describes}'s defaults and semantics)" if self.describes else ""
        header = [f"# Converted by `rlrun convert {self.stack}`{semantics} from {self.source}."]
        changed = [r for r in self.rows if r.kind in ("converted", "no value", "unknown")]
        changed += [r for r in self.rows if r.kind == "no equivalent" and r.origin == "set"]
        if changed:
            header.append(f"# Check these (the report of `rlrun convert {self.stack}` lists every key):")
            for r in changed:
                target = f" -> {r.rlrun_key}" if r.rlrun_key else ""
                default = f" ({self.stack} default)" if r.origin != "set" else ""
                header.append(f"#   {r.key}={flow(r.value)}{default}{target}: {r.note or r.kind}")
        header += [f"# {n}" for n in self.notes]
        return "\n".join(header) + "\n" + to_yaml(self.recipe)


def read_yaml(text: str) -> tuple[dict[str, Any], list[str]]:
    """Settings from a config YAML, flattened to dotted keys (Hydra's `defaults` and `_target_`
    skipped, verl's `${a.b}` / `${oc.select:a.b,default}` references resolved)."""
    try:  # the recipe loader's limits: depth, alias bombs
        data = yaml.load(text, Loader=RecipeLoader)
    except yaml.YAMLError as err:
        raise ConvertError(f"not valid YAML: {err}") from None
    if not isinstance(data, dict):
        raise ConvertError("a config YAML is a mapping of keys to values")
    flat: dict[str, Any] = {}
    _flatten(data, "", flat)
    notes = (
        ["Hydra `defaults:` are not followed: only this file's own keys are read"]
        if "defaults" in data
        else []
    )
    return {key: _resolve(value, flat) for key, value in flat.items()}, notes


def _flatten(node: dict[str, Any], prefix: str, out: dict[str, Any]) -> None:
    for key, value in node.items():
        if key in ("defaults", "hydra", "_target_") or str(key).startswith("_"):
            continue
        name = f"{prefix}{key}"
        # a mapping of engine keywords is one setting; every other mapping is a section of keys
        if isinstance(value, dict) and value and not name.endswith("engine_kwargs"):
            _flatten(value, name + ".", out)
        else:
            out[name] = value


def _resolve(value: Any, flat: dict[str, Any], depth: int = 0) -> Any:
    if not isinstance(value, str) or depth > 10:
        return value
    whole = re.fullmatch(r"\$\{(?:oc\.select:)?([\w.]+)(?:,(.*))?\}", value.strip())
    if whole is None:
        return value
    key, default = whole.groups()
    if key in flat:
        return _resolve(flat[key], flat, depth + 1)
    return parse_value(default) if default is not None else None


def build(
    settings: Mapping[str, Any],
    source: str,
    *,
    stack: str,
    table: Mapping[str, KeyMap],
    defaults: Mapping[str, Any],
    fixed: Mapping[str, Any],
    processes: int,
    refuse_unknown: bool = False,
    describes: str = "",
    refused: Sequence[str] = (),
) -> Conversion:
    """The recipe for `settings` (dotted keys of `stack` as `describes` reads them, through
    `table`; `defaults` are the stack's own), with `fixed` rlrun values added, and what became of
    each key. A key the table refuses (or, with `refuse_unknown`, one it does not know) raises
    ConvertError listing every such key with its value and reason, after the `refused` ones
    the caller found."""
    effective = {**defaults, **settings}
    rlrun_defaults = Recipe().model_dump(mode="json")
    values: dict[str, Any] = {}
    rows: list[Row] = []
    refusals: list[str] = list(refused)
    # The user's keys first: where two keys set one rlrun key (verl's two names of the actor's
    # compute dtype, say), theirs wins over the stack's default.
    for key in [*settings, *(k for k in defaults if k not in settings)]:
        value = effective[key]
        origin = "set" if key in settings else "default"
        found = find(table, key)
        if found is None:
            if refuse_unknown:
                refusals.append(
                    f"{key}={flow(value)}: not a {stack} key rlrun knows, so it cannot tell whether it changes "
                    "what is trained (remove it if it does not)"
                )
            else:
                rows.append(Row(key, value, origin, "unknown"))
            continue
        row = found[1]
        if row.refused_unless is not None:
            if value not in row.refused_unless:
                refusals.append(f"{key}={flow(value)}: {row.note}")
            elif origin == "set":
                rows.append(
                    Row(key, value, origin, "no equivalent", note=f"{stack}'s default: changes nothing")
                )
            continue
        waits_on = ", ".join(getattr(value, "names", ()))
        if waits_on and row.infrastructure:
            note = f"it waits on {waits_on}, not set here: rlrun's default stays"
            rows.append(Row(key, value, origin, "no value", row.rlrun, note=note))
            continue
        try:
            if waits_on and (row.rlrun or row.convert):
                raise ValueError(f"it waits on {waits_on}, not set here (set it in the environment)")
            rlrun_value = (
                row.convert(value, effective) if row.convert and (row.rlrun or origin == "set") else value
            )
        except (ValueError, TypeError) as err:  # the message may name the key itself, or another one
            named = str(err).startswith(f"{key}=") or hasattr(err, "key")
            refusals.append(str(err) if named else f"{key}={flow(value)}: {err}")
            continue
        if row.rlrun is None:
            if origin == "set":
                rows.append(Row(key, value, origin, "no equivalent", note=row.note))
            continue
        rlrun_default = _at(rlrun_defaults, row.rlrun)
        if origin != "set" and (rlrun_value == rlrun_default or row.rlrun in values):
            continue  # the stack's default is rlrun's too, or the user's key set it
        if rlrun_value is None and rlrun_default is not None:
            rows.append(Row(key, value, origin, "no value", row.rlrun, note=row.note))
            continue
        kind = "mapped" if rlrun_value == value else "converted"
        rows.append(Row(key, value, origin, kind, row.rlrun, rlrun_value, row.note))
        values.setdefault(row.rlrun, rlrun_value)
    if refusals:
        raise refusal(source, stack, refusals)
    values.update(fixed)
    if not values.get("critic.enabled"):  # critic settings do nothing without a critic
        unused = {k for k in values if k.startswith("critic.") and k != "critic.enabled"}
        values = {k: v for k, v in values.items() if k not in unused}
        rows = [
            replace(r, kind="no equivalent", rlrun_key=None, note="no critic with this advantage estimator")
            if r.rlrun_key in unused
            else r
            for r in rows
            if r.rlrun_key not in unused or r.origin == "set"
        ]
    notes = _absolute_paths(values)
    if processes > 1:
        notes.append(
            f"{stack} ran on {processes} GPUs: train with `rlrun train RECIPE --num-processes {processes}` "
            "(batch sizes above are totals over all processes)"
        )
    description = f"Converted from {stack} ({Path(source).name})"
    recipe = {"extends": "base", "description": description, **_nest(values)}
    return Conversion(stack, source, recipe, rows, notes, describes)


def refusal(source: str, stack: str, reasons: Sequence[str]) -> ConvertError:
    """The error listing every reason (each once) why rlrun cannot run `source` as `stack` would."""
    listed = "\n".join(f"  - {reason}" for reason in dict.fromkeys(reasons))
    shown = {"trl": "TRL"}.get(stack, stack)
    return ConvertError(
        f"{source}: rlrun cannot run this {shown} experiment as it is; nothing was written.\n{listed}"
    )


def _absolute_paths(values: dict[str, Any]) -> list[str]:
    notes = []
    for key in PATH_KEYS:
        value = values.get(key)
        if isinstance(value, str) and not value.startswith(("~", "$", "/", "hf:", "rlrun:")):
            values[key] = str(Path(value).resolve())
            notes.append(f"{key}: the relative path {value} is written as {values[key]}")
    return notes


def _at(data: dict[str, Any], key: str) -> Any:
    node: Any = data
    for part in key.split("."):
        node = node.get(part) if isinstance(node, dict) else None
    return node


def _nest(values: dict[str, Any]) -> dict[str, Any]:
    """Dotted keys as nested sections, in the schema's order (as in base.yaml)."""
    order = {dotted(key): index for index, key in enumerate(all_keys())}
    nested: dict[str, Any] = {}
    for key in sorted(values, key=lambda k: order.get(k, len(order))):
        *parents, last = key.split(".")
        node = nested
        for part in parents:
            node = node.setdefault(part, {})
        node[last] = values[key]
    return nested
