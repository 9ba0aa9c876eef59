"""The hf engine on the real shipped tiny model (no mocks)."""

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from rlrun.data import left_pad
from rlrun.embedded import resolve_model_path
from rlrun.rollout import ROLLOUT_ENGINES, RolloutEngine, SamplingParams
from rlrun.rollout.hf import exponential_noise, next_token
from rlrun.tasks.arithmetic import ArithmeticTask


@pytest.fixture(scope="module")
def model_and_tokenizer():
    path = resolve_model_path("rlrun:tiny-base")
    return AutoModelForCausalLM.from_pretrained(path), AutoTokenizer.from_pretrained(path)


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


# next_token on hand-made logits: probabilities 0.5, 0.3, 0.15, 0.05 over tokens 0..3
_PROBS = torch.tensor([[0.5, 0.3, 0.15, 0.05]])


def _draws(sampling: SamplingParams, banned=None, count: int = 4000) -> torch.Tensor:
    torch.manual_seed(0)
    return torch.bincount(next_token(_PROBS.log().expand(count, 4), sampling, banned), minlength=4)


def test_top_p_keeps_the_smallest_set_reaching_p_and_renormalises():
    # Ascending cumulative mass 0.05, 0.20, 0.50, 1.0: with top_p 0.8 tokens 3 and 2 (0.2 <= 1 - 0.8)
    # drop, leaving {0, 1} sampled as 0.5/0.8 and 0.3/0.8.
    counts = _draws(SamplingParams(top_p=0.8))
    assert counts[2:].tolist() == [0, 0]
    assert abs(counts[0].item() / 4000 - 0.625) < 0.03


def test_top_k_then_banned_tokens():
    # EOS masking comes first (as transformers applies min_new_tokens before its warpers):
    # with token 0 banned, the top 2 are {1, 2}, sampled as 0.3/0.45 and 0.15/0.45.
    counts = _draws(SamplingParams(top_k=2), banned=torch.tensor([0]))
    assert counts[0] == 0 and counts[3] == 0
    assert abs(counts[1].item() / 4000 - 2 / 3) < 0.03
    assert next_token(_PROBS.log(), SamplingParams(greedy=True), torch.tensor([0])).item() == 1


def test_plain_sampling_follows_the_distribution():
    freq = _draws(SamplingParams()).float() / 4000
    torch.testing.assert_close(freq, _PROBS[0], atol=0.03, rtol=0)


def test_a_sample_is_the_exponential_race_over_one_float32_uniform_draw():
    logits = torch.randn(5, 11, generator=torch.Generator().manual_seed(0))
    torch.manual_seed(3)
    q = -torch.rand(5, 11).log()
    torch.manual_seed(3)
    assert torch.equal(next_token(logits, SamplingParams(), None), (logits.softmax(-1) / q).argmax(-1))


def test_exponential_noise_is_exp_1():
    torch.manual_seed(0)
    q = exponential_noise(1000, 1000, device=torch.device("cpu"))
    assert (q >= 0).all()
    # Exp(1): mean 1, P(q > 1) = 1/e, P(q > 5) = e^-5 = 0.006738 (10^6 draws: 3 standard errors
    # are 0.003 for the mean, 0.0014 and 0.00025 for the tail fractions).
    assert abs(q[q.isfinite()].double().mean().item() - 1.0) < 0.003
    assert abs((q > 1).double().mean().item() - 0.367879) < 0.0015
    assert abs((q > 5).double().mean().item() - 0.006738) < 0.00025


def test_a_zero_probability_token_never_wins_even_against_infinite_noise():
    # q = inf (u = 0) where p = 0 must give 0, not NaN (argmax would pick a NaN).
    logits = torch.tensor([[0.0, float("-inf"), 0.0]])
    noise = torch.tensor([[1.0, float("inf"), 2.0]])
    assert next_token(logits, SamplingParams(), None, noise=noise).item() == 0
    noise = torch.tensor([[float("inf"), 0.5, 2.0]])
    assert next_token(logits, SamplingParams(), None, noise=noise).item() == 2


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
