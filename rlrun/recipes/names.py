"""Component names in a recipe, checked against the registries (after importing plugins)."""

from __future__ import annotations

import difflib
import importlib
import importlib.machinery
import importlib.util
import sys
from collections.abc import Callable, Iterator
from typing import Any

from rlrun.components import registries
from rlrun.errors import ConfigIssue, show_value
from rlrun.recipes.keys import KeyPath
from rlrun.recipes.provenance import Provenance
from rlrun.registry import Registry
from rlrun.schema import Recipe
from rlrun.schema.reward import RewardFunction, RewardModel
from rlrun.user_code import UserModuleError, import_user_module

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
    if not plugins:
        return []
    issues = []
    for index, module in enumerate(plugins if isinstance(plugins, list) else []):
        if not isinstance(module, str):
            continue  # the schema reports the wrong type
        if not execute:
            if not module_findable(module):
                issues.append(_plugin_issue(provenance, index, f"the plugin module {module!r} was not found"))
            continue
        try:
            import_user_module(module)
        except Exception as exc:  # noqa: BLE001 (any failure of user code is a recipe problem)
            problem = (
                str(exc)
                if isinstance(exc, UserModuleError)
                else f"the plugin module {module!r} could not be imported: {type(exc).__name__}: {exc}"
            )
            issues.append(_plugin_issue(provenance, index, problem))
    return issues


def _plugin_issue(provenance: Provenance, index: int, problem: str) -> ConfigIssue:
    return provenance.issue(
        ("algorithm", "plugins", index),
        problem,
        code="plugin-import",
        fix="check the module name and that its package is installed in this environment",
    )


# The component keywords a recipe may set under `*_kwargs`, per name key: the trainer passes the
# tensors itself (not settable), and a few keywords have their own recipe key (set them there).
KWARGS_KEYS: dict[KeyPath, tuple[KeyPath, frozenset[str], dict[str, str]]] = {
    ("algorithm", "advantage"): (
        ("algorithm", "advantage_kwargs"),
        frozenset(
            {
                "token_level_rewards",
                "response_mask",
                "index",
                "values",
                "reward_baselines",
                "reward_components",
                "old_log_probs",
                "sum_pi_squared",
                "rollout_is_weights",
            }
        ),
        {key: f"algorithm.{key}" for key in ("gamma", "lam", "norm_adv_by_std_in_grpo")},
    ),
    ("actor", "policy_loss"): (
        ("actor", "loss_kwargs"),
        frozenset(
            {
                "old_log_prob",
                "log_prob",
                "advantages",
                "response_mask",
                "rollout_is_weights",
                "agg_kwargs",
                "generator",
            }
        ),
        {
            key: f"actor.{key}"
            for key in ("loss_agg_mode", "clip_ratio", "clip_ratio_low", "clip_ratio_high", "clip_ratio_c")
        },
    ),
}


def check_names(recipe: Recipe, provenance: Provenance, *, execute: bool = True) -> Iterator[ConfigIssue]:
    """Unknown component names, each listing the valid ones; `*_kwargs` keys the named
    component does not take; reward functions that do not resolve to a callable. With
    `execute=False` user modules are not imported: a reward module need only be findable, and
    with plugins (whose components are then unknown) names are not checked."""
    from rlrun.rewards import RewardSpecError, resolve_reward_fn  # imports torch: not at CLI start-up
    from rlrun.rewards.reward_model import check_config, local_config

    tables = registries()
    for path, kind in NAMED_KEYS.items():
        value = _get(recipe, path)
        registry = tables[kind]
        if value not in registry and (execute or not recipe.algorithm.plugins):
            yield _unknown(path, value, registry.kind, registry.names(), provenance)
        elif path in KWARGS_KEYS:
            yield from _check_kwargs(recipe, provenance, registry, value, *KWARGS_KEYS[path])
    rewards = tables["reward"]
    for index, function in enumerate(recipe.reward.functions):
        if isinstance(function, RewardModel):
            yield from _check_reward_model(index, function, provenance, check_config, local_config)
            continue
        path = ("reward", "functions", index, "fn")
        if function.fn in rewards:
            yield from _reward_kwargs_issues(index, function, rewards.get(function.fn), provenance)
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
            fn = resolve_reward_fn(function.fn)
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
        else:
            yield from _reward_kwargs_issues(index, function, fn, provenance)


