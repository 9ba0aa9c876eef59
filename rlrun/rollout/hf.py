"""The ``hf`` rollout engine: a plain sampling loop over a transformers model's KV cache, on the
training model.

Each distinct prompt is run once (``rlrun.shared_prefix``) and its cache gathered to its ``n``
rows; then one token per step for every row, until all rows have ended or ``max_tokens``.
Rows are generated in chunks of at most ``max_batch_samples`` (the memory cap); rows that have
ended leave the decode batch (with their KV cache) once a quarter of it has ended, so a step
costs what the unfinished rows cost. Sampling is
exactly what ``SamplingParams`` says: temperature, then top-k, then top-p (as transformers
orders its warpers), EOS masked before ``min_tokens``; nothing is taken from the model's
``generation_config.json``. Log-probs follow the contract in ``rlrun.rollout.engine``: the raw
logits divided by the temperature, before truncation or EOS masking - the numbers the
trainer's forward pass gives.

The engine holds a reference to the model it was built with, normally the training model
itself, so ``sync_weights`` has nothing to copy; given a different module it loads that
module's weights into its own.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import torch
from transformers import PreTrainedModel

from rlrun.data.padding import left_pad
from rlrun.rollout.conversation import resubmitting
from rlrun.rollout.engine import FINISH_LENGTH, FINISH_STOP, ROLLOUT_ENGINES, RolloutBatch, SamplingParams
from rlrun.shared_prefix import cache_keyword, prefill


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
    ):
        """`compact_ended_fraction`: drop ended rows from the decode batch once this fraction of
        it has ended (compacting copies the KV cache, so not after every single EOS); above 1
        never. Samples are the same either way."""
        if max_batch_samples < 1:
            raise ValueError(f"max_batch_samples must be >= 1, got {max_batch_samples}")
        self.model = model
        self.max_batch_samples = max_batch_samples
        self.compact_ended_fraction = compact_ended_fraction
        eos = model.generation_config.eos_token_id
        eos = tokenizer.eos_token_id if eos is None else eos
        if eos is None:
            raise ValueError("the tokenizer and the model's generation config both lack an EOS token")
        self.eos_ids = [eos] if isinstance(eos, int) else list(eos)
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else self.eos_ids[0]

    def generate(self, prompt_ids: list[list[int]], sampling: SamplingParams) -> RolloutBatch:
        """Sample ``sampling.n`` responses per prompt; rows prompt-major."""
        if not prompt_ids or any(len(p) == 0 for p in prompt_ids):
            raise ValueError("generate needs at least one prompt, and no prompt may be empty")
        device = self.model.device
        ids, mask = left_pad(prompt_ids, self.pad_id)
        ids, mask = ids.to(device), mask.to(device)
        prompt_of_row = torch.arange(len(prompt_ids) * sampling.n, device=device) // sampling.n
        was_training = self.model.training
        self.model.eval()
        try:
            with torch.no_grad(), _seeded(sampling.seed, device):
                chunks = [
                    self._generate_chunk(ids, mask, rows, sampling)
                    for rows in prompt_of_row.split(self.max_batch_samples)
                ]
        finally:
            self.model.train(was_training)
        token_chunks, log_prob_chunks, mask_chunks = zip(*chunks)
        response_ids = _cat_right_padded(token_chunks, self.pad_id)
        log_probs = _cat_right_padded(log_prob_chunks, 0.0)
        response_mask = _cat_right_padded(mask_chunks, 0)
        stopped = (
            torch.isin(response_ids, torch.tensor(self.eos_ids, device=device)) & response_mask.bool()
        ).any(-1)
        finish = [FINISH_STOP if s else FINISH_LENGTH for s in stopped.tolist()]
        return RolloutBatch(response_ids, response_mask, log_probs, finish, sampling.n)

    conversation = resubmitting  # multi-turn: each turn resubmits the rows' contexts

    def sync_weights(self, model: torch.nn.Module) -> None:
        """No-op when the engine generates with the training model itself (the usual case)."""
        if model is not self.model:
            self.model.load_state_dict(model.state_dict())

    def _generate_chunk(
        self, ids: torch.Tensor, mask: torch.Tensor, prompt_of_row: torch.Tensor, sampling: SamplingParams
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Rows answering the (consecutive) prompts `prompt_of_row`: (tokens, log_probs, response_mask)."""
        first, last = int(prompt_of_row[0]), int(prompt_of_row[-1])
        logits, cache = prefill(self.model, ids[first : last + 1], mask[first : last + 1])
        rows = prompt_of_row - first
        cache.batch_select_indices(rows)
        logits, mask = logits[rows], mask[prompt_of_row]
        cache_kw = cache_keyword(self.model)
        eos = torch.tensor(self.eos_ids, device=ids.device)
        position = mask.sum(-1, keepdim=True)
        n_rows = len(rows)
        tokens = torch.full((n_rows, sampling.max_tokens), self.pad_id, dtype=torch.long, device=ids.device)
        log_probs = torch.zeros(n_rows, sampling.max_tokens, device=ids.device)
        decoding = torch.arange(n_rows, device=ids.device)  # chunk rows still in the decode batch
        ended = torch.zeros(n_rows, dtype=torch.bool, device=ids.device)  # per decode-batch row
        for t in range(sampling.max_tokens):
            scaled = logits.float()
            if sampling.temperature != 1.0:  # x / 1 is x to the bit: skip a vocabulary-wide copy
                scaled = scaled / sampling.temperature
            # Noise for every row of the chunk, ended or not, so the samples do not depend on
            # when rows leave the batch.
            noise = None
            if not sampling.greedy:
                noise = exponential_noise(n_rows, scaled.shape[-1], device=scaled.device)
                if len(decoding) < n_rows:
                    noise = noise[decoding]
            banned = eos if t < sampling.min_tokens else None
            token = next_token(scaled, sampling, banned, noise=noise).masked_fill(ended, self.pad_id)
            tokens[decoding, t] = token
            log_probs[decoding, t] = scaled.log_softmax(-1).gather(-1, token.unsqueeze(-1)).squeeze(-1)
            ended |= torch.isin(token, eos)
            if t + 1 == sampling.max_tokens or bool(ended.all()):
                break
            n_ended = int(ended.sum())
            if n_ended and n_ended >= self.compact_ended_fraction * len(ended):
                keep = (~ended).nonzero().squeeze(-1)
                cache.batch_select_indices(keep)
                decoding, mask, position, token = decoding[keep], mask[keep], position[keep], token[keep]
                ended = ended[keep]
            mask = torch.cat([mask, torch.ones_like(mask[:, :1])], 1)
            logits = self.model(
                input_ids=token.unsqueeze(-1),
                attention_mask=mask,
                position_ids=position,
                use_cache=True,
                **{cache_kw: cache},
            ).logits[:, -1]
            position = position + 1
        tokens, log_probs = tokens[:, : t + 1], log_probs[:, : t + 1]
        is_eos = torch.isin(tokens, eos).long()
        response_mask = (is_eos.cumsum(-1) - is_eos == 0).long()  # up to and including the first EOS
        return tokens.masked_fill(response_mask == 0, self.pad_id), log_probs * response_mask, response_mask


