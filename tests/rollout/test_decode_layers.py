"""Decode steps through the layers directly: the same logits as the model's own forward, per
family, and the model's forward wherever a hook, a replaced forward, another family, another
dtype or activation says the direct calls would not compute what it computes."""

import pytest
import torch
from small_models import SMALL
from transformers import (
    AutoModelForCausalLM,
    LlamaConfig,
    LlamaForCausalLM,
    MistralConfig,
    MistralForCausalLM,
    Qwen3Config,
    Qwen3ForCausalLM,
)

from rlrun.embedded import resolve_model_path
from rlrun.rollout import kv_cache
from rlrun.rollout.decode_layers import decode_layers
from rlrun.rollout.engine import SamplingParams
from rlrun.rollout.hf import HFRolloutEngine
from rlrun.rollout.kv_cache import SlotCache

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py says why


def _tiny_base():
    return AutoModelForCausalLM.from_pretrained(resolve_model_path("rlrun:tiny-base"))


def _llama_with_biases():
    torch.manual_seed(0)
    model = LlamaForCausalLM(LlamaConfig(**SMALL, attention_bias=True, mlp_bias=True))
    with torch.no_grad():  # biases are initialised to zero: make them count
        for module in model.modules():
            if isinstance(module, torch.nn.Linear) and module.bias is not None:
                module.bias.normal_()
    return model


def _qwen3():
    torch.manual_seed(0)
    model = Qwen3ForCausalLM(Qwen3Config(**SMALL, head_dim=8))
    with torch.no_grad():  # the per-head query and key norms start at one: make them count
        for layer in model.model.layers:
            layer.self_attn.q_norm.weight.uniform_(0.5, 1.5)
            layer.self_attn.k_norm.weight.uniform_(0.5, 1.5)
    return model


@pytest.fixture(
    params=[_tiny_base, _llama_with_biases, _qwen3], ids=["qwen2-tiny-base", "llama-biases", "qwen3"]
)
def model(request):
    return request.param().eval()


def _steps(model, *, direct: bool) -> list[torch.Tensor]:
    """The logits of two ragged prompts and three decode steps over four slots."""
    cache = SlotCache(model, num_slots=4, capacity=16)
    if not direct:
        cache.decode_layers = None
    assert (cache.decode_layers is not None) == direct
    out = []
    with torch.no_grad():
        out.append(cache.prefill([[5, 6, 7, 8], [9, 10]], [0, 0, 1, 1]))
        cache.begin_turn(4)
        kept = torch.tensor([True, True, False, True])  # slot 2 has ended: run, not kept
        for token in ([11, 12, 13, 14], [15, 16, 17, 18], [19, 20, 21, 22]):
            out.append(cache.step(torch.tensor(token), kept))
    return out


def test_a_step_through_the_layers_gives_the_models_own_logits_to_the_bit(model):
    direct, own = _steps(model, direct=True), _steps(model, direct=False)
    for a, b in zip(direct, own):
        assert torch.equal(a, b)


class _Tokenizer:
    """What the engine reads of a tokenizer (the random models have none)."""

    eos_token_id, pad_token_id = 1, 0


def test_the_engine_samples_the_same_tokens_and_log_probs_either_way(model, monkeypatch):
    prompts, sampling = (
        [[5, 6, 7], [9, 10, 11, 12]],
        SamplingParams(n=3, max_tokens=6, temperature=1.3, seed=4),
    )
    direct = HFRolloutEngine(model, _Tokenizer()).generate(prompts, sampling)
    monkeypatch.setattr(kv_cache, "decode_layers", lambda model: None)
    own = HFRolloutEngine(model, _Tokenizer()).generate(prompts, sampling)
    assert torch.equal(direct.response_ids, own.response_ids)
    assert torch.equal(direct.log_probs, own.log_probs)


def test_a_hook_added_after_the_cache_was_built_runs_at_the_next_step():
    model = _llama_with_biases().eval()
    cache = SlotCache(model, num_slots=2, capacity=8)
    assert cache.decode_layers is not None and cache.decode_layers.usable()
    calls = []
    with torch.no_grad():
        cache.prefill([[5, 6]], [0, 0])
        cache.begin_turn(2)
        cache.step(torch.tensor([7, 8]), torch.tensor([True, True]))
        handle = model.model.layers[1].mlp.register_forward_hook(lambda *_: calls.append("mlp"))
        cache.step(torch.tensor([9, 10]), torch.tensor([True, True]))
        handle.remove()
        cache.step(torch.tensor([11, 12]), torch.tensor([True, True]))
    assert calls == ["mlp"]  # the hooked step ran the model's forward; the others did not


def test_a_replaced_forward_turns_the_direct_calls_off_until_it_is_restored():
    model = _qwen3().eval()
    layers = decode_layers(model)
    norm = model.model.layers[0].self_attn.q_norm
    norm.forward = lambda x: x
    assert not layers.usable() and decode_layers(model) is None
    del norm.forward
    assert layers.usable()


def test_models_the_direct_calls_do_not_cover_keep_their_own_forward():
    torch.manual_seed(0)
    assert decode_layers(MistralForCausalLM(MistralConfig(**SMALL))) is None  # another family
    assert decode_layers(LlamaForCausalLM(LlamaConfig(**SMALL, hidden_act="gelu"))) is None
    assert decode_layers(LlamaForCausalLM(LlamaConfig(**SMALL)).to(torch.bfloat16)) is None
    hooked = LlamaForCausalLM(LlamaConfig(**SMALL))
    hooked.model.norm.register_forward_pre_hook(lambda *_: None)
    assert decode_layers(hooked) is None
    assert decode_layers(LlamaForCausalLM(LlamaConfig(**SMALL))) is not None
