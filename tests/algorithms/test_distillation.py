import math

import pytest
import torch

from rlrun.algorithms import DISTILLATION_LOSSES, POLICY_LOSSES
from rlrun.algorithms.distillation import distillation_loss, forward_kl_topk
from rlrun.algorithms.kl import kl_penalty


def test_forward_kl_topk_hand_computed():
    student_logits = torch.tensor([0.5, 0.25, 0.25]).log().view(1, 1, 3) + 3.0  # logits, not normalised
    teacher_ids = torch.tensor([[[1, 0]]])
    teacher_lp = torch.tensor([[[0.5, 0.25]]]).log()
    loss = forward_kl_topk(
        student_logits=student_logits, teacher_topk_log_probs=teacher_lp, teacher_topk_ids=teacher_ids
    )
    expected = 0.5 * math.log(0.5 / 0.25) + 0.25 * math.log(0.25 / 0.5)
    assert loss.shape == (1, 1) and loss.item() == pytest.approx(expected, rel=1e-5)


def test_forward_kl_topk_is_clamped_at_zero():
    student_logits = torch.tensor([0.5, 0.25, 0.25]).log().view(1, 1, 3)
    loss = forward_kl_topk(
        student_logits=student_logits,
        teacher_topk_log_probs=torch.tensor([[[math.log(0.1)]]]),
        teacher_topk_ids=torch.tensor([[[0]]]),
    )
    assert loss.item() == 0.0  # 0.1·log(0.1/0.5) < 0


def test_forward_kl_topk_log_prob_floor():
    student_logits = torch.tensor([1.0, -1e4]).view(1, 1, 2)
    loss = forward_kl_topk(
        student_logits=student_logits,
        teacher_topk_log_probs=torch.tensor([[[math.log(0.5)]]]),
        teacher_topk_ids=torch.tensor([[[1]]]),
        log_prob_min_clamp=-10.0,
    )
    assert loss.item() == pytest.approx(0.5 * (math.log(0.5) + 10.0), rel=1e-5)


def test_registered_names():
    for name in ("forward_kl_topk", "k1", "kl", "abs", "k2", "mse", "k3", "low_var_kl"):
        assert name in DISTILLATION_LOSSES


def sampled_batch():
    student = torch.tensor([[-1.0, -2.0, -0.5, float("nan")]], requires_grad=True)
    teacher = torch.tensor([[-1.5, -1.0, -0.5, 0.0]])
    old = torch.tensor([[-1.0, -2.0, -0.5, 0.0]])
    return student, teacher, old, torch.tensor([[1, 1, 1, 0]])


def test_direct_form_back_propagates_the_aggregated_estimator():
    student, teacher, _, mask = sampled_batch()
    loss, metrics = distillation_loss(
        "k3", student, mask, teacher_log_probs=teacher, use_policy_gradient=False
    )
    per_token = kl_penalty(student.detach()[:, :3], teacher[:, :3], "k3")
    assert loss.item() == pytest.approx(per_token.mean().item(), rel=1e-6)
    assert metrics["distillation/loss_max"].item() == pytest.approx(per_token.max().item())
    loss.backward()
    assert student.grad[0, 3] == 0 and torch.all(student.grad[0, :2] != 0)


def test_policy_gradient_form_uses_minus_the_loss_as_advantage():
    student, teacher, old, mask = sampled_batch()
    loss, metrics = distillation_loss(
        "k1", student, mask, teacher_log_probs=teacher, old_log_prob=old, clip_ratio_high=0.28
    )
    advantages = -kl_penalty(student.detach(), teacher, "k1")
    expected, _ = POLICY_LOSSES.get("vanilla")(old, student.detach(), advantages, mask, clip_ratio_high=0.28)
    assert loss.item() == pytest.approx(expected.item())
    assert "distillation/pg_clipfrac" in metrics and "actor/pg_clipfrac" not in metrics
    loss.backward()  # gradient through log_prob only: -A·∇ρ at ratio 1 is -A
    assert student.grad[0, :3].tolist() == pytest.approx((advantages[0, :3] * -1 / 3).tolist(), rel=1e-6)


def test_k1_direct_form_is_an_error():
    student, teacher, _, mask = sampled_batch()
    with pytest.raises(ValueError, match="use_policy_gradient"):
        distillation_loss("k1", student, mask, teacher_log_probs=teacher, use_policy_gradient=False)


def test_loss_max_clamp_clamps_both_sides_after_the_metrics():
    student = torch.tensor([[-30.0, -1.0]])
    teacher = torch.tensor([[-1.0, -30.0]])
    loss, metrics = distillation_loss(
        "k1", student, torch.ones(1, 2), teacher_log_probs=teacher, old_log_prob=student, loss_max_clamp=10.0
    )
    assert (
        metrics["distillation/loss_min"].item() == -29.0 and metrics["distillation/loss_max"].item() == 29.0
    )
    # advantages -clamp(k1) = 10, -10 at ratio 1: vanilla loss (-10 + 10)/2
    assert loss.item() == pytest.approx(0.0)
    direct, _ = distillation_loss(
        "k2",
        student,
        torch.ones(1, 2),
        teacher_log_probs=teacher,
        use_policy_gradient=False,
        loss_max_clamp=10.0,
    )
    assert direct.item() == pytest.approx(10.0)
