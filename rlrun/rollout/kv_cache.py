"""The hf engine's KV cache: every row's keys and values in a buffer preallocated for its whole
budget and written in place, so that a decode step copies only the new token's keys and values.

transformers' ``DynamicCache`` concatenates each layer's whole cache with the new token at every
step, which makes a response's cost grow with its length squared; here the model's attention
reads a view of the filled columns instead. The rows live in *slots*: the rows of a forward call
are always the first slots, so their keys and values are a view, never a gather; rows change
slots by swapping (a copy of the rows that move, not of the batch).

A row's context fills its slot's columns ``start .. end - 1``; a token's position id is its
column minus ``start``. The prompts are left-padded to the longest (``start`` is the padding), so
the rows of a first turn end at one column and each decode step writes one column for all of
them (a slice, not a scatter); a row that has ended writes that column too, past its end, where
no query of its own looks. Rows whose ends differ (after turns of different lengths) write each
at its own end, and padding of a ragged forward writes to the last column, which no attention
window reaches. Columns that a window reads but a row never wrote are masked, and zeroed first
(a masked column weighs 0, and 0 x NaN is NaN). The model gets a 4D additive attention mask (a
row sees its own columns, causally), which transformers passes to attention unchanged
(``rlrun.shared_prefix.takes_4d_mask`` says which models do).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from transformers import Cache

from rlrun.shared_prefix import cache_keyword


@dataclass
class _Write:
    """Where a forward call's keys and values go: ``columns`` (k, q) of slots ``slots`` (k, q);
    or, with ``column`` set, that column of the first k slots; or, with ``expand`` set, columns
    0 .. q-1 of slot i from row ``expand[i]`` of the call (the prompts), attention then reading
    the call's own keys."""

    k: int
    window: int
    slots: torch.Tensor | None = None
    columns: torch.Tensor | None = None
    column: int | None = None
    expand: torch.Tensor | None = None


