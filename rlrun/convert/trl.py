"""A TRL 1.16 GRPO configuration as an rlrun recipe, with a report; or a refusal naming the key.

Accepted inputs:
- a YAML config as `trl grpo --config FILE` reads it (GRPOConfig, ModelConfig and the script's
  keys, plus accelerate's `num_processes`), read through rlrun's YAML loader and its limits;
- a Python script holding one literal `GRPOConfig(...)` call (keyword arguments that are
  constants), with the trainer's `model="..."`, TRL's built-in reward functions and a literal
  `load_dataset("...")` where it has them.
Anything else (a script that reads its settings from the command line, a computed argument, a
config of another TRL trainer) is refused with the reason (`ConvertError`, exit code 2).

Every key is mapped, ignored as unable to change the numbers, or refused (`trl_keys.rule`).
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import yaml

from rlrun.convert.conversion import Conversion, ConvertError, Row, build, refusal
from rlrun.convert.trl_defaults import TRANSFORMERS_VERSION, TRL_VERSION
from rlrun.convert.trl_keys import (
    PROCESSES,
    ROWS,
    TABLE,
    TRL_DEFAULTS,
    TRL_REWARDS,
    RefusedKey,
    combination_refusals,
    fixed_values,
    rule,
    steps_per_generation,
)
from rlrun.facts.key_table import KeyMap
from rlrun.recipes.yaml_io import RecipeLoader

MAX_CONFIG_BYTES = 1_000_000  # a config is a few kB; more is not a config
TRAINERS = ("grpo", "rloo", "sft", "dpo", "kto", "reward")
_CONFIG_CLASSES = {
    "GRPOConfig": "grpo",
    "RLOOConfig": "rloo",
    "SFTConfig": "sft",
    "DPOConfig": "dpo",
    "KTOConfig": "kto",
    "RewardConfig": "reward",
}
ACCEPTED = (
    "rlrun converts a TRL GRPO config: a YAML file as `trl grpo --config FILE` reads it, or a "
    "Python script with one GRPOConfig(...) call whose arguments are constants"
)
_NOT_GRPO = {
    "rloo": "TRL's RLOO trainer takes a sequence-level ratio and puts a sequence-summed k1 KL in the "
    "reward; rlrun's `rloo` estimator (recipe `rloo`) trains token-level PPO: not the same experiment",
    "sft": "rlrun trains reinforcement learning, not supervised fine-tuning",
    "dpo": "rlrun trains online reinforcement learning, not DPO",
    "kto": "rlrun trains online reinforcement learning, not KTO",
    "reward": "rlrun trains policies, not reward models",
}


def read_config(path: Path, trainer: str = "grpo") -> tuple[dict[str, Any], list[str]]:
    """Settings from a TRL config YAML or a Python script (module docstring), and notes."""
    if trainer not in TRAINERS:
        raise ConvertError(f"--trainer must be one of {', '.join(TRAINERS)}, got {trainer!r}")
    if trainer != "grpo" and path.suffix != ".py":  # a script's own config call names its trainer
        raise ConvertError(f"{path}: a TRL {trainer.upper()} config. {_NOT_GRPO[trainer]}")
    try:
        data = path.read_bytes()
    except OSError as err:
        raise ConvertError(f"{path}: cannot read it ({err.strerror or err})") from None
    if len(data) > MAX_CONFIG_BYTES:
        raise ConvertError(
            f"{path}: {len(data)} bytes, more than a config holds ({MAX_CONFIG_BYTES}); {ACCEPTED}"
        )
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        raise ConvertError(f"{path}: not UTF-8 text (byte {err.start}); {ACCEPTED}") from None
    if path.suffix == ".py":
        settings, trainer, notes = _read_script(text, str(path))
    else:
        settings, notes = _read_yaml(text, str(path)), []
    if trainer != "grpo":
        raise ConvertError(f"{path}: a TRL {trainer.upper()} config. {_NOT_GRPO[trainer]}")
    return settings, notes


def _read_yaml(text: str, name: str) -> dict[str, Any]:
    try:
        data = yaml.load(text, Loader=RecipeLoader)
    except yaml.MarkedYAMLError as err:
        mark = err.problem_mark
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""
        raise ConvertError(
            f"{name}: not valid YAML{where}: {err.problem or err.context}; {ACCEPTED}"
        ) from None
    except yaml.YAMLError as err:
        raise ConvertError(f"{name}: not valid YAML: {err}; {ACCEPTED}") from None
    if not isinstance(data, dict) or not all(isinstance(k, str) for k in data):
        raise ConvertError(f"{name}: a TRL config is a mapping of keys to values; {ACCEPTED}")
    return data


def _read_script(text: str, name: str) -> tuple[dict[str, Any], str, list[str]]:
    try:
        tree = ast.parse(text, filename=name)
    except SyntaxError as err:
        raise ConvertError(f"{name}: not valid Python (line {err.lineno}: {err.msg}); {ACCEPTED}") from None
    calls = [
        node for node in ast.walk(tree) if isinstance(node, ast.Call) and _call_name(node) in _CONFIG_CLASSES
    ]
    if not calls:
        raise ConvertError(
            f"{name}: no GRPOConfig(...) call; a script that reads its settings from the command line "
            f"(TrlParser) is converted from the YAML it is given. {ACCEPTED}"
        )
    if len(calls) > 1:
        lines = ", ".join(str(c.lineno) for c in calls)
        raise ConvertError(
            f"{name}: {len(calls)} TRL config calls (lines {lines}); convert one at a time. {ACCEPTED}"
        )
    call = calls[0]
    trainer = _CONFIG_CLASSES[_call_name(call)]
    settings = _literal_keywords(call, name)
    notes = [f"read from the {_call_name(call)}(...) call on line {call.lineno}"]
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and _call_name(node).endswith("Trainer"):
            _trainer_arguments(node, tree, settings, name)
        elif (
            isinstance(node, ast.Call)
            and _call_name(node) == "load_dataset"
            and "dataset_name" not in settings
        ):
            _dataset_arguments(node, settings)
    return settings, trainer, notes


def _call_name(call: ast.Call) -> str:
    func = call.func
    return func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""


def _literal_keywords(call: ast.Call, name: str) -> dict[str, Any]:
    if any(isinstance(a, ast.Constant) and a.value is Ellipsis for a in call.args):
        raise ConvertError(
            f"{name}, line {call.lineno}: `{_call_name(call)}(..., ...)` is an excerpt: the settings behind "
            f"`...` are not written. {ACCEPTED}"
        )
    if call.args:
        raise ConvertError(
            f"{name}, line {call.lineno}: positional arguments to {_call_name(call)}; {ACCEPTED}"
        )
    settings = {}
    for keyword in call.keywords:
        if keyword.arg is None:
            raise ConvertError(
                f"{name}, line {call.lineno}: `**{ast.unparse(keyword.value)}` cannot be read without running "
                f"the script; write the settings as keywords. {ACCEPTED}"
            )
        try:
            settings[keyword.arg] = ast.literal_eval(keyword.value)
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            raise ConvertError(
                f"{name}, line {keyword.value.lineno}: `{keyword.arg}={ast.unparse(keyword.value)}` is computed, "
                f"not a constant; write its value. {ACCEPTED}"
            ) from None
    return settings


_TRAINER_KEYWORDS = ("model", "args", "reward_funcs", "train_dataset", "eval_dataset", "processing_class")


# The trainer's Python objects that a recipe names by import path instead (rlrun does not run the script).
_AGENT_ARGUMENTS = {
    "tools": "TRL's tools are Python functions, which rlrun does not take from a script: name each in the "
    "recipe, `agent.tools: [pkg.module:function]` (docs/coming-from-verl-trl.md)",
    "environment_factory": "TRL's environment_factory is a Python class, which rlrun does not take from a "
    "script: name it in the recipe, `agent.environment: pkg.module:Class` (a dict of classes: "
    "agent.environments), docs/coming-from-verl-trl.md",
}


def _trainer_arguments(call: ast.Call, tree: ast.Module, settings: dict[str, Any], name: str) -> None:
    """The trainer call's model (a literal name) and reward functions (TRL's built-ins); other
    arguments (tools, environments, a PEFT config object, callbacks) are refused."""
    for keyword in call.keywords:
        if keyword.arg not in _TRAINER_KEYWORDS:
            shown = f"{keyword.arg}=" if keyword.arg else "**"
            raise ConvertError(
                f"{name}, line {keyword.value.lineno}: `{_call_name(call)}({shown}{ast.unparse(keyword.value)})`: "
                + _AGENT_ARGUMENTS.get(
                    keyword.arg or "",
                    "rlrun's trainer takes the model, the data, the reward functions and the config only",
                )
            )
        if keyword.arg == "model" and isinstance(keyword.value, ast.Constant):
            settings.setdefault("model_name_or_path", keyword.value.value)
        elif keyword.arg == "reward_funcs":
            items = (
                keyword.value.elts if isinstance(keyword.value, (ast.List, ast.Tuple)) else [keyword.value]
            )
            names = []
            for item in items:
                if isinstance(item, ast.Constant) and item.value is Ellipsis:
                    raise ConvertError(
                        f"{name}, line {item.lineno}: `reward_funcs=[..., ...]` is an excerpt. {ACCEPTED}"
                    )
                if isinstance(item, ast.Constant) and isinstance(item.value, str):
                    settings.setdefault("reward_model_name_or_path", item.value)
                    continue
                called = item.func if isinstance(item, ast.Call) else item
                spelled = ast.unparse(called).rpartition(".")[2]
                if spelled not in TRL_REWARDS or not _imported_from_trl(tree, spelled):
                    raise ConvertError(
                        f"{name}, line {item.lineno}: the reward function `{ast.unparse(item)}` is defined in the "
                        "script, which rlrun does not run; put it in a module and list it as "
                        "`reward_funcs: [module.function]` in a YAML config"
                    )
                if isinstance(item, ast.Call):
                    raise ConvertError(
                        f"{name}, line {item.lineno}: `{ast.unparse(item)}`: list TRL's "
                        "`get_soft_overlong_punishment` by name (the script's values) or write a "
                        "reward entry with its kwargs by hand"
                    )
                names.append(spelled)
            if names:
                settings.setdefault("reward_funcs", names)


def _imported_from_trl(tree: ast.Module, name: str) -> bool:
    return any(
        isinstance(node, ast.ImportFrom)
        and (node.module or "").startswith("trl")
        and any(alias.name == name for alias in node.names)
        for node in ast.walk(tree)
    )


def _dataset_arguments(call: ast.Call, settings: dict[str, Any]) -> None:
    if call.args and isinstance(call.args[0], ast.Constant) and isinstance(call.args[0].value, str):
        settings["dataset_name"] = call.args[0].value
        config = (
            call.args[1]
            if len(call.args) > 1
            else next((k.value for k in call.keywords if k.arg == "name"), None)
        )
        if isinstance(config, ast.Constant) and config.value is not None:
            settings["dataset_config"] = config.value


def convert(
    settings: dict[str, Any], source: str, processes: int | None = None, rows: int | None = None
) -> Conversion:
    """The recipe for TRL `settings`, trained on `processes` processes (the config's
    `num_processes` when it has one), and what became of each key; ConvertError listing every
    key rlrun cannot honour. `rows`: the training rows of a dataset the converter cannot count
    (a hub dataset, a folder), which TRL's epochs need."""
    try:
        return _convert(settings, source, processes, rows)
    except RefusedKey as err:  # one that stops the others from being read (a value of the wrong kind)
        raise refusal(source, "trl", [str(err)]) from None


