"""Padding-free layout of a batch of `Sequences`: each distinct prompt once, its responses after it.

A group (a prompt and the responses to it) is laid out without padding inside:

    [prompt][response 1][response 2]...[response n]

and groups are packed one after another into rows as wide as the longest group (rows
end-padded to that width). A 4D attention mask lets a response's tokens see their prompt
and, causally, their own response's earlier tokens only (and a prompt's tokens their
prompt's); position ids restart at the prompt's length for every response. Every response
token therefore sees exactly the keys, at exactly the positions, it sees in the padded layout
(prompt left-padded to P, response right-padded to T), so the forward pass is the same
function of the real tokens, without the padded tokens' compute. The logits at the prompt's
last token predict each response's first token.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass
class PackedLayout:
    """B packed rows of width S, and where each of the N original rows' outputs lie in them."""

    input_ids: torch.Tensor  # (B, S) long
    position_ids: torch.Tensor  # (B, S) long
    owner: torch.Tensor  # (B, S) long: the group of each column; -1 padding
    segment: torch.Tensor  # (B, S) long: 0 a prompt token, r + 1 a token of row r's response, -1 padding
    dtype: torch.dtype  # the attention bias's
    source_row: torch.Tensor  # (N, T) long: the packed row holding the state before response token t
    source_column: torch.Tensor  # (N, T) long: its column (clamped into range where not valid)
    valid: torch.Tensor  # (N, T) bool: t is a response token of the row

    @property
    def attention_bias(self) -> torch.Tensor:
        """(B, 1, S, S) additive mask: 0 where a query may attend, the dtype's min elsewhere.
        A token sees its group's prompt and, causally, its own segment; padding sees at least
        itself (no all-masked softmax). Built on demand: B·S² numbers."""
        column = torch.arange(self.input_ids.shape[1], device=self.input_ids.device)
        causal = column.unsqueeze(1) >= column.unsqueeze(0)  # [query, key]
        same_group = self.owner.unsqueeze(2) == self.owner.unsqueeze(1)
        same_segment = self.segment.unsqueeze(2) == self.segment.unsqueeze(1)
        allowed = causal & same_group & (same_segment | (self.segment == 0).unsqueeze(1))
        bias = torch.zeros(allowed.shape, dtype=self.dtype, device=allowed.device).unsqueeze(1)
        return bias.masked_fill_(~allowed.unsqueeze(1), torch.finfo(self.dtype).min)

    @property
    def needed_columns(self) -> torch.Tensor:
        """The columns any output is read from, ascending (the others need no logits)."""
        return self.source_column[self.valid].unique()

    def gather(self, outputs: torch.Tensor, columns: torch.Tensor | None = None) -> torch.Tensor:
        """Per-position outputs of the packed rows (B, S, ...), or of their `columns` only, to
        the (N, T, ...) layout of the original rows; zeros where no response token is."""
        column = self.source_column
        if columns is not None:  # where each column sits among the kept ones
            column = torch.searchsorted(columns, column).clamp(max=len(columns) - 1)
        out = outputs[self.source_row, column]
        valid = self.valid.view(*self.valid.shape, *([1] * (out.ndim - 2)))
        return torch.where(valid, out, torch.zeros((), dtype=out.dtype, device=out.device))


def pack(
    *,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    response_attention: torch.Tensor,
    prompt_index: torch.Tensor,
    pad_id: int,
    dtype: torch.dtype,
) -> PackedLayout:
    """The packed layout of N rows `prompt (left-padded to P) + response (right-padded to T)`
    (`Sequences`' tensors); rows with equal `prompt_index` form one group. Responses must be
    contiguous from their first column (`response_attention`: as sampled, up to and including
    EOS, or an episode's every token); `dtype` is the
    attention bias's (the model's activations').

    Groups are laid out one after another in packed rows as wide as the longest group, filled
    longest group first (first-fit decreasing), so a micro-batch holding groups of different
    sizes is not padded to its largest; a query sees only its own group."""
    device = input_ids.device
    n_rows, width = input_ids.shape
    T = response_attention.shape[1]
    P = width - T
    groups, group = torch.unique(prompt_index, return_inverse=True)
    G = len(groups)
    first_row = torch.full((G,), n_rows, device=device).scatter_reduce_(
        0, group, torch.arange(n_rows, device=device), "amin"
    )
    prompt_len = attention_mask[first_row, :P].sum(-1)  # (G,)
    response_len = response_attention.sum(-1).long()  # (N,)
    group_len = prompt_len.scatter_add(0, group, response_len)  # (G,)
    S = int(group_len.max())
    row_of_group, group_start = _first_fit_decreasing(group_len.tolist(), S)
    row_of_group = torch.tensor(row_of_group, device=device)
    group_start = torch.tensor(group_start, device=device)
    B = int(row_of_group.max()) + 1

    # Where each response starts: after its group's prompt and the responses of the group's
    # earlier rows (rows keep their order).
    earlier_same_group = (group.unsqueeze(0) == group.unsqueeze(1)).tril(-1)  # [r, r'] r' < r
    start = (group_start + prompt_len)[group] + (earlier_same_group.long() * response_len.unsqueeze(0)).sum(
        -1
    )

    packed_ids = torch.full((B, S), pad_id, dtype=input_ids.dtype, device=device)
    positions = torch.zeros((B, S), dtype=torch.long, device=device)
    owner = torch.full((B, S), -1, dtype=torch.long, device=device)
    segment = torch.full((B, S), -1, dtype=torch.long, device=device)

    j = torch.arange(P, device=device)
    in_prompt = j.unsqueeze(0) < prompt_len.unsqueeze(1)  # (G, P): the prompts' tokens, left padding skipped
    g, k = in_prompt.nonzero(as_tuple=True)
    target = (row_of_group[g], group_start[g] + k)
    packed_ids[target] = input_ids[first_row[g], P - prompt_len[g] + k]
    positions[target] = k
    owner[target] = g
    segment[target] = 0

    t = torch.arange(T, device=device)
    valid = t.unsqueeze(0) < response_len.unsqueeze(1)  # (N, T)
    rows, steps = valid.nonzero(as_tuple=True)
    target = (row_of_group[group[rows]], start[rows] + steps)
    packed_ids[target] = input_ids[rows, P + steps]
    positions[target] = prompt_len[group[rows]] + steps
    owner[target] = group[rows]
    segment[target] = rows + 1

    # The state before response token t: the prompt's last token for t = 0, else token t - 1.
    prompt_end = (group_start + prompt_len - 1)[group]
    source_column = torch.where(t == 0, prompt_end.unsqueeze(1), start.unsqueeze(1) + t - 1)
    return PackedLayout(
        input_ids=packed_ids,
        position_ids=positions,
        owner=owner,
        segment=segment,
        dtype=dtype,
        source_row=row_of_group[group].unsqueeze(1).expand(n_rows, T),
        source_column=source_column.clamp(max=S - 1),
        valid=valid,
    )


def _first_fit_decreasing(lengths: list[int], capacity: int) -> tuple[list[int], list[int]]:
    """Items of `lengths` into bins of `capacity`, longest first, each into the first bin it
    fits: (bin of each item, its start in the bin)."""
    bin_of, start_of, used = [0] * len(lengths), [0] * len(lengths), []
    for item in sorted(range(len(lengths)), key=lambda i: -lengths[i]):
        b = next((b for b, u in enumerate(used) if u + lengths[item] <= capacity), len(used))
        if b == len(used):
            used.append(0)
        bin_of[item], start_of[item] = b, used[b]
        used[b] += lengths[item]
    return bin_of, start_of
