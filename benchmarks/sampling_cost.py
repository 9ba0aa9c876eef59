"""What the hf engine's sampler spends per decode step over SmolLM2's vocabulary (49,152 tokens),
op by op, on random logits: the work the generation bound (roofline.py) leaves out.

    python benchmarks/sampling_cost.py [--threads 2] [--rows 32,128]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import torch

from rlrun.rollout.sampler import exponential_noise

VOCAB = 49_152  # SmolLM2's


def milliseconds(op: Callable[[], object], repeats: int = 50) -> float:
    op()  # warm-up: the allocator's first request
    start = time.perf_counter()
    for _ in range(repeats):
        op()
    return (time.perf_counter() - start) / repeats * 1e3


def report(rows: int) -> None:
    """Each op's milliseconds at `rows` decode-batch rows, then their sum."""
    cpu = torch.device("cpu")
    logits, eos = torch.randn(rows, VOCAB), torch.tensor([2])
    noise = exponential_noise(rows, VOCAB, device=cpu)
    first = torch.zeros(rows, 1, dtype=torch.long)
    ops = {  # what rlrun.rollout.sampler.decode runs over the vocabulary each step
        "noise -log(u)": lambda: exponential_noise(rows, VOCAB, device=cpu),
        "index_fill (EOS before min_tokens)": lambda: logits.index_fill(-1, eos, float("-inf")),
        "softmax": lambda: logits.softmax(-1),
        "p / q, argmax": lambda: logits.div(noise).argmax(-1),
        "log_softmax, gather": lambda: logits.log_softmax(-1).gather(-1, first),
    }
    total = 0.0
    for name, op in ops.items():
        ms = milliseconds(op)
        total += ms
        print(f"rows {rows:4d}  {name:40s} {ms:7.2f} ms")
    print(f"rows {rows:4d}  {'all':40s} {total:7.2f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rows", default="32,128", help="decode-batch rows, comma-separated")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    for rows in args.rows.split(","):
        report(int(rows))


if __name__ == "__main__":
    main()
