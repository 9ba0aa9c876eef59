"""Multi-turn episodes over a `Conversation`: the model acts, a tool or an environment answers,
the model acts again, until the episode ends; every row's episode runs turn by turn together.

A turn is one `Conversation.sample` over the rows still going (rows whose remaining room is
smaller than a turn are sampled in a call of their own, so no row outgrows its budget); what
tools or environments answer is appended per row with one `Conversation.append`. The ids the
model sampled are kept as sampled (never re-tokenized) and are the only ones marked trained
(`sampled_mask`); results and observations are context. The episode's tokens after the prompt
are its response: the sampling's `max_tokens` (rollout.max_response_tokens) bounds them.

Each turn samples with a seed derived from the call's seed and the turn, and each environment
gets its episode's seed (`env_seeds`, derived by the caller from the run's seed, step and row),
so a rerun with the same seeds replays every episode. Tools and environments are called on
this thread, one at a time, each under its time limit (`rlrun.agents.guard`); what they do
wrong is counted per row and never ends the run.
"""

from __future__ import annotations

import dataclasses
from collections import Counter, defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from rlrun.agents.environments import STEP, EnvironmentClass, derive_seed, reset_kwargs
from rlrun.agents.formats import Prompt
from rlrun.agents.guard import Outcome, as_number, check_time_limits_here, guarded_call
from rlrun.agents.spec import AgentSpec
from rlrun.agents.tools import TOO_MANY_CALLS, Tool, ToolCall, ToolResult, call_tool
from rlrun.rollout.engine import FINISH_STOP, Conversation, SamplingParams

FINISH_ANSWERED = "answered"  # a turn without a call, ended by the model (EOS)
FINISH_TRUNCATED = "truncated"  # a turn without a call, cut at agent.max_turn_tokens
FINISH_MAX_TURNS = "max_turns"  # agent.max_turns reached while the model still called tools
FINISH_EPISODE_TOKENS = "episode_tokens"  # no room left for what came next (rollout.max_response_tokens)
FINISH_ENV_DONE = "env_done"  # a step environment ended the episode
FINISH_ENV_ERROR = "env_error"  # the environment failed (made, reset, stepped); agent.env_error_reward
FINISH_REASONS = (
    FINISH_ANSWERED,
    FINISH_TRUNCATED,
    FINISH_MAX_TURNS,
    FINISH_EPISODE_TOKENS,
    FINISH_ENV_DONE,
    FINISH_ENV_ERROR,
)
ENV_STAGES = ("create", "reset", "step", "get_reward")  # where an environment can fail

OpenConversation = Callable[[list[list[int]], int], Conversation]


@dataclass(frozen=True)
class EpisodePrompts:
    """The prompts, each run `n` times (rows prompt-major: rows ``i*n .. i*n+n-1`` answer prompt
    ``i``): their token ids and text, their chat messages (the chat_template format renders these),
    and their dataset columns (``reset`` gets them as keywords; one names the environment)."""

    ids: Sequence[Sequence[int]]
    texts: Sequence[str]
    messages: Sequence[Sequence[dict[str, Any]]] | None = None
    columns: Mapping[str, Sequence[Any]] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.ids)

    def row_columns(self, index: int) -> dict[str, Any]:
        return {name: values[index] for name, values in self.columns.items()}


@dataclass
class EpisodeCounters:
    """What one episode did: model turns, tool calls and their errors by kind
    (`rlrun.agents.tools.CALL_ERRORS`), environment errors by stage (create, reset, step,
    get_reward), results cut at agent.tool_output_chars, and seconds spent in tools and in the
    environment."""

    turns: int = 0
    tool_calls: int = 0
    tool_errors: Counter[str] = field(default_factory=Counter)
    env_errors: Counter[str] = field(default_factory=Counter)
    truncated_outputs: int = 0
    tool_seconds: float = 0.0
    env_seconds: float = 0.0


