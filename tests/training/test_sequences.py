import math
from types import SimpleNamespace

import pytest
import torch

from rlrun.algorithms.masked import entropy_from_logits
from rlrun.shared_prefix import base_model
from rlrun.training import sequences
from rlrun.training.models import ValueModel, load_causal_lm, with_lora
from rlrun.training.sequences import (
    Sequences,
    forward_batched,
    forward_cost,
    pad_response,
    response_log_probs,
    response_logits,
    response_values,
    selected_log_probs,
)


def _seq():
    prompts = [[5, 6, 7], [8], [9, 10]]
    ids = torch.tensor([[11, 12, 1, 0], [13, 0, 0, 0], [14, 15, 16, 17]])
    mask = (ids != 0).long()
    return Sequences.build(prompts, ids, mask, pad_id=0)


def test_build_left_pads_prompts_and_keeps_responses_at_column_p():
    seq = _seq()
    assert seq.input_ids[:, :3].tolist() == [[5, 6, 7], [0, 0, 8], [0, 9, 10]]
    assert torch.equal(seq.response_ids, torch.tensor([[11, 12, 1, 0], [13, 0, 0, 0], [14, 15, 16, 17]]))
    assert seq.position_ids[1].tolist() == [0, 0, 0, 1, 1, 1, 1]  # padding positions are never read


def test_build_repeats_each_prompt_for_its_n_responses():
    seq = Sequences.build([[5, 6], [7]], torch.arange(8, 12).view(4, 1), torch.ones(4, 1), pad_id=0, n=2)
    assert seq.input_ids.tolist() == [[5, 6, 8], [5, 6, 9], [0, 7, 10], [0, 7, 11]]


def test_rows_cut_shared_response_padding():
    sub = _seq().rows(torch.tensor([1, 0]))
    assert sub.response_mask.shape == (2, 3) and sub.input_ids.shape == (2, 6)
    assert sub.response_ids[0].tolist() == [13, 0, 0]


def test_prompt_index_follows_rows_and_stays_distinct_across_concatenated_parts():
    seq = Sequences.build([[5], [6]], torch.ones(4, 1, dtype=torch.long), torch.ones(4, 1), pad_id=0, n=2)
    assert seq.prompt_index.tolist() == [0, 0, 1, 1]
    assert seq.rows(torch.tensor([3, 0])).prompt_index.tolist() == [1, 0]
    assert Sequences.concat([seq, seq.rows(torch.tensor([2]))]).prompt_index.tolist() == [0, 0, 1, 1, 3]
    empty = seq.rows(torch.tensor([], dtype=torch.long))  # dynamic sampling may keep no group of a batch
    assert Sequences.concat([empty, seq]).prompt_index.tolist() == [0, 0, 1, 1]


def test_concat_repads_both_sides():
    a = _seq().rows(torch.tensor([1]))  # prompt width 3, response width 1
    b = Sequences.build([[4, 4, 4, 4]], torch.tensor([[7, 7]]), torch.ones(1, 2), pad_id=0)
    both = Sequences.concat([a, b])
    assert both.input_ids.tolist() == [[0, 0, 0, 8, 13, 0], [4, 4, 4, 4, 7, 7]]
    assert both.response_mask.tolist() == [[1, 0], [1, 1]]


def test_log_probs_are_invariant_to_padding_and_batching(random_lm):
    seq = _seq()
    whole = response_log_probs(random_lm, seq, 0.7)[0] * seq.response_mask
    alone = (
        torch.cat(
            [
                pad_response(response_log_probs(random_lm, seq.rows(torch.tensor([i])), 0.7)[0], 4)
                for i in range(3)
            ]
        )
        * seq.response_mask
    )
    torch.testing.assert_close(whole, alone, rtol=1e-4, atol=1e-5)
    chunked = forward_batched(lambda q: response_log_probs(random_lm, q, 0.7)[0], seq=seq, chunk=2)
    torch.testing.assert_close(chunked * seq.response_mask, whole, rtol=1e-4, atol=1e-5)