class SlotCache(Cache):
    """Keys and values of ``num_slots`` rows, each with room for ``capacity`` tokens, prompt
    padding included. The buffers are allocated at the first write, from the keys' shape and
    dtype; their pages are touched as columns are written."""

    def __init__(self, model: torch.nn.Module, *, num_slots: int, capacity: int):
        # transformers 5 reads the layers' kinds off `layers` (empty: all full attention);
        # none of its cache classes are used, so Cache.__init__ (whose arguments differ from
        # 4.51 to 5.x) is not called.
        self.layers: list = []
        self.model = model
        self.num_layers = model.config.num_hidden_layers
        self.dump = capacity  # the column padding writes to, past every window
        self.start = torch.zeros(num_slots, dtype=torch.long)  # per slot, on the CPU
        self.end = torch.zeros(num_slots, dtype=torch.long)
        self.finite = torch.zeros(num_slots, dtype=torch.long)  # columns [0, finite) hold numbers
        self.keys: torch.Tensor | None = None  # (layers, slots, heads, capacity + 1, head_dim)
        self.values: torch.Tensor | None = None
        self.per_layer: list[tuple[torch.Tensor, torch.Tensor]] = []  # views of both, split once
        self.device, self.mask_dtype = model.device, model.dtype
        self._write: _Write | None = None
        self.tokens_run = 0  # tokens (not padding) run through the model into this cache

    def prefill(self, prompt_ids: Sequence[Sequence[int]], prompt_of_slot: Sequence[int]) -> torch.Tensor:
        """Run each prompt once and give slot i the keys and values of prompt
        ``prompt_of_slot[i]``; returns the logits after each prompt's last token (G, V)."""
        width = max(len(p) for p in prompt_ids)
        ids = torch.tensor([[0] * (width - len(p)) + list(p) for p in prompt_ids], dtype=torch.long)
        start = torch.tensor([width - len(p) for p in prompt_ids])
        column = torch.arange(width)
        allowed = (column >= start[:, None, None]) & (column <= column[:, None])  # (G, query, key)
        rows = torch.tensor(list(prompt_of_slot), dtype=torch.long)
        self._write = _Write(k=len(rows), window=width, expand=rows.to(self.device))
        logits = self._run(ids, (column - start[:, None]).clamp(min=0), allowed)
        self.start[: len(rows)], self.end[: len(rows)], self.finite[: len(rows)] = start[rows], width, width
        self.tokens_run += sum(len(p) for p in prompt_ids)
        return logits

    def extend(self, token_ids: Sequence[Sequence[int]]) -> torch.Tensor:
        """Run tokens that slots ``0 .. k-1`` gained (row i's in ``token_ids[i]``, ragged) and
        return the logits after each row's last one (k, V)."""
        counts = torch.tensor([len(t) for t in token_ids], dtype=torch.long)
        k, q = len(counts), int(counts.max())
        ids = torch.tensor([[0] * (q - len(t)) + list(t) for t in token_ids], dtype=torch.long)
        end = self.end[:k]
        offset = torch.arange(q) - (q - counts)[:, None]  # a token's place among its row's new ones
        column = end[:, None] + offset
        window = int((end + counts).max())
        self._ensure_finite(k, window)
        self._write = _Write(
            k=k,
            window=window,
            slots=torch.arange(k).unsqueeze(-1).expand(k, q).to(self.device),
            columns=column.where(offset >= 0, self.dump).to(self.device),
        )
        # padding sees its row's context so far; with none it sees nothing (its output is unused)
        sees = column.where(offset >= 0, end[:, None] - 1)
        keys = torch.arange(window)
        allowed = (keys >= self.start[:k, None, None]) & (keys <= sees[:, :, None])
        logits = self._run(ids, (column - self.start[:k, None]).clamp(min=0), allowed)
        self.end[:k] += counts
        self.tokens_run += int(counts.sum())
        return logits

    def step(self, token: torch.Tensor, kept: torch.Tensor) -> torch.Tensor:
        """Run one token (k,) for each of slots ``0 .. k-1`` and return the next logits (k, V).
        Where ``kept`` is false the token is run but not kept (a row that has ended)."""
        k = len(token)
        kept = kept.cpu()
        end = self.end[:k]
        going = end[kept]
        top = int(going.max()) if len(going) else int(end.max())
        # one column for every row: the rows going on end there, and it is past the others' ends
        aligned = bool((going == top).all()) and int(end.max()) <= top
        self._ensure_finite(k, top if aligned else top + 1)
        self._write = (
            _Write(k=k, window=top + 1, column=top)
            if aligned
            else _Write(
                k=k,
                window=top + 1,
                slots=torch.arange(k).unsqueeze(-1).to(self.device),
                columns=end.where(kept, self.dump).unsqueeze(-1).to(self.device),
            )
        )
        keys = torch.arange(top + 1)
        allowed = (keys >= self.start[:k, None]) & (keys < (end + kept)[:, None])
        logits = self._run(token.unsqueeze(-1), (end - self.start[:k]).unsqueeze(-1), allowed.unsqueeze(1))
        self.finite[:k] = self.finite[:k].clamp(min=top + 1)
        self.end[:k] += kept.long()
        self.tokens_run += int(kept.sum())
        return logits

    def held(self, k: int) -> list[int]:
        """How many tokens each of slots ``0 .. k-1`` holds."""
        return (self.end[:k] - self.start[:k]).tolist()

    def update(
        self, key_states: torch.Tensor, value_states: torch.Tensor, layer_idx: int, *args: Any, **kwargs: Any
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Called by each attention layer: write the new keys and values (k, heads, q, head_dim)
        in place and return what the layer attends to."""
        write = self._write
        if write is None:
            raise RuntimeError("SlotCache.update outside a SlotCache forward call")
        if self.keys is None:
            self._allocate(key_states, value_states)
        keys, values = self.per_layer[layer_idx]
        if write.expand is not None:
            q = key_states.shape[2]
            keys[: write.k, :, :q] = key_states.index_select(0, write.expand)
            values[: write.k, :, :q] = value_states.index_select(0, write.expand)
            return key_states, value_states
        if write.column is not None:
            keys[: write.k, :, write.column] = key_states[:, :, 0]
            values[: write.k, :, write.column] = value_states[:, :, 0]
        else:
            keys[write.slots, :, write.columns] = key_states.transpose(1, 2)
            values[write.slots, :, write.columns] = value_states.transpose(1, 2)
        return keys[: write.k, :, : write.window], values[: write.k, :, : write.window]

    def get_seq_length(self, layer_idx: int = 0) -> int:
        return self._write.window if self._write is not None else 0

    def copy(self, target: torch.Tensor, source: torch.Tensor) -> None:
        """Slots ``target`` take what slots ``source`` hold, all read before any is written (a
        permutation of slots)."""
        if not len(source):
            return
        held = int(self.finite[source].max())
        if self.keys is not None and held:
            to, of = target.to(self.device), source.to(self.device)
            for layer in (buffer for pair in self.per_layer for buffer in pair):
                view = layer[:, :, :held]
                view.index_copy_(0, to, view.index_select(0, of))
        for state in (self.start, self.end, self.finite):
            state[target] = state[source].clone()

    def _run(self, ids: torch.Tensor, positions: torch.Tensor, allowed: torch.Tensor) -> torch.Tensor:
        """The model over ``ids`` (k, q) with this cache; ``allowed`` (k, q, keys) is the mask."""
        mask = torch.zeros(allowed.shape, dtype=self.mask_dtype).masked_fill_(
            ~allowed, torch.finfo(self.mask_dtype).min
        )
        try:
            out = self.model(
                input_ids=ids.to(self.device),
                attention_mask=mask.unsqueeze(1).to(self.device),
                position_ids=positions.to(self.device),
                use_cache=True,
                logits_to_keep=1,
                **{cache_keyword(self.model): self},
            )
        finally:
            self._write = None
        return out.logits[:, -1]

    def _allocate(self, key_states: torch.Tensor, value_states: torch.Tensor) -> None:
        shape = (self.num_layers, len(self.end))
        width = self.dump + 1
        self.keys = key_states.new_empty(*shape, key_states.shape[1], width, key_states.shape[-1])
        self.values = value_states.new_empty(*shape, value_states.shape[1], width, value_states.shape[-1])
        self.per_layer = list(zip(self.keys.unbind(0), self.values.unbind(0)))

    def _ensure_finite(self, k: int, upto: int) -> None:
        """Zero the columns below ``upto`` that slots ``0 .. k-1`` have not written."""
        if self.keys is None:
            return
        for slot in (self.finite[:k] < upto).nonzero().squeeze(-1).tolist():
            low = int(self.finite[slot])
            self.keys[:, slot, :, low:upto] = 0
            self.values[:, slot, :, low:upto] = 0
            self.finite[slot] = upto