def next_token(
    scaled_logits: torch.Tensor,
    sampling: SamplingParams,
    banned: torch.Tensor | None,
    *,
    noise: torch.Tensor | None = None,
) -> torch.Tensor:
    """One token per row from temperature-scaled logits (N, V): the argmax when greedy, else a
    sample after top-k and then top-p truncation; `banned` token ids (EOS before `min_tokens`)
    are never chosen.

    A sample is argmax(p / q) with q ~ Exp(1) per entry (the exponential race, which is how
    torch.multinomial draws one sample); `noise` is that q (N, V), drawn here when omitted."""
    logits = scaled_logits
    if banned is not None:
        logits = logits.index_fill(-1, banned, float("-inf"))
    if sampling.greedy:
        return logits.argmax(-1)
    if 0 < sampling.top_k < logits.shape[-1]:
        kth = logits.topk(sampling.top_k, dim=-1).values[:, -1:]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    if sampling.top_p < 1:
        # Drop the least likely tokens whose total probability stays within 1 - top_p; the
        # most likely token always survives.
        ascending, order = logits.sort(-1)
        drop = ascending.softmax(-1).cumsum(-1) <= 1 - sampling.top_p
        drop[:, -1] = False
        logits = logits.masked_fill(torch.zeros_like(drop).scatter(-1, order, drop), float("-inf"))
    probs = logits.softmax(-1)
    if noise is None:
        noise = exponential_noise(*probs.shape, device=probs.device)
    return probs.div(noise).argmax(-1)


def exponential_noise(rows: int, vocab: int, *, device: torch.device) -> torch.Tensor:
    """Exp(1) draws (rows, vocab) as -log(u), u uniform in [0, 1) from a float32 draw.

    `Tensor.exponential_` (what torch.multinomial uses) draws in float64 and took a fifth of a
    decode step at 128 rows of SmolLM2 on CPU; this is 4x cheaper. The 2**-24 grid of a float32
    uniform moves a sample only where two tokens' p/q lie within about 1e-7 of each other, as
    float32 rounding of the probabilities already does. u = 0 gives q = inf: that entry cannot win,
    and p = 0 (a banned or truncated token) gives 0 / q = 0, never NaN."""
    return torch.rand(rows, vocab, device=device).log_().neg_()


def _cat_right_padded(parts: tuple[torch.Tensor, ...], value: float) -> torch.Tensor:
    """Chunks stop at their own longest response: pad them to a common width, then stack rows."""
    width = max(p.shape[1] for p in parts)
    return torch.cat([torch.nn.functional.pad(p, (0, width - p.shape[1]), value=value) for p in parts])


@contextlib.contextmanager
def _seeded(seed: int | None, device: torch.device) -> Iterator[None]:
    """Seed the sampler for this call only, leaving the global RNG stream untouched."""
    if seed is None:
        yield
        return
    devices = [device] if device.type == "cuda" else []
    with torch.random.fork_rng(devices=devices):
        torch.manual_seed(seed)
        yield