def _convert(settings: dict[str, Any], source: str, processes: int | None, rows: int | None) -> Conversion:
    refused: list[str] = []
    given = settings.get(PROCESSES)
    if given is not None and processes is not None and given != processes:
        reason = f"the config says {given} processes and --num-processes {processes}: keep one"
        refused.append(str(RefusedKey(PROCESSES, given, reason)))
    settings = {**settings, PROCESSES: given if given is not None else processes or 1}
    report, mapped = [], {}
    for key, value in settings.items():
        verdict = rule(key, value)
        if verdict.kind == "refused":
            refused.append(str(RefusedKey(key, value, verdict.reason)))
        elif verdict.kind == "mapped":
            mapped[key] = value
        elif key != PROCESSES:
            note = verdict.reason or "TRL's default, which rlrun does too"
            report.append(
                Row(key, value, "set", "ignored", note=f"ignored: {note}" if verdict.reason else note)
            )
    effective = {**TRL_DEFAULTS, **settings}
    refused += [str(err) for err in [*_missing(effective), *combination_refusals(effective)]]
    context = {PROCESSES: settings[PROCESSES], ROWS: rows}
    table = {**TABLE, **{key: KeyMap(None) for key in context}}
    conversion = build(
        {**mapped, **context},
        source,
        stack="trl",
        table=table,
        # TRL's unset max_tool_calling_iterations (no limit) bounds nothing without tools, which a
        # config cannot hold: the recipe keeps its agent off and unwritten
        defaults={k: v for k, v in TRL_DEFAULTS.items() if k in TABLE and k != "max_tool_calling_iterations"},
        fixed=fixed_values(effective),
        processes=int(settings[PROCESSES]),
        describes=f"TRL {TRL_VERSION} (transformers {TRANSFORMERS_VERSION})",
        refused=refused,
    )
    conversion.rows = [
        r
        for r in conversion.rows
        if r.key not in context and not (r.kind == "no value" and r.origin != "set")
    ] + report
    conversion.notes += _notes(effective, rows)
    return conversion


