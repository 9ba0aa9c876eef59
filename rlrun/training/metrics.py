"""A step's numbers: what the batch looked like (verl's metric names), the mean over processes,
and the sample rows shown to the user. Where they go is `sinks.py`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from rlrun.data import PromptDataset
from rlrun.training.experience import Experience


@torch.no_grad()
def across_processes(
    metrics: dict[str, float], reduce: Callable[[torch.Tensor, str], torch.Tensor], processes: int
) -> dict[str, float]:
    """A step's metrics over all data-parallel processes, each holding an equal share of the
    rows: the mean of the processes' values, except maxima (max), minima (min) and throughputs
    (`perf/*`, summed). `reduce(tensor, "sum" | "max")` is the collective."""
    keys = sorted(metrics)  # the same keys, in the same order, on every process
    signs = torch.tensor([-1.0 if k.endswith("/min") else 1.0 for k in keys], dtype=torch.float64)
    values = torch.tensor([metrics[k] for k in keys], dtype=torch.float64)
    sums, extremes = reduce(values, "sum"), reduce(values * signs, "max") * signs
    out = {}
    for i, key in enumerate(keys):
        if key.endswith(("/max", "/min")):
            out[key] = float(extremes[i])
        else:
            out[key] = float(sums[i]) / (1 if key.startswith("perf/") else processes)
    return out


def batch_metrics(
    exp: Experience,
    token_level_scores: torch.Tensor,
    token_level_rewards: torch.Tensor,
    advantages: torch.Tensor,
    returns: torch.Tensor,
    values: torch.Tensor | None,
) -> dict[str, float]:
    """What the step's batch looked like, under verl's metric names."""
    valid = exp.seq.response_mask.bool()
    lengths = exp.seq.response_attention.sum(-1).float()  # verl's: an episode's every token
    prompt_lengths = exp.seq.attention_mask.sum(-1) - lengths
    adv = advantages[valid]
    out = {
        "critic/score/mean": token_level_scores.sum(-1).mean(),
        "critic/score/max": token_level_scores.sum(-1).max(),
        "critic/score/min": token_level_scores.sum(-1).min(),
        "critic/rewards/mean": token_level_rewards.sum(-1).mean(),
        "critic/advantages/mean": adv.mean(),
        "critic/advantages/max": adv.max(),
        "critic/advantages/min": adv.min(),
        "critic/returns/mean": returns[valid].mean(),
        "response_length/mean": lengths.mean(),
        "response_length/max": lengths.max(),
        "response_length/min": lengths.min(),
        "response_length/clip_ratio": exp.truncated.float().mean(),
        "prompt_length/mean": prompt_lengths.float().mean(),
        "reward/acc/mean": exp.reward.acc.mean(),
    }
    # nanmean: a sample a function did not apply to (None, TRL's convention) is left out
    out |= {f"reward/{name}/mean": column.nanmean() for name, column in exp.reward.components.items()}
    if values is not None:
        v, ret = values[valid], returns[valid]
        out["critic/values/mean"] = v.mean()
        out["critic/vf_explained_var"] = 1.0 - (ret - v).var() / (ret.var() + 1e-5)
    return {k: float(v) for k, v in out.items()}


def sample_rows(exp: Experience, dataset: PromptDataset, limit: int) -> list[dict[str, Any]]:
    """Up to `limit` completions of the step with their prompt, answer and reward; an episode's
    with how it ended and its transcript (the model's turns and calls, the results and
    observations)."""
    rows = range(min(limit, exp.num_rows))
    prompts = dataset.take([exp.prompts[i // exp.n] for i in rows])
    samples = []
    for j, i in enumerate(rows):
        sample = {
            "prompt": prompts.prompts[j],
            "completion": exp.completions[i],
            "ground_truth": prompts.ground_truths[j],
            "reward": float(exp.scores[i]),
            "acc": float(exp.reward.acc[i]),
        }
        if exp.episodes is not None:
            sample |= {"finish": exp.episodes.finish_reasons[i], "transcript": exp.episodes.transcripts[i]}
        samples.append(sample)
    return samples