def test_the_entropy_metric_in_chunks_and_temperature_1_without_a_division_change_nothing(
    random_lm, monkeypatch
):
    """The detached entropy, computed a few rows at a time to cap memory, equals the entropy of
    the whole logits (here chunks of 1 row: 4 x 24 = 96 logits each, the chunk size 100); at
    temperature 1 the logits are used as they are, the same to the bit as divided by 1."""
    seq = _seq()
    logits = response_logits(random_lm, seq)
    monkeypatch.setattr(sequences, "VOCAB_CHUNK_ELEMENTS", 100)
    for temperature in (0.7, 1.0):
        log_probs, entropy, _ = response_log_probs(random_lm, seq, temperature, entropy="detached")
        scaled = logits / temperature
        assert torch.equal(entropy, entropy_from_logits(scaled))
        torch.testing.assert_close(
            log_probs, scaled.log_softmax(-1).gather(-1, seq.response_ids.unsqueeze(-1)).squeeze(-1)
        )


def test_selected_log_probs_and_their_gradient_by_hand():
    """Logits (0, ln 3, ln 4): softmax (1, 3, 4) / 8. At token 1 the log-prob is ln(3/8), and its
    gradient onehot - softmax = (-1/8, 5/8, -4/8); at token 2 with upstream gradient 2,
    2 · (-1/8, -3/8, 4/8)."""
    row = torch.tensor([0.0, math.log(3), math.log(4)])
    logits = torch.stack([row, row]).unsqueeze(0).requires_grad_()  # (1, 2, 3)
    log_probs = selected_log_probs(logits, torch.tensor([[1, 2]]))
    torch.testing.assert_close(log_probs, torch.tensor([[math.log(3 / 8), math.log(4 / 8)]]))
    (log_probs * torch.tensor([[1.0, 2.0]])).sum().backward()
    torch.testing.assert_close(
        logits.grad, torch.tensor([[[-1 / 8, 5 / 8, -4 / 8], [-2 / 8, -6 / 8, 8 / 8]]])
    )


def test_selected_log_probs_in_chunks_equal_log_softmax_values_and_gradients(monkeypatch):
    """Chunks of one row (8 x 50 = 400 logits each, the chunk size 500) against autograd through
    `log_softmax`, in float64; bfloat16 logits are computed in float32 and give a bfloat16 gradient."""
    monkeypatch.setattr(sequences, "VOCAB_CHUNK_ELEMENTS", 500)
    generator = torch.Generator().manual_seed(0)
    logits = (3 * torch.randn(3, 8, 50, dtype=torch.float64, generator=generator)).requires_grad_()
    ids = torch.randint(50, (3, 8), generator=generator)
    upstream = torch.randn(3, 8, dtype=torch.float64, generator=generator)
    (selected_log_probs(logits, ids) * upstream).sum().backward()
    ours = logits.grad.clone()
    logits.grad = None
    expected = logits.log_softmax(-1).gather(-1, ids.unsqueeze(-1)).squeeze(-1)
    (expected * upstream).sum().backward()
    torch.testing.assert_close(selected_log_probs(logits, ids), expected)
    torch.testing.assert_close(ours, logits.grad)
    half = logits.detach().bfloat16().requires_grad_()
    out = selected_log_probs(half, ids)
    out.sum().backward()
    assert out.dtype == torch.float32 and half.grad.dtype == torch.bfloat16


def _grouped_seq():
    """Two prompts (one left-padded) answered twice each, rows interleaved, responses of 1-3 tokens."""
    responses = torch.tensor([[11, 12, 1], [14, 15, 16], [13, 0, 0], [17, 18, 0]])
    seq = Sequences.build([[5, 6, 7], [8, 9]], responses, (responses != 0).long(), pad_id=0, n=2)
    return seq.rows(torch.tensor([0, 2, 1, 3]))


def _row_by_row(model, seq):
    """The reference: every row forwarded whole, alone."""
    return torch.cat(
        [pad_response(response_log_probs(model, seq.rows(torch.tensor([i])), 0.7)[0], 3) for i in range(4)]
    )


def test_rows_sharing_a_prompt_run_it_once_with_equal_log_probs_and_gradients(random_lm):
    seq = _grouped_seq()
    calls = []
    hook = random_lm.model.embed_tokens.register_forward_hook(lambda m, i, o: calls.append(tuple(i[0].shape)))
    shared = response_log_probs(random_lm, seq, 0.7)[0] * seq.response_mask
    hook.remove()
    assert calls == [(2, 3), (4, 3)]  # the 2 distinct prompts once, then the 4 responses over their cache
    reference = _row_by_row(random_lm, seq) * seq.response_mask
    torch.testing.assert_close(shared, reference, rtol=1e-4, atol=1e-5)

    params = list(random_lm.parameters())
    g_shared = torch.autograd.grad(shared.sum(), params)
    g_reference = torch.autograd.grad(reference.sum(), params)
    for a, b in zip(g_shared, g_reference):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-6)


