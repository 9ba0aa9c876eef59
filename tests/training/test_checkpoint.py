import random

import numpy as np
import pytest
import torch
from transformers import AutoModelForCausalLM

from rlrun.training import checkpoint as ckpt


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
