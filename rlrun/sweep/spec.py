"""The sweep file: a base recipe, the points to try (`grid` and/or `list`) and the seeds, read with
the line of every key and expanded into runs with deterministic names.

```yaml
name: grpo-vs-dapo            # the sweep's folder under trainer.output_dir (default: the file's stem)
recipe: grpo                  # a built-in recipe, or a file relative to this one
overrides:                    # dotted keys set in every run
  trainer.total_steps: 100
grid:                         # every combination of these values
  recipe: [grpo, dapo]        # `recipe` picks the base recipe of a point
  actor.optimizer.lr: [1.0e-4, 3.0e-4]
list:                         # explicit points (crossed with the grid when both are given)
  - {actor.clip_ratio_high: 0.28}
seeds: [0, 1, 2]              # trainer.seed of each run of each point
```
"""

from __future__ import annotations

import itertools
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from rlrun.errors import ConfigIssue, RecipeError, show_value
from rlrun.pathnames import name_problem
from rlrun.recipes.keys import KeyPath, dotted
from rlrun.recipes.paths import unset_variable, unset_variables
from rlrun.recipes.yaml_io import Mark, Shape, parse_document, read_text

RECIPE_KEY = "recipe"  # a point's pseudo-key that chooses its base recipe
SEED_KEY = "trainer.seed"  # the schema's seed: the sweep's `seeds` set it
RESERVED_KEYS = (SEED_KEY, "trainer.output_dir")  # not swept: `seeds` sets one, all runs share the other
DEFAULT_POINT = "default"  # the name of the only point of a sweep without grid or list
MAX_NAME_CHARS = 200  # a folder name (most file systems allow 255 bytes)
_UNSAFE = re.compile(r"[^A-Za-z0-9._+-]")
SWEEP_SHAPE = Shape(
    "a sweep file is a mapping of its keys (`recipe:`, `grid:`, `list:`, `seeds:`, ...)",
    "write one key per line, e.g. `recipe: grpo`, then `grid:` with a list of values per swept key "
    "(a list of points goes under `list:`)",
)


