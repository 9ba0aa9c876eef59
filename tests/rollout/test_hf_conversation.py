"""The hf engine's conversations, which keep each row's KV cache between turns, against
resubmitting each row's whole context (on the real shipped tiny model)."""

import pytest
import torch

from rlrun.rollout import ROLLOUT_ENGINES, SamplingParams
from rlrun.rollout.conversation import ResubmittingConversation
from rlrun.rollout.hf_conversation import HFConversation, SplitConversation

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py says why


@pytest.fixture(scope="module")
def prompts(model_and_tokenizer):
    tok = model_and_tokenizer[1]
    return [tok.encode("12+3="), tok.encode("7+40=1"), tok.encode("5*5=")]  # 6, 7 and 5 tokens


def _engine(model_and_tokenizer, **kwargs):
    return ROLLOUT_ENGINES.get("hf")(*model_and_tokenizer, **kwargs)


def _assert_same_samples(batch, expected):
    assert torch.equal(batch.response_ids, expected.response_ids)
    assert torch.equal(batch.response_mask, expected.response_mask)
    assert batch.finish_reasons == expected.finish_reasons
    torch.testing.assert_close(batch.log_probs, expected.log_probs, atol=1e-5, rtol=1e-5)


def test_turns_sample_what_resubmitting_samples_and_run_each_context_token_once(model_and_tokenizer, prompts):
    model, _ = model_and_tokenizer
    engine = _engine(model_and_tokenizer)
    kept = engine.conversation(prompts, 2, max_tokens=40)
    resubmitted = ResubmittingConversation(engine, prompts, 2, max_tokens=40)
    assert isinstance(kept, HFConversation) and kept.num_rows == 6
    assert kept.cache.tokens_run == 6 + 7 + 5  # each prompt once for its two rows
    calls = []
    hook = model.register_forward_pre_hook(
        lambda _, args, kw: calls.append((kw["input_ids"].shape, kept.cache.tokens_run)), with_kwargs=True
    )
    try:
        for turn, appended in enumerate([None, [[30, 31, 32], [], [33], [34, 35], [], [36]], [[37]] * 6]):
            if appended:
                kept.append(range(6), appended)
                resubmitted.append(range(6), appended)
            calls.clear()
            sampling = SamplingParams(max_tokens=6, temperature=1.5, seed=turn)
            _assert_same_samples(kept.sample(range(6), sampling), resubmitted.sample(range(6), sampling))
            if appended:
                # the turn's first call runs what each row gained, and only that: the tokens
                # appended and the last token the turn before sampled (left-padded to the row
                # that gained most)
                assert calls[0][0] == (6, 1 + max(len(a) for a in appended))
                assert calls[1][1] - calls[0][1] == sum(len(a) for a in appended) + 6
    finally:
        hook.remove()
    assert kept.contexts == resubmitted.contexts
    # every token of a row's context ran once (a prompt once for its rows), but the last sampled
    held = dict(zip(kept.row_of_slot, kept.cache.held(6)))
    assert all(held[r] == len(c) - 1 for r, c in enumerate(kept.contexts))
    assert kept.cache.tokens_run == 6 + 7 + 5 + sum(held[r] - len(prompts[r // 2]) for r in range(6))


def test_a_rows_samples_do_not_depend_on_which_other_rows_take_the_turn(model_and_tokenizer, prompts):
    engine = _engine(model_and_tokenizer)
    sampling = SamplingParams(max_tokens=8, temperature=1.5, seed=7)
    conversation = engine.conversation(prompts, 2, max_tokens=20)
    alone = conversation.sample([4], sampling)
    assert conversation.row_of_slot == [4, 1, 2, 3, 0, 5]  # row 4 swapped into the first slot, no more
    some = engine.conversation(prompts, 2, max_tokens=20).sample([5, 4, 1], sampling)
    everyone = engine.conversation(prompts, 2, max_tokens=20).sample(range(6), sampling)
    _assert_same_samples(alone, _rows(some, [1]))
    _assert_same_samples(some, _rows(everyone, [5, 4, 1]))
    # the noise is drawn for every row of the conversation: a turn over some rows samples what
    # one generate call over all the rows' contexts samples for them
    _assert_same_samples(
        everyone, engine.generate(prompts, SamplingParams(n=2, max_tokens=8, temperature=1.5, seed=7))
    )


def _rows(batch, rows):
    """The batch's rows `rows`, with their padding cut to the longest of them."""
    width = int(batch.response_lengths[rows].max())
    return type(batch)(
        batch.response_ids[rows, :width],
        batch.response_mask[rows, :width],
        batch.log_probs[rows, :width],
        [batch.finish_reasons[r] for r in rows],
        1,
    )


def test_more_rows_than_one_decode_batch_holds_split_into_parts_like_generates_chunks(
    model_and_tokenizer, prompts
):
    engine = _engine(model_and_tokenizer, max_batch_samples=4)
    conversation = engine.conversation(prompts, 3, max_tokens=20)
    assert isinstance(conversation, SplitConversation) and [p.num_rows for p in conversation.parts] == [
        4,
        4,
        1,
    ]
    sampling = SamplingParams(max_tokens=6, temperature=1.5, seed=3)
    _assert_same_samples(
        conversation.sample(range(9), sampling),
        engine.generate(prompts, SamplingParams(n=3, max_tokens=6, temperature=1.5, seed=3)),
    )
    rows, added = [8, 0, 5], [[40], [41, 42], [43]]
    conversation.append(rows, added)
    before = [list(_context(conversation, r)) for r in rows]
    batch = conversation.sample(rows, SamplingParams(max_tokens=4, seed=4))
    for r, context, ids, mask in zip(rows, before, batch.response_ids, batch.response_mask):
        assert context[-len(added[rows.index(r)]) :] == added[rows.index(r)]
        assert _context(conversation, r) == context + ids[mask.bool()].tolist()


def _context(conversation, row):
    part, local = conversation.part_of_row[row]
    return conversation.parts[part].contexts[local]


def test_turns_are_single_samples_of_distinct_rows_within_their_budget(model_and_tokenizer, prompts):
    conversation = _engine(model_and_tokenizer).conversation(prompts[:1], 2, max_tokens=5)
    with pytest.raises(ValueError, match="n=1"):
        conversation.sample([0], SamplingParams(n=2, max_tokens=2))
    with pytest.raises(ValueError, match="distinct rows"):
        conversation.sample([0, 0], SamplingParams(max_tokens=2))
    with pytest.raises(ValueError, match="distinct rows"):
        conversation.sample([2], SamplingParams(max_tokens=2))
    conversation.append([0], [[5, 6, 7]])
    with pytest.raises(ValueError, match="1 tokens more"):
        conversation.sample([0], SamplingParams(max_tokens=3))
    with pytest.raises(ValueError, match="2 tokens more"):
        conversation.append([1], [[5, 6, 7, 8, 9, 10, 11]])
