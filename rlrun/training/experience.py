"""One step's experience: prompts → n sampled responses (or an agent's episodes) each → rewards
(+ overlong shaping), with DAPO's dynamic sampling (generate more until enough groups are
informative).

Rows are prompt-major: the n responses of group g are rows g*n .. g*n+n-1 (the engine's order),
and groups are kept or dropped whole, so the group index is always `arange(G).repeat_interleave(n)`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import torch

from rlrun.agents.spec import AgentSpec
from rlrun.algorithms.reward_shaping import group_filter, overlong_penalty
from rlrun.data import PromptDataset, PromptSampler
from rlrun.rewards import RewardCombiner, RewardOutput
from rlrun.rollout import RolloutEngine, SamplingParams
from rlrun.rollout.responses import Episodes, sample_responses
from rlrun.schema.algorithm import GroupFilter
from rlrun.schema.reward import OverlongShaping
from rlrun.training.profiling import Timer
from rlrun.training.sequences import Sequences, pad_response


class DynamicSamplingError(RuntimeError):
    """Dynamic sampling hit its generation limit without enough informative groups."""


@dataclass
class Experience:
    """The scored rollouts of G prompts (N = G·n rows)."""

    prompts: list[int]  # the G prompts' rows in the dataset
    seq: Sequences
    rollout_log_probs: torch.Tensor  # (N, T) the sampler's log-probs
    scores: torch.Tensor  # (N,) reward after overlong shaping
    reward: RewardOutput  # each function's scores and acc, unshaped
    truncated: torch.Tensor  # (N,) bool: hit max_response_tokens
    completions: list[str]  # what the rewards scored (an episode's final answer)
    n: int
    episodes: Episodes | None = None  # what an agent's episodes did, row by row

    @property
    def index(self) -> torch.Tensor:
        """(N,) group id of each row."""
        return torch.arange(len(self.prompts), device=self.scores.device).repeat_interleave(self.n)

    @property
    def num_rows(self) -> int:
        return self.scores.shape[0]


class ExperienceCollector:
    """Draws prompts from the dataset, samples responses and scores them."""

    def __init__(
        self,
        *,
        engine: RolloutEngine,
        tokenizer: Any,
        dataset: PromptDataset,
        sampler: PromptSampler,
        reward_fn: RewardCombiner,
        sampling: SamplingParams,
        overlong: OverlongShaping,
        group_filter: GroupFilter,
        device: torch.device,
        rank: int = 0,
        world: int = 1,
        everywhere: Callable[[bool], bool] = bool,
        agent: AgentSpec | None = None,
    ):
        """`agent`: sample an agent's episodes instead of single responses."""
        self.engine, self.tokenizer, self.reward_fn, self.sampling = engine, tokenizer, reward_fn, sampling
        self.dataset, self.sampler = dataset, sampler
        self.overlong, self.group_filter, self.device, self.agent = overlong, group_filter, device, agent
        self.rank, self.world = rank, world  # data parallelism: each process takes its share of the prompts
        self.everywhere = everywhere  # True on every process when true on all of them (a collective)
        self.frac_zero_std = 0.0  # of the last collection, before any filtering

    def collect(self, num_prompts: int, seed: int, *, timer: Timer) -> tuple[Experience, int]:
        """`num_prompts` groups (this process's share) of `sampling.n` scored responses and the number of generation
        batches it took. With dynamic sampling only informative groups (metric not constant
        within the group) are kept, and more prompts are drawn, `gen_prompts_per_batch` at a time
        (default: `num_prompts` per process), until there are enough; the first `num_prompts`
        kept groups train, as in verl's DAPO trainer.
        Generating and scoring add to `timer`'s "gen" and "reward" phases."""
        limit = self.group_filter.max_num_gen_batches if self.group_filter.enabled else 1
        gen_global = self.group_filter.gen_prompts_per_batch if self.group_filter.enabled else None
        per_batch = (gen_global or num_prompts * self.world) // self.world  # this process's draw
        kept: list[Experience] = []
        have = 0
        gen_batches = 0
        # Processes draw in lockstep until all have enough, so their samplers never diverge.
        while not self.everywhere(have >= num_prompts):
            if limit and gen_batches == limit:
                raise DynamicSamplingError(
                    f"dynamic sampling found {have} of {num_prompts} informative prompts in {limit} generation "
                    f"batches: the other prompts' responses all got the same {self.group_filter.metric}, so the "
                    "data is too hard or too easy for the model. Raise algorithm.group_filter.max_num_gen_batches "
                    "(0 = unlimited) or change the data"
                )
            drawn = self.sampler.next_indices(per_batch * self.world)  # the same on every process
            gen_batches += 1
            if have >= num_prompts:
                continue
            mine = drawn[self.rank * per_batch : (self.rank + 1) * per_batch]
            exp = self.generate(
                mine, self.sampling, seed=seed + (gen_batches - 1) * self.world + self.rank, timer=timer
            )
            informative = self._informative(exp)
            if gen_batches == 1:
                self.frac_zero_std = 1.0 - informative.float().mean().item()
            if self.group_filter.enabled:
                exp = select_groups(exp, informative.nonzero().flatten())
            kept.append(exp)
            have += len(exp.prompts)
        exp = concat(kept)
        return (select_groups(exp, torch.arange(num_prompts)) if have > num_prompts else exp), gen_batches

    def generate(
        self, prompts: list[int], sampling: SamplingParams, seed: int | None = None, *, timer: Timer
    ) -> Experience:
        """Sample and score `sampling.n` responses (or episodes) for each of the dataset's rows
        `prompts`."""
        data = self.dataset.take(prompts)
        with timer("gen"):
            responses = sample_responses(
                self.engine, self.tokenizer, data, replace(sampling, seed=seed), agent=self.agent
            )
        with timer("reward"):
            reward = self.reward_fn(**responses.reward_arguments(data))
            scores = reward.scores.to(self.device)
            if self.overlong.enabled:  # an episode's length: all its tokens, the budget's unit
                scores = scores + overlong_penalty(
                    responses.response_attention.sum(-1).to(self.device),
                    max_response_length=sampling.max_tokens,
                    buffer_length=self.overlong.buffer_tokens,
                    penalty_factor=self.overlong.penalty_factor,
                )
        seq = Sequences.build(
            responses.prompt_ids,
            responses.response_ids.to(self.device),
            responses.response_mask.to(self.device),
            pad_id=self.tokenizer.pad_token_id,
            n=responses.prompt_rows,
            response_attention=responses.response_attention.to(self.device),
        )
        return Experience(
            prompts=list(prompts),
            seq=seq,
            rollout_log_probs=responses.log_probs.to(self.device),
            scores=scores,
            reward=reward,
            truncated=responses.truncated.to(self.device),
            completions=responses.completions,
            n=sampling.n,
            episodes=responses.episodes,
        )

    def _informative(self, exp: Experience) -> torch.Tensor:
        """(G,) bool: groups whose filter metric is not constant."""
        metric = exp.reward.acc.to(self.device) if self.group_filter.metric == "acc" else exp.scores
        return group_filter(metric, exp.index).view(-1, exp.n)[:, 0]


