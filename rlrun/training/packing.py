"""Padding-free layout of a batch of `Sequences`: one packed row per distinct prompt.

A row holds the prompt once, then each of its responses back to back, with no padding inside:

    [prompt][response 1][response 2]...[response n]      (rows end-padded to the longest)

A 4D attention mask lets a response's tokens see the prompt and, causally, their own
response's earlier tokens only; position ids restart at the prompt's length for every
response. Every response token therefore sees exactly the keys, at exactly the positions, it
sees in the padded layout (prompt left-padded to P, response right-padded to T), so the
forward pass is the same function of the real tokens, without the padded tokens' compute.
The logits at the prompt's last token predict each response's first token.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass
class PackedLayout:
    """G packed rows of width S, and where each of the N original rows' outputs lie in them."""

    input_ids: torch.Tensor  # (G, S) long
    attention_bias: torch.Tensor  # (G, 1, S, S) additive: 0 where a query may attend, dtype's min elsewhere
    position_ids: torch.Tensor  # (G, S) long
    source_row: torch.Tensor  # (N, T) long: the packed row holding the state before response token t
    source_column: torch.Tensor  # (N, T) long: its column (clamped into range where not valid)
    valid: torch.Tensor  # (N, T) bool: t is a response token of the row

    @property
    def first_needed_column(self) -> int:
        """The leftmost column any output is read from (earlier columns need no logits)."""
        return int(self.source_column[self.valid].min()) if self.valid.any() else 0

    def gather(self, outputs: torch.Tensor) -> torch.Tensor:
        """Per-position outputs of the packed rows (G, S', ...), S' the last S' columns, to the
        (N, T, ...) layout of the original rows; zeros where no response token is."""
        offset = self.input_ids.shape[1] - outputs.shape[1]
        column = (self.source_column - offset).clamp(min=0)
        out = outputs[self.source_row, column]
        valid = self.valid.view(*self.valid.shape, *([1] * (out.ndim - 2)))
        return torch.where(valid, out, torch.zeros((), dtype=out.dtype, device=out.device))


def pack(
    *,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    response_mask: torch.Tensor,
    prompt_index: torch.Tensor,
    pad_id: int,
    dtype: torch.dtype,
) -> PackedLayout:
    """The packed layout of N rows `prompt (left-padded to P) + response (right-padded to T)`
    (`Sequences`' tensors); rows with equal `prompt_index` share one packed row. Responses
    must be contiguous from their first column (as sampled: up to and including EOS);
    `dtype` is the attention bias's (the model's activations')."""
    device = input_ids.device
    n_rows, width = input_ids.shape
    T = response_mask.shape[1]
    P = width - T
    groups, group = torch.unique(prompt_index, return_inverse=True)
    G = len(groups)
    first_row = torch.full((G,), n_rows, device=device).scatter_reduce_(
        0, group, torch.arange(n_rows, device=device), "amin"
    )
    prompt_len = attention_mask[first_row, :P].sum(-1)  # (G,)
    response_len = response_mask.sum(-1).long()  # (N,)

    # Where each response starts in its packed row: after the prompt and the responses of the
    # earlier rows of its group (rows keep their order).
    earlier_same_group = (group.unsqueeze(0) == group.unsqueeze(1)).tril(-1)  # [r, r'] r' < r
    start = prompt_len[group] + (earlier_same_group.long() * response_len.unsqueeze(0)).sum(-1)
    lengths = prompt_len.scatter_add(0, group, response_len)  # (G,)
    S = int(lengths.max())

    packed_ids = torch.full((G, S), pad_id, dtype=input_ids.dtype, device=device)
    positions = torch.zeros((G, S), dtype=torch.long, device=device)
    segment = torch.full((G, S), -1, dtype=torch.long, device=device)  # -1 padding, 0 prompt, r+1 row r

    column = torch.arange(S, device=device)
    in_prompt = column.unsqueeze(0) < prompt_len.unsqueeze(1)  # (G, S)
    prompt_source = (P - prompt_len).unsqueeze(1) + column  # left padding skipped
    prompt_ids = input_ids[first_row].gather(1, prompt_source.clamp(max=width - 1))
    packed_ids = torch.where(in_prompt, prompt_ids, packed_ids)
    positions = torch.where(in_prompt, column.expand(G, S), positions)
    segment = torch.where(in_prompt, torch.zeros_like(segment), segment)

    t = torch.arange(T, device=device)
    valid = t.unsqueeze(0) < response_len.unsqueeze(1)  # (N, T)
    rows, steps = valid.nonzero(as_tuple=True)
    target = (group[rows], start[rows] + steps)
    packed_ids[target] = input_ids[rows, P + steps]
    positions[target] = prompt_len[group[rows]] + steps
    segment[target] = rows + 1

    causal = column.unsqueeze(1) >= column.unsqueeze(0)  # [query, key]
    same = segment.unsqueeze(2) == segment.unsqueeze(1)
    allowed = causal & (same | (segment == 0).unsqueeze(1))  # padding queries see at least themselves
    bias = torch.zeros((G, 1, S, S), dtype=dtype, device=device)
    bias.masked_fill_(~allowed.unsqueeze(1), torch.finfo(dtype).min)

    # The state before response token t: the prompt's last token for t = 0, else token t - 1.
    source_column = torch.where(t == 0, (prompt_len[group] - 1).unsqueeze(1), start.unsqueeze(1) + t - 1)
    return PackedLayout(
        input_ids=packed_ids,
        attention_bias=bias,
        position_ids=positions,
        source_row=group.unsqueeze(1).expand(n_rows, T),
        source_column=source_column.clamp(max=S - 1),
        valid=valid,
    )