def test_gradient_checkpointing_runs_rows_whole(random_lm):
    seq = _grouped_seq()
    getattr(random_lm, "activation_checkpointing_enable", random_lm.gradient_checkpointing_enable)()
    random_lm.train()
    calls = []
    hook = random_lm.model.embed_tokens.register_forward_hook(lambda m, i, o: calls.append(tuple(i[0].shape)))
    log_probs = response_log_probs(random_lm, seq, 0.7)[0] * seq.response_mask
    hook.remove()
    getattr(random_lm, "activation_checkpointing_disable", random_lm.gradient_checkpointing_disable)()
    assert calls == [(4, 6)]
    torch.testing.assert_close(
        log_probs, _row_by_row(random_lm, seq) * seq.response_mask, rtol=1e-4, atol=1e-5
    )


# Padding-free (packed) against padded forward passes, on the embedded model, equal to float32
# rounding: log-probs, entropies and values to atol 1e-5 (differences seen: <= 5e-7); each
# parameter's gradient to 1e-5 of its largest entry (seen: <= 6e-6; its sums over ~100 tokens
# run in another order, and the padded path against itself row by row differs as much).
TOLERANCE = {"atol": 1e-5, "rtol": 0.0}


def _assert_gradients_close(packed, padded, rtol=0.0):
    for a, b in zip(packed, padded, strict=True):
        torch.testing.assert_close(a, b, atol=1e-5 * max(1.0, float(b.abs().max())), rtol=rtol)


@pytest.fixture(scope="module")
def embedded_lm():
    return load_causal_lm("rlrun:tiny-base")


def _ragged_groups():
    """Three prompts of 7, 2 and 5 tokens (left-padded) answered 3 times each, rows shuffled,
    responses of 1 to 12 tokens (12 = the full width), one of a single token."""
    generator = torch.Generator().manual_seed(0)
    prompts = [torch.randint(3, 78, (length,), generator=generator).tolist() for length in (7, 2, 5)]
    lengths = torch.tensor([1, 12, 4, 7, 2, 12, 3, 9, 5])
    mask = (torch.arange(12) < lengths.unsqueeze(1)).long()
    responses = torch.randint(3, 78, (9, 12), generator=generator) * mask
    seq = Sequences.build(prompts, responses, mask, pad_id=0, n=3)
    return seq.rows(torch.randperm(9, generator=generator))


def _cases():
    seq = _ragged_groups()
    lengths = seq.response_mask.sum(-1)  # each prompt's shortest response (its longest: nothing to pack)
    distinct = [int(torch.where(seq.prompt_index == p, lengths, 99).argmin()) for p in range(3)]
    # rows of 7 + 12 tokens; of 2 + 2 + 7 and 5 + 3, which share a packed row of 19
    sharing = [(0, 12), (1, 2), (1, 7), (2, 3)]
    return {
        "groups": seq,
        "no repeats": seq.rows(torch.tensor(distinct)),
        "part of a group": seq.rows(torch.tensor([4, 0, 7])),
        "groups sharing a row": seq.rows(
            torch.tensor([int(((seq.prompt_index == p) & (lengths == n)).nonzero()) for p, n in sharing])
        ),
    }


def _loss_and_grads(model, seq, padding_free):
    log_probs, entropy, _ = response_log_probs(model, seq, 0.7, entropy="grad", padding_free=padding_free)
    m = seq.response_mask
    loss = (log_probs * m).sum() + 0.1 * (entropy * m).sum()
    return log_probs * m, entropy * m, _gradients(model, loss)


def _gradients(model, loss):
    """By `backward`, as training takes them (4.51's reentrant checkpointing refuses autograd.grad)."""
    model.zero_grad(set_to_none=True)
    loss.backward()
    return [p.grad for p in model.parameters() if p.requires_grad]


