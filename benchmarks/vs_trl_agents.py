"""rlrun's agents against TRL 1.16's `tools=`: SmolLM2-135M-Instruct calling a calculator, the
same episodes through both, in one invocation.

    python benchmarks/vs_trl_agents.py                  # full run: 2 pairs (A B, then B A), 15 steps a side
    python benchmarks/vs_trl_agents.py --quick          # smoke run: 1 pair, 2 steps of 2 prompts x 4, 8 held-out prompts
    python benchmarks/vs_trl_agents.py --out benchmarks/results/vs_trl_agents_$(git rev-parse --short HEAD).txt

The workload is examples/agents/calculator.yaml on 3-digit products (`data.arithmetic.digits=3`,
operators `*`, as the `agent_calculator` recipe): SmolLM2-135M-Instruct
(`rlrun:smollm2-135m-instruct`, the folder `resolve_model_path` converts it into, loaded by
both sides), the tool `rlrun:calculator`, the recipe's chat template with tools
(examples/agents/chatml_tools.jinja), prompt wording, rows, sampling and optimiser. rlrun trains
it through `rlrun.train` with the overrides of `vs_trl.rlrun_overrides` (every knob TRL also has,
set to the shared value) and those of `agent_overrides` below; TRL's GRPOTrainer gets the same
settings (`vs_trl.trl_config`, `vs_trl.trl_trainer`: rlrun's learning-rate schedule, step for
step), `tools=[f]` with `f` the very function `rlrun:calculator` resolves to, the rows rlrun's
data section gives (its chat messages, in order) and `max_tool_calling_iterations` = the
recipe's `agent.max_turns` - 1. Each side runs in its own subprocess (peak RSS is that side's
alone), the sides alternate A B B A over the pairs, and the final weights of both go through one
evaluation: greedy episodes on held-out prompts (rlrun's episode runner on the hf engine, the
same code for both and for the weights before training), scored by `rlrun:math_answer` on the
episode's last model turn, with the share of episodes that called the tool.

What TRL needs from the template. TRL 1.16 parses a turn's calls with the tokenizer's
`response_template` (transformers >= 5.13), which `add_response_schema` sets only for chat
templates it recognises: for chatml_tools.jinja it raises "Unrecognized chat template". The
template writes Hermes calls (`<tool_call>{"name": ..., "arguments": {...}}</tool_call>`) in
ChatML turns, exactly what TRL's own `qwen3_template` parses (anchored on
`<|im_start|>assistant\\n`, content closed by `<|im_end|>`, SmolLM2's EOS), so the TRL side sets
`tokenizer.chat_template` to the recipe's template and `tokenizer.response_template` to TRL's
`qwen3_template`: nothing of either is changed. TRL's other checks pass on the template as it is:
`supports_tool_calling` (it renders the calls and the results) and
`is_chat_template_prefix_preserving` (so TRL keeps it rather than swapping in a training
template). The parent checks that the first rows render to the same prompt ids through rlrun's
format and through the tokenizer as TRL calls it.

Differences left between the sides (each is the framework's own behaviour, kept):
- A call TRL cannot parse (bad JSON, no closing tag) makes the whole turn plain content, so the
  episode ends there; rlrun answers it with an error result and the model gets its next turn.
  Arguments of the wrong type reach the tool in TRL (which raises: an error result) and are
  refused before the call in rlrun (an error result): both are errors, in other words.
- TRL samples every turn up to `max_completion_length` tokens and then cuts what does not fit the
  episode; rlrun samples at most the room left (`agent.max_turn_tokens` is set to the whole
  episode, so no other per-turn limit applies). The episodes kept are alike; TRL's sampling
  costs more.
- The training reward reads the last model turn: in TRL its parsed content (calls taken out), in
  rlrun its text (a call written in it included). They differ only for an episode that ends on a
  call (max turns or no room), whose last number is the expression's, never a 5- or 6-digit
  product: 0 on both.
- rlrun bounds a call's wall clock (`agent.tool_timeout_s`) and its output
  (`agent.tool_output_chars`, set to 1000: the calculator's results and errors are shorter); TRL
  bounds neither. Neither binds for this tool.
- rlrun evaluates 8 held-out prompts itself at the start and the end (outside the timed steps)
  and saves a checkpoint after the last step (the weights the shared evaluation loads); its peak
  RSS includes both. TRL neither evaluates nor saves until training is over.

Episodes/s and completion tokens/s are over the timed steps (all but the first and the last, as
vs_trl.py); completion tokens are the tokens the model sampled (TRL's `tool_mask`, rlrun's
sampled mask), not the tool results appended between turns.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from itertools import pairwise
from pathlib import Path
from typing import Any

import vs_trl
from vs_trl import (
    mean_phases,
    parse_or_work,
    peak_rss_mib,
    rlrun_overrides,
    rlrun_steps,
    rlrun_timed_phases,
    row,
    spread,
    spread_cells,
    timed_steps,
)

# --recipe's default
RECIPE = Path(__file__).resolve().parent.parent / "examples" / "agents" / "calculator.yaml"
# 3-digit products, which the model cannot compute alone (the agent_calculator recipe's task)
TASK = ["data.arithmetic.digits=3", 'data.arithmetic.operators=["*"]']
SHOWN = 2  # episodes of the first step printed per side
PER_STEP_SHOWN = 15


@dataclass(frozen=True)
class Spec(vs_trl.Spec):
    """One side's run: vs_trl's shared settings (recipe: the agent recipe's file), and the episode's."""

    # model turns per episode: rlrun's agent.max_turns, TRL's max_tool_calling_iterations + 1
    max_turns: int = 3
    rows_file: str = ""  # the training rows rlrun's data section gives (chat messages, answers), for TRL


@dataclass(frozen=True)
class Eval:
    """The shared evaluation of one set of weights: greedy episodes on held-out prompts."""

    accuracy: float
    called: float  # share of episodes with at least one tool call
    calls: float  # tool calls per episode
    sampled_tokens: float  # tokens the model sampled per episode


@dataclass
class Result:
    spec: Spec
    step_times_s: list[float]
    sampled_tokens: list[int]  # per step: tokens the model sampled (not the tool results)
    episode_tokens: list[int]  # per step: every token after the prompts, tool results included
    tool_calls: list[float]  # per step: tool calls per episode
    mean_reward: list[float]  # per step
    samples: list[str]  # the first step's first prompt and a few of its episodes
    peak_rss_mib: float  # read when training ended
    final_weights: str  # a folder of the trained weights, for the shared evaluation
    phase_s: dict[str, float] = field(default_factory=dict)
    after: Eval | None = None  # filled in by the parent

    def timed(self) -> slice:
        return timed_steps(len(self.step_times_s))

    @property
    def timed_s(self) -> float:
        return sum(self.step_times_s[self.timed()])

    @property
    def median_step_s(self) -> float:
        return statistics.median(self.step_times_s[self.timed()])

    @property
    def episodes_per_s(self) -> float:
        return self.spec.rows * len(self.step_times_s[self.timed()]) / self.timed_s

    @property
    def tokens_per_s(self) -> float:
        return sum(self.sampled_tokens[self.timed()]) / self.timed_s

    @property
    def calls_per_episode(self) -> float:
        return statistics.mean(self.tool_calls[self.timed()])


# --- shared by both sides -------------------------------------------------------------------


def agent_overrides(spec: Spec) -> list[str]:
    """rlrun's overrides of the agent recipe: vs_trl's shared settings, the task, and the episode
    limits as TRL has them."""
    from rlrun.recipes import load_recipe

    own = load_recipe(spec.recipe, []).recipe
    return [
        *rlrun_overrides(spec),
        # the recipe's own wording (vs_trl's chat workload sets another)
        f"data.prompt_template={json.dumps(own.data.prompt_template)}",
        *TASK,
        f"agent.max_turns={spec.max_turns}",
        f"agent.max_turn_tokens={spec.max_new_tokens}",  # TRL: a turn may fill the episode
        f"agent.max_calls_per_turn={spec.max_new_tokens}",  # TRL runs every call (a call takes > 1 token)
        "agent.tool_output_chars=1000",  # TRL keeps the whole result (the calculator's are shorter)
    ]


def recipe_spec(args: argparse.Namespace, model_dir: str) -> Spec:
    """The agent recipe's settings as a Spec, with the command line's steps, prompts and seed."""
    from rlrun.recipes import load_recipe

    r = load_recipe(args.recipe, TASK).recipe
    schedule = r.actor.lr_scheduler
    prompts = args.prompts_per_step or r.trainer.prompts_per_step
    micro = args.micro_batch_samples or r.actor.micro_batch_samples
    return Spec(
        side="",
        workload="smollm2 + calculator",
        model_dir=model_dir,
        beta=0.0,  # KL off
        steps=args.steps or r.trainer.total_steps,
        max_new_tokens=r.rollout.max_response_tokens,  # the whole episode after the prompt
        fixed_length=False,
        lr=r.actor.optimizer.lr,
        seed=args.seed,
        val_prompts=args.val_prompts,
        work_dir="",
        prompts_per_step=prompts,
        samples_per_prompt=r.rollout.n,
        chat=True,
        micro_batch_samples=min(micro, prompts * r.rollout.n),
        recipe=str(args.recipe),
        lr_scheduler=(schedule.name, schedule.warmup_steps, schedule.min_lr_ratio),
        max_turns=r.agent.max_turns,
    )


def calculator_tool() -> Callable[..., str]:
    """The function `rlrun:calculator` resolves to: TRL's side is given this very callable."""
    from rlrun.agents.tools import resolve_tool
    from rlrun.schema.agent import Agent

    return resolve_tool("rlrun:calculator", settings=Agent()).fn


def episode_line(messages: list[dict[str, Any]]) -> str:
    """An episode's turns on one line: the model's text and calls, the tools' results."""
    parts = []
    for m in messages:
        if m.get("role") == "assistant":
            calls = [c.get("function", c) for c in m.get("tool_calls") or []]
            parts.append(f"model {m.get('content', '')!r}" + (f" calls {calls}" if calls else ""))
        elif m.get("role") == "tool":
            parts.append(f"tool {m.get('content') or m.get('error')!r}")
    return " | ".join(parts)


def after_question(transcript: list[dict[str, Any]]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The row's question (the prompt's last user message: worked examples come before it, and
    results are `tool` messages) and the episode's messages after it."""
    last = max(i for i, m in enumerate(transcript) if m.get("role") == "user")
    return transcript[last], transcript[last + 1 :]


def final_answer(messages: list[dict[str, Any]]) -> str:
    """The episode's last model turn, as rlrun's reward reads it (rlrun.rollout.responses)."""
    from rlrun.rollout.responses import _final_answer

    return _final_answer(messages)


class Evaluator:
    """Greedy episodes on the first `spec.val_prompts` held-out prompts, through rlrun's episode
    runner on the hf engine, scored by the recipe's reward (`rlrun:math_answer`): the same code
    for every set of weights, whichever side trained them."""

    def __init__(self, spec: Spec):
        from rlrun.data import load_prompt_datasets
        from rlrun.evaluation import build_agent_spec, reward_functions
        from rlrun.recipes import load_recipe
        from rlrun.rewards import RewardCombiner
        from rlrun.rollout.engine import SamplingParams
        from rlrun.training.models import load_tokenizer

        self.recipe = load_recipe(spec.recipe, agent_overrides(spec)).recipe
        self.tokenizer = load_tokenizer(spec.model_dir)
        self.train, val = load_prompt_datasets(self.recipe.data, self.tokenizer)
        self.val = val.take(range(min(spec.val_prompts, len(val))))
        self.agent = build_agent_spec(self.recipe, self.tokenizer)
        self.reward = RewardCombiner(reward_functions(self.recipe, self.agent))
        self.sampling = SamplingParams.from_rollout(
            self.recipe.rollout, n=1, greedy=True, min_tokens=0, seed=0
        )

    def __call__(self, weights: str) -> Eval:
        from rlrun.rollout.responses import sample_responses
        from rlrun.training.models import load_causal_lm
        from rlrun.training.rollout_engine import build_rollout_engine

        model = load_causal_lm(weights, self.recipe.model.dtype, trainable=False)
        engine = build_rollout_engine(self.recipe, model, self.tokenizer)
        out = sample_responses(engine, self.tokenizer, self.val, self.sampling, agent=self.agent)
        scored = self.reward(**out.reward_arguments(self.val))
        calls = [c.tool_calls for c in out.episodes.counters]
        return Eval(
            accuracy=(scored.acc > 0.5).float().mean().item(),
            called=sum(c > 0 for c in calls) / len(calls),
            calls=sum(calls) / len(calls),
            sampled_tokens=out.response_mask.sum().item() / len(calls),
        )

    def check_prompts(self, rows: int = 4) -> list[int]:
        """The first training rows' episode prompts, rendered by rlrun's format and by the
        tokenizer as TRL renders them (`tools=` the callables, the template as its chat_template):
        their lengths, after checking that both give the same ids."""
        from rlrun.agents.formats import Prompt

        template = Path(self.recipe.agent.chat_template).read_text(encoding="utf-8")
        lengths = []
        for ids, messages in zip(self.train.prompt_ids[:rows], self.train.messages[:rows]):
            ours = self.agent.format.prompt_ids(Prompt(ids, messages), list(self.agent.tools))
            theirs = self.tokenizer.apply_chat_template(
                messages,
                tools=[t.fn for t in self.agent.tools],
                chat_template=template,
                add_generation_prompt=True,
                tokenize=True,
                return_dict=False,
            )
            if list(ours) != list(theirs):
                raise SystemExit(f"the sides render {messages!r} differently: {ours} vs {theirs}")
            lengths.append(len(ours))
        return lengths


# --- TRL -----------------------------------------------------------------------------------


def run_trl(spec: Spec) -> Result:
    from trl.chat_template_utils import qwen3_template

    from rlrun.recipes import load_recipe

    template = Path(load_recipe(spec.recipe, []).recipe.agent.chat_template).read_text(encoding="utf-8")
    tokenizer = vs_trl.load_tokenizer(spec.model_dir)
    tokenizer.chat_template = template
    tokenizer.response_template = qwen3_template  # Hermes calls in ChatML (module docstring)
    tool = calculator_tool()
    train = json.loads(Path(spec.rows_file).read_text())
    score = vs_trl.task_reward(chat=True)  # rlrun:math_answer
    sampled: list[int] = []
    episode_tokens: list[int] = []
    calls: list[float] = []
    rewards: list[float] = []
    samples: list[str] = []

    def reward(
        prompts: list, completions: list, completion_ids: list, answer: list[str], **_: object
    ) -> list:
        # This step's figures, which TRL's _generate has just recorded (logged at the end only).
        metrics = trainer._metrics["train"]
        sampled.append(round(metrics["completions/mean_length"][-1] * len(completions)))  # tool_mask's
        calls.append(metrics["tools/call_frequency"][-1])
        episode_tokens.append(sum(map(len, completion_ids)))
        scores = score([str(p) for p in prompts], [final_answer(c) for c in completions], answer)
        rewards.append(sum(scores) / len(scores))
        if not samples:
            samples.append(f"prompt {after_question(prompts[0])[0]['content']!r}, answer {answer[0]!r}")
            samples.extend(episode_line(c) for c in completions[:SHOWN])
        return scores

    config = vs_trl.trl_config(spec, max_tool_calling_iterations=spec.max_turns - 1)
    trainer, clock = vs_trl.trl_trainer(
        spec, config, train, reward, tokenizer, [], tools=[tool], processing_class=tokenizer
    )
    trainer.train()
    peak = peak_rss_mib()
    final = Path(spec.work_dir) / "final"
    trainer.save_model(str(final))
    return Result(
        spec,
        [b - a for a, b in pairwise(clock.marks)],
        sampled,
        episode_tokens,
        calls,
        rewards,
        samples,
        peak,
        str(final),
        phase_s=mean_phases(clock.phases[timed_steps(len(clock.phases))]),
    )


# --- rlrun ---------------------------------------------------------------------------------


def probe_sampled_tokens() -> list[int]:
    """The tokens the model sampled in each training rollout of this process, appended as they
    are made (rlrun's metrics count every token after the prompt, tool results included): its
    episode sampling, wrapped; greedy calls (its own evaluations) are left out."""
    from rlrun.rollout import responses

    episodes = responses._episodes
    counts: list[int] = []

    def probe(engine: Any, data: Any, sampling: Any, agent: Any) -> Any:
        out = episodes(engine, data, sampling, agent)
        if not sampling.greedy:
            counts.append(int(out.response_mask.sum()))
        return out

    responses._episodes = probe
    return counts


def run_rlrun(spec: Spec) -> Result:
    import rlrun
    from rlrun.records.rundir import METRICS, SAMPLES

    sampled = probe_sampled_tokens()
    result = rlrun.train(spec.recipe, agent_overrides(spec), run_dir=Path(spec.work_dir) / "run")
    peak = peak_rss_mib()
    _, steps, step_times = rlrun_steps(result.run_dir / METRICS)
    first = [json.loads(line) for line in (result.run_dir / SAMPLES).read_text().splitlines()]
    first = [s for s in first if s["step"] == 1][:SHOWN]
    question, _ = after_question(first[0]["transcript"])
    samples = [f"prompt {question['content']!r}, answer {first[0]['ground_truth']!r}"]
    samples += [episode_line(after_question(s["transcript"])[1]) for s in first]
    phases = rlrun_timed_phases(steps)
    return Result(
        spec,
        step_times,
        sampled,
        [round(m["response_length/mean"] * spec.rows) for m in steps],
        [m["episode/tool_calls/mean"] for m in steps],
        [m["critic/score/mean"] for m in steps],
        samples,
        peak,
        str(result.checkpoint),
        phase_s=phases,
    )


# --- orchestration --------------------------------------------------------------------------


def worker(spec_path: Path) -> None:
    spec = Spec(**json.loads(spec_path.read_text()))
    result = {"trl": run_trl, "rlrun": run_rlrun}[spec.side](spec)
    (spec_path.parent / "result.json").write_text(json.dumps(asdict(result)))


def run_side(spec: Spec) -> Result:
    data = vs_trl.run_worker(spec, __file__)
    return Result(spec=Spec(**data.pop("spec")), **data)


def report(results: list[Result], before: Eval) -> str:
    """The Markdown table: each side (ranges over its runs), then rlrun / TRL over the pairs."""
    lines = [
        row(
            ["side", "runs", "episodes/s", "completion tok/s", "median step (s)", "peak RSS (MiB)"]
            + ["tool calls / episode (training)", "held-out called", "held-out accuracy"]
        ),
        row(["---"] + ["---:"] * 8),
        row(["before training", "", "", "", "", "", "", f"{before.called:.1%}", f"{before.accuracy:.1%}"]),
    ]
    sides = {s: [r for r in results if r.spec.side == s] for s in ("trl", "rlrun")}
    for side, runs in sides.items():
        if runs:
            columns = [
                ("episodes_per_s", ".2f"),
                ("tokens_per_s", ",.0f"),
                ("median_step_s", ".1f"),
                ("peak_rss_mib", ",.0f"),
                ("calls_per_episode", ".2f"),
                ("after.called", ".1%"),
                ("after.accuracy", ".1%"),
            ]
            lines.append(row([side, str(len(runs)), *spread_cells(runs, columns)]))
    pairs = list(zip(sides["trl"], sides["rlrun"]))
    if pairs:

        def ratio(figure: Callable[[Result], float]) -> str:
            return spread([figure(o) / figure(t) for t, o in pairs], ".2f") + "x"

        lines.append(
            row(
                [
                    "**rlrun / TRL**",
                    str(len(pairs)),
                    "**" + ratio(lambda r: r.episodes_per_s) + "**",
                    "**" + ratio(lambda r: r.tokens_per_s) + "**",
                    ratio(lambda r: r.median_step_s),
                    ratio(lambda r: r.peak_rss_mib),
                    "",
                    spread([(o.after.called - t.after.called) * 100 for t, o in pairs], "+.1f") + " pts",
                    spread([(o.after.accuracy - t.after.accuracy) * 100 for t, o in pairs], "+.1f") + " pts",
                ]
            )
        )
    return "\n".join(lines)


def run_lines(r: Result, wall_s: float, loads: tuple[float, float]) -> list[str]:
    """One run's figures, its steps and its first episodes, for the log."""
    s, after = r.spec, r.after
    figures = (
        f"{s.side:<5}: {s.steps} steps of {s.rows} episodes, median {r.median_step_s:.1f} s/step, "
        f"{r.episodes_per_s:.2f} episodes/s, {r.tokens_per_s:,.0f} completion tok/s, "
        f"peak RSS {r.peak_rss_mib:,.0f} MiB, {r.calls_per_episode:.2f} calls/episode; held-out "
        f"{after.accuracy:.1%} right, {after.called:.1%} called, {after.sampled_tokens:.0f} sampled tokens/episode "
        f"({wall_s:.0f} s wall, load average {loads[0]:.1f} -> {loads[1]:.1f})"
    )
    return [
        figures,
        "    per step: sampled tokens/episode "
        + " ".join(f"{t / s.rows:.1f}" for t in r.sampled_tokens[:PER_STEP_SHOWN])
        + ", all tokens/episode "
        + " ".join(f"{t / s.rows:.1f}" for t in r.episode_tokens[:PER_STEP_SHOWN])
        + ", calls/episode "
        + " ".join(f"{c:.2f}" for c in r.tool_calls[:PER_STEP_SHOWN])
        + ", mean reward "
        + " ".join(f"{x:.2f}" for x in r.mean_reward[:PER_STEP_SHOWN])
        + ", step times (s) "
        + " ".join(f"{x:.1f}" for x in r.step_times_s[:PER_STEP_SHOWN]),
        "    phases (s/step, timed steps): " + ", ".join(f"{k} {v:.2f}" for k, v in r.phase_s.items()),
        *(f"    step 1: {x}" for x in r.samples),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=2, help="pairs of runs (one per side), A B then B A")
    parser.add_argument("--steps", type=int, help="GRPO steps a side (default: the recipe's, 15)")
    parser.add_argument("--prompts-per-step", type=int, help="prompts a step (default: the recipe's, 8)")
    parser.add_argument(
        "--micro-batch-samples",
        type=int,
        help="episodes per forward/backward, both sides (default: the recipe's, 16); fewer take less memory",
    )
    parser.add_argument(
        "--val-prompts", type=int, default=100, help="held-out prompts of the shared evaluation"
    )
    parser.add_argument(
        "--recipe",
        type=Path,
        default=RECIPE,
        help="the agent recipe (its model, template, tool and few-shot messages; default: calculator.yaml)",
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--sides", default="trl,rlrun", help="comma-separated subset of trl,rlrun")
    parser.add_argument("--out", type=Path, help="also write the output to this file")
    parser.add_argument(
        "--quick", action="store_true", help="smoke run: 1 pair, 2 steps of 2 prompts, 8 held-out prompts"
    )
    args = parse_or_work(parser, worker)
    if args is None:
        return
    if args.quick:
        args.pairs, args.steps, args.prompts_per_step, args.val_prompts = 1, 2, 2, 8
    out = args.out.open("w", encoding="utf-8") if args.out else None

    def say(*lines: str) -> None:
        for line in lines:
            print(line, flush=True)
            if out:
                out.write(line + "\n")
                out.flush()

    from rlrun.embedded import resolve_model_path

    say(f"$ python benchmarks/vs_trl_agents.py {' '.join(sys.argv[1:])}", vs_trl.environment())
    with tempfile.TemporaryDirectory(prefix="vs_trl_agents_") as tmp:
        shared = recipe_spec(args, str(resolve_model_path("rlrun:smollm2-135m-instruct")))
        evaluate = Evaluator(shared)
        rows = Path(tmp) / "rows.json"
        rows.write_text(
            json.dumps(
                [
                    {"prompt": m, "answer": a}
                    for m, a in zip(evaluate.train.messages, evaluate.train.ground_truths)
                ]
            )
        )
        shared = replace(shared, rows_file=str(rows))
        lengths = evaluate.check_prompts()
        schedule = "{} (warm-up {}, min ratio {})".format(*shared.lr_scheduler)
        say(
            f"{shared.workload}: {shared.model_dir}; {shared.steps} steps of {shared.prompts_per_step} prompts x "
            f"{shared.samples_per_prompt} episodes, <= {shared.max_turns} turns and {shared.max_new_tokens} tokens "
            f"an episode; lr {shared.lr:g}, {schedule}; KL off; seed {shared.seed}; held-out: "
            f"{len(evaluate.val)} prompts, greedy",
            f"episode prompts: the first {len(lengths)} render to the same ids on both sides ({lengths} tokens)",
        )
        started = time.perf_counter()
        before = evaluate(shared.model_dir)
        say(
            f"before training: held-out {before.accuracy:.1%} right, {before.called:.1%} called, "
            f"{before.sampled_tokens:.0f} sampled tokens/episode ({time.perf_counter() - started:.0f} s)"
        )
        results: list[Result] = []
        for pair in range(args.pairs):
            order = ("trl", "rlrun") if pair % 2 == 0 else ("rlrun", "trl")  # A B B A against drift
            for side in (s for s in order if s in args.sides.split(",")):
                spec = replace(shared, side=side, work_dir=str(Path(tmp) / f"{pair}-{side}"))
                started, load_before = time.perf_counter(), os.getloadavg()[0]
                r = run_side(spec)
                wall, loads = time.perf_counter() - started, (load_before, os.getloadavg()[0])
                r.after = evaluate(r.final_weights)
                results.append(r)
                say(*run_lines(r, wall, loads))
    say("", report(results, before))
    if out:
        out.close()


if __name__ == "__main__":
    main()
