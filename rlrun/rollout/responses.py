"""Prompts in, sampled responses out, ready to score: single-turn responses or an agent's
episodes, in one shape (`Responses`), and the arguments the reward functions get for them.

Training (`training.experience`) and evaluation (`rlrun.evaluation`) both sample through here,
so a reward function sees the same arguments in both, episodes or not:

- `completions`: the response's text; for an episode, its final answer (the text of its last
  model turn), which is what a single-turn reward such as `rlrun:exact_match` scores;
- the dataset's other columns, and for an episode `transcript` (its chat messages: the prompt,
  the environment's reset text, the model's turns with their calls, the tools' results, the
  observations with their rewards),
  `environment_reward` (its environment's `get_reward()`, NaN without one: what the
  `rlrun:environment_reward` term scores) and, for TRL-style functions, `environments` (the
  episode's environment instance, as TRL passes them);
- TRL-style functions also get the completion ids and the prompt messages (`TrlContext`).
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, fields
from typing import Any

import torch

from rlrun.agents.environments import derive_seed
from rlrun.agents.spec import AgentSpec
from rlrun.agents.tools import CALL_ERRORS
from rlrun.data.dataset import PromptDataset
from rlrun.rewards import TrlContext
from rlrun.rewards.scorers import ENVIRONMENT_REWARD
from rlrun.rollout.engine import FINISH_LENGTH, RolloutEngine, SamplingParams
from rlrun.rollout.episodes import (
    ENV_STAGES,
    FINISH_EPISODE_TOKENS,
    FINISH_REASONS,
    FINISH_TRUNCATED,
    EpisodeBatch,
    EpisodeCounters,
    EpisodePrompts,
    run_episodes,
)

# The extra reward columns of an episode (module docstring).
TRANSCRIPT, ENVIRONMENTS = "transcript", "environments"
# Episodes that ran out of tokens rather than ending: clipped, like a response at max_tokens.
CUT_SHORT = frozenset({FINISH_TRUNCATED, FINISH_EPISODE_TOKENS})


@dataclass
class Episodes:
    """What the episodes of a batch did, row by row (beside their tokens)."""

    finish_reasons: list[str]
    turn_ends: list[list[int]]  # each model turn's last token, in the response's columns
    turn_rewards: list[list[float]]  # a step environment's reward of each turn (else empty)
    final_rewards: list[float | None]  # the environment's get_reward() (None: it has none)
    transcripts: list[list[dict[str, Any]]]
    environments: list[Any]  # each row's environment instance (None without one)
    counters: list[EpisodeCounters]

    def rows(self, rows: list[int]) -> Episodes:
        return Episodes(**{f.name: [getattr(self, f.name)[i] for i in rows] for f in fields(self)})

    @classmethod
    def concat(cls, parts: list[Episodes]) -> Episodes:
        return cls(**{f.name: [x for p in parts for x in getattr(p, f.name)] for f in fields(cls)})

    def token_rewards(self, width: int) -> torch.Tensor:
        """(N, width) a step environment's per-turn rewards on each turn's last token, 0 elsewhere."""
        out = torch.zeros(len(self.turn_ends), width)
        for row, (ends, rewards) in enumerate(zip(self.turn_ends, self.turn_rewards)):
            for end, reward in zip(ends, rewards):
                out[row, end] += reward
        return out


@dataclass
class Responses:
    """`n` responses to each of a batch's prompts, prompt-major (N rows).

    `prompt_ids` holds the prompts the rows continue: one per prompt (`prompt_rows` = n rows each),
    or one per row (`prompt_rows` = 1) when an episode's environment made its own prompt. Of the
    (N, T) tensors after it, `response_mask` marks what the policy sampled (what trains: for an
    episode its turns, not the results and observations between them) and `response_attention`
    every token there is (the same for single-turn responses)."""

    n: int
    prompt_ids: list[list[int]]
    prompt_rows: int
    response_ids: torch.Tensor
    response_mask: torch.Tensor
    response_attention: torch.Tensor
    log_probs: torch.Tensor  # the sampler's, 0 where it sampled nothing
    truncated: torch.Tensor  # (N,) bool: cut at the token limit rather than ended
    completions: list[str]  # what a reward scores (module docstring)
    completion_ids: list[list[int]]  # the response's ids (TRL's completion_ids)
    episodes: Episodes | None = None

    def reward_arguments(self, data: PromptDataset) -> dict[str, Any]:
        """The keyword arguments of `RewardCombiner` for these responses to `data`'s prompts."""
        repeat = _repeater(self.n)
        extra = {name: repeat(column) for name, column in data.extra.items()}
        if self.episodes is not None:
            e = self.episodes
            extra[TRANSCRIPT] = e.transcripts
            extra[ENVIRONMENT_REWARD] = [math.nan if r is None else r for r in e.final_rewards]
            extra[ENVIRONMENTS] = e.environments
        return {
            "prompts": repeat(data.prompts),
            "completions": self.completions,
            "ground_truths": repeat(data.ground_truths),
            "context": TrlContext(self.completion_ids, repeat(data.messages) if data.chat else None),
            **extra,
        }