class SweepFile(BaseModel):
    """The keys of a sweep file; unknown keys are errors, as in recipes."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, populate_by_name=True)

    name: str | None = None  # default: the file's stem; a folder name (`Sweep.check`)
    description: str = ""
    recipe: str | None = Field(None, min_length=1)  # points without a `recipe` of their own use it
    overrides: dict[str, Any] = {}  # dotted key -> value, set in every run before the point's
    grid: dict[str, Annotated[list[Any], Field(min_length=1)]] = {}  # dotted key -> values
    points: list[dict[str, Any]] = Field([], alias="list")  # each a mapping of dotted key -> value
    seeds: Annotated[list[Annotated[int, Field(ge=0)]], Field(min_length=1)] = [0]

    @field_validator("seeds")
    @classmethod
    def _distinct(cls, seeds: list[int]) -> list[int]:
        if len(set(seeds)) != len(seeds):
            raise ValueError("seeds must be distinct")
        return seeds


@dataclass(frozen=True)
class Setting:
    """One value a run sets, and where the sweep file says so (for error messages)."""

    key: str
    value: Any
    at: KeyPath  # its key path in the sweep file

    @property
    def override(self) -> str:
        """The `key=value` override (`rlrun train` reads the value as YAML; JSON is YAML)."""
        return f"{self.key}={json.dumps(self.value)}"


@dataclass(frozen=True)
class Point:
    """One setting of the swept keys: its runs differ only in their seed."""

    name: str  # `recipe=dapo,actor.optimizer.lr=0.0001`
    recipe: Setting
    settings: tuple[Setting, ...]  # the sweep's overrides, then the point's own keys


@dataclass(frozen=True)
class PlannedRun:
    point: Point
    seed: int
    seed_at: KeyPath

    @property
    def name(self) -> str:
        return f"{self.point.name}/seed-{self.seed}"

    @property
    def settings(self) -> tuple[Setting, ...]:
        return (*self.point.settings, Setting(SEED_KEY, self.seed, self.seed_at))

    @property
    def overrides(self) -> list[str]:
        return [setting.override for setting in self.settings]


@dataclass(frozen=True)
class Sweep:
    file: Path
    spec: SweepFile
    positions: dict[KeyPath, Mark]

    @property
    def name(self) -> str:
        return self.spec.name or _safe(self.file.stem)

    def issue(self, at: KeyPath, message: str, key: str | None = None, **fields: Any) -> ConfigIssue:
        """An issue located at `at` in the sweep file (or its nearest located parent); `key` names
        the recipe key when it is not the sweep file's own."""
        mark = None
        for depth in range(len(at), -1, -1):
            if (mark := self.positions.get(at[:depth])) is not None:
                break
        line, column = (mark.line, mark.column) if mark else (None, None)
        key = dotted(at) if key is None else key
        return ConfigIssue(message, key=key, file=str(self.file), line=line, column=column, **fields)

    def points(self) -> list[Point]:
        """The list's points crossed with the grid's combinations, in file order."""
        spec = self.spec
        listed = [
            [Setting(key, value, ("list", index, key)) for key, value in point.items()]
            for index, point in enumerate(spec.points)
        ] or [[]]
        axes = [
            [Setting(key, value, ("grid", key, index)) for index, value in enumerate(values)]
            for key, values in spec.grid.items()
        ]
        base = [Setting(key, value, ("overrides", key)) for key, value in spec.overrides.items()]
        points = []
        for listed_part, grid_part in itertools.product(listed, itertools.product(*axes)):
            swept = [*listed_part, *grid_part]
            recipe = next((s for s in swept if s.key == RECIPE_KEY), None)
            if recipe is None:
                recipe = Setting(RECIPE_KEY, spec.recipe, ("recipe",))
            name = ",".join(f"{s.key}={_name_value(s)}" for s in swept) or DEFAULT_POINT
            settings = tuple(base + [s for s in swept if s.key != RECIPE_KEY])
            points.append(Point(name, recipe, settings))
        return points

    def runs(self) -> list[PlannedRun]:
        """Every point at every seed, point by point."""
        return [
            PlannedRun(point, seed, ("seeds", index))
            for point in self.points()
            for index, seed in enumerate(self.spec.seeds)
        ]

    def check(self) -> list[ConfigIssue]:
        """Mistakes in the sweep itself (not in the recipes it makes)."""
        issues = []
        if (problem := name_problem(self.name)) is not None:
            at = ("name",) if self.spec.name is not None else ()
            fix = "give the sweep a plain folder name, e.g. `name: lr-sweep`"
            issues.append(
                self.issue(at, f"the sweep's name `{self.name[:60]}` cannot be a folder: {problem}", fix=fix)
            )
        where = [("grid", key) for key in self.spec.grid] + [
            ("overrides", key) for key in self.spec.overrides
        ]
        where += [("list", index, key) for index, point in enumerate(self.spec.points) for key in point]
        for at in where:
            key = str(at[-1])
            if key == SEED_KEY or (key in RESERVED_KEYS and at[0] != "overrides"):
                fix = "list the seeds under `seeds:`" if key == SEED_KEY else "set it under `overrides:`"
                issues.append(self.issue(at, "the sweep sets this key itself", fix=fix))
            if key == RECIPE_KEY and at[0] == "overrides":
                issues.append(
                    self.issue(at, "the base recipe is `recipe:`, not an override", fix="move it up")
                )
        listed_keys = {key for point in self.spec.points for key in point}
        for key in sorted(listed_keys & set(self.spec.grid)):
            issues.append(
                self.issue(("grid", key), "a key in both `grid` and `list`", fix="sweep it in one of them")
            )
        recipes = {point.recipe.at: point.recipe.value for point in self.points()}
        for at, value in recipes.items():
            unset = unset_variables(value) if isinstance(value, str) else []
            issues += [self.issue(at, key=RECIPE_KEY, **unset_variable(name, value)) for name in unset]
        for point in self.points():
            if not isinstance(point.recipe.value, str) or not point.recipe.value:
                issues.append(
                    self.issue(
                        point.recipe.at,
                        f"sweep point `{point.name}` has no base recipe",
                        code="missing-key",
                        expected="a built-in recipe name or a recipe file",
                        found=show_value(point.recipe.value),
                        fix="add `recipe: NAME_OR_FILE` at the top of the sweep file",
                    )
                )
                break
        seen: dict[str, Point] = {}
        for point in self.points():
            if point.name in seen:
                issues.append(
                    self.issue(
                        point.settings[-1].at if point.settings else (),
                        f"two sweep points have the same name `{point.name}`",
                        fix="make the swept values differ after unsafe characters become `_`",
                    )
                )
            if len(point.name) > MAX_NAME_CHARS:
                issues.append(
                    self.issue((), f"the sweep point name `{point.name[:60]}...` is too long for a folder")
                )
            seen[point.name] = point
        return issues


def read_sweep(path: Path | str) -> Sweep:
    """Parse and check a sweep file; RecipeError (located by line) on any mistake."""
    path = Path(path)
    if not path.is_file():
        raise RecipeError(
            [ConfigIssue("the sweep file does not exist", code="sweep-missing", file=str(path))]
        )
    data, positions, issues = parse_document(read_text(path, "sweep file"), str(path), SWEEP_SHAPE)
    if issues:
        raise RecipeError(issues)
    located = Sweep(path, SweepFile(), positions)  # placeholder spec, for locating schema errors
    try:
        spec = SweepFile.model_validate(data)
    except ValidationError as exc:
        raise RecipeError(
            [_schema_issue(located, error) for error in exc.errors(include_url=False)]
        ) from None
    sweep = Sweep(path, spec, positions)
    if issues := sweep.check():
        raise RecipeError(issues)
    return sweep


def _schema_issue(sweep: Sweep, error: Any) -> ConfigIssue:
    at = tuple(error["loc"])
    if error["type"] == "extra_forbidden":
        keys = ", ".join(field.alias or name for name, field in SweepFile.model_fields.items())
        return sweep.issue(at, "unknown key", code="unknown-key", expected=f"one of {keys}")
    return sweep.issue(
        at, error["msg"], code="invalid", found=show_value(error.get("input")) if "input" in error else None
    )


def _name_value(setting: Setting) -> str:
    """A value as it appears in a run's folder name: recipe files by their stem, unsafe characters as `_`."""
    value = setting.value
    if setting.key == RECIPE_KEY and isinstance(value, str):
        value = Path(value).stem
    return _safe(value if isinstance(value, str) else json.dumps(value, separators=(",", ":")))


def _safe(text: str) -> str:
    return _UNSAFE.sub("_", text)
