"""The rollout engine contract: prompt token ids in, sampled responses with log-probs out.

Engines are engine-neutral: nothing here knows about transformers or vLLM. An engine is built
by its registered factory, ``ROLLOUT_ENGINES.get(name)(model, tokenizer, *, max_batch_samples,
**options)``, where ``model`` is the (unwrapped) training model and ``options`` are the
engine's own recipe keys (e.g. ``rollout.vllm``).

Log-prob convention (every engine): ``log_probs[i, t] = log_softmax(logits / temperature)``
at the sampled token, where ``logits`` are the model's raw logits *before* top-k / top-p
truncation. This is exactly what the trainer recomputes with a full forward pass, so with
top_k = 0 and top_p = 1 it is the log-prob of the distribution actually sampled from, and
the trainer may use it as the old policy's log-prob without recomputation.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import torch

from rlrun.registry import Registry

if TYPE_CHECKING:
    from rlrun.schema.rollout import Rollout

FINISH_STOP = "stop"  # the model emitted an end-of-sequence token (included in the response)
FINISH_LENGTH = "length"  # the response reached max_tokens

ROLLOUT_ENGINES = Registry("rollout engine")


@dataclass(frozen=True)
class SamplingParams:
    """How to sample: ``n`` responses per prompt of ``min_tokens`` to ``max_tokens`` tokens.

    ``top_k = 0`` and ``top_p = 1`` switch truncation off. ``greedy`` takes the argmax
    (``n`` is then usually 1; sampling settings other than temperature are ignored, and the
    returned log-probs still use ``temperature``). ``seed`` makes one call reproducible
    without touching the global RNG; ``None`` draws from the global RNG (which the trainer
    seeds and checkpoints).
    """

    n: int = 1
    max_tokens: int = 8
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    greedy: bool = False
    seed: int | None = None
    min_tokens: int = 0  # EOS suppressed before this many tokens (fixed-length benchmarks)

    def __post_init__(self) -> None:
        if self.n < 1 or self.max_tokens < 1:
            raise ValueError(f"n and max_tokens must be >= 1, got n={self.n}, max_tokens={self.max_tokens}")
        if not 0 <= self.min_tokens <= self.max_tokens:
            raise ValueError(f"min_tokens must be in [0, max_tokens], got {self.min_tokens}")
        if self.temperature <= 0:
            raise ValueError(f"temperature must be > 0 (use greedy=True for argmax), got {self.temperature}")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p}")
        if self.top_k < 0:
            raise ValueError(f"top_k must be >= 0 (0 = off), got {self.top_k}")

    @classmethod
    def from_rollout(cls, rollout: Rollout, **changes: Any) -> SamplingParams:
        """The recipe's `rollout` sampling settings (what training samples with), with `changes`."""
        settings = {
            "n": rollout.n,
            "max_tokens": rollout.max_response_tokens,
            "min_tokens": rollout.min_response_tokens,
            "temperature": rollout.temperature,
            "top_p": rollout.top_p,
            "top_k": rollout.top_k,
        }
        return cls(**(settings | changes))


@dataclass
class RolloutBatch:
    """N = len(prompts) * n responses, prompt-major: rows ``i*n .. i*n+n-1`` answer prompt ``i``.

    ``response_ids`` (N, T) long, right-padded with the tokenizer's pad id, T <= max_tokens;
    the end-of-sequence token, when emitted, is part of the response (mask 1).
    ``response_mask`` (N, T) long, 1 on response tokens. ``log_probs`` (N, T) float32, see the
    module docstring; 0 on padding. ``finish_reasons``: ``"stop"`` | ``"length"`` per row.
    """

    response_ids: torch.Tensor
    response_mask: torch.Tensor
    log_probs: torch.Tensor
    finish_reasons: list[str]
    n: int

    @property
    def response_lengths(self) -> torch.Tensor:
        return self.response_mask.sum(-1)


class Conversation(Protocol):
    """Rows that continue their prompts over several turns (an agent's episodes): the model
    samples a turn for some rows, the environment appends tokens to some rows, and so on. An
    engine may keep each row's KV cache between turns, so a turn computes only the tokens that
    are new since the last one. Rows are numbered as in ``RolloutEngine.conversation``.

    Tokens are never re-tokenized: a row's context is exactly its prompt ids, then every sampled
    and appended id in order."""

    num_rows: int

    def sample(self, rows: Sequence[int], sampling: SamplingParams) -> RolloutBatch:
        """Sample one turn for each of ``rows`` (distinct; ``sampling.n`` must be 1), in that order,
        and add the sampled ids (EOS included when emitted) to their contexts. The batch's rows
        follow ``rows``; its log-probs follow the contract in this module's docstring."""
        ...

    def append(self, rows: Sequence[int], token_ids: Sequence[Sequence[int]]) -> None:
        """Add context the model did not sample (a tool's output, an observation) to ``rows``."""
        ...

    def close(self) -> None:
        """Free what the conversation holds (its KV cache)."""
        ...


@runtime_checkable
class RolloutEngine(Protocol):
    """What the training loop needs from a generator."""

    def generate(self, prompt_ids: list[list[int]], sampling: SamplingParams) -> RolloutBatch:
        """Sample ``sampling.n`` responses for each prompt (token ids, no padding)."""
        ...

    def sync_weights(self, model: torch.nn.Module) -> None:
        """Make the engine generate with ``model``'s current weights (after every optimizer step)."""
        ...

    def conversation(self, prompt_ids: list[list[int]], n: int, *, max_tokens: int) -> Conversation:
        """Rows for multi-turn sampling: ``n`` per prompt, prompt-major (rows ``i*n .. i*n+n-1``
        continue prompt ``i``). ``max_tokens``: the most tokens any row will hold after its
        prompt, sampled and appended together (what a cache is sized for)."""
        ...
