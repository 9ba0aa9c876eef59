"""Key paths and what the schema allows at each: the basis of did-you-mean suggestions."""

from __future__ import annotations

import difflib
import typing
import unicodedata
from functools import cache
from typing import Any

from pydantic import BaseModel

from rlrun.facts.verl_keys import lookup as verl_lookup
from rlrun.schema import Recipe

KeyPath = tuple[str | int, ...]  # ("actor", "optimizer", "lr"); list items by index


def dotted(path: KeyPath) -> str:
    return ".".join(str(part) for part in path)


def section_at(path: KeyPath) -> type[BaseModel] | None:
    """The schema model of the mapping at `path`, or None where the schema has no fixed keys."""
    model: type[BaseModel] | None = Recipe
    for part in path:
        if model is None:
            return None
        if isinstance(part, int):
            continue  # an item of a list[Model] field: the model was found with the field
        field = model.model_fields.get(str(part))
        model = _model_in(field.annotation) if field else None
    return model


def _model_in(annotation: Any) -> type[BaseModel] | None:
    """The BaseModel inside `Model`, `Model | None`, `list[Model]`."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in typing.get_args(annotation):
        if (found := _model_in(arg)) is not None:
            return found
    return None


@cache
def all_keys() -> tuple[KeyPath, ...]:
    """Every key path the schema defines, sections included."""

    def walk(model: type[BaseModel], prefix: KeyPath) -> list[KeyPath]:
        out: list[KeyPath] = []
        for name, field in model.model_fields.items():
            out.append((*prefix, name))
            if (sub := _model_in(field.annotation)) is not None:
                out.extend(walk(sub, (*prefix, name)))
        return out

    return tuple(walk(Recipe, ()))


def suggest_keys(path: KeyPath) -> list[str]:
    """Likely meant keys for an unknown `path`: close sibling names first, then keys elsewhere
    with the same last name (`actor.lr` -> `actor.optimizer.lr`)."""
    *parent, name = path
    name = str(name)
    section = section_at(tuple(parent))
    siblings = list(section.model_fields) if section else []
    close = [dotted((*parent, s)) for s in difflib.get_close_matches(name, siblings, n=3, cutoff=0.6)]
    same_name = [dotted(key) for key in all_keys() if key[-1] == name and key != path]
    # Keys in the section the user was writing in come first.
    same_name.sort(key=lambda key: not key.startswith(dotted(tuple(parent[:1]))))
    return list(dict.fromkeys(close + same_name))[:3]


def did_you_mean(candidates: list[str]) -> str | None:
    if not candidates:
        return None
    return "did you mean " + " or ".join(f"`{c}`" for c in candidates) + "?"


# Keys of earlier rlrun versions -> where their setting went.
MOVED = {
    "critic.warmup_steps": "moved to `actor.frozen_steps`: the same count of steps without a policy "
    "update, which now applies with or without a critic",
}


def carry_moved_keys(data: dict[str, Any]) -> None:
    """A run's own resolved recipe, written by an earlier rlrun, with its moved keys carried to
    where their setting went, meaning what they meant there (a user's recipe is told instead:
    `MOVED`). `critic.warmup_steps` skipped actor updates only with a critic."""
    critic = data.get("critic")
    if isinstance(critic, dict) and "warmup_steps" in critic:
        steps = critic.pop("warmup_steps")
        if critic.get("enabled"):
            data.setdefault("actor", {}).setdefault("frozen_steps", steps)


def unknown_key_hint(path: KeyPath, value: Any = None) -> str | None:
    """The hint for an unknown key: where a key of an earlier rlrun went, the rlrun name of a
    verl key (with its unit change), else a did-you-mean. `value` is what the key holds (a verl
    section's keys are looked up one by one). A key with a non-ASCII character (a Cyrillic `а`
    for `a`) is told so first: a did-you-mean would show a name that looks identical."""
    hint = MOVED.get(dotted(path)) or _verl_hint(path, value) or did_you_mean(suggest_keys(path))
    return "; ".join(part for part in (_non_ascii_hint(path), hint) if part) or None


def _non_ascii_hint(path: KeyPath) -> str | None:
    key = str(path[-1]) if path else ""
    index = next((i for i, char in enumerate(key) if not char.isascii()), None)
    if index is None:
        return None
    char = key[index]
    name = unicodedata.name(char, "unnamed")
    return (
        f"the key contains a non-ASCII character, `{char}` (U+{ord(char):04X} {name}) at position "
        f"{index + 1}, where every rlrun key is plain ASCII: retype it"
    )


def _verl_hint(path: KeyPath, value: Any) -> str | None:
    own_sections = set(Recipe.model_fields)
    hints = []
    for key in [dotted((*path, *leaf)) for leaf in _leaves(value)]:
        found = verl_lookup(key)
        if found is None or (found[0].endswith(".*") and key.split(".")[0] in own_sections):
            continue  # a typo in an rlrun section is not a verl name
        row = found[1]
        note = f" ({row.note})" if row.note else ""
        hints.append(
            f"`{key}` is verl's name for `{row.rlrun}`{note}"
            if row.rlrun
            else f"verl's `{key}` has no rlrun equivalent{note}"
        )
    if not hints:
        return None
    more = [f"and {len(hints) - 3} more"] if len(hints) > 3 else []
    return "; ".join(hints[:3] + more) + " (`rlrun convert verl` converts a whole verl command line)"


def _leaves(value: Any) -> list[tuple[str, ...]]:
    """The key paths of a mapping's values, relative to it; [()] for a value that is no mapping."""
    if not isinstance(value, dict) or not value:
        return [()]
    return [(str(key), *rest) for key, sub in value.items() for rest in _leaves(sub)]