def _assert_packed_equals_padded(model, seq, rtol=0.0):
    calls = []
    hook = (
        base_model(model)
        .get_input_embeddings()
        .register_forward_hook(lambda m, i, o: calls.append(tuple(i[0].shape)))
    )
    packed = _loss_and_grads(model, seq, padding_free=True)
    hook.remove()
    # one forward, of rows as wide as the longest group (a prompt + its responses' real tokens),
    # at most one per group (short groups share one), fewer tokens than the padded rows
    P, groups = seq.prompt_width, [seq.prompt_index == p for p in seq.prompt_index.unique()]
    width = max(int(seq.attention_mask[g][0, :P].sum() + seq.response_mask[g].sum()) for g in groups)
    assert len(calls) == 1 and calls[0][1] == width and calls[0][0] <= len(groups)
    assert calls[0][0] * calls[0][1] < seq.input_ids.numel()
    padded = _loss_and_grads(model, seq, padding_free=False)
    torch.testing.assert_close(packed[0], padded[0], **{**TOLERANCE, "rtol": rtol})
    torch.testing.assert_close(packed[1], padded[1], **{**TOLERANCE, "rtol": rtol})
    _assert_gradients_close(packed[2], padded[2], rtol)


@pytest.mark.parametrize("case", ["groups", "no repeats", "part of a group", "groups sharing a row"])
def test_padding_free_log_probs_entropies_and_gradients_equal_the_padded_ones(embedded_lm, case):
    _assert_packed_equals_padded(embedded_lm, _cases()[case])


def _long_groups():
    """DAPO's group size with long responses: prompts of 9 and 4 tokens, 16 samples each, of
    1 to 512 tokens (group 0's add up to 5,347, group 1's to 4,716), rows shuffled."""
    generator = torch.Generator().manual_seed(1)
    prompts = [torch.randint(3, 78, (length,), generator=generator).tolist() for length in (9, 4)]
    lengths = torch.randint(1, 513, (32,), generator=generator)
    lengths[:2] = torch.tensor([512, 1])
    mask = (torch.arange(512) < lengths.unsqueeze(1)).long()
    responses = torch.randint(3, 78, (32, 512), generator=generator) * mask
    seq = Sequences.build(prompts, responses, mask, pad_id=0, n=16)
    return seq.rows(torch.randperm(32, generator=generator))


@pytest.mark.slow  # 45 s and 2 GB: attention over rows of 5,356 tokens
def test_16_samples_of_up_to_512_tokens_keep_the_prompt_cache_and_would_pack_exactly(
    embedded_lm, monkeypatch
):
    """The cost model (`forward_cost`, hidden size 128, in token-equivalents): the prompts once
    then the responses: 2*9 + 32*512 = 16,402 tokens and 2*9*9 + 32*512*(9+512) = 8,536,226
    attention pairs, 16,402 + 8,536,226 / 768 = 27,517; packed, a row per group as wide as the
    wider group, 9 + 5,347 = 5,356: 2*5,356 + 2*5,356^2 / 768 = 85,416. So one process keeps the
    prompt cache. (The model's rotary positions are computed, not looked up: positions past its
    128 trained ones do not matter to the equalities checked here.)"""
    seq = _long_groups()
    shapes = []
    embeddings = base_model(embedded_lm).get_input_embeddings()
    hook = embeddings.register_forward_hook(lambda m, i, o: shapes.append(tuple(i[0].shape)))
    response_log_probs(embedded_lm, seq, 1.0, padding_free=True)
    hook.remove()
    assert shapes == [(2, 9), (32, 512)]  # the prompts, then the responses on their cache
    # Packed all the same (as where the costs summed over several processes choose it), this
    # batch gives the padded log-probs, entropies and gradients, up to float32 rounding that grows
    # with the keys a softmax sums (measured: 3 of 16,384 log-probs near -8 apart by up to
    # 2.3e-5, 2.7e-6 relative).
    monkeypatch.setattr(sequences, "_packed_cost", lambda layout, hidden_size: 0.0)
    _assert_packed_equals_padded(embedded_lm, seq, rtol=1e-5)


