"""load_recipe on a generated recipe with thousands of mistakes: every kind is found, and the work
grows linearly with the file (counted in function calls, not timed)."""

import sys
from pathlib import Path

import pytest

from rlrun.errors import RecipeError, issue_kinds
from rlrun.recipes import load_recipe


def generated(folder: Path, entries: int) -> Path:
    """`entries` reward entries and `entries` actor keys, each with a mistake, and one more
    mistake at the end."""
    lines = ["extends: grpo", "reward:", "  functions:"]
    lines += ["    - {fn: 'rlrun:exact_match', wieght: 1}"] * entries
    lines += ["actor:", *(f"  k{i}: 1" for i in range(entries)), "trainer:", "  total_stepz: 5"]
    path = folder / f"generated_{entries}.yaml"
    path.write_text("\n".join(lines) + "\n")
    return path


def calls_to_load(path: Path) -> tuple[int, list[RecipeError]]:
    """Python and C function calls made while loading `path` (and grouping its errors)."""
    count, raised = 0, []

    def counted(frame, event, arg):
        nonlocal count
        count += event in ("call", "c_call")

    sys.setprofile(counted)
    try:
        load_recipe(path)
    except RecipeError as exc:
        issue_kinds(exc.issues)
        raised.append(exc)
    finally:
        sys.setprofile(None)
    return count, raised


def test_a_recipe_with_thousands_of_mistakes_reports_each_kind(tmp_path):
    with pytest.raises(RecipeError) as caught:
        load_recipe(generated(tmp_path, 1000))
    kinds = issue_kinds(caught.value.issues)
    assert [(len(kind), kind[0].key) for kind in kinds] == [
        (1000, "reward.functions.0.wieght"),
        (1000, "actor.k0"),
        (1, "trainer.total_stepz"),
    ]


def test_the_work_grows_linearly_with_the_recipe(tmp_path):
    calls_to_load(generated(tmp_path, 20))  # caches filled, modules imported
    counts = [calls_to_load(generated(tmp_path, entries))[0] for entries in (100, 200, 400)]
    first, second = counts[1] - counts[0], counts[2] - counts[1]
    assert first > 0 and second <= 2.1 * first, counts  # quadratic work would be 4 times
