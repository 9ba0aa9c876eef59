"""Accuracy on a validation set: mean@k, pass@k and maj@k, greedy or sampled, in batches.

A sample is correct when the reward's ``acc`` says so (exact match by default). With k
samples per prompt: mean@k averages all samples, pass@k counts a prompt solved when any
sample is, maj@k scores the most frequent extracted answer (ties: the first seen).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

import torch

from rlrun.data.dataset import PromptDataset
from rlrun.rewards import RewardFunction
from rlrun.rewards.answers import extract_answer, normalize_answer
from rlrun.rollout.base import RolloutEngine, SamplingParams


@dataclass(frozen=True)
class EvalResult:
    k: int
    greedy: bool
    num_prompts: int
    mean_at_k: float
    pass_at_k: float
    maj_at_k: float

    def metrics(self, prefix: str = "val/") -> dict[str, float]:
        """Flat metric names; ``<prefix>accuracy`` is mean@k."""
        return {
            f"{prefix}accuracy": self.mean_at_k,
            f"{prefix}mean@{self.k}": self.mean_at_k,
            f"{prefix}pass@{self.k}": self.pass_at_k,
            f"{prefix}maj@{self.k}": self.maj_at_k,
        }


def evaluate(
    engine: RolloutEngine,
    tokenizer: Any,
    dataset: PromptDataset,
    *,
    k: int = 1,
    greedy: bool = True,
    max_tokens: int = 8,
    temperature: float = 1.0,
    top_p: float = 1.0,
    top_k: int = 0,
    seed: int | None = 0,
    limit: int | None = None,
    reward: RewardFunction | None = None,
) -> EvalResult:
    """Score the first ``limit`` prompts of ``dataset`` (all when None) with ``k`` samples each."""
    if greedy and k != 1:
        raise ValueError("greedy evaluation draws one sample per prompt; use k=1 or greedy=false")
    data = dataset.take(range(min(limit or len(dataset), len(dataset))))
    sampling = SamplingParams(
        n=k,
        max_tokens=max_tokens,
        temperature=temperature,
        top_p=top_p,
        top_k=top_k,
        greedy=greedy,
        seed=seed,
    )
    batch = engine.generate(data.prompt_ids, sampling)
    completions = tokenizer.batch_decode(batch.response_ids, skip_special_tokens=True)

    def repeat(column: list[Any]) -> list[Any]:  # one entry per response row (prompt-major)
        return [value for value in column for _ in range(k)]

    reward = reward or RewardFunction([{"fn": "rlrun:exact_match"}])
    acc = reward(
        repeat(data.prompts),
        completions,
        repeat(data.ground_truths),
        **{name: repeat(col) for name, col in data.extra.items()},
    ).acc
    correct = (acc > 0.5).view(len(data), k)
    return EvalResult(
        k=k,
        greedy=greedy,
        num_prompts=len(data),
        mean_at_k=correct.float().mean().item(),
        pass_at_k=correct.any(-1).float().mean().item(),
        maj_at_k=_majority_correct(completions, correct, k).float().mean().item(),
    )


def _majority_correct(completions: list[str], correct: torch.Tensor, k: int) -> torch.Tensor:
    answers = [normalize_answer(extract_answer(c) or c) for c in completions]
    majority = []
    for row in range(correct.shape[0]):
        group = answers[row * k : (row + 1) * k]
        top = Counter(group).most_common(1)[0][0]  # most_common keeps first-seen order on ties
        majority.append(bool(correct[row, group.index(top)]))
    return torch.tensor(majority)
