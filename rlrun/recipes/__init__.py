"""Recipe loading: YAML with positions, `extends`, overrides, provenance, validation rules.

The built-in recipes live in `builtin/` (package data; `recipes/` at the repo root)."""

from rlrun.recipes.batch_plan import BatchPlan, algorithm_summary, batch_plan, engine_summary
from rlrun.recipes.builtin import builtin_descriptions, builtin_names, copy_builtin
from rlrun.recipes.loader import LoadedRecipe, load_recipe, resolve_recipe_path
from rlrun.recipes.provenance import Provenance, Source

__all__ = [
    "BatchPlan",
    "LoadedRecipe",
    "Provenance",
    "Source",
    "algorithm_summary",
    "batch_plan",
    "builtin_descriptions",
    "builtin_names",
    "copy_builtin",
    "engine_summary",
    "load_recipe",
    "resolve_recipe_path",
]
