"""The recipe's rollout engine: what each engine is built with."""

from __future__ import annotations

import pytest

from rlrun.recipes import load_recipe
from rlrun.training import rollout_engine


class Recorder:
    """Stands in for the engine registry: records what an engine factory is called with."""

    def __init__(self):
        self.calls = []

    def get(self, name):
        def build(model, tokenizer, **options):
            self.calls.append((name, options))
            return name

        return build


@pytest.fixture
def built(monkeypatch):
    recorder = Recorder()
    monkeypatch.setattr(rollout_engine, "ROLLOUT_ENGINES", recorder)

    def build(*overrides):
        recipe = load_recipe("real/grpo_smollm2", overrides, environment=False).recipe
        assert rollout_engine.build_rollout_engine(recipe, model=None, tokenizer=None) in ("hf", "vllm")
        return recorder.calls[-1]

    return build


LARGE = ("trainer.prompts_per_step=32", "rollout.n=8", "rollout.max_response_tokens=256")


def test_vllm_holds_the_largest_call_of_the_run_not_the_cap(built):
    # a step of 32 x 8 = 256 samples, evaluations of 8 prompts x 1: 256 sequences of 64 + 256 tokens
    # (with the cap alone, 1,024, the CPU build reserved 14 GiB of KV cache for SmolLM2)
    name, options = built("rollout.engine=vllm", *LARGE, "trainer.eval.prompts=8")
    assert name == "vllm" and options["max_batch_samples"] == 256 and options["max_model_len"] == 64 + 256
    # an evaluation larger than a step: 200 prompts x k = 2
    assert (
        built("rollout.engine=vllm", "trainer.eval.k=2", "trainer.eval.greedy=false")[1]["max_batch_samples"]
        == 400
    )
    # the whole validation set (prompts: null) may be as large as the cap
    assert built("rollout.engine=vllm", "trainer.eval.prompts=null")[1]["max_batch_samples"] == 1024
    # the cap still caps
    assert (
        built("rollout.engine=vllm", *LARGE, "rollout.max_batch_samples=100")[1]["max_batch_samples"] == 100
    )


def test_vllm_without_a_prompt_limit_takes_the_models_context(built):
    assert built("rollout.engine=vllm", "data.max_prompt_tokens=null")[1]["max_model_len"] is None


def test_the_hf_engine_chunks_at_the_cap(built):
    assert built(*LARGE) == ("hf", {"max_batch_samples": 1024})


def test_vllm_for_an_agent_takes_the_models_context(built):
    """An episode's prompt grows by the tools' descriptions and the reset text, row by row."""
    agent = 'agent={enabled: true, format: plain, environment: "tests.agents.envs_fixture:Recheck"}'
    assert built("rollout.engine=vllm", agent)[1]["max_model_len"] is None
