"""The callbacks' rollout stage: in the pipeline of a run trained with callbacks only, right after
"sample" (what it hands the callbacks is checked on a real run in tests/api/test_training.py)."""

from rlrun.recipes import load_recipe
from rlrun.training.callbacks import Callback, Callbacks, in_force
from rlrun.training.needs import needs_of
from rlrun.training.stages import Pipeline


def _names() -> list[str]:
    recipe = load_recipe("grpo").recipe
    return Pipeline.build(recipe, needs_of(recipe)).names()


def test_the_rollout_stage_runs_only_with_callbacks_right_after_sampling():
    assert "rollout_callbacks" not in _names()
    with in_force(Callbacks([])):
        assert "rollout_callbacks" not in _names()
    with in_force(Callbacks([Callback()])):
        names = _names()
    assert names[: names.index("rollout_callbacks") + 1] == ["sample", "rollout_callbacks"]
