import torch

from rlrun.training.sequences import Sequences, forward_batched, pad_response, response_log_probs


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
