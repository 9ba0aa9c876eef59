"""The hf engine on the real shipped tiny model (no mocks)."""

from types import SimpleNamespace

import pytest
import torch
from transformers import (
    AutoModelForCausalLM,
    LlamaConfig,
    LlamaForCausalLM,
    Qwen3Config,
    Qwen3ForCausalLM,
)

from rlrun.data import left_pad
from rlrun.embedded import resolve_model_path
from rlrun.rollout import ROLLOUT_ENGINES, RolloutEngine, SamplingParams
from rlrun.rollout.conversation import ResubmittingConversation
from rlrun.tasks.arithmetic import ArithmeticTask

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py says why


@pytest.fixture(scope="module")
def prompts(model_and_tokenizer):
    _, tok = model_and_tokenizer
    texts = [r["prompt"] for r in ArithmeticTask(digits=2).validation(6)] + ["1+1=", "123*45+6="]
    return tok(texts)["input_ids"]  # ragged: left padding matters


def _engine(model_and_tokenizer, **kwargs) -> RolloutEngine:
    model, tok = model_and_tokenizer
    return ROLLOUT_ENGINES.get("hf")(model, tok, **kwargs)


def _recomputed_log_probs(model, prompt_ids, batch, temperature, pad_id):
    """What the trainer computes: one full forward over prompt + response."""
    prompts, prompt_mask = left_pad([p for p in prompt_ids for _ in range(batch.n)], pad_id)
    ids = torch.cat([prompts, batch.response_ids], 1)
    mask = torch.cat([prompt_mask, batch.response_mask], 1)
    with torch.no_grad():
        logits = model(
            input_ids=ids, attention_mask=mask, position_ids=(mask.cumsum(-1) - 1).clamp(min=0)
        ).logits
    logits = logits[:, prompts.shape[1] - 1 : -1] / temperature
    return (
        torch.log_softmax(logits, -1).gather(-1, batch.response_ids.unsqueeze(-1)).squeeze(-1)
        * batch.response_mask
    )


def test_shape_order_and_masks(model_and_tokenizer, prompts):
    engine = _engine(model_and_tokenizer)
    assert isinstance(engine, RolloutEngine)
    batch = engine.generate(prompts, SamplingParams(n=3, max_tokens=5, seed=0))
    n_rows = len(prompts) * 3
    assert (
        batch.response_ids.shape[0] == batch.log_probs.shape[0] == n_rows and batch.response_ids.shape[1] <= 5
    )
    assert batch.response_ids.dtype == torch.long and batch.log_probs.dtype == torch.float32
    assert batch.n == 3 and len(batch.finish_reasons) == n_rows
    eos, pad = model_and_tokenizer[1].eos_token_id, model_and_tokenizer[1].pad_token_id
    for row, reason in enumerate(batch.finish_reasons):
        length = int(batch.response_lengths[row])
        assert batch.response_mask[row, :length].all() and not batch.response_mask[row, length:].any()
        assert (batch.response_ids[row, length:] == pad).all() and (batch.log_probs[row, length:] == 0).all()
        ends_with_eos = batch.response_ids[row, length - 1] == eos
        assert reason == ("stop" if ends_with_eos else "length")
        assert reason == "stop" or length == 5
    assert (batch.log_probs[batch.response_mask.bool()] < 0).all()


@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_log_probs_equal_the_trainers_recomputation(model_and_tokenizer, prompts, temperature):
    model, tok = model_and_tokenizer
    batch = _engine(model_and_tokenizer).generate(
        prompts, SamplingParams(n=4, max_tokens=6, temperature=temperature, seed=1)
    )
    expected = _recomputed_log_probs(model, prompts, batch, temperature, tok.pad_token_id)
    torch.testing.assert_close(batch.log_probs, expected, atol=1e-5, rtol=1e-5)


def test_sampling_is_reproducible_under_a_seed_and_leaves_the_global_rng_alone(model_and_tokenizer, prompts):
    engine = _engine(model_and_tokenizer)
    sampling = SamplingParams(n=8, max_tokens=6, seed=123)
    torch.manual_seed(0)
    state = torch.get_rng_state()
    first, second = engine.generate(prompts, sampling), engine.generate(prompts, sampling)
    assert torch.equal(torch.get_rng_state(), state)
    assert torch.equal(first.response_ids, second.response_ids)
    assert torch.equal(first.log_probs, second.log_probs)
    other = engine.generate(prompts, SamplingParams(n=8, max_tokens=6, seed=124))
    assert not torch.equal(first.response_ids, other.response_ids)


