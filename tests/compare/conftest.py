"""Crafted run directories in the `rlrun train` format (docs/architecture.md, "Run directory"),
with a meta.json of record version 1 (rlrun.records.record): the fields every run has had."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

BASE_RECIPE = Path(__file__).parents[2] / "rlrun" / "recipes" / "builtin" / "base.yaml"

MakeRun = Callable[..., Path]


@pytest.fixture
def base_recipe() -> dict[str, Any]:
    return yaml.safe_load(BASE_RECIPE.read_text())


@pytest.fixture
def make_run(tmp_path: Path, base_recipe: dict[str, Any]) -> MakeRun:
    """`make_run(name, rows, **options)` writes `tmp_path/runs/<name>/` and returns it.

    Options: `changes` ({dotted key: value} applied to the base recipe), `status`,
    `total_steps`, `tail` (text appended after the rows, e.g. a partial line), `meta`
    (extra meta.json fields), `recipe=False` (no resolved.yaml).
    """

    def make(
        name: str,
        rows: list[dict[str, Any]],
        *,
        changes: dict[str, Any] | None = None,
        status: str = "finished",
        total_steps: int | None = None,
        tail: str = "",
        meta: dict[str, Any] | None = None,
        recipe: bool = True,
    ) -> Path:
        path = tmp_path / "runs" / name
        path.mkdir(parents=True)
        resolved = copy.deepcopy(base_recipe)
        for key, value in (changes or {}).items():
            *parents, leaf = key.split(".")
            node = resolved
            for part in parents:
                node = node[part]
            node[leaf] = value
        if recipe:
            (path / "resolved.yaml").write_text(yaml.safe_dump(resolved, sort_keys=False))
        (path / "meta.json").write_text(
            json.dumps(
                {
                    "name": name,
                    "status": status,
                    "git_sha": "0123456789abcdef",
                    "git_dirty": False,
                    "seed": resolved["trainer"]["seed"],
                    "start_time": "2026-11-29T10:00:00+00:00",
                    "end_time": None if status == "running" else "2026-11-29T10:05:00+00:00",
                    "total_steps": total_steps or resolved["trainer"]["total_steps"],
                    "versions": {"python": "3.11.7", "rlrun": "0.1.0"},
                    "algorithm": {
                        "advantage": resolved["algorithm"]["advantage"],
                        "policy_loss": resolved["actor"]["policy_loss"],
                        "kl_placement": "none",
                        "text": f"{resolved['algorithm']['advantage']} × {resolved['actor']['policy_loss']} × no KL",
                    },
                    "model": resolved["model"]["path"],
                    "recipe": "recipe.yaml",
                    "overrides": [],
                    "wandb_run_id": None,
                    **(meta or {}),
                }
            )
        )
        with open(path / "metrics.jsonl", "w") as f:
            f.writelines(json.dumps(row) + "\n" for row in rows)
            f.write(tail)
        return path

    return make


def _steps(n: int, series: dict[str, Callable[[int], float] | float]) -> list[dict[str, Any]]:
    """Rows for steps 1..n (2 s and 128 samples a step): each metric a constant or a function of the step."""
    return [
        {
            "step": s,
            "wall_time_s": 2.0 * s,
            "samples": 128 * s,
            **{name: value(s) if callable(value) else value for name, value in series.items()},
        }
        for s in range(1, n + 1)
    ]


@pytest.fixture
def steps() -> Callable[..., list[dict[str, Any]]]:
    """`steps(n, {"actor/entropy": lambda s: ..., "actor/pg_clipfrac": 0.1})`: metric rows."""
    return _steps
