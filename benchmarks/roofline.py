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

The generation phase (`--phase generation`): the hf engine's `generate` alone at scaling points
`TOKENSxNxPROMPTS` (as benchmarks/scaling.py names them, responses held at the budget), against
its bound: for the prefill and for each decode step, the larger of streaming the weights at this
machine's measured read bandwidth and the step's matmul FLOPs at the measured forward matmul rate
(the GEMM shapes the engine multiplies, its sibling projections stacked, at the step's rows), plus
attention over the cache (its keys and values read at the measured bandwidth, or its FLOPs at the
matmul rate, the larger). Sampling
over the vocabulary is not in the bound: it is the overhead the bound leaves out. The matmul rate
is the faster of torch's linear and oneDNN's product over a packed weight (what the engine decodes
with), measured on one weight per shape, called repeatedly, so the weight stays in the CPU's caches;
a decode step reads each of its weights once. A second column sets the time against the same
bound at the rate of the model's own weights, each multiplied once in the model's order (the faster
of torch's linear on each and the engine's products). Each run's minor page faults are printed.

Both phases run under the glibc thresholds `rlrun train` sets (rlrun/training/allocator.py).

    python benchmarks/roofline.py --phase generation [--points 32x4x8,128x16x8] [--threads 2] \
        [--compare-dynamic] [--profile]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections import Counter
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any

import torch
from algorithms import minor_faults
from compaction import point_prompts
from packed_linear import decode_weights, linear_over_packed
from torch.profiler import ProfilerActivity, profile, record_function
from torch.utils.flop_counter import FlopCounterMode

from rlrun.recipes import load_recipe
from rlrun.rollout import ROLLOUT_ENGINES, SamplingParams
from rlrun.rollout.decode_layers import DecodeLayers
from rlrun.rollout.packed_linear import pack, product
from rlrun.training import loop
from rlrun.training.allocator import keep_freed_memory
from rlrun.training.models import load_causal_lm, load_tokenizer
from rlrun.training.session import Session
from rlrun.training.stages import Pipeline

QUIET = ["logging.console.enabled=false", "trainer.eval.prompts=1"]
SQUARE = 2048
OP_GROUPS = {  # profile buckets, by operator name
    "matmul": ("aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "mkldnn::_linear_pointwise"),
    "weight packing": ("_reorder_linear_weight",),
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
        keep = kwargs.get("logits_to_keep")
        # The packed layout names the columns whose logits it needs; the others, a count from the end.
        kept = len(keep) if isinstance(keep, torch.Tensor) else min(int(keep or length), length)
        keys = mask.shape[-1]  # cached prompt + this call's tokens
        if mask.dim() == 4:  # the packed layout's additive bias (rows, 1, queries, keys): 0 where allowed
            # (The bias alone does not say which columns are the rows' end padding: they count
            # as useful here, a few columns a row at most where the layout is chosen.)
            allowed = mask[:, 0] == 0
            real = torch.ones(rows, length, dtype=torch.long)
            seen = allowed.sum(-1)
        else:
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


def matmul_rate(shapes: Counter, rows: int, seconds: float = 0.3, *, backward: bool = True) -> float:
    """FLOP/s of forward and (with `backward`) both backward products of every (in, out) linear
    shape at `rows` rows, weighted by how many such layers the model has. Forward only (the
    generation bound): each shape's product by the faster of torch's linear and oneDNN's over the
    weight packed once (what the hf engine decodes with, `rlrun.rollout.packed_linear`)."""
    flops = elapsed = 0.0
    for (fan_in, fan_out), count in shapes.items():
        x, w, g = torch.randn(rows, fan_in), torch.randn(fan_out, fan_in), torch.randn(rows, fan_out)
        products = [partial(torch.nn.functional.linear, x, w)]
        if backward:
            products += [partial(torch.mm, g, w), partial(torch.mm, g.t(), x)]
        for call in products:
            per_call = _seconds_per_call(call, seconds / len(products))
            if not backward:
                per_call = min(per_call, _seconds_per_call(partial(product, x, pack(w, rows)), seconds))
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
    add_generation_arguments(parser)
    args = parser.parse_args()
    keep_freed_memory()  # as `rlrun train` does: measure the memory reuse a run has
    if args.phase == "generation":
        generation_phase(args)
        return
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


GENERATION_POINTS = "32x4x8,32x16x8,128x4x8,128x16x8,128x4x32,512x4x8"


def add_generation_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--phase", choices=("update", "generation"), default="update")
    parser.add_argument("--model", default="rlrun:smollm2-135m-instruct", help="generation: the model")
    parser.add_argument(
        "--points", default=GENERATION_POINTS, help="generation: TOKENSxNxPROMPTS, comma-separated"
    )
    parser.add_argument(
        "--repeats", type=int, default=2, help="generation: timed calls a point (after a warm-up)"
    )
    parser.add_argument(
        "--compare-dynamic",
        action="store_true",
        help="generation: also time transformers' DynamicCache (the fallback), A B B A with the preallocated cache",
    )


@dataclass(frozen=True)
class Machine:
    """This machine's rates at the run's thread count: bytes/s of a streaming read, and forward
    matmul FLOP/s at ``shapes`` per number of rows (measured when first asked). With ``weights``
    (the model's linear weights, in its order) and ``decode_weights`` (the same, as the engine
    multiplies them: its siblings stacked), also the rate at which a decode step's products run as
    the step reads them: each weight once, from memory, where ``matmul`` times each shape's product
    repeatedly on one weight that stays in the CPU's caches; the faster of torch's linear for every
    weight and the engine's products (packed where it packs)."""

    read_bytes_per_s: float
    shapes: Counter
    rates: dict[int, float]
    weights: tuple[torch.Tensor, ...] = ()
    decode_weights: tuple[torch.Tensor, ...] = ()
    once_rates: dict[int, float] = field(default_factory=dict)

    def matmul(self, rows: int) -> float:
        if rows not in self.rates:
            self.rates[rows] = matmul_rate(self.shapes, rows, backward=False)
        return self.rates[rows]

    def matmul_each_weight_once(self, rows: int) -> float:
        if rows not in self.once_rates:
            _, plain, engine = linear_over_packed(
                list(self.weights), rows, engine_weights=list(self.decode_weights)
            )
            flops = sum(2 * rows * w.numel() for w in self.weights)
            seconds = min(plain, engine)
            self.once_rates[rows] = flops / seconds
        return self.once_rates[rows]


def read_rate(megabytes: int = 512) -> float:
    """Bytes/s of summing a float32 tensor too large for any cache."""
    x = torch.ones(megabytes * 2**20 // 4)
    return x.numel() * 4 / _seconds_per_call(x.sum, 0.5)


@dataclass(frozen=True)
class DecodeShape:
    """What one generation at a point moves and computes, from the model's shapes."""

    weight_bytes: float  # every parameter once (tied embeddings once)
    body_flops_per_token: float  # 2 x the linear weights but the LM head's
    head_flops_per_token: float  # 2 x the LM head's weights (the prefill keeps one position's logits)
    kv_bytes_per_token: float  # keys and values of one token, all layers
    attention_flops_per_key: float  # QK^T and AV for one query and one key, all layers

    @classmethod
    def of(cls, model: torch.nn.Module) -> DecodeShape:
        cfg = model.config
        heads, layers = cfg.num_attention_heads, cfg.num_hidden_layers
        head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // heads
        kv_heads = getattr(cfg, "num_key_value_heads", None) or heads
        size = next(model.parameters()).element_size()
        head = model.get_output_embeddings()
        body = sum(
            m.weight.numel() for m in model.modules() if isinstance(m, torch.nn.Linear) and m is not head
        )
        return cls(
            weight_bytes=sum(p.numel() for p in model.parameters()) * size,
            body_flops_per_token=2 * body,
            head_flops_per_token=2 * head.weight.numel(),
            kv_bytes_per_token=2 * layers * kv_heads * head_dim * size,
            attention_flops_per_key=2 * 2 * heads * head_dim * layers,
        )

    def bound(
        self,
        machine: Machine,
        *,
        prompts: int,
        prompt_tokens: float,
        rows: int,
        tokens: int,
        rate: Callable[[int], float] | None = None,
    ) -> dict[str, float]:
        """Seconds: the prefill (each prompt once), then tokens - 1 decode steps over `rows`
        rows whose context grows from the prompt; split into weights, matmuls and attention.
        `rate`: matmul FLOP/s by rows (default ``machine.matmul``)."""
        rate = rate or machine.matmul
        prefill_tokens = prompts * prompt_tokens
        weights = self.weight_bytes / machine.read_bytes_per_s
        parts = {"weights": 0.0, "matmul": 0.0, "attention": 0.0}

        def add(flops: float, attention_flops: float, kv_bytes: float, matmul_rows: int) -> None:
            matmul = flops / rate(matmul_rows)
            parts["weights" if weights >= matmul else "matmul"] += max(weights, matmul)
            attention = attention_flops / machine.matmul(matmul_rows)
            parts["attention"] += max(kv_bytes / machine.read_bytes_per_s, attention)

        add(
            self.body_flops_per_token * prefill_tokens + self.head_flops_per_token * prompts,
            self.attention_flops_per_key * prompts * prompt_tokens * (prompt_tokens + 1) / 2,
            self.kv_bytes_per_token * prefill_tokens,
            max(1, round(prefill_tokens)),
        )
        for step in range(1, tokens):
            context = prompt_tokens + step
            add(
                (self.body_flops_per_token + self.head_flops_per_token) * rows,
                self.attention_flops_per_key * rows * context,
                self.kv_bytes_per_token * rows * context,
                rows,
            )
        return parts


def generation_phase(args: argparse.Namespace) -> None:
    """The hf engine's generation at each point against its bound (see the module docstring)."""
    torch.set_num_threads(args.threads)
    tokenizer = load_tokenizer(args.model)
    model = load_causal_lm(args.model, trainable=False)
    shape = DecodeShape.of(model)
    weights = tuple(m.weight.detach() for m in model.modules() if isinstance(m, torch.nn.Linear))
    stacked = tuple(decode_weights(model))
    decode_shapes = Counter((w.shape[1], w.shape[0]) for w in stacked)
    machine = Machine(read_rate(), decode_shapes, {}, weights, stacked)
    engines = {"preallocated": ROLLOUT_ENGINES.get("hf")(model, tokenizer)}
    if args.compare_dynamic:
        engines["dynamic"] = ROLLOUT_ENGINES.get("hf")(model, tokenizer, preallocate=False)
    print(
        f"model {args.model}: {sum(p.numel() for p in model.parameters()) / 1e6:.1f} M parameters; threads {args.threads}"
    )
    print(f"read bandwidth {machine.read_bytes_per_s / 1e9:.1f} GB/s; torch {torch.__version__}")
    print(
        "\n| point | rows | prompt tokens | measured s | bound s | measured / bound | bound: weights / matmul / "
        "attention s | completion tok/s | matmul GFLOP/s at the rows | measured / bound, each weight once "
        "(GFLOP/s) | load |"
    )
    print("|---|---:|---:|---:|---:|---:|---|---:|---:|---:|---|")
    for point in args.points.split(","):
        tokens, n, prompts = (int(x) for x in point.lower().split("x"))
        prompt_ids = point_prompts(tokenizer, prompts)
        sampling = SamplingParams(n=n, max_tokens=tokens, min_tokens=tokens, seed=0)
        engines["preallocated"].generate(prompt_ids, SamplingParams(n=n, max_tokens=2, seed=0))  # warm-up
        load = os.getloadavg()[0]
        runs = time_sides(engines, prompt_ids, sampling, args.repeats)
        rows = n * prompts
        prompt_tokens = statistics.fmean(len(p) for p in prompt_ids)
        bound_at = {"machine": machine, "prompts": prompts, "prompt_tokens": prompt_tokens, "rows": rows}
        parts = shape.bound(**bound_at, tokens=tokens)
        bound, measured = sum(parts.values()), statistics.median(w for w, _, _ in runs["preallocated"])
        once = sum(shape.bound(**bound_at, tokens=tokens, rate=machine.matmul_each_weight_once).values())
        print(
            f"| {point} | {rows} | {prompt_tokens:.0f} | {measured:.2f} | {bound:.2f} | {measured / bound:.2f}x "
            f"| {parts['weights']:.2f} / {parts['matmul']:.2f} / {parts['attention']:.2f} | {rows * tokens / measured:,.0f} "
            f"| {machine.matmul(rows) / 1e9:.1f} | {measured / once:.2f}x "
            f"({machine.matmul_each_weight_once(rows) / 1e9:.1f}) | {load:.1f} -> {os.getloadavg()[0]:.1f} |",
            flush=True,
        )
        if "dynamic" in runs:
            dynamic = statistics.median(w for w, _, _ in runs["dynamic"])
            cpu = statistics.median(c for _, c, _ in runs["dynamic"]) / statistics.median(
                c for _, c, _ in runs["preallocated"]
            )
            print(
                f"|   DynamicCache (fallback) | | | {dynamic:.2f} | | {dynamic / bound:.2f}x "
                f"| dynamic / preallocated: wall {dynamic / measured:.2f}x, CPU time {cpu:.2f}x | | | | |"
            )
        print(
            "  runs, wall s / CPU s / minor page faults: "
            + "; ".join(
                f"{k} " + ", ".join(f"{w:.2f} / {c:.2f} / {f:,}" for w, c, f in v) for k, v in runs.items()
            )
        )
    if args.profile:
        print("\n" + generation_profile(engines["preallocated"], prompt_ids, sampling))


def time_sides(
    engines: dict, prompt_ids: list[list[int]], sampling: SamplingParams, repeats: int
) -> dict[str, list[tuple[float, float, int]]]:
    """Wall and CPU seconds and minor page faults of each engine's `generate`, `repeats` times, in
    A B B A order (on a shared machine CPU time moves less with the load than wall time)."""
    names = list(engines)
    pattern = names + names[::-1]  # A B B A (with one engine: A A)
    order = [pattern[i % len(pattern)] for i in range(len(names) * repeats)]
    runs: dict[str, list[tuple[float, float, int]]] = {name: [] for name in names}
    for name in order:
        faults, wall, cpu = minor_faults(), time.perf_counter(), time.process_time()
        engines[name].generate(prompt_ids, sampling)
        runs[name].append((time.perf_counter() - wall, time.process_time() - cpu, minor_faults() - faults))
    return runs


def generation_profile(engine: Any, prompt_ids: list[list[int]], sampling: SamplingParams) -> str:
    """Self CPU time of one more `generate` call, by op group (as the update's profile), and how
    many aten operators it called, inside the model's forward calls and outside them. A decode
    step through the layers directly (`DecodeLayers.logits`) counts as a forward call. The methods
    are labelled on their classes: an instance's own forward would turn those decode steps off."""
    methods = ((type(engine.model), "forward"), (DecodeLayers, "logits"))
    own = {(cls, name): cls.__dict__.get(name) for cls, name in methods}  # None: inherited

    def labelled(method: Any) -> Any:
        def call(*args: Any, **kwargs: Any) -> Any:
            with record_function("model forward"):
                return method(*args, **kwargs)

        return call

    try:
        for cls, name in methods:
            setattr(cls, name, labelled(getattr(cls, name)))
        with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
            engine.generate(prompt_ids, sampling)
    finally:
        for (cls, name), method in own.items():
            if method is None:
                delattr(cls, name)
            else:
                setattr(cls, name, method)
    calls = inside = 0
    for event in prof.events():
        parent = event.cpu_parent
        inner = parent is not None and "::" in parent.name  # an operator's own calls are not counted
        if "::" not in event.name or inner:
            continue
        calls += 1
        while parent is not None and parent.name != "model forward":
            parent = parent.cpu_parent
        inside += parent is not None
    counted = sum(event.name == "model forward" for event in prof.events())
    return (
        f"operators called: {calls} ({inside} inside the model's {counted} forward calls, "
        f"{calls - inside} outside)\n" + profile_table(prof).replace("update phase", "generation")
    )


if __name__ == "__main__":
    main()
