"""Turning ragged token-id lists into padded tensors without a per-row Python loop."""

from __future__ import annotations

import torch


def left_pad(sequences: list[list[int]], pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(ids, attention_mask), both (B, max_len) long, sequences aligned to the right edge."""
    lengths = torch.tensor([len(s) for s in sequences], dtype=torch.long)
    flat = torch.tensor([t for s in sequences for t in s], dtype=torch.long)
    width = int(lengths.max()) if len(sequences) else 0
    rows = torch.repeat_interleave(torch.arange(len(sequences)), lengths)
    starts = torch.repeat_interleave(lengths.cumsum(0) - lengths, lengths)
    cols = torch.arange(len(flat)) - starts + (width - lengths)[rows]
    ids = torch.full((len(sequences), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(sequences), width), dtype=torch.long)
    ids[rows, cols] = flat
    mask[rows, cols] = 1
    return ids, mask
