"""The preallocated KV cache against plain forward passes, on the shipped tiny model (Qwen2) and
small random Llama and Qwen3 models (the families rlrun documents)."""

import pytest
import torch
from small_models import SMALL
from transformers import AutoModelForCausalLM, LlamaConfig, LlamaForCausalLM, Qwen3Config, Qwen3ForCausalLM

from rlrun.embedded import resolve_model_path
from rlrun.rollout.kv_cache import SlotCache

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py says why


def _tiny_base():
    return AutoModelForCausalLM.from_pretrained(resolve_model_path("rlrun:tiny-base"))


def _llama():
    torch.manual_seed(0)
    return LlamaForCausalLM(LlamaConfig(**SMALL))


def _qwen3():
    torch.manual_seed(0)
    return Qwen3ForCausalLM(Qwen3Config(**SMALL, head_dim=8))


@pytest.fixture(params=[_tiny_base, _llama, _qwen3], ids=["qwen2-tiny-base", "llama", "qwen3"])
def model(request):
    return request.param().eval()


def _full_forward(model, context: list[int]) -> torch.Tensor:
    """The logits after the last token of one unpadded context, no cache."""
    with torch.no_grad():
        return model(input_ids=torch.tensor([context])).logits[0, -1]


PROMPTS = [[5, 6, 7, 8], [9, 10], [11, 12, 13, 14, 15, 16]]


def test_prompts_ragged_turns_and_steps_give_a_plain_forwards_logits(model):
    # slots 0..4 continue prompts 0, 0, 1, 2, 1
    of_slot = [0, 0, 1, 2, 1]
    contexts = [list(PROMPTS[p]) for p in of_slot]
    cache = SlotCache(model, num_slots=5, capacity=6 + 12)
    with torch.no_grad():
        first = cache.prefill(PROMPTS, of_slot)
        for g, prompt in enumerate(PROMPTS):
            torch.testing.assert_close(first[g], _full_forward(model, prompt), atol=1e-5, rtol=1e-5)
        assert cache.held(5) == [4, 4, 2, 6, 2] and cache.tokens_run == 12  # each prompt once

        added = [[17, 18, 19], [20], [21, 22]]  # slots 0..2 gain different numbers of tokens
        logits = cache.extend(added)
        for slot, ids in enumerate(added):
            contexts[slot] += ids
            torch.testing.assert_close(
                logits[slot], _full_forward(model, contexts[slot]), atol=1e-5, rtol=1e-5
            )
        assert cache.tokens_run == 12 + 6

        # two steps over all five rows (their ends now differ); row 3 has ended: its token is
        # run but not kept
        kept = torch.tensor([True, True, True, False, True])
        cache.begin_turn(5)
        assert not cache.aligned
        for token in ([23, 24, 25, 26, 27], [28, 29, 30, 31, 32]):
            logits = cache.step(torch.tensor(token), kept)
            for slot in (0, 1, 2, 4):
                contexts[slot].append(token[slot])
                torch.testing.assert_close(
                    logits[slot], _full_forward(model, contexts[slot]), atol=1e-5, rtol=1e-5
                )
    assert cache.held(5) == [len(c) for c in contexts]


def test_rows_aligned_at_one_column_are_written_with_one_slice_and_the_buffer_is_never_reallocated(model):
    cache = SlotCache(model, num_slots=4, capacity=6 + 5)
    with torch.no_grad():
        cache.prefill(PROMPTS, [0, 1, 2, 2])
        keys = cache.keys.data_ptr()
        contexts = [list(PROMPTS[p]) for p in [0, 1, 2, 2]]
        cache.begin_turn(4)
        assert cache.aligned  # left-padded prompts end at one column
        for step in range(5):
            token = torch.tensor([20 + step] * 4)
            logits = cache.step(token, torch.tensor([True, True, True, step < 2]))
            for slot in range(3):
                contexts[slot].append(20 + step)
                torch.testing.assert_close(
                    logits[slot], _full_forward(model, contexts[slot]), atol=1e-5, rtol=1e-5
                )
    assert cache.keys.data_ptr() == keys
    assert cache.end.tolist() == [11, 11, 11, 8]  # left-padded prompts end at column 6


def test_rows_swap_slots_with_their_cache(model):
    cache = SlotCache(model, num_slots=3, capacity=6 + 4)
    with torch.no_grad():
        cache.prefill(PROMPTS, [0, 1, 2])
        cache.copy(torch.tensor([0, 2]), torch.tensor([2, 0]))  # prompts 2, 1, 0 now
        logits = cache.extend([[30], [31, 32], [33]])
    for slot, context in enumerate([PROMPTS[2] + [30], PROMPTS[1] + [31, 32], PROMPTS[0] + [33]]):
        torch.testing.assert_close(logits[slot], _full_forward(model, context), atol=1e-5, rtol=1e-5)


def test_columns_a_row_never_wrote_are_zeroed_before_a_window_reads_them(model):
    cache = SlotCache(model, num_slots=2, capacity=6 + 6)
    with torch.no_grad():
        cache.prefill([PROMPTS[0], PROMPTS[0]], [0, 1])
        for buffer in (cache.keys, cache.values):  # what an unwritten allocation may hold
            buffer[:, :, :, 4:] = float("nan")
        # slot 0 gains 5 tokens, slot 1 one: slot 1's window then reaches 5 columns it never wrote
        logits = cache.extend([[17, 18, 19, 20, 21], [22]])
    assert logits.isfinite().all()
    torch.testing.assert_close(logits[1], _full_forward(model, PROMPTS[0] + [22]), atol=1e-5, rtol=1e-5)