@dataclass
class EpisodeBatch:
    """N = len(prompts) * n episodes, prompt-major. Per row: `prompt_ids` (the row's own prompt:
    an environment's reset text and the tools' descriptions join it), then the (N, T) tensors of
    everything after it, right-padded: `token_ids`, `token_mask` (1 on every token: the model's
    and the appended ones), `sampled_mask` (1 on the tokens the model sampled: the only ones to
    train), `log_probs` (the sampler's, 0 where nothing was sampled). `turn_ends`: the index in
    `token_ids` of each model turn's last token; `turn_rewards`: a step environment's reward for
    each turn it was given (else empty); `final_rewards`: the environment's `get_reward()` (or
    agent.env_error_reward when it failed; None without one); `finish_reasons` (FINISH_*);
    `transcripts`: the episode as chat messages; `completions`: its text after the prompt;
    `counters`; `environments`: each row's environment instance (TRL's reward functions read
    their state)."""

    n: int
    prompt_ids: list[list[int]]
    token_ids: torch.Tensor
    token_mask: torch.Tensor
    sampled_mask: torch.Tensor
    log_probs: torch.Tensor
    turn_ends: list[list[int]]
    turn_rewards: list[list[float]]
    final_rewards: list[float | None]
    finish_reasons: list[str]
    transcripts: list[list[dict[str, Any]]]
    completions: list[str]
    counters: list[EpisodeCounters]
    environments: list[Any]  # each row's environment instance after its episode (None: none)


@dataclass
class _Episode:
    """One row's episode while it runs."""

    row: int
    tools: dict[str, Tool]
    environment: Any = None
    env_class: EnvironmentClass | None = None
    ids: list[int] = field(default_factory=list)
    sampled: list[int] = field(default_factory=list)
    log_probs: list[float] = field(default_factory=list)
    turn_ends: list[int] = field(default_factory=list)
    turn_rewards: list[float] = field(default_factory=list)
    transcript: list[dict[str, Any]] = field(default_factory=list)
    counters: EpisodeCounters = field(default_factory=EpisodeCounters)
    finish: str | None = None
    final_reward: float | None = None

    def add(self, ids: Sequence[int], *, sampled: bool, log_probs: Sequence[float] = ()) -> None:
        self.ids += ids
        self.sampled += [int(sampled)] * len(ids)
        self.log_probs += list(log_probs) if sampled else [0.0] * len(ids)

    def env_failed(self, stage: str, outcome: Outcome | str, reward: float) -> None:
        message = outcome if isinstance(outcome, str) else f"{outcome.error}: {outcome.message}"
        self.counters.env_errors[stage] += 1
        self.transcript.append({"role": "environment", "error": f"{stage}: {message}"})
        self.finish, self.final_reward = FINISH_ENV_ERROR, reward


