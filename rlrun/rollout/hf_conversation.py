"""The hf engine's multi-turn sampling: each row keeps its KV cache between turns, so a turn runs
only the tokens its rows gained since their last forward pass (what was appended, and the last
token the previous turn sampled), never a row's whole context again.

Single-turn ``generate`` is a conversation of one turn over all its rows, so there is one decode
loop (``rlrun.rollout.sampler.decode``). A conversation starts by running each distinct prompt
once (``rlrun.shared_prefix``'s idea) and copying its keys and values to the prompt's rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from rlrun.rollout.conversation import ConversationRows
from rlrun.rollout.engine import RolloutBatch, SamplingParams
from rlrun.rollout.kv_cache import SlotCache
from rlrun.rollout.packed_linear import PackedLinears
from rlrun.rollout.sampler import NoiseRows, Turn, decode, inference, seeded, to_batch


@dataclass(frozen=True)
class DecodeSettings:
    """What the engine fixes for every turn: the EOS ids, the padding id, and when ended rows
    leave the decode batch (``compact_ended_fraction`` of it ended)."""

    eos_ids: tuple[int, ...]
    pad_id: int
    compact_ended_fraction: float


class HFConversation(ConversationRows):
    """Rows continuing ``prompt_ids[prompt_of_row[r]]``, their KV cache kept in a ``SlotCache``
    sized for the longest prompt plus ``max_tokens``. The conversation holds every row's cache
    and decodes all the rows of a turn in one batch. Its forward passes multiply by ``packing``'s
    weights, which ``close`` releases."""

    def __init__(
        self,
        model: torch.nn.Module,
        prompt_ids: list[list[int]],
        prompt_of_row: Sequence[int],
        *,
        max_tokens: int,
        settings: DecodeSettings,
        packing: PackedLinears,
    ):
        prompt_of_row = list(prompt_of_row)
        super().__init__(prompt_ids, prompt_of_row, max_tokens=max_tokens)
        self.model, self.settings, self.packing = model, settings, packing
        self.eos = torch.tensor(settings.eos_ids, device=model.device)
        self.cache = SlotCache(model, num_slots=self.num_rows, capacity=max(self.budgets))
        prompts = list(dict.fromkeys(prompt_of_row))  # each distinct prompt runs once
        place = {p: i for i, p in enumerate(prompts)}
        self.row_of_slot = list(range(self.num_rows))  # rows change slots as turns need
        # Rows whose cache holds their whole context keep the logits after it (row -> index in
        # prompt_logits): only just after the prompts ran.
        self.logits_index: dict[int, int] = {r: place[p] for r, p in enumerate(prompt_of_row)}
        with inference(model), packing.active():
            self.prompt_logits = self.cache.prefill(
                [prompt_ids[p] for p in prompts], list(self.logits_index.values())
            )

    def sample(self, rows: Sequence[int], sampling: SamplingParams) -> RolloutBatch:
        self.check_turn(rows, sampling)
        with inference(self.model), seeded(sampling.seed, self.model.device):
            turn = self.sample_unseeded(rows, sampling)
        batch = to_batch([turn], eos=self.eos, pad_id=self.settings.pad_id, n=1)
        self.extend(rows, batch)
        return batch

    def sample_unseeded(self, rows: Sequence[int], sampling: SamplingParams) -> Turn:
        """A turn for ``rows`` (its samples in their order), drawing from the RNG as it stands;
        the rows' contexts are not extended here."""
        with self.packing.active():
            return self._sample(rows, sampling)

    def _sample(self, rows: Sequence[int], sampling: SamplingParams) -> Turn:
        waiting = [r for r in rows if r not in self.logits_index]  # tokens to run first
        order = waiting + [r for r in rows if r in self.logits_index]
        self._arrange(order)
        parts = []
        if waiting:
            held = self.cache.held(len(waiting))
            parts.append(self.cache.extend([self.contexts[r][held[i] :] for i, r in enumerate(waiting)]))
        if len(waiting) < len(order):
            parts.append(self.prompt_logits[[self.logits_index[r] for r in order[len(waiting) :]]])
        for r in order:
            self.logits_index.pop(r, None)  # its last sampled token will wait
        self.cache.begin_turn(len(order))
        everyone = order == list(range(self.num_rows))
        turn = decode(
            torch.cat(parts) if len(parts) > 1 else parts[0],
            sampling=sampling,
            eos=self.eos,
            pad_id=self.settings.pad_id,
            noise=NoiseRows(self.num_rows, None if everyone else torch.tensor(order, device=self.eos.device)),
            step=self.cache.step,
            drop=self._drop,
            compact_ended_fraction=self.settings.compact_ended_fraction,
        )
        place = {r: i for i, r in enumerate(order)}
        back = torch.tensor([place[r] for r in rows], device=turn.tokens.device)  # turn rows -> `rows`
        return Turn(turn.tokens[back], turn.log_probs[back], turn.mask[back])

    def append(self, rows: Sequence[int], token_ids: Sequence[Sequence[int]]) -> None:
        """Added ids wait in the rows' contexts and run at the rows' next turn."""
        self.check_room(rows, [len(t) for t in token_ids])
        for r, ids in zip(rows, token_ids):
            self.contexts[r].extend(ids)
            if ids:
                self.logits_index.pop(r, None)

    def close(self) -> None:
        self.packing.release()
        self.cache = None
        self.prompt_logits = None
        self.contexts = []

    def _arrange(self, order: Sequence[int]) -> None:
        """Put row ``order[i]`` in slot i; the rows it displaces take the slots those rows left."""
        k, chosen = len(order), set(order)
        slot_of_row = {r: s for s, r in enumerate(self.row_of_slot)}
        target = list(order) + self.row_of_slot[k:]
        displaced = [r for r in self.row_of_slot[:k] if r not in chosen]
        vacated = [s for s in range(k, self.num_rows) if self.row_of_slot[s] in chosen]
        for s, r in zip(vacated, displaced):
            target[s] = r
        moved = [s for s in range(self.num_rows) if self.row_of_slot[s] != target[s]]
        if moved:
            self.cache.copy(torch.tensor(moved), torch.tensor([slot_of_row[target[s]] for s in moved]))
            self.row_of_slot = target

    def _drop(self, ended: torch.Tensor) -> torch.Tensor:
        """Take the ended rows out of the decode batch (slots 0 .. k-1): each ended row among the
        first k' (the rows going on) swaps with a going row from behind them."""
        going = (~ended).nonzero().squeeze(-1).cpu()
        k = len(going)
        holes = ended[:k].nonzero().squeeze(-1).cpu()
        movers = going[going >= k]
        order = torch.arange(k)
        order[holes] = movers
        slots = torch.cat([holes, movers])
        self.cache.copy(slots, torch.cat([movers, holes]))
        for a, b in zip(holes.tolist(), movers.tolist()):
            self.row_of_slot[a], self.row_of_slot[b] = self.row_of_slot[b], self.row_of_slot[a]
        return order.to(ended.device)


