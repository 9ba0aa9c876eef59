"""The hf engine's sampling: one token per row from the logits, and the one decode loop that
samples a turn over whichever KV cache holds the rows.

Sampling is exactly what ``SamplingParams`` says: temperature, then top-k, then top-p (as
transformers orders its warpers), EOS masked before ``min_tokens``; nothing is taken from the
model's ``generation_config.json``. Log-probs follow the contract in ``rlrun.rollout.engine``:
the raw logits divided by the temperature, before truncation or EOS masking - the numbers the
trainer's forward pass gives.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import torch

from rlrun.rollout.engine import FINISH_LENGTH, FINISH_STOP, RolloutBatch, SamplingParams

# step(tokens, going) runs the decode batch's last tokens and returns the next logits; `going` is
# false for rows that have ended: their token (their EOS, then padding) is run but not kept, so
# each row's last sampled token is left for whatever runs the row next.
Step = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
# drop(ended) takes the ended rows out of the decode batch and returns, for each row left, its
# index in the batch before.
Drop = Callable[[torch.Tensor], torch.Tensor]


@dataclass
class Turn:
    """A turn's samples, one row per decode-batch row at its start: ``tokens`` (k, T) long, padded
    after the first EOS; ``log_probs`` (k, T) float32, 0 there; ``mask`` (k, T) long."""

    tokens: torch.Tensor
    log_probs: torch.Tensor
    mask: torch.Tensor


@dataclass(frozen=True)
class NoiseRows:
    """Which rows of each step's noise draw the decode batch's rows take: the draw has ``height``
    rows and batch row i takes row ``index[i]`` (``index`` None: all of them, in order)."""

    height: int
    index: torch.Tensor | None = None


def decode(
    logits: torch.Tensor,
    *,
    sampling: SamplingParams,
    eos: torch.Tensor,
    pad_id: int,
    noise: NoiseRows,
    step: Step,
    drop: Drop,
    compact_ended_fraction: float,
) -> Turn:
    """Sample up to ``sampling.max_tokens`` tokens for each row of ``logits`` (k, V), the logits
    that predict each row's first token. Each step draws the noise of all ``noise.height`` rows
    whether they still decode or not, so a row's samples do not depend on when the others end or
    on which others take part. Rows that have ended leave the batch (``drop``) once
    ``compact_ended_fraction`` of it has ended."""
    device = logits.device
    k, width = len(logits), sampling.max_tokens
    tokens = torch.full((k, width), pad_id, dtype=torch.long, device=device)
    log_probs = torch.zeros(k, width, device=device)
    decoding = torch.arange(k, device=device)  # the turn's rows still in the decode batch
    noise_index = noise.index  # the decode batch's rows of the noise draw (None: all, in order)
    ended = torch.zeros(k, dtype=torch.bool, device=device)  # per decode-batch row
    scratch = Scratch(logits.shape[-1], device=device)
    for t in range(width):
        scaled = logits.float()
        rows = len(scaled)
        if sampling.temperature != 1.0:  # x / 1 is x to the bit: skip a vocabulary-wide copy
            scaled = torch.div(scaled, sampling.temperature, out=scratch("scaled", rows))
        draw = None
        if not sampling.greedy:
            draw = exponential_noise(
                noise.height, scaled.shape[-1], device=device, out=scratch("noise", noise.height)
            )
            if noise_index is not None:
                draw = torch.index_select(draw, 0, noise_index, out=scratch("noise rows", rows))
        banned = eos if t < sampling.min_tokens else None
        token = next_token(scaled, sampling, banned, noise=draw, scratch=scratch).masked_fill(ended, pad_id)
        log_softmax = torch.log_softmax(scaled, -1, out=scratch("work", rows))
        chosen = log_softmax.gather(-1, token.unsqueeze(-1)).squeeze(-1)
        if len(decoding) == k:  # no row has left the batch: a column, not a scatter
            tokens[:, t], log_probs[:, t] = token, chosen
        else:
            tokens[decoding, t], log_probs[decoding, t] = token, chosen
        ended = ended | torch.isin(token, eos)
        if t + 1 == width or bool(ended.all()):
            break
        n_ended = int(ended.sum())
        if n_ended and n_ended >= compact_ended_fraction * len(ended):
            keep = drop(ended)
            decoding, token, ended = decoding[keep], token[keep], ended[keep]
            noise_index = (torch.arange(noise.height, device=device) if noise_index is None else noise_index)[
                keep
            ]
        logits = step(token, ~ended)
    tokens, log_probs = tokens[:, : t + 1], log_probs[:, : t + 1]
    is_eos = torch.isin(tokens, eos).long()
    mask = (is_eos.cumsum(-1) - is_eos == 0).long()  # up to and including the first EOS
    return Turn(tokens.masked_fill(mask == 0, pad_id), log_probs * mask, mask)


def next_token(
    scaled_logits: torch.Tensor,
    sampling: SamplingParams,
    banned: torch.Tensor | None,
    *,
    noise: torch.Tensor | None = None,
    scratch: Scratch | None = None,
) -> torch.Tensor:
    """One token per row from temperature-scaled logits (N, V): the argmax when greedy, else a
    sample after top-k and then top-p truncation; `banned` token ids (EOS before `min_tokens`)
    are never chosen.

    A sample is argmax(p / q) with q ~ Exp(1) per entry (the exponential race, which is how
    torch.multinomial draws one sample); `noise` is that q (N, V), drawn here when omitted.
    ``scratch`` holds the (N, V) work tensors of the usual case (no top-k or top-p); it is
    written over."""
    logits = scaled_logits
    rows = len(logits)

    def work(name: str) -> torch.Tensor:
        return torch.empty_like(logits) if scratch is None else scratch(name, rows)

    if banned is not None:
        logits = work("banned").copy_(logits).index_fill_(-1, banned, float("-inf"))
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
    probs = torch.softmax(logits, -1, out=work("work"))
    if noise is None:
        noise = exponential_noise(*probs.shape, device=probs.device)
    return probs.div_(noise).argmax(-1)


class Scratch:
    """Work tensors (rows, vocab) kept across a turn's decode steps, each step writing the first
    rows of each by name. On CPU, glibc maps a block above its mmap threshold (32 MiB at most,
    what ``rlrun train`` sets: SmolLM2's 49,152-token vocabulary from 171 rows, Qwen2's 151,936
    from 56) afresh at every allocation and faults its pages in on first touch. Allocated anew
    each step, the sampler's tensors made 192-row SmolLM2 generation take 1.10-1.18x as long
    (benchmarks/README.md, "The sampler's work tensors")."""

    def __init__(self, vocab: int, *, device: torch.device):
        self.vocab, self.device = vocab, device
        self._held: dict[str, torch.Tensor] = {}

    def __call__(self, name: str, rows: int) -> torch.Tensor:
        held = self._held.get(name)
        if held is None or len(held) < rows:
            held = self._held[name] = torch.empty(rows, self.vocab, device=self.device)
        return held[:rows]


def exponential_noise(
    rows: int, vocab: int, *, device: torch.device, out: torch.Tensor | None = None
) -> torch.Tensor:
    """Exp(1) draws (rows, vocab) as -log(u), u uniform in [0, 1) from a float32 draw, into
    ``out`` when given (the same draws).

    `Tensor.exponential_` (what torch.multinomial uses) draws in float64 and took a fifth of a
    decode step at 128 rows of SmolLM2 on CPU; this is 4x cheaper. The 2**-24 grid of a float32
    uniform moves a sample only where two tokens' p/q lie within about 1e-7 of each other, as
    float32 rounding of the probabilities already does. u = 0 gives q = inf: that entry cannot win,
    and p = 0 (a banned or truncated token) gives 0 / q = 0, never NaN."""
    return torch.rand(rows, vocab, device=device, out=out).log_().neg_()


def to_batch(turns: Sequence[Turn], *, eos: torch.Tensor, pad_id: int, n: int) -> RolloutBatch:
    """Turns (of consecutive rows) as one right-padded ``RolloutBatch``; a row stopped if it
    sampled an EOS."""
    width = max(t.tokens.shape[1] for t in turns)

    def cat(parts: list[torch.Tensor], value: float) -> torch.Tensor:
        return torch.cat([torch.nn.functional.pad(p, (0, width - p.shape[1]), value=value) for p in parts])

    response_ids = cat([t.tokens for t in turns], pad_id)
    response_mask = cat([t.mask for t in turns], 0)
    stopped = (torch.isin(response_ids, eos) & response_mask.bool()).any(-1)
    finish = [FINISH_STOP if s else FINISH_LENGTH for s in stopped.tolist()]
    return RolloutBatch(response_ids, response_mask, cat([t.log_probs for t in turns], 0.0), finish, n)


@contextlib.contextmanager
def inference(model: torch.nn.Module) -> Iterator[None]:
    """Eval mode (no dropout) and no autograd while sampling; the model's mode is restored.
    Switching walks every module (milliseconds), so a model already in eval mode is left alone."""
    training = model.training
    if training:
        model.eval()
    try:
        with torch.no_grad():
            yield
    finally:
        if training:
            model.train()


@contextlib.contextmanager
def seeded(seed: int | None, device: torch.device) -> Iterator[None]:
    """Seed the sampler for this call only, leaving the global RNG stream untouched."""
    if seed is None:
        yield
        return
    devices = [device] if device.type == "cuda" else []
    with torch.random.fork_rng(devices=devices):
        torch.manual_seed(seed)
        yield
