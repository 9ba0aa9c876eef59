"""Linear layers over oneDNN-packed weights while the hf engine samples: the same products as
torch's linear up to float rounding, never a stale weight, and the same samples for a seed."""

from types import SimpleNamespace

import pytest
import torch
from torch.nn import functional as F
from transformers import LlamaConfig, LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM

from rlrun.rollout import ROLLOUT_ENGINES, SamplingParams, packed_linear
from rlrun.rollout.packed_linear import PackedLinears, packs, sibling_groups

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


WIDE = {"vocab_size": 300, "hidden_size": 256, "intermediate_size": 512, "num_hidden_layers": 2}
WIDE |= {"num_attention_heads": 4, "num_key_value_heads": 2, "eos_token_id": 1, "pad_token_id": 0}


@pytest.fixture(params=["llama", "qwen2"])
def wide_model(request):
    """A random Llama (or Qwen2: biases on queries, keys and values) whose q, o, MLP and LM-head
    weights are wide enough to be packed; its 128x256 keys and values are not, but stacked under
    the queries they are."""
    torch.manual_seed(0)
    config, model_class = {
        "llama": (LlamaConfig, LlamaForCausalLM),
        "qwen2": (Qwen2Config, Qwen2ForCausalLM),
    }[request.param]
    model = model_class(config(**WIDE))
    assert sum(packs(m) for m in model.modules()) == 2 * 5 + 1
    assert len(sibling_groups(model)) == 2 * 2  # q k v, and gate up, in each layer
    return model, SimpleNamespace(eos_token_id=1, pad_token_id=0)


def test_sibling_projections_multiply_as_one_product_over_the_same_input(monkeypatch):
    torch.manual_seed(0)
    model = Qwen2ForCausalLM(Qwen2Config(**WIDE))
    attention = model.model.layers[0].self_attn
    q, k, v = attention.q_proj, attention.k_proj, attention.v_proj
    packing = PackedLinears(model, rows=4)
    copies = _counting(monkeypatch)
    x, other = torch.randn(4, 1, 256), torch.randn(4, 1, 256)
    with torch.no_grad(), packing.active():
        outs = [q(x), k(x), v(x)]
        assert copies == [(q, k, v)]  # one stacked product; keys and values took their parts
        for layer, out in zip((q, k, v), outs):
            torch.testing.assert_close(out, F.linear(x, layer.weight, layer.bias), atol=1e-5, rtol=1e-5)
        q(x)
        torch.testing.assert_close(
            k(other), F.linear(other, k.weight, k.bias), atol=1e-5, rtol=1e-5
        )  # not x's
        q(x)
        v.weight.mul_(-1)  # written after the stacked product: its part is stale
        torch.testing.assert_close(v(x), F.linear(x, v.weight, v.bias), atol=1e-5, rtol=1e-5)
        x.add_(1)  # the input itself written in place
        torch.testing.assert_close(k(x), F.linear(x, k.weight, k.bias), atol=1e-5, rtol=1e-5)
        outs = [q(x), k(x), v(x)]  # v's new weight is stacked again
        for layer, out in zip((q, k, v), outs):
            torch.testing.assert_close(out, F.linear(x, layer.weight, layer.bias), atol=1e-5, rtol=1e-5)
        assert copies.count((q, k, v)) == 4
    assert not packing._handed  # no part outlives the block


def test_siblings_that_cannot_be_stacked_stay_apart():
    torch.manual_seed(0)
    model = Qwen2ForCausalLM(Qwen2Config(**WIDE))
    attention, mlp = model.model.layers[0].self_attn, model.model.layers[1].mlp
    attention.k_proj.bias = None  # a bias on the queries and values only: no stacked bias
    mlp.up_proj = torch.nn.Linear(300, 512, bias=False)  # another input width than the gate's
    assert sibling_groups(model) == [
        (model.model.layers[0].mlp.gate_proj, model.model.layers[0].mlp.up_proj),
        tuple(getattr(model.model.layers[1].self_attn, n) for n in ("q_proj", "k_proj", "v_proj")),
    ]
    narrow = LlamaForCausalLM(LlamaConfig(**(WIDE | {"hidden_size": 128})))  # 128 wide: below MIN_SIDE
    assert not sibling_groups(narrow)


def _counting(monkeypatch) -> list:
    packed = []
    copy = PackedLinears._copy

    def counted(self, layers):
        packed.append(layers)
        return copy(self, layers)

    monkeypatch.setattr(PackedLinears, "_copy", counted)
    return packed


PROMPTS = [[5, 17, 42, 9], [7, 200], [3, 4, 5, 6, 7, 8]]


@pytest.mark.parametrize("preallocate", [True, False])
def test_the_engine_samples_what_it_samples_unpacked(wide_model, monkeypatch, preallocate):
    model, tok = wide_model
    engine = ROLLOUT_ENGINES.get("hf")(model, tok, preallocate=preallocate)
    sampling = SamplingParams(n=4, max_tokens=10, seed=3)
    packed_calls = _counting(monkeypatch)
    packed = engine.generate(PROMPTS, sampling)
    assert not any("forward" in vars(m) for m in model.modules())
    assert {len(layers) for layers in packed_calls} == {1, 2, 3}  # alone, gate and up, q k v
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
