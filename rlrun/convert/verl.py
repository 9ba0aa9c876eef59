"""A verl run (command line, shell script or YAML) as an rlrun recipe, with a report.

settings  <- verl's key=value overrides (a script's shell variables expanded), or a verl YAML
             flattened to dotted keys
effective <- verl's defaults (where they differ from rlrun's) updated by the settings
recipe    <- each key through the table in `verl_keys` (same value, a unit change, or none)
report    <- what mapped, what changed unit, what has no equivalent, what verl key is unknown
"""

from __future__ import annotations

import ast
import operator
import os
import re
import shlex
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import yaml

from rlrun.convert.verl_keys import VERL_DEFAULTS, gpus, lookup
from rlrun.recipes.keys import all_keys, dotted
from rlrun.recipes.render import flow, to_yaml
from rlrun.recipes.yaml_io import parse_value
from rlrun.schema import Recipe

VERL_LAYOUT_ANSWER = "reward_model.ground_truth"
_PATH_KEYS = (
    "data.source",
    "data.val_source",
)  # relative paths become absolute: valid wherever the recipe is
_STOP_TOKENS = {"|", "||", "&&", ";", "&", "$@", "2>&1"}


class ConvertError(ValueError):
    """The input is not a verl command line, script or YAML that can be read."""


@dataclass(frozen=True)
class Row:
    """One verl key's fate."""

    verl_key: str
    verl_value: Any
    origin: str  # "set" (the command line / YAML) | "verl default"
    kind: str  # mapped | converted (value or unit changed) | no value | no equivalent | unknown
    rlrun_key: str | None = None
    rlrun_value: Any = None
    note: str = ""


@dataclass
class Conversion:
    source: str
    recipe: dict[str, Any]
    rows: list[Row] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # things the user must know (processes, paths)

    def report(self) -> str:
        """What mapped, what changed unit, what has no equivalent, as text."""
        lines: list[str] = []
        sections = [
            ("converted (the value or its unit changes)", "converted"),
            ("mapped", "mapped"),
            ("not converted: no value could be worked out here", "no value"),
            ("no rlrun equivalent (left out)", "no equivalent"),
            ("not a verl key rlrun knows (left out)", "unknown"),
        ]
        for title, kind in sections:
            rows = [r for r in self.rows if r.kind == kind]
            if not rows:
                continue
            lines.append(f"{title}: {len(rows)}")
            for r in rows:
                verl = f"{r.verl_key}={flow(r.verl_value)}" + (" (verl default)" if r.origin != "set" else "")
                if kind in ("mapped", "converted"):
                    verl += f" -> {r.rlrun_key}: {flow(r.rlrun_value)}"
                elif kind == "no value":
                    verl += f" -> {r.rlrun_key}"
                lines.append(f"  {verl}" + (f"  [{r.note}]" if r.note and kind != "mapped" else ""))
        lines += [f"note: {n}" for n in self.notes]
        return "\n".join(lines)

    def to_yaml(self) -> str:
        """The recipe, headed by a comment on where it came from and what did not carry over."""
        header = [f"# Converted by `rlrun convert verl` from {self.source}."]
        changed = [r for r in self.rows if r.kind in ("converted", "no value", "unknown")]
        changed += [r for r in self.rows if r.kind == "no equivalent" and r.origin == "set"]
        if changed:
            header.append("# Check these (the report of `rlrun convert verl` lists every key):")
            for r in changed:
                target = f" -> {r.rlrun_key}" if r.rlrun_key else ""
                default = " (verl default)" if r.origin != "set" else ""
                header.append(f"#   {r.verl_key}={flow(r.verl_value)}{default}{target}: {r.note or r.kind}")
        header += [f"# {n}" for n in self.notes]
        return "\n".join(header) + "\n" + to_yaml(self.recipe)


# --- reading verl's inputs ----------------------------------------------------------------------


