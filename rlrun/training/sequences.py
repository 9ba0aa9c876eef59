"""Prompt + response sequences as the trainer sees them, and the forward passes over them.

A step's rollout becomes one `Sequences` batch, built once: prompts left-padded to a common
length P, responses right-padded to T, so every response starts at column P and all models
(policy, reference, teacher, critic) read the same tensors. Forward passes keep only the last
T + 1 positions' logits (`logits_to_keep`), which predict the T response tokens.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Literal

import torch

from rlrun.algorithms.masked import entropy_from_logits
from rlrun.data.padding import left_pad
from rlrun.shared_prefix import base_model, cache_keyword, prefill, prompt_positions, takes_4d_mask
from rlrun.training.batching import split_by_tokens
from rlrun.training.packing import PackedLayout, pack


@dataclass
class Sequences:
    """N rows of `prompt (left-padded to P) + response (right-padded to T)`. An agent's episode
    is a response whose tokens are the model's turns and, between them, what tools and
    environments answered: `attention_mask` covers every token, `response_mask` only those the
    policy sampled (what trains; for a single-turn response, the same tokens)."""

    input_ids: torch.Tensor  # (N, P+T) long
    attention_mask: torch.Tensor  # (N, P+T) long, 1 on every prompt and response token
    response_mask: torch.Tensor  # (N, T) float32, 1 on the response tokens the policy sampled
    prompt_index: torch.Tensor  # (N,) long: rows with equal values continue the same prompt
    pad_id: int = 0

    @property
    def response_ids(self) -> torch.Tensor:
        return self.input_ids[:, -self.response_mask.shape[1] :]

    @property
    def response_attention(self) -> torch.Tensor:
        """(N, T) 1 on every response token, sampled or not (contiguous from the first column)."""
        return self.attention_mask[:, self.prompt_width :]

    @property
    def prompt_width(self) -> int:
        return self.input_ids.shape[1] - self.response_mask.shape[1]

    @property
    def position_ids(self) -> torch.Tensor:
        return prompt_positions(self.attention_mask)

    @classmethod
    def build(
        cls,
        prompt_ids: list[list[int]],
        response_ids: torch.Tensor,
        response_mask: torch.Tensor,
        pad_id: int,
        n: int = 1,
        response_attention: torch.Tensor | None = None,
    ) -> Sequences:
        """G prompts (token ids), each answered by the `n` consecutive rows of the (G·n, T)
        `response_ids`/`response_mask`; `response_attention`: every response token, where it
        covers more than the sampled ones (an episode's). Prompts are padded once, then repeated."""
        attention = response_mask if response_attention is None else response_attention
        prompts, prompt_mask = left_pad(prompt_ids, pad_id)
        device = response_ids.device
        return cls(
            input_ids=torch.cat([prompts.repeat_interleave(n, 0).to(device), response_ids], 1),
            attention_mask=torch.cat(
                [prompt_mask.repeat_interleave(n, 0).to(device), attention.long().to(device)], 1
            ),
            response_mask=response_mask.float(),
            prompt_index=torch.arange(len(prompt_ids), device=device).repeat_interleave(n),
            pad_id=pad_id,
        )

    @classmethod
    def concat(cls, parts: list[Sequences]) -> Sequences:
        """Stack batches, re-padding prompts on the left and responses on the right."""
        width = max(p.response_mask.shape[1] for p in parts)
        prompt_width = max(p.input_ids.shape[1] - p.response_mask.shape[1] for p in parts)

        def pad(p: Sequences, x: torch.Tensor, value: int) -> torch.Tensor:
            t = p.response_mask.shape[1]
            return torch.nn.functional.pad(x, (prompt_width - (x.shape[1] - t), width - t), value=value)

        # Each part's prompts stay distinct from every other part's.
        ends = [int(p.prompt_index.max()) + 1 if len(p.prompt_index) else 0 for p in parts[:-1]]
        offsets = torch.tensor([0, *ends]).cumsum(0).tolist()
        return cls(
            input_ids=torch.cat([pad(p, p.input_ids, p.pad_id) for p in parts]),
            attention_mask=torch.cat([pad(p, p.attention_mask, 0) for p in parts]),
            response_mask=torch.cat([pad_response(p.response_mask, width) for p in parts]),
            prompt_index=torch.cat([p.prompt_index + offset for p, offset in zip(parts, offsets)]),
            pad_id=parts[0].pad_id,
        )

    def rows(self, idx: torch.Tensor) -> Sequences:
        """A sub-batch, with response columns that are padding in all its rows cut off."""
        mask = self.response_mask[idx]
        keep = int(mask.sum(0).nonzero().max()) + 1 if mask.any() else 1
        cut = mask.shape[1] - keep
        end = self.input_ids.shape[1] - cut
        return Sequences(
            input_ids=self.input_ids[idx, :end],
            attention_mask=self.attention_mask[idx, :end],
            response_mask=mask[:, :keep],
            prompt_index=self.prompt_index[idx],
            pad_id=self.pad_id,
        )


def pad_response(x: torch.Tensor, width: int) -> torch.Tensor:
    """Right-pad an (n, t) per-token tensor with zeros to `width` columns."""
    return torch.nn.functional.pad(x, (0, width - x.shape[1]))


def response_logits(model: torch.nn.Module, seq: Sequences, *, padding_free: bool = False) -> torch.Tensor:
    """(N, T, V) logits predicting each response token (zeros past a response's end when
    the packed layout ran).

    Rows that repeat a prompt (a group's n responses) share one forward pass of it: the prompt
    runs once, its KV cache is gathered to the rows, and only the responses run per row.
    Without repeats, or under gradient checkpointing (which would replay the cache appends),
    every row runs whole. With `padding_free`, where it costs less compute than that
    (`forward_cost`), each prompt instead runs once with its rows' responses packed after it
    (`packing`)."""
    T, P = seq.response_mask.shape[1], seq.prompt_width
    prompts, rows = torch.unique(seq.prompt_index, return_inverse=True)
    N, G = len(rows), len(prompts)
    hidden = base_model(model).config.hidden_size
    plan = _layout_plan(
        model,
        seq,
        padding_free=padding_free,
        # rows whole (one call), or prompts once then the responses over their cache (two calls)
        whole_cost=forward_cost(tokens=N * (P + T), attention_pairs=N * (P + T) ** 2, hidden_size=hidden),
        shared_cost=forward_cost(
            tokens=G * P + N * T, attention_pairs=G * P * P + N * T * (P + T), hidden_size=hidden
        ),
        whole=len(prompts) == len(rows) or _checkpointing(model),
    )
    if layout := plan.layout:
        columns = layout.needed_columns  # the same in every packed row: no logits for most prompt tokens
        out = model(
            input_ids=layout.input_ids,
            attention_mask=layout.attention_bias,
            position_ids=layout.position_ids,
            use_cache=False,
            logits_to_keep=columns,
        )
        return layout.gather(out.logits, columns).float()
    if plan.whole:
        out = model(
            input_ids=seq.input_ids,
            attention_mask=seq.attention_mask,
            position_ids=seq.position_ids,
            use_cache=False,
            logits_to_keep=T + 1,
        )
        return out.logits[:, :-1].float()
    # Any one row of each prompt (they are equal in the prompt columns).
    row_of_prompt = torch.empty_like(prompts).scatter_(0, rows, torch.arange(len(rows), device=rows.device))
    first, cache = prefill(model, seq.input_ids[row_of_prompt, :P], seq.attention_mask[row_of_prompt, :P])
    cache.batch_select_indices(rows)
    out = model(
        input_ids=seq.response_ids,
        attention_mask=seq.attention_mask,
        position_ids=seq.position_ids[:, P:],
        use_cache=True,
        **{cache_keyword(model): cache},
    )
    return torch.cat([first[rows].unsqueeze(1), out.logits[:, :-1]], 1).float()


@dataclass(frozen=True)
class LayoutPlan:
    """How one forward call lays its rows out: packed (`layout`), else padded, rows whole or
    (`whole` false) each prompt once with its rows' responses over the gathered cache."""

    layout: PackedLayout | None
    whole: bool


def _layout_plan(
    model: torch.nn.Module,
    seq: Sequences,
    *,
    padding_free: bool,
    whole_cost: float,
    shared_cost: float,
    whole: bool,
) -> LayoutPlan:
    """The cheaper layout by `forward_cost`: packed where the model takes it (`takes_4d_mask`) and it
    costs less than the padded one (responses near full length pack into little less, while a
    packed row's attention spans whole groups), and a batch without any response token has
    nothing to read packed.

    Across processes every forward call is a collective (DDP's buffer broadcast, FSDP's
    all-gathers) and the layouts differ in calls (whole rows one, the shared prompt two), so
    the processes agree, in one all-reduce: rows whole if any must, packed if the costs summed
    over the processes say so."""
    layout = None
    if padding_free and takes_4d_mask(model):
        layout = pack(
            input_ids=seq.input_ids,
            attention_mask=seq.attention_mask,
            response_attention=seq.response_attention,
            prompt_index=seq.prompt_index,
            pad_id=seq.pad_id,
            # the dtype transformers gives its own masks: the input embeddings'
            dtype=base_model(model).get_input_embeddings().weight.dtype,
        )
    packed = _packed_cost(layout, base_model(model).config.hidden_size) if layout is not None else math.inf
    costs = [packed, whole_cost, shared_cost, float(whole)]
    if torch.distributed.is_initialized() and torch.distributed.get_world_size() > 1:
        summed = torch.tensor(costs, dtype=torch.float64, device=seq.input_ids.device)
        torch.distributed.all_reduce(summed)
        costs = summed.tolist()
    packed, whole_cost, shared_cost, must_run_whole = costs
    padded = whole_cost if must_run_whole else shared_cost
    return LayoutPlan(layout if packed < padded else None, whole=must_run_whole > 0)


def _packed_cost(layout: PackedLayout, hidden_size: int) -> float:
    """`forward_cost` of the packed rows; infinite with no response token to read."""
    if not layout.valid.any():
        return math.inf
    rows, width = layout.input_ids.shape
    return forward_cost(tokens=rows * width, attention_pairs=rows * width**2, hidden_size=hidden_size)


def forward_cost(*, tokens: int, attention_pairs: int, hidden_size: int) -> float:
    """A forward pass's compute in tokens: a token's linear layers take ~24·h² FLOPs a layer
    (h = hidden size), attention ~4·h for each (query, key) pair it computes, masked or not."""
    return tokens + attention_pairs / (6 * hidden_size)


def _checkpointing(model: torch.nn.Module) -> bool:
    inner = base_model(model)
    for name in ("is_activation_checkpointing", "is_gradient_checkpointing"):  # transformers >= 5.2x, before
        on = getattr(inner, name, None)
        if on is not None:
            return bool(on)
    return False


VOCAB_CHUNK_ELEMENTS = 2**25  # logits per chunk of a vocabulary-wide pass: 128 MiB of float32


def response_log_probs(
    model: torch.nn.Module,
    seq: Sequences,
    temperature: float,
    *,
    entropy: Literal["grad", "detached"] | None = None,
    return_logits: bool = False,
    padding_free: bool = False,
) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor | None]:
    """(log_probs, entropy, logits) of the response tokens under the temperature-scaled
    distribution they were sampled from. Entropy is computed only when asked, with or without
    its gradient (a metric needs no backward through the vocabulary).

    Memory: the (N, T, vocabulary) logits are the largest tensors of a step (1.6 GB for 16 rows
    of 512 tokens and SmolLM2's 49,152 tokens), so no copy is made that need not be: no division
    at temperature 1 (x / 1 is x to the bit), the log-probs through `selected_log_probs` (the
    logits are all it keeps for the backward), and the entropy metric a few rows at a time (its
    softmax and products would otherwise add two more such tensors at once)."""
    logits = response_logits(model, seq, padding_free=padding_free)
    if temperature != 1.0:
        logits = logits / temperature
    log_probs = selected_log_probs(logits, seq.response_ids)
    ent = None
    if entropy == "grad":
        ent = entropy_from_logits(logits)
    elif entropy == "detached":
        rows = _chunk_rows(logits)
        with torch.no_grad():
            ent = torch.cat([entropy_from_logits(chunk) for chunk in logits.split(rows)])
    return log_probs, ent, logits if return_logits else None


