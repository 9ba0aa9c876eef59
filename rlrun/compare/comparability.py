"""Warnings that runs are not comparable: differences that make their metrics mean different things.

A changed learning rate is what a comparison is for; a changed model, dataset, reward,
response-length cap or batch size changes what the numbers measure, so it is called out
above the tables rather than left as one line of the config diff.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rlrun.compare.diff import MISSING, flatten
from rlrun.tasks import GENERATOR_SETTINGS

_IGNORED_DATA_KEYS = ("data.shuffle", "data.seed")  # the order of the data, not the data


@dataclass(frozen=True)
class Aspect:
    name: str
    selects: Callable[[str, Mapping[str, Any]], bool]  # (dotted key, flat recipe) -> in this aspect
    consequence: str


def _is_dataset_key(key: str, flat: Mapping[str, Any]) -> bool:
    if not key.startswith("data.") or key in _IGNORED_DATA_KEYS:
        return False
    # a generator's settings only matter when that generator is the source
    section = key.split(".")[1]
    return section not in GENERATOR_SETTINGS or flat.get("data.source") == GENERATOR_SETTINGS[section]


ASPECTS = (
    Aspect(
        "model or tokenizer",
        lambda key, _: key in ("model.path", "model.tokenizer"),
        "different starting policies: rewards and accuracies start from different places",
    ),
    Aspect("dataset", _is_dataset_key, "different prompts: rewards and accuracies measure different tasks"),
    Aspect(
        "reward functions",
        lambda key, _: key.startswith("reward.functions"),
        "rewards measure different things",
    ),
    Aspect(
        "response length limits",
        lambda key, _: key in ("rollout.max_response_tokens", "rollout.min_response_tokens"),
        "response lengths and clip ratios are bounded differently",
    ),
    Aspect(
        "batch units",
        lambda key, _: key in ("trainer.prompts_per_step", "rollout.n"),
        "a step is a different amount of data: compare by samples (the target table, --x samples)",
    ),
)


# meta.json's `setup` (rlrun.records.rundir.run_setup), compared as `setup.<key>`
SETUP = Aspect(
    "compute setup",
    lambda key, _: key.startswith("setup."),
    "the same recipe computed differently: wall times and throughput are not comparable, and float "
    "results differ by rounding (more across dtypes or devices)",
)


@dataclass(frozen=True)
class Incomparability:
    """Runs that differ in one aspect; `differences` maps each differing key to its per-run values."""

    aspect: str
    runs: list[str]  # the runs that differ from the reference
    differences: dict[str, list[Any]]
    consequence: str

    @property
    def message(self) -> str:
        keys = ", ".join(self.differences)
        return f"different {self.aspect} in {', '.join(self.runs)} ({keys}): {self.consequence}"


def check_comparability(
    names: Sequence[str],
    recipes: Sequence[Mapping[str, Any] | None],
    setups: Sequence[Mapping[str, Any] | None] = (),
) -> list[Incomparability]:
    """One warning per aspect in which any run differs from the reference (the first): the
    recipe aspects, then the compute setup (meta.json's `setup`, one per run when given).

    Runs without a resolved recipe (or a setup) cannot be checked and are left out.
    """
    flats = [_effective(flatten(recipe)) if recipe is not None else None for recipe in recipes]
    setup_views = [
        {f"setup.{key}": value for key, value in setup.items()} if setup else None for setup in setups
    ]
    aspects = [(aspect, [_select(aspect, f) if f is not None else None for f in flats]) for aspect in ASPECTS]
    warnings = []
    for aspect, views in [*aspects, (SETUP, setup_views)]:
        reference = views[0] if views else None
        if reference is None:
            continue
        differing = [i for i, view in enumerate(views) if view is not None and view != reference]
        if not differing:
            continue
        known = [view for view in views if view is not None]
        keys = list(dict.fromkeys(key for view in known for key in view))
        shared = [key for key in keys if all(key in view for view in known)]
        # a changed data.source explains the generator keys that vanished with it
        shown = _differing(shared, known, reference) or _differing(keys, known, reference)
        differences = {
            key: [view.get(key, MISSING) if view is not None else MISSING for view in views] for key in shown
        }
        warnings.append(
            Incomparability(aspect.name, [names[i] for i in differing], differences, aspect.consequence)
        )
    return warnings


def _differing(keys: list[str], views: list[dict[str, Any]], reference: dict[str, Any]) -> list[str]:
    return [
        key for key in keys if any(view.get(key, MISSING) != reference.get(key, MISSING) for view in views)
    ]


def _effective(flat: dict[str, Any]) -> dict[str, Any]:
    """Defaults that mean "same as": a null tokenizer is the model's own."""
    if "model.path" in flat and flat.get("model.tokenizer") is None:
        flat["model.tokenizer"] = flat["model.path"]
    return flat


def _select(aspect: Aspect, flat: Mapping[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in flat.items() if aspect.selects(key, flat)}
