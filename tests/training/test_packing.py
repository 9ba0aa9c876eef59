import torch

from rlrun.training.packing import _first_fit_decreasing, pack
from rlrun.training.sequences import Sequences


def _layout():
    """Prompt A = [5, 6, 7] answered by [11, 12] and [13]; B = [8] by [14, 15, 16] and nothing
    (an empty response); C = [9] by [17]; rows in the order A, B, A, C, B."""
    responses = torch.tensor([[11, 12, 0], [13, 0, 0], [14, 15, 16], [0, 0, 0], [17, 0, 0], [0, 0, 0]])
    seq = Sequences.build([[5, 6, 7], [8], [9]], responses, (responses != 0).long(), pad_id=0, n=2)
    return _pack(seq.rows(torch.tensor([0, 2, 1, 4, 3])))


def _pack(seq):
    return pack(
        input_ids=seq.input_ids,
        attention_mask=seq.attention_mask,
        response_attention=seq.response_attention,
        prompt_index=seq.prompt_index,
        pad_id=0,
        dtype=torch.float32,
    )


def test_each_prompt_once_then_its_responses_groups_packed_into_rows_as_wide_as_the_longest():
    layout = _layout()
    # A (6 tokens) fills a row; B (4) and C (2) share the second
    assert layout.input_ids.tolist() == [[5, 6, 7, 11, 12, 13], [8, 14, 15, 16, 9, 17]]
    # positions restart after the prompt for every response, and at 0 for every prompt
    assert layout.position_ids.tolist() == [[0, 1, 2, 3, 4, 3], [0, 1, 2, 3, 0, 1]]


def test_a_token_attends_to_its_prompt_and_its_own_response_earlier_tokens_only():
    layout = _layout()
    allowed = (layout.attention_bias == 0).squeeze(1).int()
    assert allowed[0].tolist() == [
        [1, 0, 0, 0, 0, 0],
        [1, 1, 0, 0, 0, 0],
        [1, 1, 1, 0, 0, 0],
        [1, 1, 1, 1, 0, 0],  # 11
        [1, 1, 1, 1, 1, 0],  # 12
        [1, 1, 1, 0, 0, 1],  # 13: the prompt and itself, not the other response
    ]
    assert allowed[1, 3:].tolist() == [
        [1, 1, 1, 1, 0, 0],  # 16
        [0, 0, 0, 0, 1, 0],  # 9: C's prompt sees nothing of B
        [0, 0, 0, 0, 1, 1],  # 17
    ]
    assert layout.attention_bias.unique().tolist() == [torch.finfo(torch.float32).min, 0.0]


def test_end_padding_attends_to_itself():
    responses = torch.tensor([[11, 12], [13, 0]])
    seq = Sequences.build([[5, 6], [7]], responses, (responses != 0).long(), pad_id=0)
    layout = _pack(seq)
    assert layout.input_ids.tolist() == [[5, 6, 11, 12], [7, 13, 0, 0]]
    assert (layout.attention_bias[1, 0, 2:] == 0).int().tolist() == [[0, 0, 1, 0], [0, 0, 1, 1]]


def test_outputs_are_read_from_the_state_before_each_response_token():
    layout = _layout()
    assert layout.valid.tolist() == [
        [True, True, False],
        [True, True, True],
        [True, False, False],
        [True, False, False],
        [False, False, False],
    ]
    # A's first row: the prompt's last token (column 2) predicts 11, 11 (column 3) predicts 12
    assert layout.source_row[:, 0].tolist() == [0, 1, 0, 1, 1]
    assert layout.source_column[layout.valid].tolist() == [2, 3, 0, 1, 2, 2, 4]
    assert layout.needed_columns.tolist() == [0, 1, 2, 3, 4]
    outputs = torch.arange(12.0).view(2, 6)  # output = 6·row + column
    expected = [[2, 3, 0], [6, 7, 8], [2, 0, 0], [10, 0, 0], [0, 0, 0]]
    assert layout.gather(outputs).tolist() == expected
    assert layout.gather(outputs[:, :5], layout.needed_columns).tolist() == expected
    assert layout.gather(outputs[:, [2, 4]], torch.tensor([2, 4]))[3].tolist() == [10, 0, 0]


def test_first_fit_decreasing_fills_the_first_bin_with_room():
    # 5 -> bin 0; 4 -> bin 1; 3 -> bin 2; 2 -> bin 1 (after 4); 1 -> bin 0 (after 5)
    assert _first_fit_decreasing([3, 5, 1, 4, 2], 6) == ([2, 0, 0, 1, 1], [0, 0, 5, 0, 4])
