"""rlrun.load_recipe: the loader as a Python program calls it, through the package's public names."""

import subprocess
import sys

import pytest

import rlrun


def test_the_public_names_load_from_their_owners_and_importing_rlrun_loads_no_training_code():
    from rlrun.api.training import train
    from rlrun.training.callbacks import Callback

    assert rlrun.__all__ == sorted(rlrun._OWNERS)
    assert rlrun.train is train and rlrun.Callback is Callback
    assert all(getattr(rlrun, name).__name__ == name for name in rlrun.__all__)
    with pytest.raises(AttributeError, match="no attribute 'trian'"):
        rlrun.trian  # noqa: B018
    probe = "import sys, rlrun; print(sorted(m for m in ('torch', 'rlrun.api', 'rlrun.training') if m in sys.modules))"
    assert (
        subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
        == "[]\n"
    )


def test_overrides_may_be_a_mapping_texts_one_text_or_none():
    by_mapping = rlrun.load_recipe("grpo", {"trainer.total_steps": 9})
    assert by_mapping.data == rlrun.load_recipe("grpo", ["trainer.total_steps=9"]).data
    assert by_mapping.data == rlrun.load_recipe("grpo", "trainer.total_steps=9").data
    assert rlrun.load_recipe("grpo", None).data["trainer"]["total_steps"] != 9


def test_strict_makes_notices_errors():
    loose = rlrun.load_recipe("grpo", {"actor.entropy_coef": 0.01})  # with groups: a notice
    assert loose.notices
    with pytest.raises(rlrun.RecipeError):
        rlrun.load_recipe("grpo", {"actor.entropy_coef": 0.01}, strict=True)
