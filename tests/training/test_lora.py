"""LoRA through peft: only the adapters train, the reference is the policy with its adapters
disabled (no second copy), checkpoints hold the adapter, resume and export merged weights."""

from __future__ import annotations

import pytest
import torch
from peft import PeftModel
from transformers import AutoModelForCausalLM

from rlrun.embedded import resolve_model_path
from rlrun.recipes import load_recipe
from rlrun.records.checkpoint import export_merged, latest_checkpoint
from rlrun.training.profiling import Timer
from rlrun.training.run import RunOptions, train
from rlrun.training.sequences import Sequences, response_log_probs

pytestmark = pytest.mark.slow

LORA = [
    "model.lora={r: 4, alpha: 8, target_modules: [q_proj, v_proj]}",
    "trainer.prompts_per_step=4",
    "rollout.n=4",
    "actor.mini_batch_samples=8",
    "actor.micro_batch_samples=4",
    "trainer.eval.prompts=8",
    "logging.console.enabled=false",
]


def _base() -> torch.nn.Module:
    return AutoModelForCausalLM.from_pretrained(resolve_model_path("rlrun:tiny-base")).eval()


def _some_sequences(session) -> Sequences:
    exp, _ = session.generation.collector.collect(2, seed=0, timer=Timer())
    return exp.seq


def test_lora_trains_only_the_adapters_and_resumes(tmp_path):
    overrides = [*LORA, "trainer.total_steps=2", "trainer.checkpoint.every_steps=1"]
    run = train(load_recipe("grpo", overrides), RunOptions(run_dir=tmp_path / "run"), overrides=overrides)
    s = run.session
    assert s.models.reference is None  # no second copy of the model
    policy, base = s.models.unwrapped_policy, _base().state_dict()
    trainable = {name for name, p in policy.named_parameters() if p.requires_grad}
    assert trainable and all("lora_" in name for name in trainable)
    for name, param in policy.named_parameters():
        if "lora_B" in name:
            assert param.abs().max() > 0, name  # peft starts B at 0: these moved
        elif "lora_" not in name:
            key = name.removeprefix("base_model.model.").replace(".base_layer", "")
            assert torch.equal(param, base[key]), name
    rows = [r for r in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert len(rows) == 3 and '"actor/kl_loss"' in rows[-1]

    checkpoint = latest_checkpoint(tmp_path / "run" / "checkpoints")
    assert (checkpoint / "adapter_model.safetensors").is_file()
    assert not (checkpoint / "model.safetensors").exists()  # the base model is not copied
    loaded = PeftModel.from_pretrained(_base(), checkpoint)
    expected = {k: v for k, v in policy.state_dict().items() if "lora_" in k}
    got = {k: v for k, v in loaded.state_dict().items() if "lora_" in k}
    assert expected.keys() == got.keys() and all(torch.equal(expected[k], got[k]) for k in expected)

    more = [*overrides, "trainer.total_steps=3"]
    resumed = train(
        load_recipe("grpo", more), RunOptions(run_dir=tmp_path / "run", resume=True), overrides=more
    )
    assert resumed.status == "finished" and resumed.session.counters.step == 3


def test_reference_is_the_base_model_and_export_merges(tmp_path):
    # no warm-up, so that step 1 moves the adapters
    overrides = [*LORA, "trainer.total_steps=1", "actor.lr_scheduler.warmup_steps=0"]
    run = train(load_recipe("grpo", overrides), RunOptions(run_dir=tmp_path / "run"), overrides=overrides)
    s = run.session
    seq = _some_sequences(s)
    with torch.no_grad():
        with s.models.reference_model() as reference:
            ref = response_log_probs(reference, seq, 1.0)[0]
        base = response_log_probs(_base(), seq, 1.0)[0]
        policy = response_log_probs(s.models.unwrapped_policy.eval(), seq, 1.0)[0]
    mask = seq.response_mask.bool()
    torch.testing.assert_close(ref[mask], base[mask], rtol=1e-5, atol=1e-5)
    assert (policy[mask] - base[mask]).abs().max() > 1e-6  # the adapters are back on afterwards

    merged = AutoModelForCausalLM.from_pretrained(
        export_merged(latest_checkpoint(tmp_path / "run" / "checkpoints"), tmp_path / "merged")
    ).eval()
    with torch.no_grad():
        torch.testing.assert_close(
            response_log_probs(merged, seq, 1.0)[0][mask], policy[mask], rtol=1e-4, atol=1e-4
        )
