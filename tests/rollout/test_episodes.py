"""The episode runner: what tools and environments see, what the model's context holds, masks,
log-probs, budgets and errors, with a scripted stand-in for the model (it returns chosen turns),
and for real on the shipped tiny model."""

from __future__ import annotations

import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

import pytest
import torch

from rlrun.agents.environments import derive_seed
from rlrun.agents.guard import TimeLimitError
from rlrun.agents.spec import build_agent
from rlrun.rollout.engine import FINISH_LENGTH, FINISH_STOP, RolloutBatch, SamplingParams
from rlrun.rollout.episodes import (
    FINISH_ANSWERED,
    FINISH_ENV_DONE,
    FINISH_ENV_ERROR,
    FINISH_EPISODE_TOKENS,
    FINISH_MAX_TURNS,
    FINISH_TRUNCATED,
    EpisodePrompts,
    run_episodes,
)
from rlrun.schema.agent import Agent
from tests.agents.byte_tokenizer import TOOLS_TEMPLATE, byte_tokenizer
from tests.rollout.test_conversation import engine_and_tokenizer  # noqa: F401 (the tiny model's fixture)

ENVS = "tests.agents.envs_fixture"
TOKENIZER = byte_tokenizer()
EOS = TOKENIZER.eos_token_id


def encode(text: str) -> list[int]:
    return TOKENIZER.encode(text, add_special_tokens=False)


class ScriptedModel:
    """A `Conversation` whose turns are scripted: row r's k-th turn is `script[r][k]` (text; EOS
    appended unless the entry is `(text, False)`), cut at the call's max_tokens like a sampler.
    Its log-probs are -(k + 1) / 100 at the k-th sampled token of the row, so they can be traced.
    It checks the contract: n = 1, no row outgrows max_tokens after its prompt."""

    def __init__(self, script, tokenizer=TOKENIZER):
        self.script, self.tokenizer = script, tokenizer
        self.calls: list[tuple] = []
        self.closed = False

    def open(self, prompt_ids: list[list[int]], max_tokens: int) -> ScriptedModel:
        self.prompts = [list(p) for p in prompt_ids]
        self.contexts = [list(p) for p in prompt_ids]
        self.max_tokens, self.turn, self.sampled = max_tokens, [0] * len(prompt_ids), [0] * len(prompt_ids)
        self.num_rows = len(prompt_ids)
        return self

    def sample(self, rows: Sequence[int], sampling: SamplingParams) -> RolloutBatch:
        assert sampling.n == 1
        self.calls.append(("sample", list(rows), sampling.max_tokens, sampling.seed))
        turns, logs = [], []
        for r in rows:
            entry = self.script[r][self.turn[r]]
            text, ends = entry if isinstance(entry, tuple) else (entry, True)
            ids = (
                self.tokenizer.encode(text, add_special_tokens=False) + [self.tokenizer.eos_token_id] * ends
            )[: sampling.max_tokens]
            logs.append([-(self.sampled[r] + k + 1) / 100 for k in range(len(ids))])
            self.turn[r] += 1
            self.sampled[r] += len(ids)
            self._grow(r, ids)
            turns.append(ids)
        width = max(map(len, turns))
        return RolloutBatch(
            torch.tensor([t + [0] * (width - len(t)) for t in turns]),
            torch.tensor([[1] * len(t) + [0] * (width - len(t)) for t in turns]),
            torch.tensor([lp + [0.0] * (width - len(lp)) for lp in logs]),
            [FINISH_STOP if t[-1] == self.tokenizer.eos_token_id else FINISH_LENGTH for t in turns],
            1,
        )

    def append(self, rows: Sequence[int], token_ids: Sequence[Sequence[int]]) -> None:
        self.calls.append(("append", list(rows), [list(t) for t in token_ids]))
        for r, ids in zip(rows, token_ids):
            self._grow(r, list(ids))

    def _grow(self, row: int, ids: list[int]) -> None:
        self.contexts[row] += ids
        assert len(self.contexts[row]) - len(self.prompts[row]) <= self.max_tokens, "a row outgrew its budget"

    def close(self) -> None:
        self.closed = True


def prompts(*texts: str, **columns) -> EpisodePrompts:
    return EpisodePrompts(ids=[encode(t) for t in texts], texts=list(texts), columns=columns)


