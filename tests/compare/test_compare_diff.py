"""Config diff of resolved recipes as flattened dotted keys."""

from __future__ import annotations

import copy

from rlrun.compare.diff import MISSING, diff_recipes, flatten


def test_flatten_uses_dotted_keys_and_indexes_lists_of_records():
    recipe = {
        "actor": {"optimizer": {"lr": 1e-4, "betas": [0.9, 0.99]}, "loss_kwargs": {}},
        "reward": {"functions": [{"fn": "rlrun:exact_match", "weight": 1.0}]},
    }
    assert flatten(recipe) == {
        "actor.optimizer.lr": 1e-4,
        "actor.optimizer.betas": [0.9, 0.99],
        "actor.loss_kwargs": {},
        "reward.functions[0].fn": "rlrun:exact_match",
        "reward.functions[0].weight": 1.0,
    }


def test_only_changed_added_and_removed_keys_show_unless_all(base_recipe):
    changed = copy.deepcopy(base_recipe)
    changed["actor"]["optimizer"]["lr"] = 3e-4
    changed["reward"]["functions"].append({"fn": "my.rewards:length", "weight": 0.1})
    del changed["model"]["lora"]
    rows = diff_recipes([base_recipe, changed])
    assert [(row.key, row.values, row.changes) for row in rows] == [
        ("model.lora", [None, MISSING], ["ref", "removed"]),
        ("reward.functions[1].fn", [MISSING, "my.rewards:length"], ["ref", "added"]),  # next to [0]
        ("reward.functions[1].weight", [MISSING, 0.1], ["ref", "added"]),
        ("actor.optimizer.lr", [1e-4, 3e-4], ["ref", "changed"]),
    ]
    everything = diff_recipes([base_recipe, changed], show_all=True)
    assert len(everything) == len(flatten(base_recipe)) + 2
    assert {row.key for row in everything if not row.differs} == set(flatten(base_recipe)) - {
        "model.lora",
        "actor.optimizer.lr",
    }


def test_a_run_without_a_recipe_is_unknown_not_different(base_recipe):
    changed = copy.deepcopy(base_recipe)
    changed["trainer"]["seed"] = 1
    rows = diff_recipes([base_recipe, None, changed])
    assert [(row.key, row.changes) for row in rows] == [("trainer.seed", ["ref", "unknown", "changed"])]
    assert diff_recipes([None, changed]) == []