def run_episodes(
    open_conversation: OpenConversation,
    prompts: EpisodePrompts,
    *,
    agent: AgentSpec,
    sampling: SamplingParams,
    env_seeds: Sequence[int],
) -> EpisodeBatch:
    """Run ``sampling.n`` episodes of every prompt (module docstring) and return them.

    `open_conversation(prompt_ids, max_tokens)` opens the rows' conversation, one row per
    episode, each with its own prompt (e.g. ``lambda ids, m: engine.conversation(ids, 1,
    max_tokens=m)``). `sampling`: temperature, top-p/k, greedy and seed of every turn, `n`
    episodes per prompt, `max_tokens` the episode's tokens after its prompt (each turn samples
    at most agent.max_turn_tokens of them); `min_tokens` is refused (a turn has none). `env_seeds`:
    one per row."""
    check_time_limits_here()
    rows = len(prompts) * sampling.n
    if len(env_seeds) != rows:
        raise ValueError(f"env_seeds holds {len(env_seeds)} seeds for {rows} episodes")
    if sampling.min_tokens:
        raise ValueError("episodes sample turns of any length: min_tokens must be 0")
    episodes, prompt_ids = [], []
    for row in range(rows):
        episode, ids = _start(row, row // sampling.n, prompts, agent, env_seeds[row])
        episodes.append(episode)
        prompt_ids.append(ids)
    conversation = open_conversation(prompt_ids, sampling.max_tokens)
    try:
        for turn in range(agent.limits.max_turns):
            going = [e for e in episodes if e.finish is None]
            if not going:
                break
            _sample_turn(conversation, going, sampling, agent, turn)
            appended = [
                (e.row, ids) for e in going if (ids := _answer_turn(e, agent, turn, sampling.max_tokens))
            ]
            for row, ids in appended:
                episodes[row].add(ids, sampled=False)
            if appended:
                conversation.append([row for row, _ in appended], [ids for _, ids in appended])
    finally:
        conversation.close()
    for episode in episodes:
        _final_reward(episode, agent)
    return _batch(episodes, prompt_ids, agent, sampling.n)


def _start(
    row: int, index: int, prompts: EpisodePrompts, agent: AgentSpec, seed: int
) -> tuple[_Episode, list[int]]:
    """Make the row's environment and reset it; its prompt: the row's, with reset text and tools."""
    columns = prompts.row_columns(index)
    env_class = _environment_of(agent, columns, index)
    episode = _Episode(row, {t.name: t for t in agent.tools}, env_class=env_class)
    given = prompts.messages[index] if prompts.messages else None
    episode.transcript = (
        [dict(m) for m in given] if given else [{"role": "user", "content": prompts.texts[index]}]
    )
    reset_text = None
    if env_class is not None:
        reset_text = _make_environment(episode, env_class, columns, agent, seed)
    if reset_text is not None:  # it joins the prompt (as the format writes it)
        episode.transcript.append({"role": "environment", "content": reset_text, "reset": True})
    ids = agent.format.prompt_ids(Prompt(prompts.ids[index], given, reset_text), list(episode.tools.values()))
    return episode, ids


def _environment_of(agent: AgentSpec, columns: dict[str, Any], index: int) -> EnvironmentClass | None:
    if not agent.environments:
        return None
    if agent.environment_column is None:
        return agent.environments[None]
    name = columns.get(agent.environment_column)
    if name not in agent.environments:
        valid = ", ".join(map(repr, agent.environments))
        raise ValueError(
            f"prompt {index}: its `{agent.environment_column}` column is {name!r}, which names none of "
            f"agent.environments ({valid})"
        )
    return agent.environments[name]


def _make_environment(
    episode: _Episode, env_class: EnvironmentClass, columns: dict[str, Any], agent: AgentSpec, seed: int
) -> str | None:
    """Make and reset the environment; its tools join the episode's. None: no text to add."""
    limits = agent.limits
    made = guarded_call(env_class.factory, timeout_s=limits.env_timeout_s)
    episode.counters.env_seconds += made.seconds
    if made.error is not None:
        episode.env_failed("create", made, limits.env_error_reward)
        return None
    episode.environment = made.value
    kwargs = reset_kwargs(env_class, columns, seed=seed, skip=agent.environment_column)
    reset = guarded_call(made.value.reset, kwargs=kwargs, timeout_s=limits.env_timeout_s)
    episode.counters.env_seconds += reset.seconds
    if reset.error is not None:
        episode.env_failed("reset", reset, limits.env_error_reward)
        return None
    if reset.value is not None and not isinstance(reset.value, str):
        episode.env_failed(
            "reset", f"returned a {type(reset.value).__name__}, not text or None", limits.env_error_reward
        )
        return None
    episode.tools |= {tool.name: tool for tool in env_class.tools(made.value)}
    return reset.value


def _sample_turn(
    conversation: Conversation, going: list[_Episode], sampling: SamplingParams, agent: AgentSpec, turn: int
) -> None:
    """One model turn for every row still going: one sample call per distinct room left."""
    by_room: dict[int, list[_Episode]] = defaultdict(list)
    for episode in going:
        by_room[min(agent.limits.max_turn_tokens, sampling.max_tokens - len(episode.ids))].append(episode)
    for room, group in sorted(by_room.items(), reverse=True):
        seed = None if sampling.seed is None else derive_seed(sampling.seed, turn, room)
        params = dataclasses.replace(sampling, n=1, max_tokens=room, seed=seed)
        batch = conversation.sample([e.row for e in group], params)
        for episode, ids, mask, log_probs, reason in zip(
            group,
            batch.response_ids.tolist(),
            batch.response_mask.tolist(),
            batch.log_probs.tolist(),
            batch.finish_reasons,
        ):
            length = sum(mask)
            episode.add(ids[:length], sampled=True, log_probs=log_probs[:length])
            episode.turn_ends.append(len(episode.ids) - 1)
            episode.counters.turns += 1
            episode.transcript.append(
                {"role": "assistant", "content": "", "ended": reason == FINISH_STOP, "ids": ids[:length]}
            )


def _answer_turn(episode: _Episode, agent: AgentSpec, turn: int, budget: int) -> list[int] | None:
    """What follows the turn just sampled: the ids to append, or None when the episode ends."""
    message = episode.transcript[-1]
    turn_ids, ended = message.pop("ids"), message.pop("ended")
    message["content"] = agent.format.decode(turn_ids)
    room = budget - len(episode.ids)
    last = turn == agent.limits.max_turns - 1
    if episode.env_class is not None and episode.env_class.kind == STEP:
        return _step(episode, agent, message["content"], ended=ended, room=room, last=last)
    calls = agent.format.parse_calls(turn_ids)
    if calls:
        message["tool_calls"] = [_shown_call(c) for c in calls]
    if not calls:
        episode.finish = (
            FINISH_ANSWERED if ended else FINISH_EPISODE_TOKENS if room == 0 else FINISH_TRUNCATED
        )
        return None
    if last:  # as TRL: the last turn's calls are not run
        episode.finish = FINISH_MAX_TURNS
        return None
    results = _run_calls(episode, calls, agent)
    ids = agent.format.results_ids(results, ended=ended)
    shown = len(ids) < room  # and room for the next turn's first token
    episode.transcript += [_result_message(r, shown) for r in results]
    if not shown:
        episode.finish = FINISH_EPISODE_TOKENS
        return None
    return ids


def _step(
    episode: _Episode, agent: AgentSpec, action: str, *, ended: bool, room: int, last: bool
) -> list[int] | None:
    limits = agent.limits
    outcome = guarded_call(episode.environment.step, (action,), timeout_s=limits.env_timeout_s)
    episode.counters.env_seconds += outcome.seconds
    if outcome.error is not None:
        episode.env_failed("step", outcome, limits.env_error_reward)
        return None
    parsed = _step_result(outcome.value)
    if isinstance(parsed, str):
        episode.env_failed("step", parsed, limits.env_error_reward)
        return None
    observation, reward, done = parsed
    episode.turn_rewards.append(reward)
    episode.transcript.append({"role": "environment", "content": observation, "reward": reward, "done": done})
    if done:
        episode.finish = FINISH_ENV_DONE
        return None
    if last:
        episode.finish = FINISH_MAX_TURNS
        return None
    ids = agent.format.observation_ids(observation, ended=ended) if observation is not None else []
    if len(ids) >= room:
        episode.transcript[-1]["shown"] = False
        episode.finish = FINISH_EPISODE_TOKENS
        return None
    return ids


def _step_result(value: Any) -> tuple[str | None, float, bool] | str:
    """`(observation, reward, done)` checked, or what is wrong with it."""
    if not isinstance(value, tuple) or len(value) != 3:
        return f"step returned {type(value).__name__}, not (observation, reward, done)"
    observation, reward, done = value
    number = as_number(reward)
    if observation is not None and not isinstance(observation, str):
        return f"step's observation is a {type(observation).__name__}, not text or None"
    if number is None:
        return f"step's reward {reward!r} is not a finite number"
    if not isinstance(done, bool):
        return f"step's done is a {type(done).__name__}, not a bool"
    return observation, number, done


def _run_calls(episode: _Episode, calls: list[ToolCall], agent: AgentSpec) -> list[ToolResult]:
    limits, counters = agent.limits, episode.counters
    results = []
    for index, call in enumerate(calls):
        if index >= limits.max_calls_per_turn:
            result = ToolResult(
                call.name or "?",
                error=f"more than {limits.max_calls_per_turn} calls in one turn",
                error_kind=TOO_MANY_CALLS,
            )
        else:
            result = call_tool(
                episode.tools, call, timeout_s=limits.tool_timeout_s, output_chars=limits.tool_output_chars
            )
        counters.tool_calls += 1
        counters.tool_seconds += result.seconds
        counters.truncated_outputs += result.truncated
        if result.error_kind is not None:
            counters.tool_errors[result.error_kind] += 1
        results.append(result)
    return results


def _shown_call(call: ToolCall) -> dict[str, Any]:
    if call.error is not None:
        return {"text": call.text, "error": call.error}
    return {"name": call.name, "args": list(call.args), "arguments": dict(call.kwargs)}


def _result_message(result: ToolResult, shown: bool) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "tool", "name": result.name, "content": result.text}
    if result.error is not None:
        message |= {"content": "", "error": result.error, "error_kind": result.error_kind}
    if result.truncated:
        message["truncated"] = True
    if not shown:
        message["shown"] = False  # no room left in the episode: the model never saw it
    return message