def read_source(args: list[str]) -> tuple[dict[str, Any], list[str], str]:
    """Settings, notes and a display name from what the user gave: one .yaml/.yml file, one
    shell script (.sh), or a command line."""
    if len(args) == 1 and args[0].endswith((".yaml", ".yml", ".sh")):
        path = Path(args[0])
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as err:
            raise ConvertError(f"{path}: cannot read it ({err.strerror or err})") from None
        try:
            settings, notes = read_script(text) if path.suffix == ".sh" else read_yaml(text)
        except ConvertError as err:
            raise ConvertError(f"{path}: {err}") from None
        return settings, notes, str(path)
    settings, notes = read_command_line(args)
    return settings, notes, "the command line"


def read_command_line(args: list[str]) -> tuple[dict[str, Any], list[str]]:
    """verl settings from `python -m verl.trainer.main_ppo k=v ...` (or just the `k=v` items),
    and notes on what was skipped."""
    tokens = list(args)
    for i, token in enumerate(tokens):  # drop `python3 -m module` when present
        if token == "-m" and i + 1 < len(tokens):
            tokens = tokens[i + 2 :]
            break
    settings: dict[str, Any] = {}
    notes: list[str] = []
    for token in tokens:
        if token in _STOP_TOKENS or token.startswith((">", "2>", "|")):
            break
        if token.startswith(("--config-name", "--config-path")):
            notes.append(f"`{token}`: the named verl config is not read; convert its YAML file instead")
            continue
        if token.startswith("~"):
            notes.append(f"`{token}`: a Hydra deletion, ignored")
            continue
        key, sep, value = token.partition("=")
        if not sep or not key:
            raise ConvertError(f"`{token}` is not a verl override of the form key=value")
        settings[key.lstrip("+")] = _value(value)
    if not settings:
        raise ConvertError("no verl settings (key=value) found")
    return settings, notes


def read_script(text: str, environ: dict[str, str] | None = None) -> tuple[dict[str, Any], list[str]]:
    """verl settings from a shell script that runs verl: its variables (`n=8`, `${N:-1}`,
    `$((a * 2))`) expanded, the environment's too; the first command naming verl's trainer."""
    variables = dict(os.environ if environ is None else environ)
    joined = re.sub(r"\\\n", " ", text)
    for line in joined.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        assignment = re.fullmatch(r"(?:export\s+)?([A-Za-z_]\w*)=(.*)", line)
        if assignment:
            name, raw = assignment.groups()
            words = shlex.split(_expand(raw, variables), comments=True) or [""]
            variables[name] = words[0]
            continue
        if re.search(r"main_ppo|main_dapo|verl\.trainer", line):
            settings, notes = read_command_line(shlex.split(_expand(line, variables), comments=True))
            unresolved = sorted(
                {v for value in settings.values() for v in re.findall(r"\$\{?(\w+)", str(value))}
            )
            notes += [f"shell variable ${name} is not set here: left as written" for name in unresolved]
            return settings, notes
    raise ConvertError("no command running verl's trainer (`python3 -m verl.trainer.main_ppo ...`) found")


def _expand(text: str, variables: dict[str, str]) -> str:
    """Shell expansion of `$((arithmetic))`, `${NAME:-default}` (nested), `${NAME}` and `$NAME`;
    unknown names are left as written."""
    out: list[str] = []
    i = 0
    while i < len(text):
        if text.startswith("$((", i) and (end := text.find("))", i)) > 0:
            out.append(_arithmetic(text[i + 3 : end], variables) or text[i : end + 2])
            i = end + 2
        elif text.startswith("${", i) and (end := _closing_brace(text, i + 1)) > 0:
            name, _, default = text[i + 2 : end].partition(":-")
            known = variables.get(name)
            out.append(known if known else _expand(default, variables) if default else text[i : end + 1])
            i = end + 1
        elif (plain := re.match(r"\$([A-Za-z_]\w*)", text[i:])) is not None:
            out.append(variables.get(plain[1], plain[0]))
            i += len(plain[0])
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