def run(
    script,
    agent: Agent,
    batch: EpisodePrompts,
    *,
    n: int = 1,
    max_tokens: int = 200,
    seed: int | None = 3,
    tokenizer=TOKENIZER,
    **spec,
):
    model = ScriptedModel(script, tokenizer)
    sampling = SamplingParams(n=n, max_tokens=max_tokens, seed=seed)
    built = build_agent(agent, tokenizer=tokenizer, **spec)
    rows = len(batch) * n
    result = run_episodes(
        model.open, batch, agent=built, sampling=sampling, env_seeds=list(range(100, 100 + rows))
    )
    assert model.closed
    return result, model


TOOLS = "tests.agents.tools_fixture"


@pytest.fixture
def recorder():
    from tests.agents.tools_fixture import SEEN

    SEEN.clear()
    return SEEN


CALCULATOR = Agent(enabled=True, tools=["rlrun:calculator"])


def test_a_call_its_result_and_the_answer_laid_out_token_by_token():
    script = {0: ["<call>calculator('2+3')</call>", "5"]}
    batch, model = run(script, CALCULATOR, prompts("2+3="))
    turn1, result, turn2 = (
        encode("<call>calculator('2+3')</call>") + [EOS],
        encode("<result>5</result>"),
        encode("5") + [EOS],
    )
    assert batch.prompt_ids == [encode("2+3=")]
    assert batch.token_ids[0].tolist() == turn1 + result + turn2
    assert batch.sampled_mask[0].tolist() == [1] * len(turn1) + [0] * len(result) + [1] * len(turn2)
    assert batch.token_mask[0].tolist() == [1] * (len(turn1) + len(result) + len(turn2))
    sampled_logs = [-(k + 1) / 100 for k in range(len(turn1) + len(turn2))]
    expected_logs = sampled_logs[: len(turn1)] + [0.0] * len(result) + sampled_logs[len(turn1) :]
    assert batch.log_probs[0].tolist() == pytest.approx(expected_logs)
    assert batch.turn_ends == [[len(turn1) - 1, len(turn1) + len(result) + len(turn2) - 1]]
    assert batch.finish_reasons == [FINISH_ANSWERED]
    assert batch.completions == ["<call>calculator('2+3')</call><result>5</result>5"]
    assert model.contexts[0] == encode("2+3=") + batch.token_ids[0].tolist()  # the model's context, exactly
    assert model.calls[1] == ("append", [0], [result])
    assert batch.transcripts[0] == [
        {"role": "user", "content": "2+3="},
        {
            "role": "assistant",
            "content": "<call>calculator('2+3')</call>",
            "tool_calls": [{"name": "calculator", "args": ["2+3"], "arguments": {}}],
        },
        {"role": "tool", "name": "calculator", "content": "5"},
        {"role": "assistant", "content": "5"},
    ]
    counters = batch.counters[0]
    assert (counters.turns, counters.tool_calls, dict(counters.tool_errors)) == (2, 1, {})
    assert (batch.turn_rewards, batch.final_rewards) == ([[]], [None])


def test_the_tool_gets_exactly_what_the_model_wrote(recorder):
    agent = Agent(enabled=True, tools=[f"{TOOLS}:record"], max_turn_tokens=100)
    script = {0: ["<call>record(2, b=40)</call><call>record(-1)</call>", "ok"]}
    batch, _ = run(script, agent, prompts("q"))
    assert recorder == [(2, 40), (-1, 0)]
    assert batch.completions[0].endswith("<result>42</result><result>-1</result>ok")


def test_turns_are_batched_across_rows_and_each_row_ends_its_own_way():
    script = {
        0: ["<call>calculator('1+1')</call>", "2"],  # answered after a call
        1: ["no tools"],  # answered at once
        2: [("cut without a call", False)],  # cut at max_turn_tokens (8)
        3: ["<call>calculator('1')</call>", "<call>calculator('2')</call>", "<call>calculator('3')</call>"],
    }
    agent = CALCULATOR.model_copy(update={"max_turns": 3, "max_turn_tokens": 40})
    batch, model = run(script, agent, prompts("a", "b", "c", "d"))
    assert batch.finish_reasons[:2] == [FINISH_ANSWERED, FINISH_ANSWERED]
    assert batch.finish_reasons[3] == FINISH_MAX_TURNS
    samples = [c for c in model.calls if c[0] == "sample"]
    assert [c[1] for c in samples] == [[0, 1, 2, 3], [0, 3], [3]]  # one sample call per turn
    # as TRL: the last turn's calls are not run, so nothing is appended after it
    assert batch.counters[3].tool_calls == 2 and batch.transcripts[3][-1]["role"] == "assistant"
    short = Agent(enabled=True, tools=["rlrun:calculator"], max_turn_tokens=8)
    cut, _ = run({0: [("cut without a call", False)]}, short, prompts("c"))
    assert cut.finish_reasons == [FINISH_TRUNCATED] and cut.token_ids.shape == (1, 8)


