"""Generation with and without compaction (ended rows leaving the decode batch), side by side.

The hf engine samples the same tokens either way (tests/rollout/test_hf_engine.py); this measures
what compaction saves. Each pair of timings runs in A B B A order in one process, so a busy
machine slows both sides alike; the ratio is off / on (above 1: compaction is faster).

    python benchmarks/compaction.py [--model rlrun:smollm2-135m-instruct] [--pairs 2]
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
from transformers import PreTrainedTokenizerBase

from rlrun.embedded import resolve_model_path
from rlrun.rollout import ROLLOUT_ENGINES, SamplingParams
from rlrun.tasks.arithmetic import ArithmeticTask
from rlrun.training.allocator import keep_freed_memory
from rlrun.training.models import load_causal_lm, load_tokenizer

OFF = 2.0  # compact_ended_fraction above 1: never compact


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--model", default="rlrun:tiny-base")
    parser.add_argument("--prompts", type=int, default=8)
    parser.add_argument("--n", type=int, default=4)
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--pairs", type=int, default=2)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--chat", action="store_true", help="wrap prompts in the tokenizer's chat template")
    parser.add_argument(
        "--fraction",
        type=float,
        default=0.25,
        help="compaction on: once this fraction of the batch has ended",
    )
    args = parser.parse_args()
    keep_freed_memory()  # as `rlrun train` does: measure the memory reuse a run has
    torch.set_num_threads(args.threads)
    tokenizer = load_tokenizer(args.model)
    model = load_causal_lm(args.model, trainable=False)
    prompt_ids = arithmetic_prompt_ids(tokenizer, args.prompts, chat=args.chat)
    sampling = SamplingParams(n=args.n, max_tokens=args.max_tokens, seed=0)
    engines = {
        "on": ROLLOUT_ENGINES.get("hf")(model, tokenizer, compact_ended_fraction=args.fraction),
        "off": ROLLOUT_ENGINES.get("hf")(model, tokenizer, compact_ended_fraction=OFF),
    }
    engines["on"].generate(prompt_ids, sampling)  # warm-up: first-call allocations and caches
    times: dict[str, list[float]] = {"on": [], "off": []}
    lengths = None
    for _ in range(args.pairs):
        for side in ("on", "off", "off", "on"):
            start = time.perf_counter()
            batch = engines[side].generate(prompt_ids, sampling)
            times[side].append(time.perf_counter() - start)
            lengths = batch.response_lengths.float()
    print(
        f"model {args.model} ({resolve_model_path(args.model)}), {args.prompts} prompts x {args.n}, "
        f"max {args.max_tokens} tokens, {args.threads} thread(s), {args.pairs} ABBA pair(s), "
        f"compaction on at {args.fraction} of the batch ended"
    )
    print(f"response length: mean {lengths.mean():.1f}, min {lengths.min():.0f}, max {lengths.max():.0f}")
    for side, values in times.items():
        print(
            f"compaction {side:3}: median {statistics.median(values):.3f} s  ({', '.join(f'{v:.3f}' for v in values)})"
        )
    print(f"off / on: {statistics.median(times['off']) / statistics.median(times['on']):.2f}x")


def arithmetic_prompt_ids(tokenizer: PreTrainedTokenizerBase, count: int, *, chat: bool) -> list[list[int]]:
    """`count` held-out 2-digit additions, worded as the real recipe words them, tokenised
    (with `chat`, inside the tokenizer's chat template)."""
    texts = [
        f"What is {r['prompt']}? Answer with only the number."
        for r in ArithmeticTask(digits=2).validation(count)
    ]
    if chat:
        texts = [
            tokenizer.apply_chat_template(
                [{"role": "user", "content": t}], tokenize=False, add_generation_prompt=True
            )
            for t in texts
        ]
    return tokenizer(texts, add_special_tokens=False)["input_ids"]


def point_prompts(tokenizer: PreTrainedTokenizerBase, count: int) -> list[list[int]]:
    """Held-out 2-digit additions: in the chat template, worded as `real/grpo_smollm2` words
    them, for a chat model; as the arithmetic task writes them (`12+34=`) for the tiny models."""
    if tokenizer.chat_template:
        return arithmetic_prompt_ids(tokenizer, count, chat=True)
    return tokenizer([r["prompt"] for r in ArithmeticTask(digits=2).validation(count)])["input_ids"]


if __name__ == "__main__":
    main()