def test_unseeded_sampling_follows_the_global_rng(model_and_tokenizer, prompts):
    engine = _engine(model_and_tokenizer)
    sampling = SamplingParams(n=4, max_tokens=6)
    torch.manual_seed(7)
    first = engine.generate(prompts, sampling)
    torch.manual_seed(7)
    assert torch.equal(first.response_ids, engine.generate(prompts, sampling).response_ids)


def test_greedy_is_the_argmax_and_independent_of_batching(model_and_tokenizer, prompts):
    model, tok = model_and_tokenizer
    whole = _engine(model_and_tokenizer).generate(prompts, SamplingParams(greedy=True))
    chunked = _engine(model_and_tokenizer, max_batch_samples=3).generate(prompts, SamplingParams(greedy=True))
    one_by_one = [_engine(model_and_tokenizer).generate([p], SamplingParams(greedy=True)) for p in prompts]
    assert torch.equal(whole.response_ids, chunked.response_ids)
    decoded = tok.batch_decode(whole.response_ids, skip_special_tokens=True)
    assert decoded == [tok.decode(b.response_ids[0], skip_special_tokens=True) for b in one_by_one]
    # each greedy token is the argmax of the model's distribution at its position
    logp_all = _recomputed_log_probs(model, prompts, whole, 1.0, tok.pad_token_id)
    torch.testing.assert_close(whole.log_probs, logp_all, atol=1e-5, rtol=1e-5)


def test_top_k_one_is_greedy_and_max_tokens_bounds_length(model_and_tokenizer, prompts):
    engine = _engine(model_and_tokenizer)
    greedy = engine.generate(prompts, SamplingParams(greedy=True, max_tokens=8))
    top1 = engine.generate(prompts, SamplingParams(top_k=1, max_tokens=8, seed=5))
    assert torch.equal(greedy.response_ids, top1.response_ids)
    short = engine.generate(prompts, SamplingParams(n=2, max_tokens=1, seed=5))
    assert short.response_ids.shape[1] == 1


def test_min_tokens_suppresses_eos(model_and_tokenizer, prompts):
    batch = _engine(model_and_tokenizer).generate(
        prompts, SamplingParams(n=2, max_tokens=6, min_tokens=6, seed=0)
    )
    assert batch.finish_reasons == ["length"] * len(batch.finish_reasons)
    assert batch.response_mask.all()


def test_generation_restores_training_mode_and_sync_is_a_no_op_for_the_same_model(
    model_and_tokenizer, prompts
):
    model, _ = model_and_tokenizer
    engine = _engine(model_and_tokenizer)
    model.train()
    engine.generate(prompts[:1], SamplingParams(greedy=True))
    assert model.training
    model.eval()
    engine.sync_weights(model)
    assert engine.model is model


def test_sync_weights_copies_from_another_module(model_and_tokenizer):
    _, tok = model_and_tokenizer
    copy = AutoModelForCausalLM.from_pretrained(resolve_model_path("rlrun:tiny-base"))
    engine = ROLLOUT_ENGINES.get("hf")(copy, tok)
    trained = AutoModelForCausalLM.from_pretrained(resolve_model_path("rlrun:tiny-teacher"))
    engine.sync_weights(trained)
    for name, tensor in trained.state_dict().items():
        assert torch.equal(copy.state_dict()[name], tensor)


@pytest.mark.parametrize(
    "kwargs",
    [{"n": 0}, {"max_tokens": 0}, {"temperature": 0.0}, {"top_p": 0.0}, {"top_k": -1}, {"min_tokens": 9}],
)
def test_bad_sampling_params_are_refused(kwargs):
    with pytest.raises(ValueError):
        SamplingParams(**kwargs)