def test_turn_seeds_derive_from_the_calls_seed_and_the_turn():
    script = {0: ["<call>calculator('1')</call>", "x"]}
    _, model = run(script, CALCULATOR, prompts("a"), seed=11)
    samples = [c for c in model.calls if c[0] == "sample"]
    assert [c[3] for c in samples] == [derive_seed(11, 0, 32), derive_seed(11, 1, 32)]
    _, unseeded = run(script, CALCULATOR, prompts("a"), seed=None)
    assert [c[3] for c in unseeded.calls if c[0] == "sample"] == [None, None]  # the global generator


def test_the_episode_budget_bounds_turns_and_results():
    big = "<call>calculator('" + "1" * 30 + "')</call>"  # its result is the 30 ones back
    small = "<call>calculator('7')</call>"
    turn0, result0 = len(encode(big)) + 1, len(encode("<result>" + "1" * 30 + "</result>"))
    turn1, result1 = len(encode(small)) + 1, len(encode("<result>7</result>"))
    budget = turn0 + result0 - 1  # row 0's result misses by one token: room is kept for the next turn
    script = {0: [big, "a"], 1: [small, "done" * 20]}
    agent = CALCULATOR.model_copy(update={"max_turn_tokens": 60})
    batch, model = run(script, agent, prompts("a", "b"), max_tokens=budget)
    assert batch.finish_reasons[0] == FINISH_EPISODE_TOKENS
    assert batch.transcripts[0][-1]["shown"] is False and batch.token_mask[0].sum() == turn0
    # row 1's second turn gets only the room left, in a sample call of its own
    samples = [c for c in model.calls if c[0] == "sample"]
    assert samples[1][1:3] == ([1], budget - turn1 - result1)
    assert batch.finish_reasons[1] == FINISH_EPISODE_TOKENS and batch.token_mask[1].sum() == budget


def test_nothing_a_tool_does_stops_the_run():
    names = ("raises", "hangs", "returns_bytes", "returns_megabytes")
    agent = Agent(
        enabled=True,
        tools=[f"{TOOLS}:{name}" for name in names],
        tool_timeout_s=0.3,
        tool_output_chars=5,
        max_calls_per_turn=6,
        max_turn_tokens=300,
    )
    calls = "".join(f"<call>{name}()</call>" for name in names) + "<call>nope()</call><call>raises(1)</call>"
    calls += "<call>broken(</call>"
    started = time.monotonic()
    batch, _ = run({0: [calls, "fine"]}, agent, prompts("q"), max_tokens=1000)
    assert time.monotonic() - started < 10
    counters = batch.counters[0]
    assert dict(counters.tool_errors) == {
        "raised": 1,
        "timeout": 1,
        "not_text": 1,
        "unknown_tool": 1,
        "bad_arguments": 1,
        "too_many_calls": 1,
    }
    assert (counters.tool_calls, counters.truncated_outputs) == (7, 1)
    assert batch.finish_reasons == [FINISH_ANSWERED]
    shown = batch.completions[0]
    assert (
        "<result>error: RuntimeError: broken</result><result>error: no result within 0.3 s</result>" in shown
    )
    assert (
        "<result>yyyyy</result>" in shown and "<result>error: more than 6 calls in one turn</result>" in shown
    )


def test_a_trl_environment_one_instance_per_episode_its_tools_reset_text_and_reward():
    agent = Agent(enabled=True, environment=f"{ENVS}:Counter", max_turn_tokens=100)
    script = {0: ["<call>add(2)</call>", "done"], 1: ["<call>add(5)</call><call>add(1)</call>", "done"]}
    batch, _ = run(script, agent, prompts("Count.", start=[10]), n=2)
    assert batch.prompt_ids[0] == encode("Count.") + encode("\nStart at 10.")  # reset's text joins the prompt
    assert batch.final_rewards == [12.0, 16.0]  # each episode's own instance: 10 + 2, 10 + 5 + 1
    assert batch.transcripts[0][:2] == [
        {"role": "user", "content": "Count."},
        {"role": "environment", "content": "Start at 10.", "reset": True},
    ]
    assert (
        batch.completions[1]
        == "<call>add(5)</call><call>add(1)</call><result>15</result><result>16</result>done"
    )


