"""`trainer.autocast` and `trainer.compile`: the trainer's passes under bfloat16 autocast give
float32 log-probs within bfloat16's tolerance of float32 and float32 gradients; a compiled run
trains, checkpoints under the model's own weight names and resumes."""

from __future__ import annotations

import json

import pytest
import torch
from safetensors import safe_open
from transformers import AutoModelForCausalLM

from rlrun.embedded import resolve_model_path
from rlrun.facts.machine import bf16_supported
from rlrun.recipes import load_recipe
from rlrun.records.checkpoint import latest_checkpoint
from rlrun.training.models import load_tokenizer
from rlrun.training.precision import TrainerForward
from rlrun.training.profiling import Timer
from rlrun.training.run import RunOptions, train
from rlrun.training.sequences import _checkpointing, response_log_probs
from rlrun.training.session import Session

SMALL = [
    "trainer.prompts_per_step=4",
    "rollout.n=4",
    "actor.mini_batch_samples=16",
    "actor.micro_batch_samples=8",
    "trainer.eval.prompts=8",
    "logging.console.enabled=false",
]
# bfloat16 keeps 8 significant bits: a logit near 10 is off by up to ~0.04, and a log-prob by
# the sum of such errors over the softmax. Measured on the tiny model's batches: mean 0.006, max
# 0.11-0.23 (benchmarks/README.md).
BF16_MEAN_NATS, BF16_MAX_NATS = 0.02, 0.5

needs_bf16 = pytest.mark.skipif(not bf16_supported("cpu"), reason="this CPU has no bfloat16 arithmetic")


def _metrics(run_dir) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


class _Wrapper(torch.nn.Module):
    """What a DDP wrapper looks like from outside: the model under `.module`."""

    def __init__(self, module: torch.nn.Module):
        super().__init__()
        self.module, self.calls = module, 0

    def forward(self, **inputs):
        self.calls += 1
        return self.module(**inputs)


def test_trainer_forward_calls_through_a_wrapper_and_reads_the_model_inside(random_lm):
    wrapped = _Wrapper(random_lm)
    forward = TrainerForward(wrapped, autocast=None, compile=False, device_type="cpu")
    assert forward.module is random_lm and forward.config is random_lm.config
    assert list(forward.parameters()) == list(random_lm.parameters())  # no weights of its own
    ids = torch.tensor([[3, 4, 5]])
    torch.testing.assert_close(forward(input_ids=ids).logits, random_lm(input_ids=ids).logits, rtol=0, atol=0)
    assert wrapped.calls == 1  # through the wrapper: DDP's gradient sync is kept
    random_lm.gradient_checkpointing_enable()
    assert _checkpointing(forward)  # seen through the wrapper, as for the DDP-wrapped policy


@needs_bf16
def test_autocast_log_probs_within_bf16_tolerance_and_gradients_float32():
    s = Session(load_recipe("grpo", SMALL).recipe)
    seq = s.generation.collector.collect(4, seed=0, timer=Timer())[0].seq
    autocast = TrainerForward(s.models.policy, autocast="bfloat16", compile=False, device_type="cpu")
    with torch.no_grad():
        exact = response_log_probs(s.models.policy_forward, seq, 1.0)[0]
    mixed = response_log_probs(autocast, seq, 1.0)[0]
    assert mixed.dtype == torch.float32
    diff = (mixed - exact).abs()[seq.response_mask.bool()]
    assert 0 < diff.mean() < BF16_MEAN_NATS and diff.max() < BF16_MAX_NATS  # 0: autocast did nothing
    (mixed * seq.response_mask).sum().backward()
    grads = [p.grad for p in s.models.policy.parameters()]
    assert all(g is not None and g.dtype == torch.float32 and torch.isfinite(g).all() for g in grads)


@needs_bf16
def test_an_autocast_run_with_two_updates_a_step_trains_and_recomputes_old_log_probs(tmp_path):
    # two optimizer steps a rollout: the float32 sampler's log-probs are not the autocast trainer's
    overrides = [*SMALL, "trainer.total_steps=2", "trainer.autocast=bfloat16", "actor.mini_batch_samples=8"]
    run = train(load_recipe("grpo", overrides), RunOptions(run_dir=tmp_path / "run"), overrides=overrides)
    assert run.status == "finished" and run.session.needs.old_log_probs == "recompute"
    last = _metrics(tmp_path / "run")[-1]
    assert "timing_s/old_log_prob" in last and abs(last["actor/pg_loss"]) < 10
    assert torch.isfinite(torch.tensor(last["actor/grad_norm"]))
    setup = json.loads((tmp_path / "run" / "meta.json").read_text())["setup"]
    assert setup["mixed_precision"] == "bf16"  # `rlrun compare` shows it: `amp bf16`


@pytest.fixture
def one_layer_model(tmp_path):
    """The tiny model cut to one layer: the smallest graph torch.compile has to build."""
    path = resolve_model_path("rlrun:tiny-base")
    model = AutoModelForCausalLM.from_pretrained(path, num_hidden_layers=1, layer_types=["full_attention"])
    model.save_pretrained(tmp_path / "model")
    load_tokenizer("rlrun:tiny-base").save_pretrained(tmp_path / "model")
    return tmp_path / "model"


@pytest.mark.slow
def test_a_compiled_run_checkpoints_plain_weight_names_and_resumes(tmp_path, one_layer_model):
    overrides = [
        *SMALL,
        # One response per prompt: every row runs whole (no shared-prompt KV cache), one graph to compile.
        "algorithm.advantage=reinforce_plus_plus",
        "rollout.n=1",
        "trainer.prompts_per_step=16",
        f"model.path={one_layer_model}",
        "trainer.compile=true",
        "trainer.total_steps=2",
        "trainer.checkpoint.every_steps=1",
    ]
    run = train(load_recipe("grpo", overrides), RunOptions(run_dir=tmp_path / "run"), overrides=overrides)
    assert run.status == "finished"
    checkpoint = latest_checkpoint(tmp_path / "run" / "checkpoints")
    with safe_open(checkpoint / "model.safetensors", "pt") as saved:
        names = set(saved.keys())
    assert names and names <= set(run.session.models.unwrapped_policy.state_dict())  # no `_orig_mod.` prefix
    more = [*overrides, "trainer.total_steps=3"]
    resumed = train(
        load_recipe("grpo", more), RunOptions(run_dir=tmp_path / "run", resume=True), overrides=more
    )
    assert resumed.status == "finished" and resumed.session.counters.step == 3
    assert [m["step"] for m in _metrics(tmp_path / "run")] == [0, 1, 2, 3]
