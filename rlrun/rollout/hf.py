"""The ``hf`` rollout engine: rlrun's own sampling loop over a transformers model, on the training
model.

Rows are generated in chunks of at most ``max_batch_samples`` (the memory cap). A chunk is a
conversation of one turn (``rlrun.rollout.hf_conversation``): each distinct prompt runs once and
its keys and values are copied to its ``n`` rows, in a KV cache preallocated for the whole
response budget and written in place (``rlrun.rollout.kv_cache``); then one token per step for
every row, until all rows have ended or ``max_tokens``. Rows that have ended leave the decode
batch once a quarter of it has ended, so a step costs what the unfinished rows cost. Sampling
and log-probs: ``rlrun.rollout.sampler``. On CPU in float32, the large linear layers multiply
by weights packed once per chunk or conversation (``rlrun.rollout.packed_linear``).

A model whose attention would not take the cache's 4D mask unchanged
(``rlrun.shared_prefix.takes_4d_mask``: flash or flex attention, a sliding window, remote code)
decodes over transformers' ``DynamicCache`` instead, which copies each layer's whole cache at every
step (logged when the engine is built); its multi-turn conversations resubmit each row's context.

The engine holds a reference to the model it was built with, normally the training model
itself, so ``sync_weights`` has nothing to copy; given a different module it loads that
module's weights into its own.
"""

from __future__ import annotations

import logging
from typing import Any

import torch
from transformers import PreTrainedModel

from rlrun.data.padding import left_pad
from rlrun.rollout.conversation import ResubmittingConversation
from rlrun.rollout.engine import ROLLOUT_ENGINES, Conversation, RolloutBatch, SamplingParams
from rlrun.rollout.hf_conversation import DecodeSettings, HFConversation, SplitConversation
from rlrun.rollout.packed_linear import PackedLinears
from rlrun.rollout.sampler import NoiseRows, Turn, decode, inference, seeded, to_batch
from rlrun.shared_prefix import cache_keyword, prefill, takes_4d_mask

logger = logging.getLogger("rlrun.rollout")