def select_groups(exp: Experience, groups: torch.Tensor) -> Experience:
    """The experience of the given groups (indices) only."""
    rows = groups.repeat_interleave(exp.n) * exp.n + torch.arange(exp.n).repeat(len(groups))
    seq = exp.seq.rows(rows.to(exp.scores.device))
    return Experience(
        prompts=[exp.prompts[g] for g in groups.tolist()],
        seq=seq,
        rollout_log_probs=exp.rollout_log_probs[rows, : seq.response_mask.shape[1]],
        scores=exp.scores[rows],
        reward=RewardOutput(
            exp.reward.scores[rows],
            {k: v[rows] for k, v in exp.reward.components.items()},
            exp.reward.acc[rows],
        ),
        truncated=exp.truncated[rows],
        completions=[exp.completions[i] for i in rows.tolist()],
        n=exp.n,
        episodes=None if exp.episodes is None else exp.episodes.rows(rows.tolist()),
    )


def concat(parts: list[Experience]) -> Experience:
    """Several generation batches' experience as one."""
    if len(parts) == 1:
        return parts[0]
    seq = Sequences.concat([p.seq for p in parts])
    width = seq.response_mask.shape[1]
    return Experience(
        prompts=[g for p in parts for g in p.prompts],
        seq=seq,
        rollout_log_probs=torch.cat([pad_response(p.rollout_log_probs, width) for p in parts]),
        scores=torch.cat([p.scores for p in parts]),
        reward=RewardOutput(
            torch.cat([p.reward.scores for p in parts]),
            {k: torch.cat([p.reward.components[k] for p in parts]) for k in parts[0].reward.components},
            torch.cat([p.reward.acc for p in parts]),
        ),
        truncated=torch.cat([p.truncated for p in parts]),
        completions=[c for p in parts for c in p.completions],
        n=parts[0].n,
        episodes=None if parts[0].episodes is None else Episodes.concat([p.episodes for p in parts]),
    )


def _repeat(column: list[Any], n: int) -> list[Any]:
    return [v for v in column for _ in range(n)]
