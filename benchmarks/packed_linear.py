"""Decode-step products over weights packed once for oneDNN against torch's `linear`, per weight
shape and for a whole model: what `rlrun.rollout.packed_linear` rests on (which weights it packs,
``MIN_SIDE``).

For each distinct (out, in) shape of the models' linear layers and of their stacked siblings,
enough distinct weights of that shape to fill about 120 MB (a decode step reads each weight once,
from memory, not from a cache) are multiplied by `rows` rows, linear packed packed linear; the
ratio is linear's time over the packed one's, both runs a side summed. Then every linear weight of
each model once, in its order, at each row count: all by `linear`, against the engine's products
(sibling projections stacked into one weight as ``sibling_groups`` has them, packed where
``packable``) and against every weight packed alone.

    python benchmarks/packed_linear.py [--models rlrun:smollm2-135m-instruct,rlrun:tiny-base] \
        [--rows 1,8,32,128] [--threads 2]
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable

import torch

from rlrun.rollout.packed_linear import pack, packable, product, sibling_groups
from rlrun.training.models import load_causal_lm

OUT_OF_CACHE_BYTES = 120e6


def seconds(fn: Callable[[], object], repeats: int = 3) -> float:
    fn()  # warm-up
    start = time.perf_counter()
    for _ in range(repeats):
        fn()
    return (time.perf_counter() - start) / repeats


def decode_weights(model: torch.nn.Module) -> list[torch.Tensor]:
    """The model's linear weights as the hf engine multiplies them in a decode step, in order:
    each group of sibling projections (``sibling_groups``) stacked into one weight."""
    groups = {group[0]: group for group in sibling_groups(model)}
    later = {m for group in groups.values() for m in group[1:]}
    return [
        torch.cat([m.weight.detach() for m in groups[layer]]) if layer in groups else layer.weight.detach()
        for layer in model.modules()
        if isinstance(layer, torch.nn.Linear) and layer not in later
    ]


def linear_over_packed(
    weights: list[torch.Tensor],
    rows: int,
    *,
    engine_weights: list[torch.Tensor] | None = None,
    force: bool = False,
) -> tuple[float, float, float]:
    """linear's seconds over every weight of ``weights`` over the engine's (its ``engine_weights``,
    the same products stacked as it stacks them; default ``weights``), packed where ``packable``
    or every weight with ``force``, A B B A; and each side's seconds per pass."""
    engine_weights = weights if engine_weights is None else engine_weights
    inputs = {w.shape[1]: torch.randn(rows, 1, w.shape[1]) for w in weights + engine_weights}
    packed = [pack(w, rows) if force or packable(w) else None for w in engine_weights]

    def plain() -> None:
        for w in weights:
            torch.nn.functional.linear(inputs[w.shape[1]], w)

    def engine() -> None:
        for w, p in zip(engine_weights, packed):
            x = inputs[w.shape[1]]
            if p is None:
                torch.nn.functional.linear(x, w)
            else:
                product(x, p)

    a, b, c, d = seconds(plain), seconds(engine), seconds(engine), seconds(plain)
    return (a + d) / (b + c), (a + d) / 2, (b + c) / 2


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--models", default="rlrun:smollm2-135m-instruct,rlrun:tiny-base")
    parser.add_argument("--rows", default="1,8,32,128")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    rows = [int(r) for r in args.rows.split(",")]
    models = {name: load_causal_lm(name, trainable=False) for name in args.models.split(",")}
    weights = {
        name: [m.weight.detach() for m in model.modules() if isinstance(m, torch.nn.Linear)]
        for name, model in models.items()
    }
    stacked = {name: decode_weights(model) for name, model in models.items()}
    print(f"torch {torch.__version__}, {args.threads} threads, load {os.getloadavg()[0]:.1f}")
    print(
        "\nPer shape (every weight distinct, ~120 MB a pass; forced packed: linear / packed, both in µs per weight):"
    )
    print("| weight (out x in) | the engine | " + " | ".join(f"{r} rows" for r in rows) + " |")
    print("|---|---|" + "---:|" * len(rows))
    every = [w for ws in (*weights.values(), *stacked.values()) for w in ws]
    shapes = sorted({tuple(w.shape) for w in every}, key=lambda s: s[0] * s[1])
    for out, inn in shapes:
        count = max(4, round(OUT_OF_CACHE_BYTES / (4 * out * inn)))
        ws = [torch.randn(out, inn) for _ in range(count)]
        cells = []
        for r in rows:
            ratio, plain, packed = linear_over_packed(ws, r, force=True)
            cells.append(f"{ratio:.2f}x ({1e6 * plain / count:.0f} / {1e6 * packed / count:.0f})")
        packs = "packed" if packable(ws[0]) else "kept"
        print(f"| {out} x {inn} | {packs} | " + " | ".join(cells) + " |", flush=True)
    print(
        "\nWhole models (every linear weight once, in order: linear over the engine's products, its siblings stacked"
        ", ms; and over every weight packed alone):"
    )
    print("| model | " + " | ".join(f"{r} rows" for r in rows) + " |")
    print("|---|" + "---:|" * len(rows))
    for name, ws in weights.items():
        cells = []
        for r in rows:
            ratio, plain, engine = linear_over_packed(ws, r, engine_weights=stacked[name])
            forced = linear_over_packed(ws, r, force=True)[0]
            cells.append(
                f"{ratio:.2f}x ({1e3 * plain:.1f} / {1e3 * engine:.1f} ms); all packed {forced:.2f}x"
            )
        print(f"| {name} | " + " | ".join(cells) + " |", flush=True)
    print(f"load at the end {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
