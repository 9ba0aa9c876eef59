"""The distance to the limit: the update phase's model FLOP/s over this CPU's float32 matmul rate,
both measured in one process with the same number of threads.

The update phase is `update_actor` of real training steps (the recipe's own rollouts, loss,
backward, clipping and AdamW). Its FLOPs are counted from the model's shapes on every call the
update makes: 2 x (linear weights) per token forward, the LM head on the positions whose logits
are kept, attention (QK^T and AV over the keys each query sees), and twice all that backward.
"computed" counts every token that ran, padding included; "useful" only real tokens (and, in
attention, real causal pairs). Step 1 is warm-up; it is also where the count is checked against
torch's FlopCounterMode. The matmul rate is torch.nn.functional.linear and its two backward
products at the model's own GEMM shapes (the update's median rows per call), FLOP-weighted as
the model uses them, plus one large square product; measured before and after the steps.

    python benchmarks/roofline.py [--recipe real/grpo_smollm2] [--steps 4] [--threads 1] [--profile]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections import Counter
from contextlib import contextmanager
from dataclasses import replace
from functools import partial
from typing import Any

import torch
from torch.profiler import ProfilerActivity, profile
from torch.utils.flop_counter import FlopCounterMode

from rlrun.recipes import load_recipe
from rlrun.training import loop
from rlrun.training.session import Session
from rlrun.training.stages import Pipeline

QUIET = ["logging.console.enabled=false", "trainer.eval.prompts=1"]
SQUARE = 2048
OP_GROUPS = {  # profile buckets, by aten op name
    "matmul": ("aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm"),
    "attention": ("scaled_dot_product", "_flash_attention"),
    "log-softmax / softmax": ("softmax",),
    "optimizer": ("_foreach", "adam"),
    "copies, gathers, cats": ("copy_", "cat", "index", "gather", "scatter", "contiguous", "clone", "to_copy"),
}


class UpdateFlops:
    """Counts the FLOPs of the policy's forward calls while `active` (backward as 2x forward
    for calls that record a graph), and the rows x tokens of each call."""

    def __init__(self, model: torch.nn.Module):
        cfg = model.config
        self.layers, self.heads, self.head_dim = (
            cfg.num_hidden_layers,
            cfg.num_attention_heads,
            getattr(cfg, "head_dim", cfg.hidden_size // cfg.num_attention_heads),
        )
        head = model.get_output_embeddings()
        self.head_weights = head.weight.numel()
        self.linear_weights = sum(
            m.weight.numel() for m in model.modules() if isinstance(m, torch.nn.Linear) and m is not head
        )
        self.computed = self.useful = 0.0
        self.call_tokens: list[int] = []
        self.active = False
        model.register_forward_pre_hook(self._count, with_kwargs=True)

    def _count(self, _module: torch.nn.Module, _args: tuple, kwargs: dict[str, Any]) -> None:
        if not self.active:
            return
        rows, length = kwargs["input_ids"].shape
        mask = kwargs.get("attention_mask")
        if mask is None:  # no padding to mask: every token is real (a packed row counts as one sequence)
            mask = torch.ones(rows, length, dtype=torch.long)
        keys = mask.shape[1]  # cached prompt + this call's tokens
        kept = min(int(kwargs.get("logits_to_keep") or length), length)
        real = mask[:, -length:]
        seen = mask.cumsum(-1)[:, -length:]  # real keys at or before each query
        attention_unit = 2 * 2 * self.heads * self.head_dim * self.layers  # QK^T and AV, per (query, key)
        computed = (
            2 * self.linear_weights * rows * length
            + 2 * self.head_weights * rows * kept
            + attention_unit * rows * length * keys
        )
        useful = (
            2 * self.linear_weights * real.sum().item()
            + 2 * self.head_weights * real[:, -kept:].sum().item()
            + attention_unit * (real * seen).sum().item()
        )
        scale = 3 if torch.is_grad_enabled() else 1  # backward: input and weight gradients
        self.computed += scale * computed
        self.useful += scale * useful
        self.call_tokens.append(rows * length)


def matmul_rate(shapes: Counter, rows: int, seconds: float = 0.3) -> float:
    """FLOP/s of forward and both backward products of every (in, out) linear shape at `rows`
    rows, weighted by how many such layers the model has."""
    flops = elapsed = 0.0
    for (fan_in, fan_out), count in shapes.items():
        x, w, g = torch.randn(rows, fan_in), torch.randn(fan_out, fan_in), torch.randn(rows, fan_out)
        for product in (
            partial(torch.nn.functional.linear, x, w),
            partial(torch.mm, g, w),
            partial(torch.mm, g.t(), x),
        ):
            per_call = _seconds_per_call(product, seconds / 3)
            flops += count * 2 * rows * fan_in * fan_out
            elapsed += count * per_call
    return flops / elapsed


def square_rate(seconds: float = 0.5) -> float:
    a, b = torch.randn(SQUARE, SQUARE), torch.randn(SQUARE, SQUARE)
    return 2 * SQUARE**3 / _seconds_per_call(lambda: a @ b, seconds)


def _seconds_per_call(fn: Any, budget: float) -> float:
    fn()  # warm-up
    calls, start = 0, time.perf_counter()
    while time.perf_counter() - start < budget or calls < 3:
        fn()
        calls += 1
    return (time.perf_counter() - start) / calls


def linear_shapes(model: torch.nn.Module) -> Counter:
    return Counter((m.in_features, m.out_features) for m in model.modules() if isinstance(m, torch.nn.Linear))


@contextmanager
def instrumented_update(s: Session, counter: UpdateFlops, record: dict[str, Any]):
    """Wraps the session's `update_actor` stage so that the FLOPs counter runs only inside it,
    its wall time is recorded, and (when asked) it runs under FlopCounterMode or the profiler."""
    pipeline = s.pipeline
    (stage,) = [st for st in pipeline if st.name == "update_actor"]
    original = stage.run

    def update_actor(*args: Any, **kwargs: Any) -> None:
        mode = record.pop("mode", None)
        counter.active = True
        start = time.perf_counter()
        try:
            if mode is None:
                return original(*args, **kwargs)
            with mode:
                return original(*args, **kwargs)
        finally:
            record["seconds"] = time.perf_counter() - start
            counter.active = False

    s.pipeline = Pipeline(tuple(replace(st, run=update_actor) if st is stage else st for st in pipeline))
    try:
        yield
    finally:
        s.pipeline = pipeline


def profile_table(prof: profile) -> str:
    events = prof.key_averages()
    total = sum(e.self_cpu_time_total for e in events)
    lines = [f"update phase, self CPU time by group (total {total / 1e6:.2f} s):"]
    remaining = {e.key: e.self_cpu_time_total for e in events}
    for group, needles in OP_GROUPS.items():
        keys = [k for k in remaining if any(n in k for n in needles)]
        share = sum(remaining.pop(k) for k in keys)
        lines.append(f"  {group:24s} {share / 1e6:7.2f} s  {100 * share / total:5.1f} %")
    rest = sum(remaining.values())
    lines.append(f"  {'everything else':24s} {rest / 1e6:7.2f} s  {100 * rest / total:5.1f} %")
    by_shape = prof.key_averages(group_by_input_shape=True)
    head = sum(
        e.self_cpu_time_total
        for e in by_shape
        if e.key in OP_GROUPS["matmul"] and any(49152 in s for s in e.input_shapes if s)
    )
    lines.append(f"  of matmul, with the 49152-wide LM head: {head / 1e6:.2f} s ({100 * head / total:.1f} %)")
    lines.append("")
    lines.append(events.table(sort_by="self_cpu_time_total", row_limit=25))
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--recipe", default="real/grpo_smollm2")
    parser.add_argument("--steps", type=int, default=4, help="training steps; the first is warm-up")
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    parser.add_argument("--profile", action="store_true", help="profile the update of one more step")
    parser.add_argument("overrides", nargs="*", help="recipe overrides, as for rlrun train")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    recipe = load_recipe(args.recipe, [*QUIET, *args.overrides]).recipe
    s = Session(recipe)
    model = s.models.unwrapped_policy
    counter, record = UpdateFlops(model), {}
    print(
        f"recipe {args.recipe} {' '.join(args.overrides)}; threads {args.threads}; torch {torch.__version__}"
    )
    print(f"model: {sum(p.numel() for p in model.parameters()) / 1e6:.1f} M parameters")

    shapes = linear_shapes(model)
    square_before = square_rate()
    rows: list[tuple[int, float, float, float, float]] = []  # step, update s, computed, useful, matmul rate
    with instrumented_update(s, counter, record):
        for step in range(1, args.steps + 1):
            flop_mode = FlopCounterMode(display=False) if step == 1 else None
            if flop_mode is not None:
                record["mode"] = flop_mode
            before = (counter.computed, counter.useful)
            loop.training_step(s, step)
            computed, useful = counter.computed - before[0], counter.useful - before[1]
            if flop_mode is not None:
                counted = flop_mode.get_total_flops()
                call_rows = int(statistics.median(counter.call_tokens))
                print(
                    f"check (step 1): FlopCounterMode {counted / 1e12:.4f} TFLOP, this count "
                    f"{computed / 1e12:.4f} (ratio {computed / counted:.3f})"
                )
                continue
            # Right after each update: a busy machine slows both sides of the ratio alike.
            rows.append((step, record["seconds"], computed, useful, matmul_rate(shapes, call_rows)))
        profiled = None
        if args.profile:
            profiled = profile(activities=[ProfilerActivity.CPU], record_shapes=True)
            record["mode"] = profiled
            loop.training_step(s, args.steps + 1)
    square_after = square_rate()

    print(
        "\n| step | update s | computed TFLOP | useful share | computed GFLOP/s | useful GFLOP/s "
        "| matmul GFLOP/s | computed / matmul | useful / matmul |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for step, seconds, computed, useful, rate in rows:
        print(
            f"| {step} | {seconds:.2f} | {computed / 1e12:.3f} | {useful / computed:.2f} "
            f"| {computed / seconds / 1e9:.1f} | {useful / seconds / 1e9:.1f} | {rate / 1e9:.1f} "
            f"| {100 * computed / seconds / rate:.0f} % | {100 * useful / seconds / rate:.0f} % |"
        )
    shares = [c / t / r for _, t, c, _, r in rows]
    useful_shares = [u / t / r for _, t, _, u, r in rows]
    print(f"\nmatmul rate at the model's GEMM shapes: {call_rows} rows per call (the update's median)")
    print(
        f"matmul rate, {SQUARE}^3 square: {square_before / 1e9:.1f} GFLOP/s before, {square_after / 1e9:.1f} after"
    )
    print(
        f"distance to the limit, steps 2-{args.steps}: computed {100 * min(shares):.0f}-{100 * max(shares):.0f} % "
        f"(median {100 * statistics.median(shares):.0f} %) of the shape-matched matmul rate, useful "
        f"{100 * min(useful_shares):.0f}-{100 * max(useful_shares):.0f} % "
        f"(median {100 * statistics.median(useful_shares):.0f} %)"
    )
    if profiled is not None:
        print("\n" + profile_table(profiled))


if __name__ == "__main__":
    main()
