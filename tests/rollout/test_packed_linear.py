"""Linear layers over oneDNN-packed weights while the hf engine samples: the same products as
torch's linear up to float rounding, never a stale weight, and the same samples for a seed."""

from types import SimpleNamespace

import pytest
import torch
from torch.nn import functional as F
from transformers import LlamaConfig, LlamaForCausalLM

from rlrun.rollout import ROLLOUT_ENGINES, SamplingParams, packed_linear
from rlrun.rollout.packed_linear import PackedLinears, packs

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py says why


class Holder(torch.nn.Module):
    """A model-like module: PackedLinears reads ``device`` as a transformers model has it."""

    def __init__(self, *layers: torch.nn.Module):
        super().__init__()
        self.layers = torch.nn.ModuleList(layers)
        self.device = torch.device("cpu")


class Doubled(torch.nn.Linear):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return 2 * super().forward(x)


def test_which_layers_are_packed():
    assert packs(torch.nn.Linear(256, 300))
    assert not packs(torch.nn.Linear(128, 512))  # one side below MIN_SIDE: measured slower packed
    assert not packs(torch.nn.Linear(256, 256, dtype=torch.float64))
    assert not packs(torch.nn.Linear(256, 256, dtype=torch.bfloat16))
    assert not packs(Doubled(256, 256))  # not exactly linear(x, weight, bias)
    hooked = torch.nn.Linear(256, 256)
    hooked.forward = lambda x: x  # someone else's forward (an offloading hook, say)
    assert not packs(hooked)


def test_products_equal_linears_inside_the_block_and_the_class_forward_returns_after():
    torch.manual_seed(0)
    layer = torch.nn.Linear(256, 320)  # with a bias
    packing = PackedLinears(Holder(layer), rows=8)
    x = torch.randn(8, 3, 256).transpose(0, 1)  # 3D and not contiguous, as attention's output
    with torch.no_grad(), packing.active():
        assert "forward" in vars(layer)
        out = layer(x)
    assert "forward" not in vars(layer)
    assert packing._packed  # the product ran over a packed copy
    torch.testing.assert_close(out, F.linear(x, layer.weight, layer.bias), atol=1e-5, rtol=1e-5)
    packing.release()
    assert not packing._packed


def test_autograd_and_autocast_take_torchs_linear_unchanged():
    torch.manual_seed(0)
    layer = torch.nn.Linear(256, 256)
    packing = PackedLinears(Holder(layer), rows=4)
    x = torch.randn(4, 256)
    with packing.active():
        out = layer(x)
        out.sum().backward()
        with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
            cast = layer(x)
    assert torch.equal(out, F.linear(x, layer.weight, layer.bias)) and layer.weight.grad is not None
    assert cast.dtype == torch.bfloat16 and not packing._packed


def test_a_weight_written_in_place_or_replaced_is_packed_again():
    torch.manual_seed(0)
    layer = torch.nn.Linear(256, 256, bias=False)
    packing = PackedLinears(Holder(layer), rows=4)
    x = torch.randn(4, 256)
    with torch.no_grad(), packing.active():
        layer(x)
        layer.weight.mul_(-1)  # an optimizer step writes in place
        torch.testing.assert_close(layer(x), F.linear(x, layer.weight), atol=1e-5, rtol=1e-5)
        layer.weight = torch.nn.Parameter(torch.randn(256, 256))  # load_state_dict(assign=True), say
        torch.testing.assert_close(layer(x), F.linear(x, layer.weight), atol=1e-5, rtol=1e-5)


@pytest.fixture
def wide_model():
    """A random Llama whose q, o, MLP and LM-head weights are wide enough to be packed (its
    128x256 keys and values are not)."""
    torch.manual_seed(0)
    sizes = {"vocab_size": 300, "hidden_size": 256, "intermediate_size": 512, "num_hidden_layers": 2}
    sizes |= {"num_attention_heads": 4, "num_key_value_heads": 2, "eos_token_id": 1, "pad_token_id": 0}
    model = LlamaForCausalLM(LlamaConfig(**sizes))
    assert sum(packs(m) for m in model.modules()) == 2 * 5 + 1
    return model, SimpleNamespace(eos_token_id=1, pad_token_id=0)


def _counting(monkeypatch) -> list:
    packed = []
    weight = PackedLinears._weight

    def counted(self, layer):
        packed.append(layer)
        return weight(self, layer)

    monkeypatch.setattr(PackedLinears, "_weight", counted)
    return packed


PROMPTS = [[5, 17, 42, 9], [7, 200], [3, 4, 5, 6, 7, 8]]


@pytest.mark.parametrize("preallocate", [True, False])
def test_the_engine_samples_what_it_samples_unpacked(wide_model, monkeypatch, preallocate):
    model, tok = wide_model
    engine = ROLLOUT_ENGINES.get("hf")(model, tok, preallocate=preallocate)
    sampling = SamplingParams(n=4, max_tokens=10, seed=3)
    packed_calls = _counting(monkeypatch)
    packed = engine.generate(PROMPTS, sampling)
    assert packed_calls and not any("forward" in vars(m) for m in model.modules())
    monkeypatch.setattr(packed_linear, "MIN_SIDE", 10**9)  # nothing packs
    before = len(packed_calls)
    plain = engine.generate(PROMPTS, sampling)
    assert len(packed_calls) == before
    assert (
        torch.equal(packed.response_ids, plain.response_ids) and packed.finish_reasons == plain.finish_reasons
    )
    torch.testing.assert_close(packed.log_probs, plain.log_probs, atol=1e-5, rtol=1e-5)


def test_a_conversation_whose_weights_change_between_turns_uses_the_new_weights(wide_model, monkeypatch):
    model, tok = wide_model
    engine = ROLLOUT_ENGINES.get("hf")(model, tok)
    state = {k: v.clone() for k, v in model.state_dict().items()}
    change = {k: 0.05 * torch.randn_like(v) for k, v in state.items()}

    def turns() -> list:
        model.load_state_dict(state)
        conversation = engine.conversation(PROMPTS, 2, max_tokens=24)
        first = conversation.sample(range(6), SamplingParams(n=1, max_tokens=4, seed=0))
        with torch.no_grad():
            for name, p in model.named_parameters():
                p.add_(change[name])  # trained between turns, in place
        conversation.append(range(6), [[9, 10]] * 6)
        second = conversation.sample(range(6), SamplingParams(n=1, max_tokens=4, seed=1))
        conversation.close()
        return [first, second]

    packed_calls = _counting(monkeypatch)
    packed = turns()
    assert packed_calls
    monkeypatch.setattr(packed_linear, "MIN_SIDE", 10**9)
    plain = turns()
    for a, b in zip(packed, plain):
        assert torch.equal(a.response_ids, b.response_ids)
        torch.testing.assert_close(a.log_probs, b.log_probs, atol=1e-5, rtol=1e-5)
