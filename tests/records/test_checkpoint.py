import random

import numpy as np
import pytest
import torch
from transformers import AutoModelForCausalLM

from rlrun.errors import RecipeError
from rlrun.records import checkpoint as ckpt


def _state(step):
    return {"step": step, "rng": ckpt.capture_rng_state(), "data": {"position": 7}, "t": torch.arange(3)}


def test_checkpoint_loads_with_transformers_and_weights_only(tmp_path, random_lm):
    path = ckpt.save_checkpoint(tmp_path, 3, model=random_lm, tokenizer=None, state=_state(3))
    assert path.name == "step_000003"
    loaded = AutoModelForCausalLM.from_pretrained(path)
    for a, b in zip(loaded.state_dict().values(), random_lm.state_dict().values()):
        assert torch.equal(a, b)
    assert (path / "model.safetensors").exists()
    state = ckpt.load_trainer_state(path)  # weights_only=True
    assert state["step"] == 3 and state["data"] == {"position": 7}


def test_keep_last_k(tmp_path, random_lm):
    for step in (1, 2, 3, 4):
        ckpt.save_checkpoint(tmp_path, step, model=random_lm, tokenizer=None, state=_state(step), keep_last=2)
    assert [s for s, _ in ckpt.list_checkpoints(tmp_path)] == [3, 4]
    assert ckpt.latest_checkpoint(tmp_path).name == "step_000004"


def test_a_crash_mid_save_leaves_no_checkpoint(tmp_path, random_lm, monkeypatch):
    ckpt.save_checkpoint(tmp_path, 1, model=random_lm, tokenizer=None, state=_state(1))

    def boom(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(torch, "save", boom)
    with pytest.raises(OSError):
        ckpt.save_checkpoint(tmp_path, 2, model=random_lm, tokenizer=None, state=_state(2))
    assert [s for s, _ in ckpt.list_checkpoints(tmp_path)] == [1]  # the half-written one is invisible
    ckpt.remove_partial_checkpoints(tmp_path)
    assert [p.name for p in tmp_path.iterdir()] == ["step_000001"]


def test_rng_state_round_trips_through_weights_only_load(tmp_path, random_lm):
    random.seed(1), np.random.seed(2), torch.manual_seed(3)
    path = ckpt.save_checkpoint(tmp_path, 1, model=random_lm, tokenizer=None, state=_state(1))
    expected = (random.random(), np.random.rand(), torch.rand(1))
    random.seed(9), np.random.seed(9), torch.manual_seed(9)
    ckpt.restore_rng_state(ckpt.load_trainer_state(path)["rng"])
    assert (random.random(), np.random.rand(), torch.rand(1)) == expected


def _damage(path, how):
    weights = path / "model.safetensors"
    data = bytearray(weights.read_bytes())
    if how == "truncated":
        weights.write_bytes(data[: len(data) // 2])
    elif how == "empty":
        weights.write_bytes(b"")
    elif how == "random tensor bytes":  # same size, valid header: only a checksum can tell
        data[-64:] = random.Random(0).randbytes(64)
        weights.write_bytes(bytes(data))
    elif how == "trainer state truncated":
        state = path / ckpt.TRAINER_STATE
        state.write_bytes(state.read_bytes()[:100])
    return weights


@pytest.mark.parametrize("how", ["truncated", "empty", "random tensor bytes", "trainer state truncated"])
def test_a_damaged_checkpoint_is_named_and_resume_falls_back_to_the_newest_intact_one(
    tmp_path, random_lm, how
):
    for step in (1, 2):
        ckpt.save_checkpoint(tmp_path, step, model=random_lm, tokenizer=None, state=_state(step))
    _damage(tmp_path / "step_000002", how)
    damage = ckpt.checkpoint_damage(tmp_path / "step_000002")
    file = ckpt.TRAINER_STATE if how.startswith("trainer") else "model.safetensors"
    assert len(damage) == 1 and damage[0].startswith(str(tmp_path / "step_000002" / file))
    warnings = []
    assert ckpt.latest_intact_checkpoint(tmp_path, warn=warnings.append) == tmp_path / "step_000001"
    assert warnings == [f"Checkpoint step_000002 is damaged and skipped: {damage[0]}."]


def test_with_no_intact_checkpoint_resume_is_refused_with_the_file_named(tmp_path, random_lm):
    path = ckpt.save_checkpoint(tmp_path, 1, model=random_lm, tokenizer=None, state=_state(1))
    weights = _damage(path, "random tensor bytes")
    assert ckpt.checkpoint_damage(path) == [
        f"{weights}: its contents changed since it was saved (sha256 differs)"
    ]
    with pytest.raises(RecipeError, match="the checkpoint is damaged") as error:
        ckpt.latest_intact_checkpoint(tmp_path, warn=lambda text: None)
    assert error.value.issues[0].file == str(weights)
    assert ckpt.latest_intact_checkpoint(tmp_path / "none", warn=print) is None  # nothing saved yet