class SplitConversation:
    """A conversation of more rows than one decode batch may hold: consecutive parts of at most
    ``max_batch_samples`` rows, each an ``HFConversation`` (all over one ``PackedLinears``). Rows
    are numbered across the parts.
    The parts of a turn draw their noise one after another from one stream, as ``generate``'s
    chunks do, so a row's samples do not depend on the other rows of its part, but do on how many
    steps the parts before it ran."""

    def __init__(self, parts: list[HFConversation]):
        self.parts = parts
        self.num_rows = sum(p.num_rows for p in parts)
        self.part_of_row = [(i, r) for i, p in enumerate(parts) for r in range(p.num_rows)]

    def sample(self, rows: Sequence[int], sampling: SamplingParams) -> RolloutBatch:
        split = self._split(rows)
        for part, local, _ in split:
            part.check_turn(local, sampling)
        model = self.parts[0].model
        with inference(model), seeded(sampling.seed, model.device):
            turns = [part.sample_unseeded(local, sampling) for part, local, _ in split]
        settings, eos = self.parts[0].settings, self.parts[0].eos
        for (part, local, _), turn in zip(split, turns):
            part.extend(local, to_batch([turn], eos=eos, pad_id=settings.pad_id, n=1))
        whole = to_batch(turns, eos=eos, pad_id=settings.pad_id, n=1)  # the parts' rows one after another
        back = torch.tensor([i for _, _, where in split for i in where]).argsort().tolist()
        return RolloutBatch(
            whole.response_ids[back],
            whole.response_mask[back],
            whole.log_probs[back],
            [whole.finish_reasons[i] for i in back],
            1,
        )

    def append(self, rows: Sequence[int], token_ids: Sequence[Sequence[int]]) -> None:
        for part, local, where in self._split(rows):
            part.append(local, [token_ids[i] for i in where])

    def close(self) -> None:
        for part in self.parts:
            part.close()

    def _split(self, rows: Sequence[int]) -> list[tuple[HFConversation, list[int], list[int]]]:
        """Per part with rows among ``rows``: the part, those rows in its numbering, and their
        places in ``rows``."""
        if not all(0 <= r < self.num_rows for r in rows):
            raise ValueError(f"a conversation's rows are 0 .. {self.num_rows - 1}")
        found: dict[int, tuple[list[int], list[int]]] = {}
        for place, r in enumerate(rows):
            part, local = self.part_of_row[r]
            found.setdefault(part, ([], []))
            found[part][0].append(local)
            found[part][1].append(place)
        return [(self.parts[i], local, where) for i, (local, where) in sorted(found.items())]
