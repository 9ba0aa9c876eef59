"""`rlrun.load_recipe`: the recipe loader as a Python program calls it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rlrun.recipes import LoadedRecipe
from rlrun.recipes import load_recipe as load


def load_recipe(
    recipe: str | Path | Mapping[str, Any],
    overrides: Mapping[str, Any] | Sequence[str] | None = None,
    *,
    strict: bool = False,
) -> LoadedRecipe:
    """A validated recipe: a YAML file, a built-in recipe's name (`"grpo"`) or a mapping (which
    may `extends` one), changed by `overrides`, a mapping of dotted keys to values
    (`{"actor.optimizer.lr": 3e-6}`) or the command line's `key=value` / `~key` texts. A reward
    function, a tool or an environment class may be given as the object itself. Raises
    `rlrun.RecipeError` with every problem, each naming the key and where it was written (a file
    and line, "recipe from Python" or "overrides from Python"); `strict`: notices are errors too."""
    if isinstance(overrides, str):  # one text is not a list of texts
        overrides = [overrides]
    return load(recipe, overrides if overrides is not None else (), strict=strict)