def _closing_brace(text: str, start: int) -> int:
    depth = 0
    for i in range(start, len(text)):
        depth += {"{": 1, "}": -1}.get(text[i], 0)
        if depth == 0:
            return i
    return -1


def _arithmetic(expression: str, variables: dict[str, str]) -> str | None:
    expression = re.sub(r"\$?\{?([A-Za-z_]\w*)\}?", lambda m: variables.get(m[1], m[0]), expression)
    try:
        return str(_integer_arithmetic(ast.parse(expression.strip(), mode="eval").body))
    except (SyntaxError, ValueError, ZeroDivisionError):
        return None


_OPERATORS = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.floordiv,  # the shell's integer division
    ast.Mod: operator.mod,
}


def _integer_arithmetic(node: ast.expr) -> int:
    """The value of shell arithmetic: integers, + - * / % and parentheses only."""
    if isinstance(node, ast.Constant) and isinstance(node.value, int):
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return -_integer_arithmetic(node.operand)
    if isinstance(node, ast.BinOp) and type(node.op) in _OPERATORS:
        return _OPERATORS[type(node.op)](_integer_arithmetic(node.left), _integer_arithmetic(node.right))
    raise ValueError("not integer arithmetic")


def read_yaml(text: str) -> tuple[dict[str, Any], list[str]]:
    """verl settings from a verl config YAML, flattened to dotted keys (Hydra's `defaults` and
    `_target_` skipped, `${a.b}` / `${oc.select:a.b,default}` references resolved)."""
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as err:
        raise ConvertError(f"not valid YAML: {err}") from None
    if not isinstance(data, dict):
        raise ConvertError("a verl config YAML is a mapping of sections (data, actor_rollout_ref, ...)")
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
        # verl's reward kwargs are a mapping the reward function takes whole; everything else is a key
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


def _value(text: str) -> Any:
    try:
        return parse_value(text)
    except yaml.YAMLError:
        return text


# --- converting ---------------------------------------------------------------------------------


def convert(settings: dict[str, Any], source: str) -> Conversion:
    """The recipe for verl `settings` (dotted keys), and what became of each key."""
    effective = {**VERL_DEFAULTS, **settings}
    rlrun_defaults = Recipe().model_dump(mode="json")
    values: dict[str, Any] = {}
    rows: list[Row] = []
    for key, value in effective.items():
        origin = "set" if key in settings else "verl default"
        found = lookup(key)
        if found is None:
            rows.append(Row(key, value, origin, "unknown"))
            continue
        row = found[1]
        if row.rlrun is None:
            if origin == "set":
                rows.append(Row(key, value, origin, "no equivalent", note=row.note))
            continue
        rlrun_value = row.convert(value, effective) if row.convert else value
        rlrun_default = _at(rlrun_defaults, row.rlrun)
        if origin != "set" and rlrun_value == rlrun_default:
            continue  # verl's default is rlrun's too
        if rlrun_value is None and rlrun_default is not None:
            rows.append(Row(key, value, origin, "no value", row.rlrun, note=row.note))
            continue
        kind = "mapped" if rlrun_value == value else "converted"
        rows.append(Row(key, value, origin, kind, row.rlrun, rlrun_value, row.note))
        values.setdefault(row.rlrun, rlrun_value)
    values["data.answer_key"] = VERL_LAYOUT_ANSWER
    if not values.get("critic.enabled"):  # verl's critic settings do nothing without a critic
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
    processes = gpus(effective)
    if processes > 1:
        notes.append(
            f"verl ran on {processes} GPUs: train with `rlrun train RECIPE --num-processes {processes}` "
            "(batch sizes above are totals over all processes)"
        )
    recipe = {"extends": "base", "description": f"Converted from verl ({Path(source).name})", **_nest(values)}
    return Conversion(source, recipe, rows, notes)


def _absolute_paths(values: dict[str, Any]) -> list[str]:
    notes = []
    for key in _PATH_KEYS:
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
