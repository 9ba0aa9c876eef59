import json
import math
from types import SimpleNamespace

import pytest
import torch

from rlrun.training.loop import NonFiniteModel, check_policy_health, weight_norm


def test_weight_norm_is_the_l2_norm_of_all_weights_without_overflow():
    model = torch.nn.Linear(2, 1)
    with torch.no_grad():
        model.weight.copy_(torch.tensor([[3.0, 4.0]]))
        model.bias.fill_(12.0)
    assert weight_norm(model) == 13.0  # sqrt(9 + 16 + 144)
    with torch.no_grad():
        model.weight.mul_(1e30)  # squares overflow float32, not float64
    assert math.isclose(weight_norm(model), 5e30, rel_tol=1e-6)
    with torch.no_grad():
        model.bias.fill_(float("nan"))
    assert math.isnan(weight_norm(model))


def _health_session(model):
    return SimpleNamespace(
        models=SimpleNamespace(unwrapped_policy=model),
        group=SimpleNamespace(all=bool),
        recipe=SimpleNamespace(actor=SimpleNamespace(padding_free=True)),
    )


def test_a_step_that_blows_up_or_breaks_the_policy_is_named_with_its_learning_rate(monkeypatch):
    from rlrun.training import loop

    model = torch.nn.Linear(2, 1)
    with torch.no_grad():
        model.weight.copy_(torch.tensor([[3.0, 4.0]]))
        model.bias.zero_()
    seq = SimpleNamespace(input_ids=torch.zeros(8, 3, dtype=torch.long), rows=lambda rows: rows)
    monkeypatch.setattr(loop, "response_logits", lambda policy, rows, padding_free: torch.zeros(len(rows), 2))
    s = _health_session(model)
    assert check_policy_health(s, seq, 3, lr=1e-4, norm_before=4.9) == 5.0  # healthy: the new norm
    with pytest.raises(
        NonFiniteModel, match=r"in step 3 the policy's weights grew 12.5-fold .* \(learning rate 3e\+06\)"
    ):
        check_policy_health(s, seq, 3, lr=3e6, norm_before=0.4)
    monkeypatch.setattr(
        loop, "response_logits", lambda policy, rows, padding_free: torch.full((len(rows), 2), math.inf)
    )
    with pytest.raises(NonFiniteModel, match="logits stopped being finite.*lower actor.optimizer.lr"):
        check_policy_health(s, seq, 3, lr=1e-4, norm_before=5.0)


@pytest.mark.slow
@pytest.mark.parametrize("lr", [3e6, 1e30])
def test_a_learning_rate_that_blows_up_the_weights_stops_the_run_with_no_checkpoint_of_it(tmp_path, lr):
    from rlrun.recipes import load_recipe
    from rlrun.training.run import RunOptions, train

    overrides = [f"actor.optimizer.lr={lr}", "trainer.total_steps=3", "trainer.prompts_per_step=4",
                 "actor.mini_batch_samples=32", "actor.micro_batch_samples=32", "trainer.eval.every_steps=0",
                 "trainer.eval.prompts=16", "trainer.checkpoint.every_steps=1", "logging.console.enabled=false",
                 "actor.lr_scheduler.warmup_steps=0"]  # fmt: skip
    # no warm-up: one from 0 would leave step 1's weights as they were
    with pytest.raises(NonFiniteModel, match="in step 1 the policy's weights grew"):
        train(load_recipe("grpo", overrides), RunOptions(run_dir=tmp_path / "r"))
    assert json.loads((tmp_path / "r" / "meta.json").read_text())["status"] == "failed"
    assert not (tmp_path / "r" / "checkpoints").exists()