def test_reset_gets_the_rows_columns_and_its_seed():
    from tests.agents import envs_fixture

    made = []
    original = envs_fixture.Seeded.reset

    def spy(self, seed, **kwargs):
        made.append((seed, kwargs))
        return original(self, seed, **kwargs)

    envs_fixture.Seeded.reset = spy
    try:
        run(
            {0: ["a"], 1: ["b"]},
            Agent(enabled=True, environment=f"{ENVS}:Seeded"),
            prompts("p", level=[3]),
            n=2,
        )
    finally:
        envs_fixture.Seeded.reset = original
    assert made == [(100, {"level": 3}), (101, {"level": 3})]


def test_a_step_environment_rewards_each_turn_and_ends_the_episode():
    agent = Agent(enabled=True, environment=f"{ENVS}:Guess")
    script = {0: ["3", "9", "7"], 1: ["1", "2", "3", "4"]}
    batch, _ = run(script, agent, prompts("Play.", secret=["7"]), n=2)
    assert batch.turn_rewards[0] == [0.0, 0.0, 1.0] and batch.finish_reasons[0] == FINISH_ENV_DONE
    assert batch.completions[0] == "3Higher.9Lower.7"
    assert batch.finish_reasons[1] == FINISH_MAX_TURNS and batch.turn_rewards[1] == [0.0] * 4
    assert batch.final_rewards == [None, None]  # Guess has no get_reward
    assert batch.transcripts[0][3] == {
        "role": "environment",
        "content": "Higher.",
        "reward": 0.0,
        "done": False,
    }


@pytest.mark.parametrize(
    ("environment", "stage", "message"),
    [
        ("BrokenReset", "reset", "raised: RuntimeError: no server"),
        ("SlowStep", "step", "timeout: no result within 0.3 s"),
        ("BadStep", "step", "step returned tuple, not (observation, reward, done)"),
    ],
)
def test_an_environment_that_fails_ends_its_episode_with_the_stated_reward(environment, stage, message):
    agent = Agent(enabled=True, environment=f"{ENVS}:{environment}", env_timeout_s=0.3, env_error_reward=-1.0)
    batch, model = run({0: ["x", "y"], 1: ["x", "y"]}, agent, prompts("p"), n=2)
    assert batch.finish_reasons == [FINISH_ENV_ERROR] * 2 and batch.final_rewards == [-1.0, -1.0]
    assert all(c.env_errors == {stage: 1} for c in batch.counters)
    assert batch.transcripts[0][-1] == {"role": "environment", "error": f"{stage}: {message}"}
    if stage == "reset":
        assert not [c for c in model.calls if c[0] == "sample"] and batch.token_ids.shape == (2, 0)


def test_a_reward_that_is_not_a_number_is_counted_and_replaced():
    agent = Agent(enabled=True, environment=f"{ENVS}:BadReward", env_error_reward=-2.0)
    batch, _ = run({0: ["done"]}, agent, prompts("p"))
    assert batch.final_rewards == [-2.0] and batch.counters[0].env_errors == {"get_reward": 1}
    assert batch.finish_reasons == [FINISH_ANSWERED]


def test_environments_chosen_per_row_by_a_column():
    agent = Agent(
        enabled=True,
        environments={"count": f"{ENVS}:Counter", "guess": f"{ENVS}:Guess"},
        environment_column="task",
    )
    batch, _ = run(
        {0: ["<call>add(1)</call>", "ok"], 1: ["7"]},
        agent,
        prompts("a", "b", task=["count", "guess"], secret=["0", "7"]),
    )
    assert batch.finish_reasons == [FINISH_ANSWERED, FINISH_ENV_DONE]
    assert batch.final_rewards == [1.0, None] and batch.turn_rewards == [[], [1.0]]
    with pytest.raises(ValueError, match="prompt 0: its `task` column is 'chess', which names none of"):
        run({0: ["x"]}, agent, prompts("a", task=["chess"]))