def test_ended_rows_leave_the_decode_batch_without_changing_any_sample(model_and_tokenizer, prompts):
    model, _ = model_and_tokenizer
    decode_batch_sizes = []
    hook = model.register_forward_pre_hook(
        lambda _, args, kwargs: decode_batch_sizes.append(kwargs["input_ids"].shape), with_kwargs=True
    )
    sampling = SamplingParams(n=8, max_tokens=12, temperature=1.5, seed=11)
    try:
        every_step = _engine(model_and_tokenizer, compact_ended_fraction=0.0).generate(prompts, sampling)
        compacted_sizes, decode_batch_sizes[:] = list(decode_batch_sizes), []
        never = _engine(model_and_tokenizer, compact_ended_fraction=2.0).generate(prompts, sampling)
    finally:
        hook.remove()
    lengths = every_step.response_lengths
    assert lengths.min() < lengths.max()  # rows end at different steps, so compaction happens
    decode_rows = [shape[0] for shape in compacted_sizes if shape[1] == 1]
    assert decode_rows == sorted(decode_rows, reverse=True) and decode_rows[-1] < len(lengths)
    assert all(shape[0] == len(lengths) for shape in decode_batch_sizes if shape[1] == 1)
    assert torch.equal(every_step.response_ids, never.response_ids)
    assert torch.equal(every_step.response_mask, never.response_mask)
    assert every_step.finish_reasons == never.finish_reasons
    torch.testing.assert_close(every_step.log_probs, never.log_probs, atol=1e-6, rtol=1e-6)


def _small_model(family: str):
    """A small random model of a family rlrun documents, with a tokenizer's two ids."""
    torch.manual_seed(0)
    sizes = {"vocab_size": 40, "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2}
    sizes |= {"num_attention_heads": 4, "num_key_value_heads": 2, "eos_token_id": 1, "pad_token_id": 0}
    model = (
        LlamaForCausalLM(LlamaConfig(**sizes))
        if family == "llama"
        else Qwen3ForCausalLM(Qwen3Config(**sizes))
    )
    return model, SimpleNamespace(eos_token_id=1, pad_token_id=0)


@pytest.mark.parametrize("family", ["qwen2-tiny-base", "llama", "qwen3"])
@pytest.mark.parametrize(
    "sampling",
    [
        SamplingParams(n=4, max_tokens=12, temperature=1.5, seed=0),
        SamplingParams(n=3, max_tokens=9, top_k=5, top_p=0.8, min_tokens=2, seed=1),
        SamplingParams(greedy=True, max_tokens=10),
    ],
    ids=["plain", "truncated", "greedy"],
)
def test_the_preallocated_cache_samples_what_the_dynamic_cache_samples(
    model_and_tokenizer, prompts, family, sampling
):
    model, tok = model_and_tokenizer if family == "qwen2-tiny-base" else _small_model(family)
    ids = prompts if family == "qwen2-tiny-base" else [[min(i, 39) for i in p] for p in prompts]
    preallocated = ROLLOUT_ENGINES.get("hf")(model, tok, preallocate=True, max_batch_samples=10)
    dynamic = ROLLOUT_ENGINES.get("hf")(model, tok, preallocate=False, max_batch_samples=10)
    new, old = preallocated.generate(ids, sampling), dynamic.generate(ids, sampling)
    assert torch.equal(new.response_ids, old.response_ids) and torch.equal(
        new.response_mask, old.response_mask
    )
    assert new.finish_reasons == old.finish_reasons
    torch.testing.assert_close(new.log_probs, old.log_probs, atol=1e-5, rtol=1e-5)


def test_a_model_the_preallocated_cache_cannot_serve_decodes_over_the_dynamic_cache_and_says_so(
    random_lm, caplog
):
    random_lm.config.sliding_window, random_lm.config.use_sliding_window = 4096, True
    tok = SimpleNamespace(eos_token_id=1, pad_token_id=0)
    with caplog.at_level("WARNING", logger="rlrun.rollout"):
        engine = ROLLOUT_ENGINES.get("hf")(random_lm, tok)
    assert not engine.preallocate and "DynamicCache" in caplog.text and "sliding window" in caplog.text
    batch = engine.generate([[5, 6, 7], [8, 9]], SamplingParams(n=2, max_tokens=4, seed=0))
    assert batch.response_ids.shape[0] == 4
    assert isinstance(engine.conversation([[5, 6, 7]], 2, max_tokens=8), ResubmittingConversation)
    with pytest.raises(ValueError, match="cannot decode into the preallocated KV cache"):
        ROLLOUT_ENGINES.get("hf")(random_lm, tok, preallocate=True)
