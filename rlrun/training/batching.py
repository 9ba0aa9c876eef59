"""Mini-batches (one optimizer step each) and micro-batches (one forward/backward each).

The loss of a mini-batch is normalised over the whole mini-batch — all its tokens, or all its
sequences, on every data-parallel process — never per micro-batch. Each micro-batch's
`agg_loss` is therefore given the mini-batch's global token and sequence counts
(`agg_kwargs`), so the micro-batch losses sum to exactly the whole mini-batch's loss and
their gradients accumulate to its gradient, however the batch is split.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

ReduceSum = Callable[[torch.Tensor], torch.Tensor]


def _local(x: torch.Tensor) -> torch.Tensor:
    return x


@dataclass
class MiniBatch:
    """Row indices of one optimizer step, split into micro-batches, with its loss normaliser."""

    micro: list[torch.Tensor]
    agg_kwargs: dict[str, Any]
    tokens: torch.Tensor  # this process's response tokens in the mini-batch (weights micro-batch metrics)

    @property
    def indices(self) -> torch.Tensor:
        return torch.cat(self.micro)


def global_agg_kwargs(
    response_mask: torch.Tensor,
    *,
    dp_size: int = 1,
    loss_scale_factor: float | None = None,
    reduce_sum: ReduceSum = _local,
) -> dict[str, Any]:
    """`agg_loss` keywords that normalise over these rows on all processes together.

    `agg_loss` multiplies by dp_size because data-parallel gradients are averaged; the counts
    are therefore the global ones."""
    lengths = response_mask.sum(-1)
    counts = reduce_sum(torch.stack([lengths.sum(), (lengths > 0).sum()]).to(torch.float32))
    return {
        "dp_size": dp_size,
        "batch_num_tokens": counts[0].item(),
        "global_batch_size": counts[1].item(),
        "loss_scale_factor": loss_scale_factor,
    }


def plan_minibatches(
    response_mask: torch.Tensor,
    *,
    mini_batch: int,
    micro_batch: int,
    generator: torch.Generator,
    shuffle: bool = True,
    dp_size: int = 1,
    loss_scale_factor: float | None = None,
    reduce_sum: ReduceSum = _local,
    micro_batch_tokens: int | None = None,
    prompt_width: int = 0,
    lengths: torch.Tensor | None = None,
) -> list[MiniBatch]:
    """One epoch over the rows of `response_mask`: shuffled, cut into mini- then micro-batches.

    `mini_batch` and `micro_batch` count this process's rows (the recipe's sample counts
    divided by the number of processes); a last, smaller mini-batch is kept. With
    `micro_batch_tokens`, micro-batches are cut by padded size instead (`split_by_tokens`) of
    the rows' `lengths` (default: their tokens in `response_mask`; an episode's are longer)."""
    rows = response_mask.shape[0]
    order = torch.randperm(rows, generator=generator) if shuffle else torch.arange(rows)
    order = order.to(response_mask.device)
    lengths = response_mask.sum(-1) if lengths is None else lengths
    plan = []
    for mini in order.split(mini_batch):
        kwargs = global_agg_kwargs(
            response_mask[mini], dp_size=dp_size, loss_scale_factor=loss_scale_factor, reduce_sum=reduce_sum
        )
        tokens = response_mask[mini].sum().clamp(min=1)
        if micro_batch_tokens is None:
            micro = list(mini.split(micro_batch))
        else:
            micro = split_by_tokens(mini, lengths[mini], budget=micro_batch_tokens, prompt_width=prompt_width)
        plan.append(MiniBatch(micro=micro, agg_kwargs=kwargs, tokens=tokens))
    return plan


def split_by_tokens(
    rows: torch.Tensor, lengths: torch.Tensor, *, budget: int, prompt_width: int = 0
) -> list[torch.Tensor]:
    """Cut `rows` into micro-batches of at most `budget` padded tokens each, a micro-batch
    costing (its rows) x (prompt_width + its longest response); a row over budget goes alone.

    Rows are taken longest response first, so rows of similar length share a micro-batch and
    little of it is padding (verl's dynamic batch size, without its balancing across
    processes: the loss is normalised over the whole mini-batch, so any split gives the same
    gradient)."""
    order = torch.sort(lengths, descending=True, stable=True).indices.tolist()
    micro, current, width = [], [], 0
    for position in order:
        width = width if current else prompt_width + int(lengths[position])
        if current and (len(current) + 1) * width > budget:
            micro.append(rows[current])
            current, width = [], prompt_width + int(lengths[position])
        current.append(position)
    if current:
        micro.append(rows[current])
    return micro


class UpdateMetrics:
    """Per-step update metrics from per-micro-batch values, without a host sync per micro-batch.

    `sums` are parts of a globally normalised loss: they add up over the micro-batches of a
    mini-batch. `means` are token means within a micro-batch: weighted by its token share.
    Mini-batch values are then averaged over the mini-batches (and epochs) of the step."""

    def __init__(self) -> None:
        self._mini: dict[str, torch.Tensor] = {}
        self._total: dict[str, float] = {}
        self._count: dict[str, int] = {}

    def add(
        self,
        sums: dict[str, torch.Tensor] | None = None,
        means: dict[str, torch.Tensor] | None = None,
        weight: torch.Tensor | float = 1.0,
    ) -> None:
        for key, value in (sums or {}).items():
            self._mini[key] = self._mini.get(key, 0.0) + value
        for key, value in (means or {}).items():
            self._mini[key] = self._mini.get(key, 0.0) + value * weight

    def end_minibatch(self, scalars: dict[str, float] | None = None) -> None:
        for key, value in {**self._mini, **(scalars or {})}.items():
            self._total[key] = self._total.get(key, 0.0) + float(value)
            self._count[key] = self._count.get(key, 0) + 1
        self._mini = {}

    def result(self) -> dict[str, float]:
        """Means over mini-batches. With data parallelism a process's loss sums carry
        agg_loss's dp_size factor, so their mean over the processes is the global loss."""
        return {key: total / self._count[key] for key, total in self._total.items()}
