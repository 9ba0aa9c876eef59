"""A TRL `GRPOConfig` YAML (as `trl grpo --config` reads it) as an rlrun recipe, with a report.

TRL configs do not hold the process count (accelerate's), which batch sizes depend on: the
converter is told it. Reward functions and data come from the `trl grpo` script's keys
(`reward_funcs`, `dataset_name`) when the file has them; otherwise the report says to add them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rlrun.convert.recipe import Conversion, ConvertError, build, read_yaml
from rlrun.convert.trl_keys import PROCESSES, TABLE, TRL_DEFAULTS, kl_loss_switch


def read_config(path: Path) -> tuple[dict[str, Any], list[str]]:
    """Settings from a GRPOConfig YAML file."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as err:
        raise ConvertError(f"{path}: cannot read it ({err.strerror or err})") from None
    try:
        return read_yaml(text)
    except ConvertError as err:
        raise ConvertError(f"{path}: {err}") from None


def convert(settings: dict[str, Any], source: str, processes: int = 1) -> Conversion:
    """The recipe for TRL `settings` trained on `processes` processes, and what became of each key."""
    settings = {**settings, PROCESSES: processes}
    conversion = build(
        settings,
        source,
        stack="trl",
        table=TABLE,
        defaults=TRL_DEFAULTS,
        fixed=kl_loss_switch({**TRL_DEFAULTS, **settings}),
        processes=processes,
    )
    conversion.notes.append(
        "TRL passes the dataset's columns to its reward functions: rlrun scores against "
        "data.answer_key (default `answer`); set it to your dataset's answer column"
    )
    return conversion
