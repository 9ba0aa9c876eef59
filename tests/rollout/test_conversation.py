"""Multi-turn sampling by resubmission, on the real shipped tiny model and the hf engine."""

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from rlrun.embedded import resolve_model_path
from rlrun.rollout import ROLLOUT_ENGINES, SamplingParams
from rlrun.rollout.conversation import ResubmittingConversation


@pytest.fixture(scope="module")
def engine_and_tokenizer():
    path = resolve_model_path("rlrun:tiny-base")
    tokenizer = AutoTokenizer.from_pretrained(path)
    return ROLLOUT_ENGINES.get("hf")(AutoModelForCausalLM.from_pretrained(path), tokenizer), tokenizer


def test_a_turn_is_a_generate_call_over_the_contexts_and_extends_them(engine_and_tokenizer):
    engine, tok = engine_and_tokenizer
    prompts = [tok.encode("12+3="), tok.encode("7+40=")]
    conversation = ResubmittingConversation(engine, prompts, 2, max_tokens=20)
    assert conversation.num_rows == 4
    sampling = SamplingParams(max_tokens=6, seed=1)
    first = conversation.sample([0, 3], sampling)
    expected = engine.generate([prompts[0], prompts[1]], sampling)
    assert torch.equal(first.response_ids, expected.response_ids)
    for row, prompt, ids, mask in zip([0, 3], prompts, first.response_ids, first.response_mask):
        assert conversation.contexts[row] == prompt + ids[mask.bool()].tolist()
    assert conversation.contexts[1] == prompts[0] and conversation.contexts[2] == prompts[1]

    observation = tok.encode("?", add_special_tokens=False)
    conversation.append([3], [observation])
    before = list(conversation.contexts[3])
    second = conversation.sample([3], SamplingParams(max_tokens=4, seed=2))
    assert before[-1:] == observation
    assert torch.equal(
        second.response_ids, engine.generate([before], SamplingParams(max_tokens=4, seed=2)).response_ids
    )


def test_a_row_cannot_outgrow_its_budget_and_turns_are_single_samples(engine_and_tokenizer):
    engine, tok = engine_and_tokenizer
    conversation = ResubmittingConversation(engine, [tok.encode("1+1=")], 1, max_tokens=5)
    with pytest.raises(ValueError, match="n=1"):
        conversation.sample([0], SamplingParams(n=2, max_tokens=2))
    conversation.append([0], [[5, 6, 7]])
    with pytest.raises(ValueError, match="1 tokens more"):
        conversation.sample([0], SamplingParams(max_tokens=3))
    with pytest.raises(ValueError, match="2 tokens more"):
        conversation.append([0], [[5, 6, 7, 8]])