def _one_prompt_16_samples(long: int) -> Sequences:
    """A 9-token prompt and 16 responses: `long` of 512 tokens, the others of 8."""
    generator = torch.Generator().manual_seed(0)
    lengths = torch.tensor([512] * long + [8] * (16 - long))
    mask = (torch.arange(512) < lengths.unsqueeze(1)).long()
    responses = torch.randint(3, 78, (16, 512), generator=generator) * mask
    prompt = torch.randint(3, 78, (9,), generator=generator).tolist()
    return Sequences.build([prompt], responses, mask, pad_id=0, n=16)


def _saved_for_backward_mib(model, seq) -> float:
    """What a forward keeps for the backward (activations, masks): the bulk of training memory,
    counted exactly (each storage once), where a process's peak RSS would be noisy."""
    storages = {}

    def keep(t):
        storages[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(keep, lambda t: t):
        response_log_probs(model, seq, 1.0, padding_free=True)
    return sum(storages.values()) / 2**20


@pytest.mark.slow  # 11 s: seven forwards over up to 16 x 521 tokens
def test_with_16_samples_of_512_tokens_packing_pays_while_few_run_long_and_never_costs_memory(
    embedded_lm, monkeypatch
):
    """`forward_cost` (hidden size 128): the padded layout, the prompt once then 16 responses of
    512 columns, is 9 + 16*512 = 8,201 tokens and 81 + 16*512*521 = 4,268,113 attention pairs:
    8,201 + 4,268,113 / 768 = 13,758. Packed, one row of 9 + 512k + 8(16 - k) tokens for k long
    responses: k = 1: 641 + 641^2 / 768 = 1,176; k = 4: 2,153 + 6,036 = 8,189; k = 8: 4,169 +
    22,631 = 26,800; k = 16: 8,201 + 87,573 = 95,774. So packed up to k = 4, padded from k = 8.
    Memory does not jump where the choice turns: what the chosen layout keeps for the backward
    is never more than the padded layout keeps (measured: packed 42, 137 MiB at k = 1, 4; padded
    503 MiB); packing all 16 at full length (as multi-process runs once did) would keep 694 MiB."""
    for long, packed in [(1, True), (4, True), (8, False), (16, False)]:
        seq = _one_prompt_16_samples(long)
        shapes = []
        hook = (
            base_model(embedded_lm)
            .get_input_embeddings()
            .register_forward_hook(lambda m, i, o, seen=shapes: seen.append(tuple(i[0].shape)))
        )
        chosen = _saved_for_backward_mib(embedded_lm, seq)
        hook.remove()
        width = 9 + 512 * long + 8 * (16 - long)
        assert shapes == ([(1, width)] if packed else [(1, 9), (16, 512)]), long
        if not packed:
            continue  # the chosen layout is the padded one
        with monkeypatch.context() as forced:
            forced.setattr(sequences, "_packed_cost", lambda layout, hidden_size: math.inf)
            assert chosen <= _saved_for_backward_mib(embedded_lm, seq), long
    # k = 16 (the last seq, chosen padded): packing it anyway, as multi-process runs did, keeps more
    monkeypatch.setattr(sequences, "_packed_cost", lambda layout, hidden_size: 0.0)
    assert _saved_for_backward_mib(embedded_lm, seq) > 1.3 * chosen


def test_processes_agree_on_the_layout_by_their_summed_costs(embedded_lm, monkeypatch):
    """This process's rows: 2 prompts of 2 tokens, 2 responses each, of 6 and 1 tokens (T = 6).
    `forward_cost` (hidden size 128) here: rows whole 4*8 + 4*64/768 = 32.33; the prompts once
    then the responses 2*2 + 4*6 = 28 tokens, 2*4 + 4*6*8 = 200 pairs: 28.26; packed, two rows
    of 2 + 6 + 1 = 9: 18 + 162/768 = 18.21, the cheapest here. Another process adds its own
    costs (packed, whole, shared, must run whole) in the one all-reduce, and the sums choose."""
    seq = Sequences.build(
        [[5, 6], [7, 8]],
        torch.randint(3, 78, (4, 6), generator=torch.Generator().manual_seed(0)),
        (torch.arange(6) < torch.tensor([[6], [1], [6], [1]])).long(),
        pad_id=0,
        n=2,
    )
    monkeypatch.setattr(torch.distributed, "is_initialized", lambda: True)
    monkeypatch.setattr(torch.distributed, "get_world_size", lambda group=None: 2)
    for other, calls in [
        ([0.0, 0.0, 0.0, 0.0], [(2, 9)]),  # alone: packed
        ([30.0, 32.0, 10.0, 0.0], [(2, 2), (4, 6)]),  # 48.21 packed > 38.26 shared: padded, shared
        ([60.0, 10.0, 10.0, 1.0], [(4, 8)]),  # one must run rows whole: 42.33 whole < 78.21 packed
    ]:
        reduced = []

        def all_reduce(t, other=other, reduced=reduced):
            reduced.append(t.tolist())
            t.add_(torch.tensor(other, dtype=t.dtype))

        monkeypatch.setattr(torch.distributed, "all_reduce", all_reduce)
        shapes = []
        hook = embedded_lm.model.embed_tokens.register_forward_hook(
            lambda m, i, o, seen=shapes: seen.append(tuple(i[0].shape))
        )
        response_log_probs(embedded_lm, seq, 1.0, padding_free=True)
        hook.remove()
        assert len(reduced) == 1
        torch.testing.assert_close(
            torch.tensor(reduced[0]), torch.tensor([18 + 162 / 768, 32 + 256 / 768, 28 + 200 / 768, 0.0])
        )
        assert shapes == calls, other


@pytest.mark.parametrize("attention", ["eager", "sdpa"])
def test_padding_free_under_either_attention_and_gradient_checkpointing(attention):
    model = load_causal_lm("rlrun:tiny-base")
    model.config._attn_implementation = attention
    _assert_packed_equals_padded(model, _ragged_groups())
    getattr(model, "activation_checkpointing_enable", model.gradient_checkpointing_enable)()
    _assert_packed_equals_padded(model, _ragged_groups())


def test_padding_free_through_lora():
    lora = with_lora(
        load_causal_lm("rlrun:tiny-base"),
        SimpleNamespace(r=4, alpha=8, dropout=0.0, target_modules=["q_proj", "v_proj"]),
    )
    for module in lora.modules():  # adapters start at B = 0: make them matter
        if hasattr(module, "lora_B"):
            torch.nn.init.normal_(module.lora_B["default"].weight, std=0.1)
    _assert_packed_equals_padded(lora, _ragged_groups())


def test_padding_free_critic_values_and_gradients_equal_the_padded_ones():
    critic = ValueModel.from_pretrained("rlrun:tiny-base")
    torch.manual_seed(0)
    torch.nn.init.normal_(critic.value_head.weight)  # a zero head would make every value 0
    for seq in _cases().values():
        m = seq.response_mask
        tokens = []
        hook = critic.get_input_embeddings().register_forward_hook(
            lambda m, i, o, seen=tokens: seen.append(i[0].numel())
        )
        values = {free: response_values(critic, seq, padding_free=free) * m for free in (True, False)}
        hook.remove()
        assert tokens[0] < tokens[1] == seq.input_ids.numel()  # packed, then padded
        torch.testing.assert_close(values[True], values[False], **TOLERANCE)
        grads = {free: _gradients(critic, (values[free] ** 2).sum()) for free in values}
        _assert_gradients_close(grads[True], grads[False])


def test_the_padded_layout_runs_where_packing_would_not_cost_less(embedded_lm):
    """Full-length responses: the shared prompts (2 x 7) and the responses (4 x 3) run 26
    tokens padded, with 2 x 7² + 4 x 3 x 10 = 218 attention pairs; packed, rows of 7 + 2 x 3 =
    13 tokens would run 26 too, but with 2 x 13² = 338 pairs."""
    responses = torch.randint(3, 78, (4, 3), generator=torch.Generator().manual_seed(0))
    seq = Sequences.build([[5] * 7, [6] * 7], responses, torch.ones(4, 3), pad_id=0, n=2)
    calls = []
    hook = embedded_lm.model.embed_tokens.register_forward_hook(
        lambda m, i, o: calls.append(tuple(i[0].shape))
    )
    response_log_probs(embedded_lm, seq, 0.7, padding_free=True)
    hook.remove()
    assert calls == [(2, 7), (4, 3)]  # prefill once per prompt, then the responses over the cache


def test_forward_cost_counts_a_token_as_6_hidden_sizes_of_attention_pairs():
    assert forward_cost(tokens=100, attention_pairs=6 * 128 * 10, hidden_size=128) == 110
