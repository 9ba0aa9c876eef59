"""`load_recipe`: a recipe file and overrides in, a validated `Recipe` (or every problem) out."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from rlrun.errors import ConfigIssue, RecipeError
from rlrun.recipes.agent import check_agent
from rlrun.recipes.builtin import builtin_names, builtin_path
from rlrun.recipes.inherit import display_path, merge, read_chain
from rlrun.recipes.keys import carry_moved_keys
from rlrun.recipes.names import check_names, import_plugins
from rlrun.recipes.overrides import apply_overrides
from rlrun.recipes.paths import anchor_paths, unset_variable_issues
from rlrun.recipes.provenance import Provenance
from rlrun.recipes.rules import check_rules
from rlrun.recipes.schema_issues import schema_issues, without_invalid
from rlrun.schema import Recipe


@dataclass(frozen=True)
class LoadedRecipe:
    recipe: Recipe
    data: dict[str, Any]  # the resolved recipe as plain data (what resolved.yaml holds)
    provenance: Provenance
    notices: list[ConfigIssue]
    source_path: Path


def resolve_recipe_path(ref: str | Path) -> Path:
    """A recipe file, or the name of a built-in recipe (`dapo`)."""
    path = Path(ref)
    if not path.exists() and (builtin := builtin_path(str(ref))) is not None:
        return builtin
    if not path.is_file():
        raise RecipeError(
            [
                ConfigIssue(
                    "the recipe file does not exist" if not path.exists() else "the recipe is not a file",
                    code="recipe-missing",
                    file=str(ref),
                    expected=f"a YAML file or a built-in recipe name ({', '.join(builtin_names())})",
                    fix="check the path (`rlrun recipes` lists the built-in ones)",
                )
            ]
        )
    return path


def load_recipe(
    path: str | Path,
    overrides: Sequence[str] = (),
    strict: bool = False,
    environment: bool = True,
    import_modules: bool = True,
    run_record: bool = False,
) -> LoadedRecipe:
    """Read, inherit, override and validate a recipe. Raises RecipeError with every problem;
    with `strict`, notices count as problems too; `environment=False` skips the checks of this
    machine (vLLM, GPU) for a recipe meant to run elsewhere; `import_modules=False` runs no user
    code (reward and plugin modules are only looked up, not imported); `run_record`: the file is a
    run's own resolved.yaml, perhaps written by an earlier rlrun (its moved keys are carried over)."""
    path = resolve_recipe_path(path)
    issues: list[ConfigIssue] = []
    data, provenance = merge(read_chain(path, issues), display_path(path))
    if run_record:
        carry_moved_keys(data)
    issues += apply_overrides(data, provenance, overrides)
    anchor_paths(data, Path.cwd(), only=lambda key: provenance.of(key).kind == "override")
    issues += unset_variable_issues(data, provenance)
    issues += import_plugins(data, provenance, execute=import_modules)
    try:
        recipe = Recipe.model_validate(data)
    except ValidationError as exc:
        issues += schema_issues(exc, data, provenance)
        recipe = _valid_part(without_invalid(data, exc))
    notices: list[ConfigIssue] = []
    if recipe is not None:  # the rules can still look at what the schema accepted
        rule_errors, notices = check_rules(recipe, provenance, environment=environment)
        agent_errors, agent_notices = check_agent(
            recipe, provenance, execute=import_modules, environment=environment
        )
        issues += [*check_names(recipe, provenance, execute=import_modules), *rule_errors, *agent_errors]
        notices += agent_notices
    if strict:
        issues, notices = issues + notices, []
    if issues:
        raise RecipeError(sorted(issues, key=_reading_order), notices)
    return LoadedRecipe(recipe, recipe.model_dump(mode="json"), provenance, notices, path)


def _valid_part(data: dict[str, Any]) -> Recipe | None:
    try:
        return Recipe.model_validate(data)
    except ValidationError:
        return None


def _reading_order(issue: ConfigIssue) -> tuple[bool, str, int, int]:
    """File order by line and column; command-line overrides last."""
    return (issue.override is not None, issue.file or "", issue.line or 0, issue.column or 0)