@ROLLOUT_ENGINES.register("hf", trainer_log_probs=True)
class HFRolloutEngine:
    """Batched sampling with a KV cache and shared prompts (CPU or one GPU; no extra dependency)."""

    def __init__(
        self,
        model: PreTrainedModel,
        tokenizer: Any,
        *,
        max_batch_samples: int = 1024,
        compact_ended_fraction: float = 0.25,
        preallocate: bool | None = None,
    ):
        """`compact_ended_fraction`: drop ended rows from the decode batch once this fraction of
        it has ended (compacting copies the KV cache of the rows that move, so not after every
        single EOS); above 1 never. Samples are the same either way. `preallocate`: decode into
        the preallocated cache (None: where the model can; False: transformers' DynamicCache)."""
        if max_batch_samples < 1:
            raise ValueError(f"max_batch_samples must be >= 1, got {max_batch_samples}")
        self.model = model
        self.max_batch_samples = max_batch_samples
        eos = model.generation_config.eos_token_id
        eos = tokenizer.eos_token_id if eos is None else eos
        if eos is None:
            raise ValueError("the tokenizer and the model's generation config both lack an EOS token")
        eos_ids = (eos,) if isinstance(eos, int) else tuple(eos)
        pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else eos_ids[0]
        self.settings = DecodeSettings(eos_ids, pad_id, compact_ended_fraction)
        fits = takes_4d_mask(model)
        if preallocate and not fits:
            raise ValueError(
                f"{type(model).__name__} cannot decode into the preallocated KV cache: its attention would not "
                "take a custom 4D mask unchanged (flash or flex attention, a sliding window, or remote code)"
            )
        self.preallocate = fits if preallocate is None else preallocate
        if not fits:
            logger.warning(
                "the hf engine decodes %s over transformers' DynamicCache, which copies every layer's cache at "
                "each token (its attention would not take the preallocated cache's 4D mask: flash or flex "
                "attention, a sliding window, or remote code); multi-turn conversations resubmit each context",
                type(model).__name__,
            )

    @property
    def eos(self) -> torch.Tensor:
        return torch.tensor(self.settings.eos_ids, device=self.model.device)

    def generate(self, prompt_ids: list[list[int]], sampling: SamplingParams) -> RolloutBatch:
        """Sample ``sampling.n`` responses per prompt; rows prompt-major."""
        if not prompt_ids or any(len(p) == 0 for p in prompt_ids):
            raise ValueError("generate needs at least one prompt, and no prompt may be empty")
        prompt_of_row = [i // sampling.n for i in range(len(prompt_ids) * sampling.n)]
        chunks = [
            prompt_of_row[i : i + self.max_batch_samples]
            for i in range(0, len(prompt_of_row), self.max_batch_samples)
        ]
        with inference(self.model), seeded(sampling.seed, self.model.device):
            turns = [self._turn(prompt_ids[rows[0] : rows[-1] + 1], rows, sampling) for rows in chunks]
        return to_batch(turns, eos=self.eos, pad_id=self.settings.pad_id, n=sampling.n)

    def conversation(self, prompt_ids: list[list[int]], n: int, *, max_tokens: int) -> Conversation:
        """Rows that keep their KV cache between turns (at most ``max_batch_samples`` decode in
        one batch); over the DynamicCache, rows that resubmit their contexts."""
        if not self.preallocate:
            return ResubmittingConversation(self, prompt_ids, n, max_tokens=max_tokens)
        if not prompt_ids or any(len(p) == 0 for p in prompt_ids):
            raise ValueError("a conversation needs at least one prompt, and no prompt may be empty")
        prompt_of_row = [i // n for i in range(len(prompt_ids) * n)]
        packing = PackedLinears(self.model, rows=min(len(prompt_of_row), self.max_batch_samples))
        parts = [
            HFConversation(
                self.model,
                prompt_ids,
                prompt_of_row[i : i + self.max_batch_samples],
                max_tokens=max_tokens,
                settings=self.settings,
                packing=packing,
            )
            for i in range(0, len(prompt_of_row), self.max_batch_samples)
        ]
        return parts[0] if len(parts) == 1 else SplitConversation(parts)

    def sync_weights(self, model: torch.nn.Module) -> None:
        """No-op when the engine generates with the training model itself (the usual case)."""
        if model is not self.model:
            self.model.load_state_dict(model.state_dict())

    def _turn(self, prompt_ids: list[list[int]], prompt_of_row: list[int], sampling: SamplingParams) -> Turn:
        """One turn for rows answering the (consecutive) prompts starting at ``prompt_of_row[0]``."""
        local = [p - prompt_of_row[0] for p in prompt_of_row]
        packing = PackedLinears(self.model, rows=len(local))
        if not self.preallocate:
            try:
                with packing.active():
                    return self._dynamic_turn(prompt_ids, local, sampling)
            finally:
                packing.release()
        conversation = HFConversation(
            self.model,
            prompt_ids,
            local,
            max_tokens=sampling.max_tokens,
            settings=self.settings,
            packing=packing,
        )
        try:
            return conversation.sample_unseeded(range(len(local)), sampling)
        finally:
            conversation.close()

    def _dynamic_turn(
        self, prompt_ids: list[list[int]], prompt_of_row: list[int], sampling: SamplingParams
    ) -> Turn:
        """The turn over transformers' DynamicCache: the prompts run once, their cache gathered
        to the rows, and each step appends to it."""
        device = self.model.device
        ids, prompt_mask = left_pad(prompt_ids, self.settings.pad_id)
        logits, cache = prefill(self.model, ids.to(device), prompt_mask.to(device))
        rows = torch.tensor(prompt_of_row, device=device)
        cache.batch_select_indices(rows)
        state = {"mask": prompt_mask.to(device)[rows]}
        state["position"] = state["mask"].sum(-1, keepdim=True)
        cache_kw = cache_keyword(self.model)

        def step(token: torch.Tensor, going: torch.Tensor) -> torch.Tensor:
            state["mask"] = torch.cat([state["mask"], torch.ones_like(state["mask"][:, :1])], 1)
            out = self.model(
                input_ids=token.unsqueeze(-1),
                attention_mask=state["mask"],
                position_ids=state["position"],
                use_cache=True,
                **{cache_kw: cache},
            )
            state["position"] = state["position"] + 1
            return out.logits[:, -1]

        def drop(ended: torch.Tensor) -> torch.Tensor:
            keep = (~ended).nonzero().squeeze(-1)
            cache.batch_select_indices(keep)
            state["mask"], state["position"] = state["mask"][keep], state["position"][keep]
            return keep

        return decode(
            logits[rows],
            sampling=sampling,
            eos=self.eos,
            pad_id=self.settings.pad_id,
            noise=NoiseRows(len(rows)),
            step=step,
            drop=drop,
            compact_ended_fraction=self.settings.compact_ended_fraction,
        )
