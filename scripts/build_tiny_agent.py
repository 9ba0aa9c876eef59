"""Rebuild rlrun's shipped tiny agent model (``rlrun:tiny-agent``) from a seed.

The tiny models' Qwen2 (``build_tiny_models.build_model``) with their character tokenizer
grown by the plain tool format's tokens (``<call>``, ``</call>``, ``<result>``, ``</result>``) and
the characters calls need, trained with supervision on synthesized episodes of two tasks,
loss on the model's turns only (the prompt and the tools' results are context):

- calculator: ``123*456=`` -> a quarter of the episodes call ``calculator("123*456")`` and copy
  its result (half of them a random number shown as the result: copying is then the only way
  to the answer), the rest answer directly with a random number as long as the product (the
  model cannot multiply, and trying took its copying away).
- guess-a-number (``rlrun.tasks.guess_number``): three games in ten bisect (every guess the
  middle of the interval the game last stated), the others guess uniform numbers of the whole
  range, the game's answers unused (9 % of such games are won: 1 - (62/63)^6).

The calculator episodes first all call the tool, until the model writes calls and copies
results (copying is what it learns slowest); then a quarter do, beside calling episodes trained
on their answers only, while the learning rate decays. The first checkpoint after that
(checked every ``--eval-every`` steps) whose measured behaviour is in its bands (calls written
right and results copied, a calling share near the data's, half the guesses inside the
interval, most games not yet won) becomes ``tiny-agent``; the games are measured from the
switch on (before it, only the calculator's copying decides anything). Behaviour is measured
on episodes run as training runs them (``rlrun.rollout.episodes`` over the hf engine, an
``agent`` section in the plain format with ``rlrun:calculator`` or the ``GuessNumber``
environment); the figures go to ``build_info.json``.
Deterministic on CPU for a given seed, thread count, libraries and CPU kernels.

    python scripts/build_tiny_agent.py                  # into rlrun/embedded/models/tiny-agent
    python scripts/build_tiny_agent.py --out /tmp/agent # elsewhere
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from transformers import PreTrainedTokenizerFast, Qwen2ForCausalLM

sys.path.insert(0, str(Path(__file__).resolve().parent))
from build_tiny_models import (
    CHARACTERS,
    build_model,
    build_parser,
    build_tokenizer,
    save_tokenizer,
)

from rlrun.agents import AgentSpec, build_agent
from rlrun.facts.machine import numerics
from rlrun.rollout import ROLLOUT_ENGINES, SamplingParams
from rlrun.rollout.episodes import FINISH_ANSWERED, EpisodePrompts, run_episodes
from rlrun.schema.agent import Agent
from rlrun.tasks.arithmetic import ArithmeticTask
from rlrun.tasks.guess_number import CORRECT, GAME_OVER, HIGHER, LOWER, GuessNumber, GuessNumberTask

ENVIRONMENT = "rlrun.tasks.guess_number:GuessNumber"  # agent.environment of the guessing games
FORMAT_TOKENS = ("<call>", "</call>", "<result>", "</result>")
# Added as whole tokens too, so that transformers 5.x's byte-level pre-tokenizer keeps them.
WHITESPACE = (" ", "\n")
AGENT_CHARACTERS = CHARACTERS + "\"'_\n<>[]{}!;"
MAX_POSITIONS = 256  # a lost game of 1 to 63 is 153 tokens
DEFAULT_OUT = Path(__file__).resolve().parents[1] / "rlrun" / "embedded" / "models" / "tiny-agent"

CALCULATOR_DIGITS = 3  # operands of up to 3 digits: products the model cannot compute alone
CALL_SHARE = 0.25  # of the calculator episodes trained on that call the tool
# Of the calling episodes trained on, those whose result is a random number (of 1 to 7 digits),
# copied as the answer: copying is then the only way to the answer. On true products alone the
# model chases the product instead (no result copied in 200 episodes after 1200 steps); with half
# random, copying appears after ~500 steps.
RANDOM_RESULT_SHARE = 0.5
# Of the games trained on, those that bisect: a strategy the model has, for RL to make its own
# (bisection wins every game of 1 to 63 in 6 guesses). The others ignore the answers, so the
# first guess decides the game. A fifth of the guesses in the middle, mixed within each game
# instead, won 38 % and left RL about 4 points per 40 steps: the middle had to be chosen at
# every turn, each worth little alone.
BISECT_SHARE = 0.3
MAX_TURNS = 8  # an episode's model turns in the measurements: 6 guesses, the answer, one spare
MAX_TURN_TOKENS = 32  # a calculator call with 3-digit operands is 24 tokens with its EOS

# The bands a checkpoint's measured behaviour must be in to become the model
CALL_BAND = (0.15, 0.35)  # share of calculator episodes that call
FORMAT_MIN = 0.9  # calls written right, results copied
LEGAL_MIN = 0.5  # guesses inside the interval the answers so far leave
GUESS_SUCCESS_MAX = 0.70  # games won within the limit: room for RL
COPYING = ("calls_written_right", "results_copied")  # what the calculator episodes that all call teach


@dataclass
class Episode:
    """What the model did: each call (as the runner shows it: name, args, arguments; or the
    text and error of one it could not read) with the result it saw, and its final answer (the
    turn without a call; None when the turns or the episode's room ran out first)."""

    calls: list[tuple[dict[str, Any], str]] = field(default_factory=list)
    final: str | None = None


def agent_tokenizer() -> PreTrainedTokenizerFast:
    return build_tokenizer(AGENT_CHARACTERS, FORMAT_TOKENS + WHITESPACE, MAX_POSITIONS)


# ---- the synthesized episodes -------------------------------------------------------------------


def calculator_episode(
    record: dict[str, str], calls: bool, result: str | None = None
) -> list[tuple[str, bool]]:
    """(text, sampled by the model) segments after the prompt; each model turn ends at EOS. A
    call's result (the product unless given) is copied as the answer; a direct answer is
    ``result`` too (the product unless given)."""
    if not calls:
        return [(result or record["answer"], True)]
    expression, result = record["prompt"].removesuffix("="), result or record["answer"]
    return [
        (f'<call>calculator("{expression}")</call>', True),
        (f"<result>{result}</result>", False),
        (result, True),
    ]


def _calculator_or_guess(record: dict[str, str], rng: np.random.Generator) -> list[tuple[str, bool]]:
    """A ``CALL_SHARE`` of the episodes call; the others answer a random number as long as the
    product. The model cannot multiply (0% of direct answers right when trained on products),
    and training it to try took its copying of results away (93% copied to 14% in 400 steps)."""
    if rng.random() < CALL_SHARE:
        return calculator_episode(record, True, shown_result(record, rng))
    digits = len(record["answer"])
    return calculator_episode(record, False, str(int(rng.integers(10 ** (digits - 1), 10**digits))))


def shown_result(record: dict[str, str], rng: np.random.Generator) -> str:
    """The product, or (``RANDOM_RESULT_SHARE`` of the time) a random number to copy instead."""
    if rng.random() >= RANDOM_RESULT_SHARE:
        return record["answer"]
    return str(int(rng.integers(0, 10 ** int(rng.integers(1, 8)))))


def guess_episode(
    row: dict[str, Any], rng: np.random.Generator, bisect_share: float = BISECT_SHARE
) -> list[tuple[str, bool]]:
    """A game against the real environment: every guess the middle of the interval the
    answers so far leave (``bisect_share`` of the games) or a uniform number of the whole range;
    after "correct" the model says the number, after "game over" nothing."""
    game = GuessNumber()
    game.reset(**row)
    low, high, segments = row["low"], row["high"], []
    bisect = rng.random() < bisect_share
    while True:
        number = (low + high) // 2 if bisect else int(rng.integers(row["low"], row["high"] + 1))
        answer = game.guess(number)
        segments += [(f"<call>guess({number})</call>", True), (f"<result>{answer}</result>", False)]
        if answer in (CORRECT, GAME_OVER):
            return [*segments, (str(number) if answer == CORRECT else "", True)]
        low, high = (number + 1, high) if answer.startswith(HIGHER) else (low, number - 1)


def encode_episodes(
    tokenizer: PreTrainedTokenizerFast,
    prompts: list[str],
    episodes: list[list[tuple[str, bool]]],
    answer_only: bool = False,
) -> tuple[torch.Tensor, ...]:
    """(ids, attention_mask, loss_mask), right-padded: ids as the runner builds them (the prompt
    with <bos>, then each segment encoded alone; model turns get EOS), loss on model turns (with
    ``answer_only``, on the last one only)."""
    rows = []
    for prompt, segments in zip(prompts, episodes):
        ids = list(tokenizer(prompt)["input_ids"])
        trained = [0] * len(ids)
        for index, (text, sampled) in enumerate(segments):
            piece = tokenizer.encode(text, add_special_tokens=False) + (
                [tokenizer.eos_token_id] if sampled else []
            )
            ids += piece
            trained += [int(sampled and not (answer_only and index < len(segments) - 1))] * len(piece)
        rows.append((ids, trained))
    width = max(len(ids) for ids, _ in rows)
    if width > MAX_POSITIONS:
        raise ValueError(f"an episode of {width} tokens is longer than the model's {MAX_POSITIONS} positions")
    ids = torch.full((len(rows), width), tokenizer.pad_token_id, dtype=torch.long)
    attention, loss_mask = torch.zeros_like(ids), torch.zeros_like(ids)
    for i, (row_ids, trained) in enumerate(rows):
        ids[i, : len(row_ids)] = torch.tensor(row_ids)
        attention[i, : len(row_ids)] = 1
        loss_mask[i, : len(row_ids)] = torch.tensor(trained)
    return ids, attention, loss_mask


def training_sets(
    tokenizer: PreTrainedTokenizerFast, args: argparse.Namespace
) -> dict[str, tuple[torch.Tensor, ...]]:
    """The episodes trained on, from this seed's draw of the training splits: calculator episodes
    that all call (while the model learns to write calls and copy results), the same problems
    of which a ``CALL_SHARE`` call and the others guess, calling episodes trained on their answer only (copying
    stays trained while the share of calls is learned from the others), and games; each set
    padded to its own length. Calling episodes show a random result ``RANDOM_RESULT_SHARE`` of
    the time."""
    rng = np.random.default_rng([args.seed, 2])
    calc = ArithmeticTask(digits=CALCULATOR_DIGITS, operators=("*",), seed=args.seed).train(args.episodes)
    games = GuessNumberTask(seed=args.seed).train(args.episodes)
    calc_prompts = [r["prompt"] for r in calc]
    return {
        "calls": encode_episodes(
            tokenizer, calc_prompts, [calculator_episode(r, True, shown_result(r, rng)) for r in calc]
        ),
        "calculator": encode_episodes(
            tokenizer,
            calc_prompts,
            [_calculator_or_guess(r, rng) for r in calc],
        ),
        "copies": encode_episodes(
            tokenizer,
            calc_prompts,
            [calculator_episode(r, True, shown_result(r, rng)) for r in calc],
            answer_only=True,
        ),
        "guess_number": encode_episodes(
            tokenizer,
            [r["prompt"] for r in games],
            [guess_episode(r, rng) for r in games],
        ),
    }


# ---- measuring: episodes as rlrun trains on them ------------------------------------------------


def agent_spec(tokenizer: PreTrainedTokenizerFast, **section: Any) -> AgentSpec:
    """The runner's spec of an `agent` section in the plain format with these tools or this
    environment (none: every call is an unknown tool's error)."""
    settings = Agent(enabled=True, max_turns=MAX_TURNS, max_turn_tokens=MAX_TURN_TOKENS, **section)
    return build_agent(settings, tokenizer=tokenizer)


def play(
    engine: Any, tokenizer: PreTrainedTokenizerFast, rows: list[dict], agent: AgentSpec, seed: int
) -> tuple[list[Episode], list[float | None]]:
    """Each row's episode run by ``rlrun.rollout.episodes`` (the row's columns go to the
    environment's ``reset``), and the environment's final rewards."""
    prompts = EpisodePrompts(
        ids=[tokenizer(row["prompt"])["input_ids"] for row in rows],
        texts=[row["prompt"] for row in rows],
        columns={key: [row[key] for row in rows] for key in rows[0]},
    )
    room = MAX_POSITIONS - max(len(ids) for ids in prompts.ids)
    batch = run_episodes(
        lambda ids, max_tokens: engine.conversation(ids, 1, max_tokens=max_tokens),
        prompts,
        agent=agent,
        sampling=SamplingParams(max_tokens=room, seed=seed),
        env_seeds=[seed] * len(rows),
    )
    episodes = [
        _episode(transcript, finish == FINISH_ANSWERED)
        for transcript, finish in zip(batch.transcripts, batch.finish_reasons)
    ]
    return episodes, batch.final_rewards


def _episode(transcript: list[dict[str, Any]], answered: bool) -> Episode:
    turns = [m for m in transcript if m["role"] == "assistant"]
    calls = [call for turn in turns for call in turn.get("tool_calls", [])]
    results = [
        f"error: {m['error']}" if "error" in m else m["content"] for m in transcript if m["role"] == "tool"
    ]
    return Episode(list(zip(calls, results)), turns[-1]["content"] if answered else None)


def calculator_figures(
    engine: Any, tokenizer: PreTrainedTokenizerFast, records: list[dict], seed: int, alone: bool
) -> dict:
    """How the model meets ``records`` with ``rlrun:calculator``, and (``alone``) without it: its
    calls then fail."""
    episodes, _ = play(engine, tokenizer, records, agent_spec(tokenizer, tools=["rlrun:calculator"]), seed)
    called = [(e, r) for e, r in zip(episodes, records) if e.calls]
    direct = [(e, r) for e, r in zip(episodes, records) if not e.calls]
    answered = [e for e, _ in called if not e.calls[-1][1].startswith("error:")]
    figures = {
        "episodes": len(records),
        "success": _share(e.final == r["answer"] for e, r in zip(episodes, records)),
        "call_rate": len(called) / len(records),
        "calls_written_right": _share(
            e.calls[0][0] == {"name": "calculator", "args": [r["prompt"].removesuffix("=")], "arguments": {}}
            for e, r in called
        ),
        "results_copied": _share(e.final == e.calls[-1][1] for e in answered),
        "direct_accuracy": _share(e.final == r["answer"] for e, r in direct),
    }
    if alone:
        without, _ = play(engine, tokenizer, records, agent_spec(tokenizer), seed)
        figures["success_without_tool"] = _share(e.final == r["answer"] for e, r in zip(without, records))
    return figures


def guess_figures(
    engine: Any, tokenizer: PreTrainedTokenizerFast, rows: list[dict], samples: int, seed: int, alone: bool
) -> dict:
    """``samples`` games per row against ``GuessNumber``, and (``alone``) as many without it."""
    rows = [row for row in rows for _ in range(samples)]
    episodes, rewards = play(engine, tokenizer, rows, agent_spec(tokenizer, environment=ENVIRONMENT), seed)
    won = [(e, r) for e, r, reward in zip(episodes, rows, rewards) if reward]
    legal, first_mid, bisected = [], [], []
    for episode, row in zip(episodes, rows):
        low, high, mids = row["low"], row["high"], []
        for call, answer in episode.calls:
            number = _guessed(call)
            legal.append(number is not None and low <= number <= high)
            mids.append(number == (low + high) // 2)
            if number is not None and answer.startswith(HIGHER):
                low = max(low, number + 1)
            elif number is not None and answer.startswith(LOWER):
                high = min(high, number - 1)
        first_mid.append(bool(mids) and mids[0])
        bisected.append(bool(mids) and all(mids))
    figures = {
        "episodes": len(rows),
        "success": len(won) / len(rows),
        "mean_reward": float(np.mean(rewards)),
        "guesses_when_won": float(np.mean([len(e.calls) for e, _ in won])) if won else None,
        "legal_guesses": _share(legal),
        "first_guess_mid": _share(first_mid),
        "bisected": _share(bisected),
        "secret_said": _share(e.final == r["answer"] for e, r in won),
    }
    if alone:
        without, _ = play(engine, tokenizer, rows, agent_spec(tokenizer), seed)
        figures["success_without_environment"] = _share(e.final == r["answer"] for e, r in zip(without, rows))
    return figures


def _guessed(call: dict[str, Any]) -> int | None:
    """The number a call of ``guess`` names (None for any other call or argument)."""
    if call.get("name") != "guess":
        return None
    number = call["args"][0] if call["args"] else call["arguments"].get("number")
    return number if isinstance(number, int) and not isinstance(number, bool) else None


def _share(flags: Any) -> float:
    flags = list(flags)
    return sum(flags) / len(flags) if flags else 0.0


def in_bands(figures: dict) -> bool:
    calc, guess = figures["calculator"], figures["guess_number"]
    return (
        CALL_BAND[0] <= calc["call_rate"] <= CALL_BAND[1]
        and min(calc["calls_written_right"], calc["results_copied"]) >= FORMAT_MIN
        and guess["legal_guesses"] >= LEGAL_MIN
        and guess["success"] <= GUESS_SUCCESS_MAX
    )


def measure(
    engine: Any,
    tokenizer: PreTrainedTokenizerFast,
    args: argparse.Namespace,
    *,
    alone: bool,
    games: bool = True,
) -> dict:
    """On the validation rows the built-in recipes evaluate on (the tasks' default seeds); the
    games unless ``games`` is False."""
    calc = ArithmeticTask(digits=CALCULATOR_DIGITS, operators=("*",)).validation(args.eval_prompts)
    figures = {"calculator": calculator_figures(engine, tokenizer, calc, args.seed, alone)}
    if games:
        rows = GuessNumberTask().validation(args.eval_prompts)
        samples = -(-args.eval_prompts // len(rows))  # about as many games as calculator episodes
        figures["guess_number"] = guess_figures(engine, tokenizer, rows, samples, args.seed, alone)
    return figures


# ---- training -----------------------------------------------------------------------------------


def task_loss(
    model: Qwen2ForCausalLM, sets: list[tuple[torch.Tensor, ...]], rows: list[int], order: np.random.Generator
) -> torch.Tensor:
    """The mean over the tasks of each task's mean loss per trained token, on ``rows[i]`` rows of
    set ``i`` (each batch cut to its longest row): a game trains on seven times a calculator
    episode's tokens, and would otherwise drown out the copying the calculator needs."""
    losses = []
    for (ids, attention, loss_mask), count in zip(sets, rows):
        batch = torch.from_numpy(order.integers(0, len(ids), count))
        width = int(attention[batch].sum(1).max())
        batch_ids, mask = ids[batch, :width], loss_mask[batch, 1:width]
        logits = model(input_ids=batch_ids, attention_mask=attention[batch, :width]).logits[:, :-1]
        loss = torch.nn.functional.cross_entropy(logits.transpose(1, 2), batch_ids[:, 1:], reduction="none")
        losses.append((loss * mask).sum() / mask.sum())
    return torch.stack(losses).mean()


def train(args: argparse.Namespace) -> dict:
    """Calculator episodes that all call until the model writes calls and copies results; then a
    ``CALL_SHARE`` of them call, beside calling episodes trained on their answers, while the
    learning rate decays to 0 over ``--decay-steps`` (at a constant rate the copying learned came
    and went: 83%, 20%, 75% of results copied 200 steps apart); the first checkpoint after the
    switch in the bands is the model."""
    torch.set_num_threads(args.threads)
    tokenizer = agent_tokenizer()
    sets = training_sets(tokenizer, args)
    model = build_model(tokenizer, args.seed, MAX_POSITIONS)
    model.generation_config.max_new_tokens = MAX_TURN_TOKENS
    engine = ROLLOUT_ENGINES.get("hf")(model, tokenizer)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.0, betas=(0.9, 0.98))
    copying_learned = None

    def rate(step: int) -> float:
        decay = 1.0 if copying_learned is None else max(0.0, 1 - (step - copying_learned) / args.decay_steps)
        return min(1.0, (step + 1) / args.warmup) * decay

    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, rate)
    order = np.random.default_rng(args.seed)
    start, parts, rows = time.time(), ["calls", "guess_number"], [args.calculator_rows, args.game_rows]
    for step in range(1, args.max_steps + 1):
        loss = task_loss(model, [sets[part] for part in parts], rows, order)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        schedule.step()
        if step % args.eval_every:
            continue
        model.eval()
        figures = measure(engine, tokenizer, args, alone=False, games=copying_learned is not None)
        print(
            f"step {step:5d}  loss {loss.item():.4f}  {time.time() - start:.0f}s  {json.dumps(figures)}",
            flush=True,
        )
        if copying_learned is None and min(figures["calculator"][k] for k in COPYING) >= FORMAT_MIN:
            copying_learned = step
            parts, rows = ["calculator", "copies", "guess_number"], [*rows[:1], args.copy_rows, *rows[1:]]
        elif copying_learned is not None and in_bands(figures):
            info = {"step": step, "copying_learned_at_step": copying_learned}
            return _save(model, tokenizer, args, info | measure(engine, tokenizer, args, alone=True))
        model.train()
        if copying_learned is not None and step >= copying_learned + args.decay_steps:
            break
    raise RuntimeError(
        f"no checkpoint had its behaviour in the bands (step {step}, copying from {copying_learned})"
    )


def _save(
    model: Qwen2ForCausalLM,
    tokenizer: PreTrainedTokenizerFast,
    args: argparse.Namespace,
    figures: dict,
) -> dict:
    info = {**figures, "seed": args.seed, "versions": numerics()}
    model.save_pretrained(args.out)
    save_tokenizer(tokenizer, args.out)
    (args.out / "build_info.json").write_text(json.dumps(info, indent=2) + "\n")
    print(f"tiny-agent: step {figures['step']} -> {args.out}", flush=True)
    return info


def main() -> None:
    parser = build_parser(__doc__, DEFAULT_OUT)
    parser.add_argument("--episodes", type=int, default=20000, help="synthesized episodes trained on")
    parser.add_argument("--eval-prompts", type=int, default=200, help="episodes per task and measurement")
    parser.add_argument("--eval-every", type=int, default=100)
    parser.add_argument("--calculator-rows", type=int, default=32, help="calculator episodes per step")
    parser.add_argument("--game-rows", type=int, default=8, help="guessing games per step")
    parser.add_argument("--copy-rows", type=int, default=8, help="calling episodes per step, answers trained")
    parser.add_argument(
        "--decay-steps", type=int, default=1000, help="lr decay to 0 after copying is learned"
    )
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--warmup", type=int, default=50)
    parser.add_argument("--max-steps", type=int, default=4000)
    train(parser.parse_args())


if __name__ == "__main__":
    main()
