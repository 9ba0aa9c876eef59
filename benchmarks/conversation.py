"""Multi-turn sampling: keeping each row's KV cache between turns against resubmitting its context.

    python benchmarks/conversation.py                       # the hf engine: kept cache vs resubmitting
    python benchmarks/conversation.py --engine vllm         # vLLM: prefix cache kept vs emptied each turn

A conversation is `--prompts` prompts x `--n` rows; each of `--turns` turns samples
`--turn-tokens` tokens for every row (EOS suppressed: every turn the same work), then appends an
observation of `--observation-tokens` tokens to each row, as an agent's tool output would be. The
hf engine's own conversation keeps each row's cache, so a turn runs only what the rows gained;
`ResubmittingConversation` runs each row's whole context again every turn. vLLM always resubmits
(`ResubmittingConversation` over its `generate`) and its prefix cache serves the blocks it has
seen (whole blocks: 128 tokens on the CPU build); the other side empties that cache before each
turn (what a run without prefix caching would compute across turns). Both sides of a pair sample
the same tokens for a seed; after an untimed one-turn warm-up, the sides run in A B B A order in
one process.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from typing import Any

import torch
from compaction import point_prompts

from rlrun.rollout import ROLLOUT_ENGINES, SamplingParams
from rlrun.rollout.conversation import ResubmittingConversation
from rlrun.training.allocator import keep_freed_memory
from rlrun.training.models import load_causal_lm, load_tokenizer


def converse(
    engine: Any,
    conversation: Any,
    args: argparse.Namespace,
    observation: list[int],
    *,
    empty_cache: bool,
    turns: int,
) -> list[list[int]]:
    """Run `turns` turns (a seed each) over all rows; returns the last turn's samples."""
    rows = range(conversation.num_rows)
    for turn in range(turns):
        if empty_cache:
            engine.llm.reset_prefix_cache()
        sampling = SamplingParams(max_tokens=args.turn_tokens, min_tokens=args.turn_tokens, seed=turn)
        batch = conversation.sample(rows, sampling)
        if turn + 1 < turns:
            conversation.append(rows, [observation] * len(rows))
    return batch.response_ids.tolist()


class PrefixCacheCount:
    """vLLM's prompt tokens over the calls, and how many its prefix cache served (a count the
    load does not move, unlike the seconds)."""

    def __init__(self, engine: Any):
        self.prompt_tokens = self.cached_tokens = 0
        generate = engine.llm.generate

        def counted(*args: Any, **kwargs: Any) -> Any:
            outputs = generate(*args, **kwargs)
            self.prompt_tokens += sum(len(o.prompt_token_ids) for o in outputs)
            self.cached_tokens += sum(o.num_cached_tokens or 0 for o in outputs)
            return outputs

        engine.llm.generate = counted

    def take(self) -> str:
        line = f"{self.cached_tokens:,} of {self.prompt_tokens:,} prompt tokens from the prefix cache"
        self.prompt_tokens = self.cached_tokens = 0
        return line


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--engine", choices=("hf", "vllm"), default="hf")
    parser.add_argument("--model", default="rlrun:smollm2-135m-instruct")
    parser.add_argument("--prompts", type=int, default=4)
    parser.add_argument("--n", type=int, default=4)
    parser.add_argument("--turns", type=int, default=4)
    parser.add_argument("--turn-tokens", type=int, default=32)
    parser.add_argument("--observation-tokens", type=int, default=32)
    parser.add_argument("--pairs", type=int, default=1)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    keep_freed_memory()  # as `rlrun train` does: measure the memory reuse a run has
    torch.set_num_threads(args.threads)
    tokenizer = load_tokenizer(args.model)
    model = load_causal_lm(args.model, trainable=False)
    prompts = point_prompts(tokenizer, args.prompts)
    text = " The calculator says 42." * args.observation_tokens
    observation = tokenizer(text, add_special_tokens=False)["input_ids"][: args.observation_tokens]
    rows = args.prompts * args.n
    budget = args.turns * (args.turn_tokens + args.observation_tokens)
    if args.engine == "hf":
        engine = ROLLOUT_ENGINES.get("hf")(model, tokenizer)
        sides = {
            "kept cache": lambda: engine.conversation(prompts, args.n, max_tokens=budget),
            "resubmitting": lambda: ResubmittingConversation(engine, prompts, args.n, max_tokens=budget),
        }
    else:
        longest = max(len(p) for p in prompts) + budget
        engine = ROLLOUT_ENGINES.get("vllm")(model, tokenizer, max_batch_samples=rows, max_model_len=longest)
        sides = {
            "prefix cache": lambda: engine.conversation(prompts, args.n, max_tokens=budget),
            "emptied each turn": lambda: engine.conversation(prompts, args.n, max_tokens=budget),
        }
    print(
        f"{args.engine} on {args.model}, {args.prompts} prompts x {args.n} rows, {args.turns} turns of "
        f"{args.turn_tokens} sampled + {args.observation_tokens} appended tokens "
        f"(prompts {min(map(len, prompts))}-{max(map(len, prompts))} tokens), {args.threads} thread(s)"
    )
    first, second = sides
    count = PrefixCacheCount(engine) if args.engine == "vllm" else None
    converse(engine, sides[first](), args, observation, empty_cache=False, turns=1)  # warm-up, untimed
    if count:
        count.take()  # not the warm-up's
    seconds: dict[str, list[float]] = {name: [] for name in sides}
    samples = {}
    for name in [first, second, second, first] * args.pairs:
        load = os.getloadavg()[0]
        start = time.perf_counter()
        samples[name] = converse(
            engine,
            sides[name](),
            args,
            observation,
            empty_cache=name == "emptied each turn",
            turns=args.turns,
        )
        seconds[name].append(time.perf_counter() - start)
        cached = f"; {count.take()}" if count else ""
        print(
            f"  {name:18} {seconds[name][-1]:.2f} s (load {load:.1f} -> {os.getloadavg()[0]:.1f}){cached}",
            flush=True,
        )
    print(f"same last-turn samples: {samples[first] == samples[second]}")
    for name, values in seconds.items():
        print(f"{name:18} median {statistics.median(values):.2f} s ({', '.join(f'{v:.2f}' for v in values)})")
    print(
        f"{second} / {first}: {statistics.median(seconds[second]) / statistics.median(seconds[first]):.2f}x"
    )


if __name__ == "__main__":
    main()