def selected_log_probs(logits: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    """`log_softmax(logits)` at `ids`: (N, T, V) logits and (N, T) ids give (N, T) log-probs,
    `logits[ids] - logsumexp(logits)`, with their gradient `g · (onehot(ids) - softmax(logits))`.

    `logits.log_softmax(-1).gather(...)` keeps its (N, T, V) output for the backward, and its
    backward makes three more such tensors at once (the gathered gradient scattered back, the
    softmax, the result): four vocabulary-wide tensors at the top of the backward, where every
    layer's activations are still held. This keeps the logits and builds the gradient in one
    tensor, a few rows at a time: two."""
    return _SelectedLogProbs.apply(logits.to(torch.promote_types(logits.dtype, torch.float32)), ids)


class _SelectedLogProbs(torch.autograd.Function):
    @staticmethod
    def forward(ctx, logits: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
        rows = _chunk_rows(logits)
        lse = torch.cat([chunk.logsumexp(-1) for chunk in logits.split(rows)])
        ctx.save_for_backward(logits, ids, lse)
        return logits.gather(-1, ids.unsqueeze(-1)).squeeze(-1) - lse

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> tuple[torch.Tensor, None]:
        logits, ids, lse = ctx.saved_tensors
        out = torch.empty_like(logits)
        rows = _chunk_rows(logits)
        for part, x, m, g in zip(out.split(rows), logits.split(rows), lse.split(rows), grad.split(rows)):
            torch.sub(x, m.unsqueeze(-1), out=part).exp_().mul_(-g.unsqueeze(-1))  # -g · softmax
        return out.scatter_add_(-1, ids.unsqueeze(-1), grad.unsqueeze(-1)), None


def _chunk_rows(logits: torch.Tensor) -> int:
    """Rows of (N, T, V) logits per chunk of a vocabulary-wide pass (at least one)."""
    return max(1, VOCAB_CHUNK_ELEMENTS // logits.shape[1:].numel())


def response_values(critic: torch.nn.Module, seq: Sequences, *, padding_free: bool = False) -> torch.Tensor:
    """(N, T) critic values of the states before each response token (0 past a response's end
    when the packed layout ran: see `response_logits`)."""
    T = seq.response_mask.shape[1]
    whole = forward_cost(
        tokens=seq.input_ids.numel(),
        attention_pairs=seq.input_ids.numel() * seq.input_ids.shape[1],
        hidden_size=base_model(critic).config.hidden_size,
    )
    # the critic runs rows whole (no shared-prompt path)
    plan = _layout_plan(
        critic, seq, padding_free=padding_free, whole_cost=whole, shared_cost=whole, whole=True
    )
    if layout := plan.layout:
        values = critic(
            input_ids=layout.input_ids,
            attention_mask=layout.attention_bias,
            position_ids=layout.position_ids,
        )
        return layout.gather(values)
    values = critic(input_ids=seq.input_ids, attention_mask=seq.attention_mask, position_ids=seq.position_ids)
    return values[:, -T - 1 : -1]


def forward_batched(
    fn: Callable[[Sequences], torch.Tensor], *, seq: Sequences, chunk: int, chunk_tokens: int | None = None
) -> torch.Tensor:
    """`fn` (a per-token forward pass) over `seq` in chunks of rows (capping memory), as one
    (N, T) tensor: `chunk` rows at a time, or with `chunk_tokens` chunks of at most that many
    padded tokens, rows of similar length together (`split_by_tokens`)."""
    rows = torch.arange(seq.input_ids.shape[0], device=seq.input_ids.device)
    if chunk_tokens is None:
        return forward_in_parts(fn, seq=seq, parts=rows.split(chunk))
    parts = split_by_tokens(
        rows, seq.response_attention.sum(-1), budget=chunk_tokens, prompt_width=seq.prompt_width
    )
    return forward_in_parts(fn, seq=seq, parts=parts)


@torch.no_grad()
def forward_in_parts(
    fn: Callable[[Sequences], torch.Tensor], *, seq: Sequences, parts: Iterable[torch.Tensor]
) -> torch.Tensor:
    """`fn` over `seq` one part (row indices; every row in exactly one) at a time, as one (N, T)
    tensor, zero past each part's response width."""
    out = None
    for part in parts:
        result = fn(seq.rows(part))
        if out is None:
            out = result.new_zeros(seq.input_ids.shape[0], seq.response_mask.shape[1])
        out[part, : result.shape[1]] = result
    if out is None:
        raise ValueError("no rows to run the forward pass on")
    return out
