"""`load_recipe`: a recipe (a file, a built-in's name, or a mapping given from Python) and
overrides in, a validated `Recipe` (or every problem) out."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from rlrun.errors import ConfigIssue, RecipeError
from rlrun.recipes.agent import check_agent
from rlrun.recipes.builtin import builtin_names, builtin_path
from rlrun.recipes.inherit import Layer, display_path, merge, read_chain, read_given
from rlrun.recipes.keys import carry_moved_keys
from rlrun.recipes.names import check_names, import_plugins
from rlrun.recipes.overrides import PYTHON_OVERRIDES, apply_overrides
from rlrun.recipes.paths import anchor_paths, unset_variable_issues
from rlrun.recipes.provenance import Provenance
from rlrun.recipes.python_objects import REFUSED, Named, PassedObject, live_table, name_objects
from rlrun.recipes.rules import check_rules
from rlrun.recipes.schema_issues import schema_issues, without_invalid
from rlrun.recipes.yaml_dump import flow, to_yaml
from rlrun.schema import Recipe
from rlrun.user_code import live_objects

PYTHON_RECIPE = "recipe from Python"  # where a problem of a recipe given as a mapping is
PYTHON_RECIPE_STEM = "python-recipe"  # the default run name's start for such a recipe


@dataclass(frozen=True)
class LoadedRecipe:
    recipe: Recipe
    data: dict[str, Any]  # the resolved recipe as plain data (what resolved.yaml holds)
    provenance: Provenance
    notices: list[ConfigIssue]
    source_path: Path  # the recipe file (for a mapping given from Python: `python-recipe`, no file)
    source_text: str = ""  # the recipe as given: the file's text, or the mapping as YAML
    objects: Mapping[str, PassedObject] = field(default_factory=dict)  # Python objects, by the name it holds
    overrides: list[str] = field(default_factory=list)  # as `key=value` texts (Python objects by their names)

    def live_table(self) -> dict[str, Any]:
        """The ``python-object:`` names the recipe holds and their objects."""
        return live_table(self.objects)

    def to_yaml(self, path: str | Path, *, overwrite: bool = False) -> Path:
        """Write the resolved recipe as a YAML file that loads back as this recipe (a Python
        object no import path names stays its ``python-object:`` name: pass it again when loading).
        An existing file is kept unless `overwrite`."""
        path = Path(path)
        if path.exists() and not overwrite:
            raise FileExistsError(f"{path} already exists; rlrun does not overwrite it (pass overwrite=True)")
        header = "".join(
            f"# {name}: {passed.not_reproducible}; give it again when loading this file\n"
            for name, passed in self.objects.items()
            if passed.not_reproducible
        )
        path.write_text(header + to_yaml(self.data))
        return path


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
    path: str | Path | Mapping[str, Any],
    overrides: Sequence[str] | Mapping[str, Any] = (),
    strict: bool = False,
    environment: bool = True,
    import_modules: bool = True,
    run_record: bool = False,
) -> LoadedRecipe:
    """Read, inherit, override and validate a recipe. Raises RecipeError with every problem;
    with `strict`, notices count as problems too; `environment=False` skips the checks of this
    machine (vLLM, GPU) for a recipe meant to run elsewhere; `import_modules=False` runs no user
    code (reward and plugin modules are only looked up, not imported); `run_record`: the file is a
    run's own resolved.yaml, perhaps written by an earlier rlrun (its moved keys are carried over).
    A recipe given as a mapping, or overrides as a mapping of dotted keys, come from Python: they
    may hold Python objects where `python_objects.OBJECT_KEYS` says."""
    issues: list[ConfigIssue] = []
    named = Named()
    if isinstance(path, Mapping):
        given = name_objects(path, (), named, PYTHON_RECIPE)
        layers, shown, source_text = read_given(given, PYTHON_RECIPE, issues), PYTHON_RECIPE, to_yaml(given)
        path = Path(PYTHON_RECIPE_STEM)
    else:
        path = resolve_recipe_path(path)
        layers, shown, source_text = read_chain(path, issues), display_path(path), None
    if isinstance(overrides, Mapping):
        named_values = (
            (key, name_objects(v, _key_path(key), named, PYTHON_OVERRIDES)) for key, v in overrides.items()
        )
        overrides = {key: value for key, value in named_values if value is not REFUSED}
    issues += named.issues
    texts = (
        [f"{key}={flow(value)}" for key, value in overrides.items()]
        if isinstance(overrides, Mapping)
        else list(overrides)
    )
    with live_objects(live_table(named.passed)):
        loaded = _validated(layers, shown, overrides, issues, strict, environment, import_modules, run_record)
    recipe, provenance, notices = loaded
    if recipe.model.tokenizer is None and any(
        p.description["kind"] == "model" for p in named.passed.values()
    ):
        raise RecipeError([_tokenizer_needed(provenance)])
    if source_text is None:  # read once validated: read_chain has reported a file it cannot read
        source_text = path.read_text()
    return LoadedRecipe(
        recipe,
        recipe.model_dump(mode="json"),
        provenance,
        notices,
        path,
        source_text,
        dict(named.passed),
        texts,
    )


def _tokenizer_needed(provenance: Provenance) -> ConfigIssue:
    """A model given from Python is written without a tokenizer: the recipe must name one."""
    return provenance.issue(
        ("model", "path"),
        "a model given from Python is written to a folder of its own without a tokenizer",
        code="python-object",
        fix="name its tokenizer in `model.tokenizer` (a folder, a hub id, or rlrun:<name>)",
    )


def _key_path(key: str) -> tuple[str | int, ...]:
    return tuple(int(part) if part.isdigit() else part for part in str(key).split("."))


def _validated(
    layers: list[Layer],
    shown: str,
    overrides: Sequence[str] | Mapping[str, Any],
    issues: list[ConfigIssue],
    strict: bool,
    environment: bool,
    import_modules: bool,
    run_record: bool,
) -> tuple[Recipe, Provenance, list[ConfigIssue]]:
    """The layers merged, overridden and validated (load_recipe's arguments)."""
    data, provenance = merge(layers, shown)
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
    if issues or recipe is None:
        raise RecipeError(sorted(issues, key=_reading_order), notices)
    return recipe, provenance, notices


def _valid_part(data: dict[str, Any]) -> Recipe | None:
    try:
        return Recipe.model_validate(data)
    except ValidationError:
        return None


def _reading_order(issue: ConfigIssue) -> tuple[bool, str, int, int]:
    """File order by line and column; command-line overrides last."""
    return (issue.override is not None, issue.file or "", issue.line or 0, issue.column or 0)
