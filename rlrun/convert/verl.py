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
from pathlib import Path
from typing import Any

import yaml

from rlrun.convert.recipe import Conversion, ConvertError, build, read_yaml
from rlrun.convert.verl_keys import TABLE, VERL_DEFAULTS, gpus
from rlrun.recipes.yaml_io import parse_value

_STOP_TOKENS = {"|", "||", "&&", ";", "&", "$@", "2>&1"}


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


def _value(text: str) -> Any:
    try:
        return parse_value(text)
    except yaml.YAMLError:
        return text


def convert(settings: dict[str, Any], source: str) -> Conversion:
    """The recipe for verl `settings` (dotted keys), and what became of each key."""
    return build(
        settings,
        source,
        stack="verl",
        table=TABLE,
        defaults=VERL_DEFAULTS,
        # data.answer_key stays `answer`: absent in verl's layout, rlrun then reads
        # reward_model.ground_truth and keeps the reward_model column whole for verl-style rewards
        fixed={},
        processes=gpus({**VERL_DEFAULTS, **settings}),
    )
