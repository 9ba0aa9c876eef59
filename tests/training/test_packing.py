import torch

from rlrun.training.packing import pack
from rlrun.training.sequences import Sequences


def _layout():
    """Prompt A = [5, 6, 7] answered by [11, 12] and [13]; prompt B = [8] by [14, 15, 16];
    rows interleaved (A, B, A)."""
    responses = torch.tensor([[11, 12, 0], [13, 0, 0], [14, 15, 16], [0, 0, 0]])
    seq = Sequences.build([[5, 6, 7], [8]], responses, (responses != 0).long(), pad_id=0, n=2)
    seq = seq.rows(torch.tensor([0, 2, 1]))
    return pack(
        input_ids=seq.input_ids,
        attention_mask=seq.attention_mask,
        response_mask=seq.response_mask,
        prompt_index=seq.prompt_index,
        pad_id=0,
        dtype=torch.float32,
    )


def test_each_prompt_once_then_its_responses_back_to_back_padded_at_the_end_only():
    layout = _layout()
    assert layout.input_ids.tolist() == [[5, 6, 7, 11, 12, 13], [8, 14, 15, 16, 0, 0]]
    # positions restart after the prompt for every response; padding reads position 0
    assert layout.position_ids.tolist() == [[0, 1, 2, 3, 4, 3], [0, 1, 2, 3, 0, 0]]


def test_a_response_attends_to_its_prompt_and_its_own_earlier_tokens_only():
    allowed = (_layout().attention_bias == 0).squeeze(1).int()
    assert allowed[0].tolist() == [
        [1, 0, 0, 0, 0, 0],
        [1, 1, 0, 0, 0, 0],
        [1, 1, 1, 0, 0, 0],
        [1, 1, 1, 1, 0, 0],  # 11
        [1, 1, 1, 1, 1, 0],  # 12
        [1, 1, 1, 0, 0, 1],  # 13: the prompt and itself, not the other response
    ]
    assert allowed[1, :4].tolist() == [
        [1, 0, 0, 0, 0, 0],
        [1, 1, 0, 0, 0, 0],
        [1, 1, 1, 0, 0, 0],
        [1, 1, 1, 1, 0, 0],
    ]
    assert allowed[1, 4:].sum(-1).min() >= 1  # a padding query sees something (no all-masked softmax)
    assert _layout().attention_bias.unique().tolist() == [torch.finfo(torch.float32).min, 0.0]


def test_outputs_are_read_from_the_state_before_each_response_token():
    layout = _layout()
    assert layout.valid.tolist() == [[True, True, False], [True, True, True], [True, False, False]]
    # row 0 (A's first): the prompt's last token (column 2) predicts 11, 11 (column 3) predicts 12
    assert layout.source_row[:, 0].tolist() == [0, 1, 0]
    assert layout.source_column[layout.valid].tolist() == [2, 3, 0, 1, 2, 2]
    assert layout.first_needed_column == 0  # prompt B's only token
    outputs = torch.arange(12.0).view(2, 6)  # output = 6·row + column
    assert layout.gather(outputs).tolist() == [[2, 3, 0], [6, 7, 8], [2, 0, 0]]
