"""The paths a recipe names (data files, model directories), made absolute where they are read.

`~` and environment variables (`$DATA`, `${DATA}`) are expanded. A relative path is relative
to the folder of the file that wrote it: a recipe's own values to the recipe, the values a
base recipe contributes (through `extends`) to that base recipe, and command-line overrides
to the working directory. Data files (`data.source`, `data.val_source`, anything but
`rlrun:arithmetic` and `hf:<name>`) and `agent.chat_template` always resolve so. A model
(`model.path`, `model.tokenizer`, `reference.path`, `critic.model_path`, `distillation.teacher`)
resolves so when it starts with `./` or `../` or names an existing folder there (so do reward
models, `reward.functions[i].model`); otherwise it is left as written: a hub id such as
`Qwen/Qwen2.5-0.5B-Instruct`, or a shipped `rlrun:` model. The resolved recipe
(`resolved.yaml`) holds the absolute paths, so a run resumes from any directory.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rlrun.recipes.keys import KeyPath

DATA_PATH_KEYS: tuple[KeyPath, ...] = (("data", "source"), ("data", "val_source"))
FILE_PATH_KEYS: tuple[KeyPath, ...] = (("agent", "chat_template"),)  # files, resolved as data files are
MODEL_PATH_KEYS: tuple[KeyPath, ...] = (
    ("model", "path"),
    ("model", "tokenizer"),
    ("reference", "path"),
    ("critic", "model_path"),
    ("distillation", "teacher"),
)
# Not files: the built-in generator, the HF hub, shipped models (rlrun.data.sources, rlrun.embedded).
NOT_PATH_PREFIXES = ("rlrun:", "hf:")


def anchor_paths(
    data: dict[str, Any], base: Path, only: Callable[[KeyPath], bool] = lambda key: True
) -> None:
    """Make the paths in one recipe layer (or in the overrides) absolute, in place, relative to
    `base`, the folder of the file that wrote them (the working directory for overrides);
    `only` picks the keys to touch. Empty values and values of the wrong type are left for the
    schema to report."""
    reward = data.get("reward")
    functions = reward.get("functions") if isinstance(reward, dict) else None
    reward_models = [
        (("reward", "functions", index, "model"), entry)
        for index, entry in enumerate(functions if isinstance(functions, list) else [])
        if isinstance(entry, dict)
    ]
    sections = [(key, data.get(key[0])) for key in (*DATA_PATH_KEYS, *FILE_PATH_KEYS, *MODEL_PATH_KEYS)]
    for key, section in [*sections, *reward_models]:
        value = section.get(key[-1]) if isinstance(section, dict) else None
        if only(key) and key in DATA_PATH_KEYS and isinstance(value, list):  # a list of data files
            section[key[-1]] = [data_path(v, base) if isinstance(v, str) and v else v for v in value]
            continue
        if not only(key) or not isinstance(value, str) or not value:
            continue
        section[key[-1]] = model_path(value, base) if key in MODEL_PATH_KEYS else data_path(value, base)


def data_path(value: str, base: Path) -> str:
    """A data source with its file path expanded and made absolute against `base`."""
    if value.startswith(NOT_PATH_PREFIXES):
        return value
    return _absolute(expand(value), base)


def model_path(value: str, base: Path) -> str:
    """A model reference: a local folder made absolute against `base`; a hub id unchanged."""
    if value.startswith(NOT_PATH_PREFIXES):
        return value
    expanded = expand(value)
    local = _absolute(expanded, base)
    explicit = os.path.isabs(expanded) or expanded.startswith(("./", "../"))
    return local if explicit or os.path.isdir(local) else value


def expand(value: str) -> str:
    """`~` and environment variables expanded (an unset variable stays as written)."""
    return os.path.expanduser(os.path.expandvars(value))


def _absolute(value: str, base: Path) -> str:
    return os.path.normpath(os.path.join(base.absolute(), value))
