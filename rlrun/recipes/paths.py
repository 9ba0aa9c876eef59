"""The paths a recipe names (data files, model directories, the output folder), made absolute
where they are read: the one owner of what a path in a recipe means.

Every key that holds a path (`PATH_KEYS`, and each reward model, `reward.functions[i].model`)
has `~` and environment variables (`$DATA`, `${DATA}`) expanded; a variable that is not set is
an error naming the key and the variable (`unset_variable_issues`), never a folder literally
named `${DATA}`. A relative path is relative to the folder of the file that wrote it: a
recipe's own values to the recipe, the values a base recipe contributes (through `extends`) to
that base recipe, and command-line overrides to the working directory. Data files
(`data.source`, `data.val_source`, anything but `rlrun:arithmetic` and `hf:<name>`) always
resolve so, and so does `agent.chat_template`. A model (`model.path`, `model.tokenizer`, `reference.path`, `critic.model_path`,
`distillation.teacher`, reward models) resolves so when it starts with `./` or `../` or names an
existing folder there; otherwise it is left as written: a hub id such as
`Qwen/Qwen2.5-0.5B-Instruct`, or a shipped `rlrun:` model. `trainer.output_dir` is only
expanded: a relative one is where the command runs, as the default `runs` is. The resolved
recipe (`resolved.yaml`) holds the results, so a run resumes from any directory. Other files
that name paths (`extends:`, a sweep's `recipe:`) expand them with `expand` too.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from rlrun.errors import ConfigIssue
from rlrun.recipes.keys import KeyPath
from rlrun.recipes.provenance import Provenance
from rlrun.user_code import LIVE_PREFIX

DATA_PATH_KEYS: tuple[KeyPath, ...] = (("data", "source"), ("data", "val_source"))
FILE_PATH_KEYS: tuple[KeyPath, ...] = (("agent", "chat_template"),)  # files, resolved as data files are
MODEL_PATH_KEYS: tuple[KeyPath, ...] = (
    ("model", "path"),
    ("model", "tokenizer"),
    ("reference", "path"),
    ("critic", "model_path"),
    ("distillation", "teacher"),
)
OUTPUT_PATH_KEYS: tuple[KeyPath, ...] = (("trainer", "output_dir"),)
PATH_KEYS = (
    *DATA_PATH_KEYS,
    *FILE_PATH_KEYS,
    *MODEL_PATH_KEYS,
    *OUTPUT_PATH_KEYS,
)  # and reward models (`path_slots`)
# Not files: the built-in generator, the HF hub, shipped models (rlrun.data.sources, rlrun.embedded),
# rows given from Python (rlrun.recipes.python_objects).
NOT_PATH_PREFIXES = ("rlrun:", "hf:", LIVE_PREFIX)
# What os.path.expandvars expands: `$NAME` and `${NAME}`.
_VARIABLE = re.compile(r"\$(?:(\w+)|\{([^}]*)\})")


def path_slots(data: dict[str, Any]) -> Iterator[tuple[KeyPath, Any, Any]]:
    """Every place in a recipe mapping (one layer, or the merged recipe) that holds a path:
    (key path, container, index in it), a list of data files item by item. Values of the wrong
    type are included as they are, for the schema to report."""
    reward = data.get("reward")
    functions = reward.get("functions") if isinstance(reward, dict) else None
    keys = [*PATH_KEYS] + [
        ("reward", "functions", index, "model")
        for index, entry in enumerate(functions if isinstance(functions, list) else [])
        if isinstance(entry, dict)
    ]
    for key in keys:
        section: Any = data
        for part in key[:-1]:  # mappings down to the key, and a reward's list item
            if isinstance(section, dict):
                section = section.get(part)
            elif isinstance(section, list) and isinstance(part, int):
                section = section[part]
        if not isinstance(section, dict) or key[-1] not in section:
            continue
        value = section[key[-1]]
        if key in DATA_PATH_KEYS and isinstance(value, list):  # a list of data files
            yield from (((*key, index), value, index) for index in range(len(value)))
        else:
            yield key, section, key[-1]


def anchor_paths(
    data: dict[str, Any], base: Path, only: Callable[[KeyPath], bool] = lambda key: True
) -> None:
    """Make the paths in one recipe layer (or in the overrides) absolute, in place, relative to
    `base`, the folder of the file that wrote them (the working directory for overrides);
    `only` picks the keys to touch. Empty values and values of the wrong type are left for the
    schema to report."""
    for key, container, index in list(path_slots(data)):
        value = container[index]
        setting = key[:2] if key[:2] in DATA_PATH_KEYS else key
        if not only(setting) or not isinstance(value, str) or not value:
            continue
        if setting in DATA_PATH_KEYS or setting in FILE_PATH_KEYS:
            container[index] = data_path(value, base)
        elif setting in OUTPUT_PATH_KEYS:
            container[index] = expand(value)
        else:
            container[index] = model_path(value, base)


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
    return local if explicit or os.path.isdir(local) else expanded


def expand(value: str) -> str:
    """`~` and environment variables expanded (an unset variable stays as written:
    `unset_variables` finds it)."""
    return os.path.expanduser(os.path.expandvars(value))


def unset_variables(value: str) -> list[str]:
    """The environment variables `value` names that are not set."""
    names = [plain or braced for plain, braced in _VARIABLE.findall(value)]
    return list(dict.fromkeys(name for name in names if name not in os.environ))


def unset_variable(name: str, value: str) -> dict[str, str]:
    """The fields of the issue for the unset variable `name` in the path `value` (the caller
    locates it)."""
    return {
        "message": f"the path names the environment variable ${name}, which is not set",
        "code": "path-variable-unset",
        "found": repr(value),
        "fix": f"set it (`export {name}=...`) before running rlrun, or write the path out",
    }


def unset_variable_issues(data: dict[str, Any], provenance: Provenance) -> list[ConfigIssue]:
    """An error for each path in the (merged) recipe that names an environment variable that is
    not set, located where the path was written."""
    return [
        provenance.issue(key, **unset_variable(name, value))
        for key, container, index in path_slots(data)
        if isinstance(value := container[index], str) and not value.startswith(NOT_PATH_PREFIXES)
        for name in unset_variables(value)
    ]


def _absolute(value: str, base: Path) -> str:
    return os.path.normpath(os.path.join(base.absolute(), value))
