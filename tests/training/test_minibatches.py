"""An update's optimizer step: clipped, or skipped and counted when the gradient is not finite."""

import math
from types import SimpleNamespace

import pytest
import torch
from accelerate import Accelerator

from rlrun.training.context import Counters, ProcessGroup
from rlrun.training.minibatches import TooManySkippedUpdates, optimizer_step


def _session(limit):
    warnings = []
    session = SimpleNamespace(
        group=ProcessGroup(Accelerator(cpu=True)),
        counters=Counters(),
        optim=SimpleNamespace(optimizer=None),  # another model's optimizer: the lr schedule is not its
        warn=warnings.append,
        recipe=SimpleNamespace(trainer=SimpleNamespace(max_skipped_updates=limit)),
    )
    return session, warnings


def test_non_finite_gradients_skip_the_update_then_abort_past_the_limit():
    model = torch.nn.Linear(3, 1)
    optimizer = torch.optim.AdamW(model.parameters(), lr=0.1)
    session, warnings = _session(limit=1)
    before = model.weight.detach().clone()

    model(torch.tensor([[float("nan"), 1.0, 1.0]])).sum().backward()
    norm = optimizer_step(session, model, optimizer, grad_clip=1.0)
    assert math.isnan(norm) and session.counters.skipped_updates == 1 and "skipped" in warnings[0]
    assert torch.equal(model.weight, before) and model.weight.grad is None

    model(torch.ones(1, 3)).sum().backward()
    assert optimizer_step(session, model, optimizer, grad_clip=1.0) > 0
    assert not torch.equal(model.weight, before)

    model(torch.tensor([[float("inf"), 1.0, 1.0]])).sum().backward()
    with pytest.raises(TooManySkippedUpdates, match="max_skipped_updates"):
        optimizer_step(session, model, optimizer, grad_clip=None)
