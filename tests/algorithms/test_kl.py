import math

import pytest
import torch

from rlrun.algorithms import KL_ESTIMATORS
from rlrun.algorithms.kl import AdaptiveKLController, FixedKLController, apply_kl_penalty, kl_penalty

BASES = {"kl": "k1", "k1": "k1", "abs": "abs", "mse": "k2", "k2": "k2", "low_var_kl": "k3", "k3": "k3"}


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("k1", 1.0),
        ("kl", 1.0),
        ("abs", 1.0),
        ("k2", 0.5),
        ("mse", 0.5),
        ("k3", math.exp(-1)),  # x = ref - logp = -1: e^-1 + 1 - 1
        ("low_var_kl", math.exp(-1)),
    ],
)
def test_estimators_hand_computed(name, expected):
    assert kl_penalty(torch.tensor([-1.0]), torch.tensor([-2.0]), name).item() == pytest.approx(expected)


def test_k1_and_abs_signs():
    assert kl_penalty(torch.tensor([-2.0]), torch.tensor([-1.0]), "k1").item() == -1.0
    assert kl_penalty(torch.tensor([-2.0]), torch.tensor([-1.0]), "abs").item() == 1.0


def test_k3_clamps():
    # x = 30 -> clamped to 20 -> e^20 - 21, then clamped to 10
    assert kl_penalty(torch.tensor([-31.0]), torch.tensor([-1.0]), "k3").item() == 10.0
    # x = -30 -> clamped to -20 -> e^-20 + 19
    assert kl_penalty(torch.tensor([0.0]), torch.tensor([-30.0]), "k3").item() == pytest.approx(10.0)
    assert kl_penalty(torch.tensor([0.0]), torch.tensor([-5.0]), "k3").item() == pytest.approx(
        math.exp(-5) + 4
    )


@pytest.mark.parametrize("name", list(BASES))
def test_straight_through_forms_keep_the_value_and_take_the_k2_gradient(name):
    logp = torch.tensor([-1.0, -0.3, -2.5], requires_grad=True)
    ref = torch.tensor([-2.0, -0.1, -0.5])
    value = kl_penalty(logp, ref, name + "+")
    assert torch.allclose(value, kl_penalty(logp, ref, name))
    value.sum().backward()
    assert torch.allclose(logp.grad, (logp - ref).detach())  # d/dlogp ½(logp - ref)²


def test_every_name_and_plus_form_is_registered():
    for name in BASES:
        assert name in KL_ESTIMATORS and name + "+" in KL_ESTIMATORS
    assert all(KL_ESTIMATORS.describe().values())
    with pytest.raises(KeyError, match="valid"):
        kl_penalty(torch.zeros(1), torch.zeros(1), "k4")


def test_fixed_controller():
    ctrl = FixedKLController(0.05)
    ctrl.update(current_kl=10.0, n_steps=100)
    assert ctrl.value == 0.05
    other = FixedKLController(1.0)
    other.load_state_dict(ctrl.state_dict())
    assert other.value == 0.05


def test_adaptive_controller():
    ctrl = AdaptiveKLController(init_kl_coef=0.001, target_kl=0.1, horizon=10000)
    ctrl.update(current_kl=0.3, n_steps=100)  # error 2 clipped to 0.2
    assert ctrl.value == pytest.approx(0.001 * (1 + 0.2 * 100 / 10000))
    ctrl.update(current_kl=0.09, n_steps=1000)  # error -0.1
    assert ctrl.value == pytest.approx(0.001 * 1.002 * (1 - 0.1 * 0.1))
    restored = AdaptiveKLController(0.5, 0.5, 5)
    restored.load_state_dict(ctrl.state_dict())
    assert restored.state_dict() == ctrl.state_dict()
    with pytest.raises(ValueError, match="horizon"):
        AdaptiveKLController(0.001, 0.1, 0)


def test_apply_kl_penalty_in_reward():
    scores = torch.tensor([[0.0, 1.0, 0.0], [0.0, 0.0, 0.0]])
    old = torch.tensor([[-1.0, -1.0, float("nan")], [-1.0, -2.0, -3.0]])
    ref = torch.tensor([[-1.5, -2.0, 0.0], [-1.0, -1.0, -1.0]])
    mask = torch.tensor([[1, 1, 0], [1, 1, 1]])
    ctrl = AdaptiveKLController(0.1, target_kl=0.1, horizon=10)
    rewards, metrics = apply_kl_penalty(scores, old, ref, mask, ctrl, "kl")
    # k1 per token: row 0: .5, 1 (padding 0); row 1: 0, -1, -2
    assert torch.allclose(rewards, torch.tensor([[-0.05, 0.9, 0.0], [0.0, 0.1, 0.2]]))
    current = (0.75 + -1.0) / 2
    assert metrics["actor/reward_kl_penalty"].item() == pytest.approx(current, rel=1e-5)
    assert metrics["actor/reward_kl_penalty_coeff"].item() == pytest.approx(0.1)  # β before the update
    assert ctrl.value == pytest.approx(0.1 * (1 - 0.2 * 2 / 10))  # n_steps = batch size 2
