"""A verl run (command line, shell script or YAML) as an rlrun recipe, with a report.

settings  <- verl's key=value overrides (a script's shell variables expanded), or a verl YAML
             flattened to dotted keys
effective <- verl's defaults (where they differ from rlrun's) updated by the settings
recipe    <- each key through the table in `verl_keys` (same value, a unit change, or none)
report    <- what mapped, what changed unit, what has no equivalent, what verl key is unknown
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from rlrun.convert.conversion import Conversion, ConvertError, build, read_yaml, refusal
from rlrun.convert.verl_agent import agent_refusals, single_turn_note
from rlrun.convert.verl_shell import MAX_SCRIPT_CHARS, ShellError, Unresolved, find_verl_command, unresolved
from rlrun.facts.verl_keys import (
    DAPO_TRAINER,
    TABLE,
    TRAINER,
    VERL_DEFAULTS,
    VERL_VERSION,
    columns,
    data_parallel,
    data_sources,
    files,
    gpus,
)
from rlrun.facts.verl_scorers import verl_scorer
from rlrun.recipes.yaml_io import parse_value

MAIN_PPO = "verl.trainer.main_ppo"
TRAINERS = (MAIN_PPO, DAPO_TRAINER)  # the trainers whose semantics rlrun reproduces
_STOP_TOKENS = {"|", "||", "&&", ";", "&", "2>&1"}
# Vision-language model families in verl's examples: their data has images rlrun cannot read.
_VISION_MODEL = re.compile(
    r"-VL\b|VL-|[-_]vl\b|GLM-4\.\dV|MiniCPM-[oV]|Kimi-VL|llava|InternVL", re.IGNORECASE
)


@dataclass
class VerlRun:
    """What a verl input asks for: its settings (dotted keys), the trainer module, notes."""

    settings: dict[str, Any]
    trainer: str = MAIN_PPO
    notes: list[str] = field(default_factory=list)
    name: str = "the command line"


# --- reading verl's inputs ----------------------------------------------------------------------


def read_source(args: list[str], environ: dict[str, str] | None = None) -> VerlRun:
    """The verl run the user gave: a .yaml/.yml file or a shell script (.sh), either followed by
    key=value overrides, or a command line. After a script the overrides are its arguments, as
    `bash run.sh key=value` passes them: where its verl command has `$@`, else after its own; after
    a YAML they override its keys."""
    import os

    if args and args[0].endswith((".yaml", ".yml", ".sh")):
        path, overrides = Path(args[0]), args[1:]
        try:
            if path.stat().st_size > MAX_SCRIPT_CHARS:
                raise ConvertError(
                    f"{path}: larger than {MAX_SCRIPT_CHARS} bytes; a verl launch script or config is a few kB"
                )
            text = path.read_bytes().decode("utf-8")
        except OSError as err:
            raise ConvertError(f"{path}: cannot read it ({err.strerror or err})") from None
        except UnicodeDecodeError as err:
            raise ConvertError(f"{path}: not UTF-8 text ({err.reason} at byte {err.start})") from None
        try:
            if path.suffix == ".sh":
                run = read_script(text, dict(os.environ) if environ is None else environ, overrides)
            else:
                settings, notes = read_yaml(text)
                run = VerlRun({key: _interpolation(value) for key, value in settings.items()}, notes=notes)
                if overrides:
                    run.settings |= read_command_line(overrides).settings
        except ConvertError as err:
            raise ConvertError(f"{path}: {err}") from None
        run.name = str(path)
        return run
    return read_command_line(args)


def read_command_line(args: list[str]) -> VerlRun:
    """verl settings from `python -m verl.trainer.main_ppo k=v ...` (or just the `k=v` items)."""
    tokens = list(args)
    trainer = MAIN_PPO
    for i, token in enumerate(tokens):  # drop `python3 -m module` when present
        if token == "-m" and i + 1 < len(tokens):
            trainer, tokens = tokens[i + 1], tokens[i + 2 :]
            break
    settings: dict[str, Any] = {}
    notes: list[str] = []
    for index, token in enumerate(tokens):
        if token in _STOP_TOKENS or token.startswith((">", "2>", "|")):
            break
        if not token:
            continue
        if token.startswith("--config-path"):
            continue  # where the config named by --config-name lies
        if token.startswith("--config-name"):
            name = token.partition("=")[2].strip("'\"").removesuffix(".yaml")
            if name == "ppo_trainer":  # verl's default config: nothing else is read
                continue
            why = " (Megatron: rlrun trains with FSDP or DDP)" if "megatron" in name else ""
            raise ConvertError(
                f"`{token}`: the run starts from the verl config {name}{why}, not verl's ppo_trainer defaults; "
                "a command line does not show its settings: convert that YAML file itself "
                "(`rlrun convert verl CONFIG.yaml`)"
            )
        if token.startswith("~"):
            raise ConvertError(
                f"`{token}`: a Hydra deletion changes verl's defaults in ways rlrun cannot follow"
            )
        if not token.strip():
            after = f" after `{tokens[index - 1]}`" if index else ""
            raise ConvertError(
                f"an argument that is only spaces{after}: a backslash followed by a space (or by a comment) "
                "instead of the end of its line, which ends the command there in bash"
            )
        key, sep, value = token.partition("=")
        if not sep or not key or not re.fullmatch(r"\+{0,2}[\w.]+", key):
            raise ConvertError(f"`{token}` is not a verl override of the form key=value")
        if isinstance(token, Unresolved):
            value = unresolved(value, token.names)
        settings[key.lstrip("+")] = _value(value)
    if not settings:
        raise ConvertError("no verl settings (key=value) found")
    return VerlRun(settings, trainer, notes)


def read_script(
    text: str, environ: dict[str, str] | None = None, arguments: list[str] | None = None
) -> VerlRun:
    """The verl run of a launch script given `arguments`: the first command running a verl
    trainer, with the script's variables (and the environment's) expanded the way bash would.
    Arguments its command does not pass on (no `$@`) follow its own words."""
    arguments = arguments or []
    try:
        command = find_verl_command(text, {} if environ is None else environ, arguments)
    except ShellError as err:
        raise ConvertError(str(err)) from None
    if command is None:
        raise ConvertError("no command running verl's trainer (`python3 -m verl.trainer.main_ppo ...`) found")
    appended = [] if command.passes_arguments else arguments
    run = read_command_line(["-m", command.module, *command.args, *appended])
    if appended:
        run.notes.append(
            f"the script's verl command has no $@, so bash would not pass it {' '.join(appended)}; "
            "rlrun applied them after its own settings"
        )
    return run


def _interpolation(value: Any) -> Any:
    """A YAML value still holding a Hydra interpolation (`${oc.env:HOME}`): unknown here, named
    where a key that matters holds it."""
    if isinstance(value, str) and (found := re.search(r"\$\{[^}]*\}", value)):
        return unresolved(value, (f"the Hydra interpolation {found[0]}, which verl resolves when it runs",))
    return value


def _value(text: str) -> Any:
    """A Hydra override's value, read as YAML; kept as written when YAML cannot read it (or when
    it waits on a shell value)."""
    if isinstance(text, Unresolved):
        return text
    if "${" in text:
        raise ConvertError(
            f"`{text}`: a Hydra interpolation (${{oc.env:...}}, ${{key}}) is resolved by verl at run time; write the value"
        )
    try:
        return parse_value(text)
    except yaml.YAMLError:
        return text


# --- checks of the whole run -----------------------------------------------------------------


def refusals(run: VerlRun) -> list[str]:
    """Why rlrun cannot run `run` as verl would, beyond single keys: the trainer, vision-language
    data or models, data sources verl scores with a scorer rlrun lacks, tool rollouts (verl_agent)."""
    s = run.settings
    reasons = []
    if run.trainer not in TRAINERS:
        reasons.append(
            f"the command runs {run.trainer}; rlrun converts runs of {' and '.join(TRAINERS)}, whose "
            "training loop it reproduces"
        )
    if run.trainer == MAIN_PPO and s.get("algorithm.filter_groups.enable"):
        reasons.append(
            "algorithm.filter_groups.enable=True under verl.trainer.main_ppo: verl 0.9 refills filtered groups one "
            "prompt at a time in its replay buffer; rlrun's dynamic sampling is recipe.dapo.main_dapo's (whole "
            "generation batches): run it as `python3 -m recipe.dapo.main_dapo ...`"
        )
    model = str(s.get("actor_rollout_ref.model.path", ""))
    if _VISION_MODEL.search(model):
        reasons.append(
            f"actor_rollout_ref.model.path={model}: a vision-language model trained on images; rlrun trains on text"
        )
    custom = bool(s.get("custom_reward_function.path"))
    for key in ("data.train_files", "data.val_files"):
        if s.get(key) is None or getattr(s.get(key), "names", ()):
            continue
        try:
            paths = files(s[key])
        except ValueError:
            continue  # refused with the key
        for path in paths:
            images = sorted(columns(path) & {"images", "videos", "audios"})
            if images:
                reasons.append(
                    f"{key}: {path} holds {', '.join(images)}: vision-language data; rlrun trains on text"
                )
            sources = data_sources(path) or set()
            unknown = sorted(source for source in sources if verl_scorer(source) is None)
            if unknown and not custom and not s.get("reward_model.enable"):
                reasons.append(
                    f"{key}: {path} has data_source {', '.join(unknown)}, which verl scores with a function rlrun "
                    "does not ship: name it with custom_reward_function.path (a verl compute_score file)"
                )
    reasons += agent_refusals(s)
    if custom and s.get("reward_model.enable"):
        reasons.append(
            "custom_reward_function.path with reward_model.enable=True: verl then calls only the custom function, "
            "which may query the reward model; rlrun cannot pass it one"
        )
    return reasons


def convert(run: VerlRun) -> Conversion:
    """The recipe for a verl run, and what became of each key; ConvertError when rlrun cannot
    run it as verl would (every reason listed)."""
    reasons = refusals(run)
    try:
        processes = data_parallel({**VERL_DEFAULTS, **run.settings})
        total = gpus({**VERL_DEFAULTS, **run.settings})
    except ValueError as err:
        reasons.append(str(err))
        processes = total = 1
    if reasons:
        raise refusal(run.name, "verl", reasons)
    fixed = {"trainer.eval.prompts": None}  # verl scores its whole validation set
    conversion = build(
        run.settings,
        run.name,
        stack="verl",
        table=TABLE,
        defaults={**VERL_DEFAULTS, TRAINER: run.trainer},
        # data.answer_key stays `answer`: absent in verl's layout, rlrun then reads
        # reward_model.ground_truth and keeps the reward_model column whole for verl-style rewards
        fixed=fixed,
        processes=processes,
        refuse_unknown=True,
        describes=f"verl {VERL_VERSION}",
    )
    conversion.notes.append("trainer.eval.prompts: null, the whole validation set, as verl evaluates")
    if run.trainer == DAPO_TRAINER and run.settings.get("algorithm.filter_groups.enable"):
        conversion.notes.append(
            "verl's DAPO trainer also stops early when its epochs of generation batches run out (a filtered step "
            "can use several); rlrun trains trainer.total_steps steps, drawing prompts on into further epochs"
        )
    if processes != total:
        conversion.notes.append(
            f"verl ran on {total} GPUs as {processes} data-parallel ranks (ulysses_sequence_parallel_size); "
            "rlrun's processes are data-parallel ranks"
        )
    if note := single_turn_note(run.settings):
        conversion.notes.append(note)
    conversion.notes += run.notes
    return conversion