def _missing(settings: dict[str, Any]) -> list[RefusedKey]:
    """What TRL needs and the config lacks: data, rewards, a model."""
    missing = []
    if not settings.get("dataset_name") and not settings.get("datasets"):  # a `datasets` list is refused
        missing.append(
            RefusedKey(
                "dataset_name",
                None,
                "TRL needs a dataset (dataset_name or datasets); without one rlrun would train on "
                "its arithmetic generator. Add dataset_name",
            )
        )
    if not settings.get("reward_funcs") and not settings.get("reward_model_name_or_path"):
        missing.append(
            RefusedKey(
                "reward_funcs",
                None,
                "TRL needs reward functions (reward_funcs or reward_model_name_or_path); add them",
            )
        )
    if not settings.get("model_name_or_path"):
        missing.append(RefusedKey("model_name_or_path", None, "add the model to train"))
    return missing


def _notes(settings: dict[str, Any], rows: int | None) -> list[str]:
    """What the user must know: the answer column, epochs, and where TRL's optimizer steps within
    a generation differ from rlrun's mini-batches."""
    notes = [
        (
            "TRL passes the dataset's columns to its reward functions: rlrun scores against "
            "data.answer_key (default `answer`); set it to your dataset's answer column"
        )
    ]
    if rows is not None and not (settings.get("max_steps") or 0) > 0:
        notes.append(
            f"trainer.total_steps from num_train_epochs over the {rows} rows of {settings['dataset_name']}; "
            "rlrun draws the next epoch's prompts where TRL drops an epoch's last incomplete batch"
        )
    mini_batches = steps_per_generation(settings) // int(settings["gradient_accumulation_steps"])
    if mini_batches > 1 and int(settings["num_iterations"]) > 1:
        notes.append(
            f"TRL splits each generation batch once into its {mini_batches} optimizer steps and makes its "
            f"num_iterations={settings['num_iterations']} passes over the same split; rlrun reshuffles the "
            "mini-batches every pass (actor.ppo_epochs), so after the first pass other samples share an "
            "optimizer step"
        )
    if settings.get("max_tool_calling_iterations") is not None:
        notes.append(
            "agent.max_turns counts what max_tool_calling_iterations bounds, and like it changes nothing without "
            "tools: TRL's tools= and environment_factory= are Python objects given to GRPOTrainer, not settings. "
            "Add agent.enabled: true, agent.tools: [pkg.module:function] or agent.environment: pkg.module:Class, "
            "and, as TRL samples a turn, agent.max_turn_tokens: "
            f"{settings.get('max_completion_length')} (docs/coming-from-verl-trl.md)"
        )
    if mini_batches > 1 and settings.get("loss_type") == "dapo":
        notes.append(
            "loss_type dapo: TRL divides each optimizer step's token sum by the generation "
            f"batch's tokens / {mini_batches}, rlrun by the step's own tokens (actor.loss_agg_mode token-mean): "
            "the same when the mini-batches hold equal token counts"
        )
    return notes
