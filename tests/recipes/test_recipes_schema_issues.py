"""Schema errors restated as located issues, and the recipe left once the rejected values are
taken out (what the cross-field rules still check)."""

from pydantic import ValidationError

from rlrun.recipes import load_recipe
from rlrun.recipes.schema_issues import without_invalid
from rlrun.schema import Recipe


def _pruned(data: dict) -> dict:
    try:
        Recipe.model_validate(data)
    except ValidationError as exc:
        return without_invalid(data, exc)
    raise AssertionError("the data is valid")


def test_every_rejected_list_item_is_taken_out_however_many_a_list_holds():
    """Taking one item out must not move the index of another rejected one."""
    assert _pruned({"algorithm": {"plugins": [1, "a", 2, "b", 3]}}) == {"algorithm": {"plugins": ["a", "b"]}}
    data = {"reward": {"functions": [{"fn": "x", "wieght": 1}, {"fn": "y"}, {"fn": "z", "wieght": 2}]}}
    # an entry of a tagged union that fits none of its forms goes whole
    assert _pruned(data) == {"reward": {"functions": [{"fn": "y"}]}}
    assert data["reward"]["functions"][0] == {"fn": "x", "wieght": 1}  # a copy: the input is kept


def test_the_rules_still_run_beside_several_rejected_items_of_one_list():
    issues = []
    try:
        load_recipe("grpo", ["algorithm.plugins=[1, 2]", "rollout.n=1"])
    except Exception as exc:  # noqa: BLE001 - RecipeError, checked below
        issues = exc.issues
    assert [(i.key, i.code) for i in issues][:3] == [
        ("algorithm.plugins.0", "wrong-type"),
        ("algorithm.plugins.1", "wrong-type"),
        ("rollout.n", "group-needs-n"),
    ]