def sample_responses(
    engine: RolloutEngine,
    tokenizer: Any,
    data: PromptDataset,
    sampling: SamplingParams,
    *,
    agent: AgentSpec | None = None,
) -> Responses:
    """`sampling.n` responses to each prompt of `data`: one `generate` call, or with `agent` the
    prompts' episodes (each environment seeded from `sampling.seed` and its row)."""
    if agent is None:
        batch = engine.generate(data.prompt_ids, sampling)
        mask = batch.response_mask
        return Responses(
            n=sampling.n,
            prompt_ids=data.prompt_ids,
            prompt_rows=sampling.n,
            response_ids=batch.response_ids,
            response_mask=mask,
            response_attention=mask,
            log_probs=batch.log_probs,
            truncated=torch.tensor([f == FINISH_LENGTH for f in batch.finish_reasons]),
            completions=tokenizer.batch_decode(batch.response_ids, skip_special_tokens=True),
            completion_ids=[row[m.bool()].tolist() for row, m in zip(batch.response_ids, mask)],
        )
    return _episodes(engine, data, sampling, agent)


def _episodes(
    engine: RolloutEngine, data: PromptDataset, sampling: SamplingParams, agent: AgentSpec
) -> Responses:
    rows = len(data) * sampling.n
    base = 0 if sampling.seed is None else sampling.seed
    prompts = EpisodePrompts(
        ids=data.prompt_ids,
        texts=data.prompts,
        messages=data.messages if data.chat or agent.format.name == "chat_template" else None,
        columns={"prompt": data.prompts, "answer": data.ground_truths, **data.extra},
    )
    opened: dict[str, Any] = {}

    def open_conversation(prompt_ids: list[list[int]], max_tokens: int) -> Any:
        # A group's rows that share their prompt share its prefill (and its KV cache).
        shared = _shared_prompts(prompt_ids, sampling.n)
        opened["shared"] = shared is not None
        if shared is not None:
            return engine.conversation(shared, sampling.n, max_tokens=max_tokens)
        return engine.conversation(prompt_ids, 1, max_tokens=max_tokens)

    batch = run_episodes(
        open_conversation,
        prompts,
        agent=agent,
        sampling=sampling,
        env_seeds=[derive_seed(base, row) for row in range(rows)],
    )
    shared = opened["shared"]
    return _from_episodes(batch, sampling.n, agent, shared=shared)


def _shared_prompts(prompt_ids: list[list[int]], n: int) -> list[list[int]] | None:
    """The distinct prompts when every group's `n` rows continue the same one, else None."""
    groups = [prompt_ids[i : i + n] for i in range(0, len(prompt_ids), n)]
    if all(all(p == g[0] for p in g) for g in groups):
        return [g[0] for g in groups]
    return None


def _from_episodes(batch: EpisodeBatch, n: int, agent: AgentSpec, *, shared: bool) -> Responses:
    sampled, attention = batch.sampled_mask, batch.token_mask
    answers = [_final_answer(t) for t in batch.transcripts]
    return Responses(
        n=n,
        prompt_ids=batch.prompt_ids[::n] if shared else batch.prompt_ids,
        prompt_rows=n if shared else 1,
        response_ids=batch.token_ids,
        response_mask=sampled,
        response_attention=attention,
        log_probs=batch.log_probs,
        truncated=torch.tensor([f in CUT_SHORT for f in batch.finish_reasons]),
        completions=answers,
        completion_ids=[row[m.bool()].tolist() for row, m in zip(batch.token_ids, attention)],
        episodes=Episodes(
            finish_reasons=batch.finish_reasons,
            turn_ends=batch.turn_ends,
            turn_rewards=batch.turn_rewards,
            final_rewards=batch.final_rewards,
            transcripts=batch.transcripts,
            environments=batch.environments,
            counters=batch.counters,
        ),
    )


def _final_answer(transcript: list[dict[str, Any]]) -> str:
    """The text of the episode's last model turn."""
    return next((m.get("content") or "" for m in reversed(transcript) if m.get("role") == "assistant"), "")


def episode_metrics(episodes: Episodes) -> dict[str, float]:
    """Per-episode means of what the episodes did (turns, tool calls, tool errors by kind,
    environment errors by stage, results cut short), the share of each way they ended, and the
    seconds spent in tools and environments (summed: the step's time in them). The same keys at
    every step and on every process, zeros included."""
    c, rows = episodes.counters, len(episodes.counters)
    errors = sum((x.tool_errors for x in c), Counter())
    env_errors = sum((x.env_errors for x in c), Counter())
    finished = Counter(episodes.finish_reasons)
    out = {
        "episode/turns/mean": sum(x.turns for x in c) / rows,
        "episode/turns/max": max(x.turns for x in c),
        "episode/tool_calls/mean": sum(x.tool_calls for x in c) / rows,
        "episode/tool_errors/mean": sum(errors.values()) / rows,
        "episode/truncated_outputs/mean": sum(x.truncated_outputs for x in c) / rows,
        "timing_s/tools": sum(x.tool_seconds for x in c),
        "timing_s/environment": sum(x.env_seconds for x in c),
    }
    out |= {f"episode/tool_errors/{kind}": errors[kind] / rows for kind in CALL_ERRORS}
    out |= {f"episode/env_errors/{stage}": env_errors[stage] / rows for stage in ENV_STAGES}
    return out | {f"episode/finish/{reason}": finished[reason] / rows for reason in FINISH_REASONS}


def _repeater(n: int) -> Any:
    def repeat(column: list[Any]) -> list[Any]:  # one entry per response row (prompt-major)
        return [value for value in column for _ in range(n)]

    return repeat