def test_the_chat_template_format_appends_what_the_template_renders():
    tokenizer = byte_tokenizer(eos="<|im_end|>", chat_template=TOOLS_TEMPLATE.read_text())
    agent = Agent(enabled=True, format="chat_template", tools=["rlrun:calculator"], max_turn_tokens=100)
    messages = [[{"role": "user", "content": "What is 2+3?"}]]
    batch_prompts = EpisodePrompts(ids=[[]], texts=["What is 2+3?"], messages=messages)
    # as the template writes an assistant's call (after its empty content)
    call = '\n<tool_call>\n{"name": "calculator", "arguments": {"expression": "2+3"}}\n</tool_call>'
    batch, model = run({0: [call, "It is 5."]}, agent, batch_prompts, tokenizer=tokenizer, max_tokens=400)
    spec = build_agent(agent, tokenizer=tokenizer)
    whole = [
        *messages[0],
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {"type": "function", "function": {"name": "calculator", "arguments": {"expression": "2+3"}}}
            ],
        },
        {"role": "tool", "name": "calculator", "content": "5"},
        {"role": "assistant", "content": "It is 5."},
    ]
    rendered = tokenizer.apply_chat_template(whole, tools=[t.schema for t in spec.tools], return_dict=False)
    assert model.contexts[0] == rendered[: len(model.contexts[0])]
    assert rendered[len(model.contexts[0]) :] == tokenizer.encode(
        "\n", add_special_tokens=False
    )  # the template's last newline
    assert batch.finish_reasons == [FINISH_ANSWERED]


def test_what_cannot_run_is_refused_before_anything_runs():
    spec = build_agent(CALCULATOR, tokenizer=TOKENIZER)
    model = ScriptedModel({})
    with pytest.raises(ValueError, match="env_seeds holds 1 seeds for 2 episodes"):
        run_episodes(
            model.open, prompts("a"), agent=spec, sampling=SamplingParams(n=2, max_tokens=8), env_seeds=[0]
        )
    with pytest.raises(ValueError, match="min_tokens must be 0"):
        run_episodes(
            model.open,
            prompts("a"),
            agent=spec,
            sampling=SamplingParams(max_tokens=8, min_tokens=1),
            env_seeds=[0],
        )
    with ThreadPoolExecutor(1) as pool:  # not the main thread: the time limits could not work there
        call = {"agent": spec, "sampling": SamplingParams(max_tokens=8), "env_seeds": [0]}
        failure = pool.submit(run_episodes, model.open, prompts("a"), **call).exception()
    assert isinstance(failure, TimeLimitError) and "main thread" in str(failure)


def test_on_the_real_tiny_model_episodes_are_its_samples_and_replay_exactly(request):
    """rlrun:tiny-base answers arithmetic and calls no tool: each episode is one turn, which is
    exactly what the engine samples for that turn's seed, and a rerun replays it."""
    engine, tokenizer = request.getfixturevalue("engine_and_tokenizer")
    texts = ["12+3=", "40+7="]
    batch_prompts = EpisodePrompts(ids=[tokenizer.encode(t) for t in texts], texts=texts)
    spec = build_agent(
        Agent(enabled=True, tools=["rlrun:calculator"], max_turn_tokens=6), tokenizer=tokenizer
    )
    sampling = SamplingParams(n=2, max_tokens=20, seed=5)

    def episodes():
        return run_episodes(
            lambda ids, m: engine.conversation(ids, 1, max_tokens=m),
            batch_prompts,
            agent=spec,
            sampling=sampling,
            env_seeds=[0, 1, 2, 3],
        )

    first, second = episodes(), episodes()
    rows = [tokenizer.encode(t) for t in texts for _ in range(2)]
    expected = engine.generate(rows, SamplingParams(max_tokens=6, seed=derive_seed(5, 0, 6)))
    width = expected.response_ids.shape[1]
    assert torch.equal(first.token_ids[:, :width], expected.response_ids)
    assert torch.equal(first.sampled_mask[:, :width], expected.response_mask)
    assert torch.allclose(first.log_probs[:, :width], expected.log_probs)
    assert torch.equal(first.sampled_mask, first.token_mask)  # no tool answered: every token was sampled
    assert set(first.finish_reasons) <= {FINISH_ANSWERED, FINISH_TRUNCATED}
    assert all(c.turns == 1 and c.tool_calls == 0 for c in first.counters)
    assert torch.equal(first.token_ids, second.token_ids) and first.completions == second.completions
