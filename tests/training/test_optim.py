"""The lr schedule equals verl's and transformers' (so TRL's) at every update: the warm-up
counts from 0, so the first update runs at lr 0."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest
import torch

from rlrun.training.optim import build_scheduler, lr_factor

WARMUP, TOTAL = 4, 10


# verl 0.9.1, verl/utils/torch_functional.py: the lr_lambda of get_constant_schedule_with_warmup
# and of get_cosine_schedule_with_warmup (init_lr_ratio None -> 0, zero_indexed_step True: the
# defaults its FSDP engine builds them with, verl/workers/engine/fsdp/transformer_impl.py).
def verl_constant(step: int, *, warmup: int) -> float:
    if step < warmup:
        return float(step) / float(max(1.0, warmup))
    return 1.0


def verl_cosine(step: int, *, warmup: int, total: int, min_lr_ratio: float, num_cycles: float = 0.5) -> float:
    coef, intercept = (1 - min_lr_ratio) * 0.5, (1 + min_lr_ratio) * 0.5
    if step < warmup:
        return 0.0 + (1.0 - 0.0) * (float(step) / float(max(1, warmup)))
    progress = float(step - warmup) / float(max(1, total - warmup))
    return max(min_lr_ratio, math.cos(math.pi * float(num_cycles) * 2.0 * progress) * coef + intercept)


def rates(scheduler: torch.optim.lr_scheduler.LRScheduler, updates: int) -> list[float]:
    """The lr each of the first `updates` updates runs at (optimizer step, then scheduler step,
    as both verl and the transformers Trainer do)."""
    used = []
    for _ in range(updates):
        used.append(scheduler.get_last_lr()[0])
        scheduler.optimizer.step()
        scheduler.step()
    return used


def rlrun_rates(name: str, min_lr_ratio: float = 0.0) -> list[float]:
    optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0)
    cfg = SimpleNamespace(name=name, warmup_steps=WARMUP, min_lr_ratio=min_lr_ratio)
    return rates(build_scheduler(optimizer, cfg, TOTAL), WARMUP + 2)


def test_the_warm_up_starts_at_zero_by_hand():
    assert [lr_factor(k, name="constant", warmup_steps=4, total_steps=10) for k in range(6)] == [
        0.0,
        0.25,
        0.5,
        0.75,
        1.0,
        1.0,
    ]


def test_verl_constant_warm_up():
    expected = [verl_constant(k, warmup=WARMUP) for k in range(WARMUP + 2)]
    assert expected == [0.0, 0.25, 0.5, 0.75, 1.0, 1.0]
    assert rlrun_rates("constant") == expected


def test_verl_cosine_with_a_floor():
    expected = [verl_cosine(k, warmup=WARMUP, total=TOTAL, min_lr_ratio=0.1) for k in range(WARMUP + 2)]
    # after the warm-up: 0.1 + 0.9 x (1 + cos(pi x progress)) / 2, progress 0 then 1/6
    assert expected == pytest.approx([0.0, 0.25, 0.5, 0.75, 1.0, 0.1 + 0.45 * (1 + math.sqrt(3) / 2)])
    assert rlrun_rates("cosine", min_lr_ratio=0.1) == pytest.approx(expected, abs=1e-15)


@pytest.mark.parametrize(
    ("name", "after_warm_up"),
    [("linear", (TOTAL - 5) / (TOTAL - WARMUP)), ("cosine", 0.5 * (1 + math.sqrt(3) / 2))],
)
def test_transformers_schedules_as_trl_builds_them(name, after_warm_up):
    from transformers import get_scheduler

    optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0)
    hf = get_scheduler(name, optimizer, num_warmup_steps=WARMUP, num_training_steps=TOTAL)
    expected = rates(hf, WARMUP + 2)
    assert expected == pytest.approx([0.0, 0.25, 0.5, 0.75, 1.0, after_warm_up])
    assert rlrun_rates(name) == pytest.approx(expected, abs=1e-15)