def _reward_kwargs_issues(
    index: int, function: RewardFunction, fn: Any, provenance: Provenance
) -> Iterator[ConfigIssue]:
    """A reward entry's `kwargs` must name parameters of its function, and give a factory (TRL's
    `get_soft_overlong_punishment`) every argument it needs (rlrun.rewards.styles)."""
    from rlrun.rewards.styles import missing_factory_arguments, unaccepted_kwargs

    missing = missing_factory_arguments(fn, function.kwargs)
    if missing:
        yield provenance.issue(
            ("reward", "functions", index, "kwargs"),
            f"{function.fn} builds a reward function from {', '.join(map(repr, missing))}, which `kwargs` "
            "does not give",
            code="reward-kwargs",
            expected="kwargs with every argument of the factory",
            fix=f"add {', '.join(f'{m}: ...' for m in missing)} to the entry's kwargs",
        )
    unknown = unaccepted_kwargs(fn, function.kwargs)
    if unknown:
        yield provenance.issue(
            ("reward", "functions", index, "kwargs", unknown[0]),
            f"{function.fn} has no parameter {', '.join(map(repr, unknown))}",
            code="reward-kwargs",
            expected="a keyword argument the function takes",
            fix="remove it, or give the function that parameter",
        )


def _check_reward_model(
    index: int,
    entry: RewardModel,
    provenance: Provenance,
    check_config: Callable[[dict[str, Any], int | str | None], str | None],
    local_config: Callable[[str], dict[str, Any] | None],
) -> Iterator[ConfigIssue]:
    """A reward model on this machine must be a one-output classifier, or name its `label`
    (its config.json is read; nothing loads). A hub id is checked when it loads."""
    try:
        config = local_config(entry.model)
    except ValueError as exc:  # an unknown rlrun: name, or a directory without config.json
        yield provenance.issue(
            ("reward", "functions", index, "model"),
            str(exc),
            code="reward-model",
            expected="rlrun:tiny-reward, a Hugging Face model directory or a hub id",
            found=show_value(entry.model),
            fix="check the path",
        )
        return
    problem = check_config(config, entry.label) if config is not None else None
    if problem:
        key = "label" if entry.label is not None or "outputs" in problem else "model"
        yield provenance.issue(
            ("reward", "functions", index, key),
            f"this reward model cannot be used as a reward: {problem}",
            code="reward-model",
            fix="name a sequence-classification model (AutoModelForSequenceClassification); "
            "for one with several outputs, set `label` (an index or an id2label name)",
        )


def _check_kwargs(
    recipe: Recipe,
    provenance: Provenance,
    registry: Registry,
    name: str,
    path: KeyPath,
    supplied: frozenset[str],
    own_keys: dict[str, str],
) -> Iterator[ConfigIssue]:
    """Each key of the `*_kwargs` mapping at `path` checked against `name`'s signature."""
    accepted = [k for k in registry.keywords(name) if k not in supplied and k not in own_keys]
    hints = registry.keyword_types(name)
    for key, value in _get(recipe, path).items():
        if key in own_keys:
            yield provenance.issue(
                (*path, key),
                f"`{key}` has its own recipe key; the trainer passes {own_keys[key]} to `{name}`",
                code="kwarg-has-key",
                found=show_value(key),
                fix=f"set `{own_keys[key]}` instead, and remove `{key}` here",
            )
        elif key not in accepted:
            close = difflib.get_close_matches(key, accepted, n=1, cutoff=0.5)
            what = (
                "an input the trainer passes to"
                if key in supplied
                else f"not a keyword of the {registry.kind}"
            )
            yield provenance.issue(
                (*path, key),
                f"`{key}` is {what} `{name}`" + (f"; did you mean {close[0]!r}?" if close else ""),
                code="unknown-kwarg",
                expected="one of " + ", ".join(accepted)
                if accepted
                else f"nothing: `{name}` takes no settings",
                found=show_value(key),
                fix="remove the key, or use one the component takes (its docstring documents them)",
            )
        elif key in hints and (problem := _type_problem(hints[key], value)):
            yield provenance.issue(
                (*path, key),
                f"`{key}` of `{name}` {problem}",
                code="kwarg-type",
                expected=_type_name(hints[key]),
                found=show_value(value),
                fix=f"give `{key}` a value of the type `{name}` declares",
            )


def _type_problem(hint: Any, value: Any) -> str | None:
    """Why `value` does not fit the type hint (strict: no string-to-number coercion), or None."""
    from pydantic import TypeAdapter, ValidationError

    try:
        TypeAdapter(hint).validate_python(value, strict=True)
    except ValidationError as exc:
        return exc.errors()[0]["msg"].lower().replace("input ", "", 1)
    except Exception:  # noqa: BLE001 (a hint pydantic cannot check, e.g. torch.Tensor: not checked)
        return None
    return None


def _type_name(hint: Any) -> str:
    return getattr(hint, "__name__", None) or str(hint).replace("collections.abc.", "").replace("typing.", "")


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
