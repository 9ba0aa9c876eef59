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
(``rlrun.shared_prefix.takes_4d_mask`` says which models do); a decode step's mask is a view of a
per-slot mask kept up to date as columns fill, so a step builds none. A step's attention is
``rlrun.rollout.decode_attention``'s where it applies, and a step runs through the layers'
operations directly (``rlrun.rollout.decode_layers``) where the model's classes allow.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from transformers import Cache

from rlrun.rollout.decode_attention import single_query_attention
from rlrun.rollout.decode_layers import decode_layers
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
    dtype; their pages are touched as columns are written.

    A forward call is ``prefill`` (the prompts), ``extend`` (tokens the first k slots gained,
    ragged), or, after ``begin_turn(k)``, ``step`` (one token for each of the first k slots)."""

    def __init__(self, model: torch.nn.Module, *, num_slots: int, capacity: int):
        # transformers 5 reads the layers' kinds off `layers` (empty: all full attention);
        # none of its cache classes are used, so Cache.__init__ (whose arguments differ from
        # 4.51 to 5.x) is not called.
        self.layers: list = []
        self.model = model
        self.num_layers = model.config.num_hidden_layers
        self.device, self.mask_dtype = model.device, model.dtype
        self.lowest = torch.finfo(model.dtype).min
        self.dump = capacity  # the column padding writes to, past every window
        self.start = torch.zeros(num_slots, dtype=torch.long, device=self.device)  # per slot
        self.end = torch.zeros(num_slots, dtype=torch.long, device=self.device)
        self.finite = torch.zeros(num_slots, dtype=torch.long)  # columns [0, finite) hold numbers (CPU)
        # 0 where a slot's own context is, the lowest number elsewhere: a step's attention mask
        self.bias = torch.full(
            (num_slots, capacity + 1), self.lowest, dtype=self.mask_dtype, device=self.device
        )
        self.keys: torch.Tensor | None = None  # (layers, slots, heads, capacity + 1, head_dim)
        self.values: torch.Tensor | None = None
        self.per_layer: list[tuple[torch.Tensor, torch.Tensor]] = []  # views of both, split once
        self._write: _Write | None = None
        self._top = 0  # during a turn: the column a step writes when the rows are aligned
        self.aligned = False  # during a turn: whether its steps write one column for all rows
        self._run = torch.zeros((), dtype=torch.long, device=self.device)
        # the model's layers for decode steps where they can be called directly (else its forward)
        self.decode_layers = decode_layers(model)

    @property
    def tokens_run(self) -> int:
        """Tokens (not padding) run through the model into this cache."""
        return int(self._run)

    def held(self, k: int) -> list[int]:
        """How many tokens each of slots ``0 .. k-1`` holds."""
        return (self.end[:k] - self.start[:k]).tolist()

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
        logits = self._forward(ids, (column - start[:, None]).clamp(min=0), allowed)
        k = len(rows)
        self.start[:k], self.end[:k], self.finite[:k] = start[rows].to(self.device), width, width
        self.bias[:k, :width] = self._additive(column >= self.start[:k, None].cpu())
        self._run += sum(len(p) for p in prompt_ids)
        return logits

    def extend(self, token_ids: Sequence[Sequence[int]]) -> torch.Tensor:
        """Run tokens that slots ``0 .. k-1`` gained (row i's in ``token_ids[i]``, ragged, at
        least one each) and return the logits after each row's last one (k, V)."""
        counts = torch.tensor([len(t) for t in token_ids], dtype=torch.long)
        k, q = len(counts), int(counts.max())
        ids = torch.tensor([[0] * (q - len(t)) + list(t) for t in token_ids], dtype=torch.long)
        start, end = self.start[:k].cpu(), self.end[:k].cpu()
        offset = torch.arange(q) - (q - counts)[:, None]  # a token's place among its row's new ones
        column = end[:, None] + offset
        real = offset >= 0
        window = int((end + counts).max())
        self._ensure_finite(k, window)
        slots = torch.arange(k).unsqueeze(-1).expand(k, q)
        self._write = _Write(
            k=k,
            window=window,
            slots=slots.to(self.device),
            columns=column.where(real, self.dump).to(self.device),
        )
        # padding sees its row's context so far; with none it sees nothing (its output is unused)
        sees = column.where(real, end[:, None] - 1)
        keys = torch.arange(window)
        allowed = (keys >= start[:, None, None]) & (keys <= sees[:, :, None])
        logits = self._forward(ids, (column - start[:, None]).clamp(min=0), allowed)
        self.bias[slots[real].to(self.device), column[real].to(self.device)] = 0
        self.end[:k] += counts.to(self.device)
        self._run += int(counts.sum())
        return logits

    def begin_turn(self, k: int) -> None:
        """Decode steps for slots ``0 .. k-1`` follow: they advance together, one column a step,
        from the furthest end among them (a slice write when all end there)."""
        end = self.end[:k].cpu()
        self._top = int(end.max())
        self.aligned = bool((end == self._top).all())
        self._ensure_finite(k, self._top)

    def step(self, token: torch.Tensor, kept: torch.Tensor) -> torch.Tensor:
        """Run one token (k,) for each of slots ``0 .. k-1`` and return the next logits (k, V).
        Where ``kept`` is false the token is run but not kept (a row that has ended)."""
        k, top = len(token), self._top
        end = self.end[:k]
        if self.aligned:  # the rows going on all end at `top`; the others end before it
            self._write = _Write(k=k, window=top + 1, column=top)
            self.bias[:k, top].masked_fill_(kept, 0)
        else:
            if self.keys is not None:  # the rows that end before `top` do not write it
                self.keys[:, :k, :, top] = 0
                self.values[:, :k, :, top] = 0
            self._write = _Write(
                k=k,
                window=top + 1,
                slots=torch.arange(k, device=self.device).unsqueeze(-1),
                columns=end.where(kept, self.dump).unsqueeze(-1),
            )
            self.bias[:k].scatter_(1, end.unsqueeze(-1), self._additive(kept).unsqueeze(-1))
        mask = self.bias[:k, : top + 1].unsqueeze(1).unsqueeze(1)
        ids, positions = token.unsqueeze(-1), (end - self.start[:k]).unsqueeze(-1)
        if self.decode_layers is not None and self.decode_layers.usable():
            try:
                logits = self.decode_layers.logits(ids, positions, mask, cache=self)
            finally:
                self._write = None
        else:
            with single_query_attention(self.model):
                logits = self._call_model(ids, positions, mask)
        self.finite[:k] = self.finite[:k].clamp(min=top + 1)
        end += kept
        self._run += kept.sum()
        self._top = top + 1
        return logits

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
        to, of = target.to(self.device), source.to(self.device)
        if self.keys is not None and held:
            for layer in (buffer for pair in self.per_layer for buffer in pair):
                view = layer[:, :, :held]
                view.index_copy_(0, to, view.index_select(0, of))
        for state in (self.start, self.end, self.bias):
            state[to] = state[of]
        self.finite[target] = self.finite[source]

    def _forward(self, ids: torch.Tensor, positions: torch.Tensor, allowed: torch.Tensor) -> torch.Tensor:
        """The model over ``ids`` (k, q) with this cache; ``allowed`` (k, q, keys) is the mask."""
        mask = self._additive(allowed).unsqueeze(1).to(self.device)
        return self._call_model(ids.to(self.device), positions.to(self.device), mask)

    def _call_model(self, ids: torch.Tensor, positions: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        try:
            out = self.model(
                input_ids=ids,
                attention_mask=mask,
                position_ids=positions,
                use_cache=True,
                logits_to_keep=1,
                **{cache_keyword(self.model): self},
            )
        finally:
            self._write = None
        return out.logits[:, -1]

    def _additive(self, allowed: torch.Tensor) -> torch.Tensor:
        """0 where ``allowed``, the lowest number elsewhere (what attention adds to its scores)."""
        zero = torch.zeros((), dtype=self.mask_dtype, device=allowed.device)
        return zero.where(allowed, self.lowest)

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
