"""Component names in a recipe, checked against the registries (after importing plugins)."""

from __future__ import annotations

import difflib
import importlib
import importlib.machinery
import importlib.util
import sys
from collections.abc import Iterator
from typing import Any

from rlrun.components import registries
from rlrun.errors import ConfigIssue, show_value
from rlrun.recipes.keys import KeyPath
from rlrun.recipes.provenance import Provenance
from rlrun.schema import Recipe

# Which registry each name-valued key is looked up in.
NAMED_KEYS: dict[KeyPath, str] = {
    ("algorithm", "advantage"): "advantage",
    ("actor", "policy_loss"): "policy_loss",
    ("algorithm", "kl_in_reward", "estimator"): "kl_estimator",
    ("actor", "kl_loss", "estimator"): "kl_estimator",
    ("distillation", "loss"): "distillation_loss",
}


def module_findable(name: str) -> bool:
    """Whether `import name` would find the module, found without running any of its code, nor
    that of the packages above it (`importlib.util.find_spec` would import those)."""
    if name in sys.modules:
        return True
    top, *subs = name.split(".")
    try:
        spec = importlib.util.find_spec(top)
        for depth in range(1, len(subs) + 1):
            if spec is None or spec.submodule_search_locations is None:
                return False
            full = ".".join([top, *subs[:depth]])
            spec = importlib.machinery.PathFinder.find_spec(full, list(spec.submodule_search_locations))
    except (ImportError, ValueError):
        return False
    return spec is not None


def import_plugins(
    data: dict[str, Any], provenance: Provenance, *, execute: bool = True
) -> list[ConfigIssue]:
    """Import `algorithm.plugins` so their components register before names are checked
    (`execute=False`: only check that each module can be found, running none of it)."""
    plugins = data.get("algorithm", {}).get("plugins", []) if isinstance(data.get("algorithm"), dict) else []
    issues = []
    for index, module in enumerate(plugins if isinstance(plugins, list) else []):
        if not isinstance(module, str):
            continue  # the schema reports the wrong type
        if not execute:
            if not module_findable(module):
                issues.append(_plugin_issue(provenance, index, f"the plugin module {module!r} was not found"))
            continue
        try:
            importlib.import_module(module)
        except Exception as exc:  # noqa: BLE001 (any failure of user code is a recipe problem)
            problem = f"the plugin module {module!r} could not be imported: {type(exc).__name__}: {exc}"
            issues.append(_plugin_issue(provenance, index, problem))
    return issues


def _plugin_issue(provenance: Provenance, index: int, problem: str) -> ConfigIssue:
    return provenance.issue(
        ("algorithm", "plugins", index),
        problem,
        code="plugin-import",
        fix="check the module name and that its package is installed in this environment",
    )


def check_names(recipe: Recipe, provenance: Provenance, *, execute: bool = True) -> Iterator[ConfigIssue]:
    """Unknown component names, each listing the valid ones; reward functions that do not
    resolve to a callable. With `execute=False` user modules are not imported: a reward module
    need only be findable, and with plugins (whose components are then unknown) names are not checked."""
    from rlrun.rewards import RewardSpecError, resolve_reward_fn  # imports torch: not at CLI start-up

    tables = registries()
    for path, kind in NAMED_KEYS.items():
        value = _get(recipe, path)
        registry = tables[kind]
        if value not in registry and (execute or not recipe.algorithm.plugins):
            yield _unknown(path, value, registry.kind, registry.names(), provenance)
    rewards = tables["reward"]
    for index, function in enumerate(recipe.reward.functions):
        path = ("reward", "functions", index, "fn")
        if function.fn in rewards:
            continue
        if function.fn.startswith("rlrun:") or ":" not in function.fn:
            yield _unknown(
                path,
                function.fn,
                "reward function",
                rewards.names(),
                provenance,
                extra="or a `pkg.module:function` import path",
            )
            continue
        if not execute:
            module = function.fn.partition(":")[0]
            if not module_findable(module):
                yield provenance.issue(
                    path,
                    f"the reward module {module!r} was not found",
                    code="reward-import",
                    found=show_value(function.fn),
                    fix="check the spelling and that the module is importable from the "
                    "working directory or installed",
                )
            continue
        try:
            resolve_reward_fn(function.fn)
        except Exception as exc:  # noqa: BLE001 (RewardSpecError, or the user's module failing on import)
            problem = str(exc) if isinstance(exc, RewardSpecError) else f"{type(exc).__name__}: {exc}"
            yield provenance.issue(
                path,
                f"the reward function cannot be loaded: {problem}",
                code="reward-import",
                expected="`pkg.module:function` naming a callable importable here",
                found=show_value(function.fn),
                fix="check the spelling and that the module is importable from the "
                "working directory or installed",
            )


def _unknown(
    path: KeyPath, value: str, kind: str, valid: list[str], provenance: Provenance, extra: str = ""
) -> ConfigIssue:
    close = difflib.get_close_matches(value, valid, n=1, cutoff=0.5)
    return provenance.issue(
        path,
        f"unknown {kind}" + (f"; did you mean {close[0]!r}?" if close else ""),
        code="unknown-name",
        expected="one of " + ", ".join(valid) + (f" {extra}" if extra else ""),
        found=show_value(value),
        fix="use a registered name (`rlrun components` lists them with descriptions), or register your "
        "own in a module listed under `algorithm.plugins`",
    )


def _get(recipe: Recipe, path: KeyPath) -> Any:
    value: Any = recipe
    for part in path:
        value = getattr(value, str(part))
    return value