def _final_reward(episode: _Episode, agent: AgentSpec) -> None:
    if episode.finish == FINISH_ENV_ERROR or episode.env_class is None or not episode.env_class.has_reward:
        return
    outcome = guarded_call(episode.environment.get_reward, timeout_s=agent.limits.env_timeout_s)
    episode.counters.env_seconds += outcome.seconds
    number = as_number(outcome.value) if outcome.error is None else None
    if number is None:
        problem = outcome if outcome.error is not None else f"returned {outcome.value!r}, not a finite number"
        episode.counters.env_errors["get_reward"] += 1
        episode.transcript.append({"role": "environment", "error": f"get_reward: {_text(problem)}"})
        number = agent.limits.env_error_reward
    episode.final_reward = number


def _text(problem: Outcome | str) -> str:
    return problem if isinstance(problem, str) else f"{problem.error}: {problem.message}"


def _finished(episode: _Episode) -> str:
    if episode.finish is None:  # every turn loop ends each episode by its last turn
        raise AssertionError(f"row {episode.row}'s episode never ended")
    return episode.finish


def _batch(episodes: list[_Episode], prompt_ids: list[list[int]], agent: AgentSpec, n: int) -> EpisodeBatch:
    width = max((len(e.ids) for e in episodes), default=0)
    pad = agent.format.pad_token_id

    def padded(values: list[list[Any]], fill: Any, dtype: torch.dtype) -> torch.Tensor:
        return torch.tensor([v + [fill] * (width - len(v)) for v in values], dtype=dtype).reshape(
            len(values), width
        )

    return EpisodeBatch(
        n=n,
        prompt_ids=prompt_ids,
        token_ids=padded([e.ids for e in episodes], pad, torch.long),
        token_mask=padded([[1] * len(e.ids) for e in episodes], 0, torch.long),
        sampled_mask=padded([e.sampled for e in episodes], 0, torch.long),
        log_probs=padded([e.log_probs for e in episodes], 0.0, torch.float32),
        turn_ends=[e.turn_ends for e in episodes],
        turn_rewards=[e.turn_rewards for e in episodes],
        final_rewards=[e.final_reward for e in episodes],
        finish_reasons=[_finished(e) for e in episodes],
        transcripts=[e.transcript for e in episodes],
        completions=[agent.format.decode(e.ids) for e in episodes],
        counters=[e.counters for e in episodes],
        environments=[e.environment for e in episodes],
    )
