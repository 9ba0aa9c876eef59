"""The decode steps' single-query attention: its formula by hand, against sdpa, and when it
stands in for the model's attention. Its logits against a plain forward pass, per family, are
tests/rollout/test_kv_cache.py's."""

import math

import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM, MistralConfig, MistralForCausalLM
from transformers.integrations.sdpa_attention import sdpa_attention_forward
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

from rlrun.rollout.decode_attention import NAME, applies, attention, single_query_attention
from rlrun.rollout.kv_cache import SlotCache

LOWEST = torch.finfo(torch.float32).min
SIZES = {"vocab_size": 40, "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2}
SIZES |= {"num_attention_heads": 4, "num_key_value_heads": 2, "eos_token_id": 1, "pad_token_id": 0}


def _module(heads: int, kv_heads: int) -> torch.nn.Module:
    module = torch.nn.Module()
    module.num_key_value_groups = heads // kv_heads  # what sdpa's wrapper reads
    module.is_causal = True
    return module


def test_one_query_per_head_over_its_groups_key_value_head_by_hand():
    # one row, two query heads sharing one key-value head, head dim 1, two keys
    query = torch.tensor([1.0, 2.0]).view(1, 2, 1, 1)
    key = torch.tensor([0.0, 1.0]).view(1, 1, 2, 1)
    value = torch.tensor([10.0, 20.0]).view(1, 1, 2, 1)
    open_mask = torch.zeros(1, 1, 1, 2)
    out, weights = attention(_module(2, 1), query, key, value, open_mask, scaling=1.0)
    e = math.e
    # head 0: scores (0, 1); head 1: scores (0, 2)
    expected = [(10 + 20 * e) / (1 + e), (10 + 20 * e**2) / (1 + e**2)]
    assert weights is None and out.shape == (1, 1, 2, 1)
    torch.testing.assert_close(out.flatten(), torch.tensor(expected))
    masked, _ = attention(_module(2, 1), query, key, value, torch.tensor([[[[LOWEST, 0.0]]]]), scaling=1.0)
    torch.testing.assert_close(masked.flatten(), torch.tensor([20.0, 20.0]))  # only key 1 is seen


def test_it_gives_what_sdpa_gives_at_a_decode_steps_shapes():
    torch.manual_seed(0)
    rows, heads, kv_heads, keys, dim = 5, 9, 3, 17, 8
    query, key, value = (
        torch.randn(rows, heads, 1, dim),
        torch.randn(rows, kv_heads, keys, dim),
        torch.randn(rows, kv_heads, keys, dim),
    )
    mask = torch.zeros(rows, 1, 1, keys)
    mask[0, ..., :4] = LOWEST  # a left-padded row
    mask[3, ..., -1] = LOWEST  # a row that ended
    module = _module(heads, kv_heads)
    ours, _ = attention(module, query, key, value, mask, scaling=dim**-0.5)
    theirs, _ = sdpa_attention_forward(module, query, key, value, mask, scaling=dim**-0.5)
    torch.testing.assert_close(ours, theirs, atol=1e-6, rtol=1e-6)
    default, _ = attention(module, query, key, value, mask)  # no scaling given: 1 / sqrt(dim), as sdpa
    torch.testing.assert_close(default, theirs, atol=1e-6, rtol=1e-6)


def _llama():
    torch.manual_seed(0)
    return LlamaForCausalLM(LlamaConfig(**SIZES)).eval()


def test_a_slot_cache_step_runs_it_and_a_prefill_does_not():
    model = _llama()
    seen: list[str] = []
    model.model.layers[0].self_attn.register_forward_pre_hook(
        lambda module, args: seen.append(module.config._attn_implementation)
    )
    cache = SlotCache(model, num_slots=2, capacity=8)
    with torch.no_grad():
        cache.prefill([[5, 6, 7], [8, 9]], [0, 1])
        cache.begin_turn(2)
        cache.step(torch.tensor([10, 11]), torch.tensor([True, True]))
    assert seen == ["sdpa", NAME] and ALL_ATTENTION_FUNCTIONS[NAME] is attention
    assert model.config._attn_implementation == "sdpa"  # restored


def test_the_models_own_attention_is_restored_when_a_step_fails():
    model = _llama()
    with pytest.raises(RuntimeError, match="boom"), single_query_attention(model):
        assert model.config._attn_implementation == NAME
        raise RuntimeError("boom")
    assert model.config._attn_implementation == "sdpa"


def test_it_applies_only_to_float32_sdpa_models_of_the_tested_families_on_cpu():
    assert applies(_llama())
    assert not applies(_llama().to(torch.bfloat16))  # sdpa's softmax runs in float32 there
    eager = _llama()
    eager.config._attn_implementation = "eager"
    assert not applies(eager)
    torch.manual_seed(0)
    mistral = MistralForCausalLM(MistralConfig(**SIZES, sliding_window=None)).eval()
    assert not applies(mistral)  # not a family whose attention was checked
    with single_query_attention(mistral):
        assert mistral.config._attn_implementation == "sdpa"
