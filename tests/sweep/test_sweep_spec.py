"""Sweep files: expansion of grid and list into points, run names, and located errors."""

from __future__ import annotations

import pytest

from rlrun.errors import RecipeError
from rlrun.sweep.spec import read_sweep


def test_grid_is_cartesian_in_file_order_and_every_point_gets_every_seed(write_sweep):
    sweep = read_sweep(
        write_sweep(
            "recipe: grpo\n"
            "grid:\n"
            "  recipe: [grpo, dapo]\n"
            "  actor.optimizer.lr: [1.0e-4, 3.0e-4]\n"
            "seeds: [0, 1, 2]\n"
        )
    )
    assert sweep.name == "sweep"  # the file's stem
    names = [point.name for point in sweep.points()]
    assert names == [
        "recipe=grpo,actor.optimizer.lr=0.0001",
        "recipe=grpo,actor.optimizer.lr=0.0003",
        "recipe=dapo,actor.optimizer.lr=0.0001",
        "recipe=dapo,actor.optimizer.lr=0.0003",
    ]
    runs = sweep.runs()
    assert len(runs) == 12
    assert runs[1].name == "recipe=grpo,actor.optimizer.lr=0.0001/seed-1"
    assert runs[1].overrides == ["actor.optimizer.lr=0.0001", "trainer.seed=1"]
    assert runs[-1].point.recipe.value == "dapo"


def test_list_points_cross_the_grid_and_overrides_come_first(write_sweep):
    sweep = read_sweep(
        write_sweep(
            "name: clip\n"
            "recipe: ./my.yaml\n"
            "overrides:\n"
            "  trainer.total_steps: 50\n"
            "list:\n"
            "  - {actor.clip_ratio_high: 0.28}\n"
            "  - {recipe: dapo, reward.functions: [{fn: 'rlrun:exact_match'}]}\n"
            "grid:\n"
            "  rollout.n: [4, 8]\n"
        )
    )
    points = sweep.points()
    assert [point.name for point in points] == [
        "actor.clip_ratio_high=0.28,rollout.n=4",
        "actor.clip_ratio_high=0.28,rollout.n=8",
        "recipe=dapo,reward.functions=___fn___rlrun_exact_match___,rollout.n=4",  # unsafe characters: _
        "recipe=dapo,reward.functions=___fn___rlrun_exact_match___,rollout.n=8",
    ]
    assert points[0].recipe.value == "./my.yaml" and points[2].recipe.value == "dapo"
    assert [setting.override for setting in points[2].settings] == [
        "trainer.total_steps=50",
        'reward.functions=[{"fn": "rlrun:exact_match"}]',
        "rollout.n=4",
    ]
    assert sweep.runs()[0].name == "actor.clip_ratio_high=0.28,rollout.n=4/seed-0"  # seeds default to [0]


def test_a_sweep_without_grid_or_list_has_one_point(write_sweep):
    sweep = read_sweep(write_sweep("recipe: grpo\nseeds: [3, 4]\n"))
    assert [run.name for run in sweep.runs()] == ["default/seed-3", "default/seed-4"]


@pytest.mark.parametrize(
    ("text", "line", "key", "words"),
    [
        ("recipe: grpo\ngrid:\n  rollout.n: [4]\nseed: [0]\n", 4, "seed", "unknown key"),
        ("recipe: grpo\nseeds: [0, 0]\n", 2, "seeds", "seeds must be distinct"),
        ("recipe: grpo\nseeds: [-1]\n", 2, "seeds.0", "greater than or equal to 0"),
        ("recipe: grpo\ngrid:\n  rollout.n: []\n", 3, "grid.rollout.n", "at least 1 item"),
        (
            "recipe: grpo\ngrid:\n  trainer.seed: [1, 2]\n",
            3,
            "grid.trainer.seed",
            "list the seeds under `seeds:`",
        ),
        (
            "recipe: grpo\nlist:\n  - {trainer.output_dir: x}\n",
            3,
            "list.0.trainer.output_dir",
            "sets this key",
        ),
        ("grid:\n  rollout.n: [4]\n", 1, "recipe", "has no base recipe"),
        (
            "recipe: grpo\ngrid:\n  rollout.n: [4]\nlist:\n  - {rollout.n: 8}\n",
            3,
            "grid.rollout.n",
            "both `grid` and `list`",
        ),
        ("recipe: grpo\ngrid:\n  x: [a/b, a_b]\n", 3, "grid.x.1", "same name"),
        ("recipe: grpo\nrecipe: dapo\n", 2, "recipe", "appears twice"),
        (
            "name: ../x\nrecipe: grpo\n",
            1,
            "name",
            "the sweep's name `../x` cannot be a folder: it holds a path",
        ),
        ("name: '..'\nrecipe: grpo\n", 1, "name", "the sweep's name `..` cannot be a folder: `..` is"),
    ],
)
def test_mistakes_in_the_sweep_file_are_located(write_sweep, text, line, key, words):
    path = write_sweep(text)
    with pytest.raises(RecipeError) as caught:
        read_sweep(path)
    issue = caught.value.issues[0]
    assert issue.file == str(path)
    assert issue.line == line
    assert issue.key == key
    assert words in issue.format()


def test_a_missing_sweep_file_is_an_error(tmp_path):
    with pytest.raises(RecipeError, match="does not exist"):
        read_sweep(tmp_path / "nope.yaml")
