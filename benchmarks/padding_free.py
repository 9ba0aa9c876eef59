"""The trainer's forward passes with and without padding (`actor.padding_free`), side by side.

Responses are sampled once (seeded) from the model itself, so their lengths are the model's
own; then the two layouts time the same work in A B B A order in one process, so a busy
machine slows both alike:

- update: one mini-batch's forward + backward, micro-batch by micro-batch, rows shuffled as
  the trainer shuffles them (a micro-batch holds parts of groups);
- ref: the no-grad log-probs of all rows (reference, old policy, teacher).

The ratio is padded / packed (above 1: padding-free is faster).

    python benchmarks/padding_free.py                      # the tiny model, as the grpo recipe
    python benchmarks/padding_free.py --model rlrun:smollm2-135m-instruct --chat --prompts 8 --n 4 \
        --max-tokens 32 --mini-batch 32 --micro-batch 16   # as real/grpo_smollm2
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
from compaction import arithmetic_prompt_ids  # benchmarks/ is on the path of a script run from it

from rlrun.rollout import ROLLOUT_ENGINES, SamplingParams
from rlrun.training.allocator import keep_freed_memory
from rlrun.training.batching import plan_minibatches
from rlrun.training.models import load_causal_lm, load_tokenizer
from rlrun.training.sequences import Sequences, forward_batched, response_log_probs

SIDES = ("packed", "padded", "padded", "packed")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--model", default="rlrun:tiny-base")
    parser.add_argument("--prompts", type=int, default=16)
    parser.add_argument("--n", type=int, default=8)
    parser.add_argument("--max-tokens", type=int, default=8)
    parser.add_argument("--mini-batch", type=int, default=128, help="rows per optimizer step")
    parser.add_argument("--micro-batch", type=int, default=128, help="rows per forward/backward")
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--chat", action="store_true", help="wrap prompts in the tokenizer's chat template")
    parser.add_argument(
        "--gradient-checkpointing",
        action="store_true",
        help="as model.gradient_checkpointing (padded rows run whole)",
    )
    args = parser.parse_args()
    keep_freed_memory()  # as `rlrun train` does: measure the memory reuse a run has
    torch.set_num_threads(args.threads)
    seq = sampled_sequences(args)
    model = load_causal_lm(args.model)
    if args.gradient_checkpointing:
        getattr(model, "activation_checkpointing_enable", model.gradient_checkpointing_enable)()
    plan = plan_minibatches(
        seq.response_mask,
        mini_batch=args.mini_batch,
        micro_batch=args.micro_batch,
        generator=torch.Generator().manual_seed(0),
    )[0]

    def update(packed: bool) -> None:
        for rows in plan.micro:
            q = seq.rows(rows)
            log_probs = response_log_probs(model, q, 1.0, entropy="detached", padding_free=packed)[0]
            (log_probs * q.response_mask).sum().backward()
        model.zero_grad(set_to_none=True)

    def ref(packed: bool) -> None:
        forward_batched(
            lambda q: response_log_probs(model, q, 1.0, padding_free=packed)[0],
            seq=seq,
            chunk=args.micro_batch,
        )

    lengths = seq.response_mask.sum(-1)
    print(
        f"model {args.model}, {args.prompts} prompts x {args.n}, prompts {seq.prompt_width} tokens wide "
        f"(mean {seq.attention_mask[:, : seq.prompt_width].sum(-1).float().mean():.1f}), responses mean "
        f"{lengths.mean():.1f} of {seq.response_mask.shape[1]} (min {lengths.min():.0f}), mini-batch "
        f"{args.mini_batch} rows in micro-batches of {args.micro_batch}, {args.threads} thread(s), "
        f"{args.pairs} ABBA pair(s){', gradient checkpointing' if args.gradient_checkpointing else ''}"
    )
    for name, work in (("update", update), ("ref", ref)):
        work(True)  # warm-up: first-call allocations
        times: dict[str, list[float]] = {"packed": [], "padded": []}
        for _ in range(args.pairs):
            for side in SIDES:
                start = time.perf_counter()
                work(side == "packed")
                times[side].append(time.perf_counter() - start)
        medians = {side: statistics.median(values) for side, values in times.items()}
        ranges = {side: f"{min(values):.3f}-{max(values):.3f}" for side, values in times.items()}
        print(
            f"{name:6}: packed {medians['packed']:.3f} s ({ranges['packed']}), padded {medians['padded']:.3f} s "
            f"({ranges['padded']}), padded / packed {medians['padded'] / medians['packed']:.2f}x"
        )


def sampled_sequences(args: argparse.Namespace) -> Sequences:
    """The model's own seeded responses to arithmetic prompts, as the trainer receives them."""
    tokenizer = load_tokenizer(args.model)
    model = load_causal_lm(args.model, trainable=False)
    prompt_ids = arithmetic_prompt_ids(tokenizer, args.prompts, chat=args.chat)
    sampling = SamplingParams(n=args.n, max_tokens=args.max_tokens, seed=0)
    batch = ROLLOUT_ENGINES.get("hf")(model, tokenizer).generate(prompt_ids, sampling)
    return Sequences.build(
        prompt_ids, batch.response_ids, batch.response_mask, tokenizer.pad_token_id, n=args.n
    )


if __name__ == "__main__":
    main()
