"""What a checkpoint's trainer_state.pt holds, and that it reads back as saved; what a closed
session lets go of."""

import weakref

import torch

from rlrun.recipes import load_recipe
from rlrun.training.session import Session, TrainState

SAVED = {  # trainer_state.pt as every rlrun version with these fields wrote it: a plain dict
    "step": 4,
    "optimizer": {"state": {}, "param_groups": [{"lr": 1e-3}]},
    "scheduler": {"last_epoch": 4},
    "critic_optimizer": None,
    "rng": {"python": [3, [1, 2], None]},
    "data": {"position": 7},
    "kl_controller": {"value": 0.05},
    "skipped_updates": 1,
    "samples_seen": 64,
    "wandb_run_id": "abc123",
    "tokenizer_fingerprint": "0123456789abcdef",
}


def test_the_trainer_state_is_saved_as_a_plain_dict_and_reads_back(tmp_path):
    state = TrainState.from_dict(SAVED)
    assert (state.step, state.skipped_updates, state.samples_seen) == (4, 1, 64)
    assert state.data == {"position": 7} and state.wandb_run_id == "abc123"
    torch.save(state.to_dict(), tmp_path / "trainer_state.pt")
    assert torch.load(tmp_path / "trainer_state.pt", weights_only=True) == SAVED


def test_keys_a_later_version_adds_do_not_stop_a_resume():
    assert TrainState.from_dict({**SAVED, "added_later": 1}) == TrainState.from_dict(SAVED)


def test_a_closed_session_lets_go_of_its_models_at_once_and_keeps_its_counters():
    session = Session(load_recipe("ppo", []).recipe)
    session.counters.step = 3
    policy, critic = weakref.ref(session.models.policy), weakref.ref(session.models.critic)
    session.close()
    # no cycle left for a later collection, such as the interpreter's teardown, to find
    assert policy() is None and critic() is None
    assert session.group.accelerator._models == [] and session.counters.step == 3
    assert not hasattr(session, "models")
