"""How rlrun's cost grows with the work, against TRL's GRPOTrainer, on SmolLM2-135M-Instruct.

    python benchmarks/scaling.py                                  # the default grid (hours on a CPU)
    python benchmarks/scaling.py --points 32x4x8,128x4x8         # some points
    python benchmarks/scaling.py --report a.json b.json --png x.png   # the table and pictures again

A point is `TOKENSxNxPROMPTS`: the response budget, samples per prompt, prompts per step.
Responses are held at the budget on both sides (EOS suppressed until then: TRL `min_new_tokens`,
rlrun `rollout.min_response_tokens`), so both do the same work. Every point runs, each in its own
subprocess through `vs_trl.py`'s harness (same weights, prompts, seed, settings, micro-batches):
TRL, rlrun with its cost model choosing the layout per forward (packed or padded), then at once
rlrun with the other layout forced, which checks the cost model's choice. Which side goes first
turns around every point, and the grid runs backwards every other repeat (A B B A). Per run: completion tokens/s and median step time over the timed
steps (all but the first and last when there are more than two), peak RSS, and rlrun's seconds
per phase. After each point's runs the machine's rates are measured (roofline.py's read
bandwidth and forward matmul rate at the point's rows, same thread count), which give rlrun's
generation phase its bound there; the table ends with the issue's targets, met or not.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from dataclasses import asdict, replace
from pathlib import Path

import roofline
import vs_trl
from vs_trl import Result, Spec, row, run_side, spread

DEFAULT_POINTS = "32x4x8,32x16x8,32x4x32,32x16x32,128x4x8,128x16x8,128x4x32,512x4x8,512x16x8"
PHASES = ("gen", "ref", "old_log_prob", "update_actor")  # the phases of a GRPO step (rlrun's timing_s/*)
FORWARD_PHASES = ("ref", "old_log_prob", "update_actor")  # where the layout matters
TARGET_SPEED = 2.0  # rlrun / TRL completion tokens/s, at every point
TARGET_MEMORY = 1.0  # rlrun / TRL peak RSS, at most
TARGET_GEN_BOUND = 1.5  # rlrun's generation over its bound, at most, from 128 tokens on


def phase_cell(runs: list[Result]) -> str:
    """Mean seconds a step in each of PHASES over `runs`; empty where no run recorded phases
    (TRL results from before the harness timed TRL's phases)."""
    runs = [r for r in runs if r.phase_s]
    return (
        " / ".join(f"{statistics.mean(r.phase_s.get(p, 0.0) for r in runs):.1f}" for p in PHASES)
        if runs
        else ""
    )


def parse_point(text: str) -> tuple[int, int, int]:
    tokens, n, prompts = (int(x) for x in text.lower().split("x"))
    return tokens, n, prompts


def point_spec(base: Spec, point: tuple[int, int, int], micro: int) -> Spec:
    tokens, n, prompts = point
    return replace(
        base,
        workload=f"{tokens}x{n}x{prompts}",
        max_new_tokens=tokens,
        samples_per_prompt=n,
        prompts_per_step=prompts,
        micro_batch_samples=min(micro, n * prompts),
    )


def runs_of(point: str, results: list[Result]) -> dict[str, list[Result]]:
    """A point's results by side: "trl", "rlrun" (the cost model's layout), "rlrun forced"."""
    out: dict[str, list[Result]] = {}
    for r in results:
        if r.spec.workload == point:
            key = r.spec.side if r.spec.layout == "auto" else f"{r.spec.side} forced"
            out.setdefault(key, []).append(r)
    return out


def chosen_layout(runs: list[Result]) -> str:
    packed = sum(r.packed_forwards for r in runs)
    total = sum(r.layout_forwards for r in runs)
    if not total:
        return "none"
    return "packed" if packed == total else "padded" if packed == 0 else f"packed {packed}/{total}"


def forward_s(r: Result) -> float:
    return sum(r.phase_s.get(p, 0.0) for p in FORWARD_PHASES)


def report(results: list[Result], bounds: dict[str, float] | None = None) -> str:
    """One row per point: both sides' throughput and memory, rlrun's phases and its generation
    against its bound (`bounds`: seconds per point), and the layout check; then the targets."""
    bounds = bounds or {}
    lines = [
        row(
            [
                "point (tokens x n x prompts)",
                "completion tokens / step",
                "runs",
                "TRL tok/s",
                "rlrun tok/s",
                "**rlrun / TRL**",
                "TRL peak RSS (MiB)",
                "rlrun peak RSS (MiB)",
                "RSS rlrun / TRL",
                "TRL gen / ref / old / update (s)",
                "rlrun gen / ref / old / update (s)",
                "rlrun gen / its bound",
                "layout chosen",
                "forward phases chosen / other (s)",
            ]
        ),
        row(["---"] + ["---:"] * 11 + ["---", "---:"]),
    ]
    points = list(dict.fromkeys(r.spec.workload for r in results))
    for point in points:
        sides = runs_of(point, results)
        trl, ours, forced = sides.get("trl", []), sides.get("rlrun", []), sides.get("rlrun forced", [])
        spec = (trl or ours or forced)[0].spec
        pairs = list(zip(trl, ours))
        cells = [
            point,
            f"{spec.rows * spec.max_new_tokens:,}",
            str(max(len(trl), len(ours))),
            spread([r.tokens_per_s for r in trl], ",.0f") if trl else "",
            spread([r.tokens_per_s for r in ours], ",.0f") if ours else "",
            "**" + spread([o.tokens_per_s / t.tokens_per_s for t, o in pairs], ".2f") + "x**"
            if pairs
            else "",
            spread([r.peak_rss_mib for r in trl], ",.0f") if trl else "",
            spread([r.peak_rss_mib for r in ours], ",.0f") if ours else "",
            spread([o.peak_rss_mib / t.peak_rss_mib for t, o in pairs], ".2f") + "x" if pairs else "",
            phase_cell(trl),
            phase_cell(ours),
            spread(gen_over_bound(ours, bounds[point]), ".2f") + "x" if point in bounds and ours else "",
            chosen_layout(ours),
            f"{spread([forward_s(r) for r in ours], '.1f')} / {spread([forward_s(r) for r in forced], '.1f')}"
            if ours and forced
            else "",
        ]
        lines.append(row(cells))
    return "\n".join(lines + [""] + targets(results, bounds))


def gen_over_bound(runs: list[Result], bound: float) -> list[float]:
    return [r.phase_s["gen"] / bound for r in runs if r.phase_s.get("gen")]


def targets(results: list[Result], bounds: dict[str, float]) -> list[str]:
    """The issue's targets, each over the points that measure it: the worst pair decides."""
    speed, memory, generation = [], [], []
    for point in dict.fromkeys(r.spec.workload for r in results):
        sides = runs_of(point, results)
        pairs = list(zip(sides.get("trl", []), sides.get("rlrun", [])))
        speed += [(point, o.tokens_per_s / t.tokens_per_s) for t, o in pairs]
        memory += [(point, o.peak_rss_mib / t.peak_rss_mib) for t, o in pairs]
        if point in bounds and parse_point(point)[0] >= 128:
            generation += [(point, g) for g in gen_over_bound(sides.get("rlrun", []), bounds[point])]
    lines = []
    for name, values, limit, better in (
        (f"rlrun / TRL completion tokens/s >= {TARGET_SPEED}", speed, TARGET_SPEED, max),
        (f"rlrun / TRL peak RSS <= {TARGET_MEMORY}", memory, TARGET_MEMORY, min),
        (
            f"rlrun generation / its bound <= {TARGET_GEN_BOUND} (128 tokens and more)",
            generation,
            TARGET_GEN_BOUND,
            min,
        ),
    ):
        if not values:
            lines.append(f"- {name}: not measured")
            continue
        worst = min(values, key=lambda v: v[1]) if better is max else max(values, key=lambda v: v[1])
        met = all((v >= limit) if better is max else (v <= limit) for _, v in values)
        lines.append(
            f"- {name}: {'met' if met else 'NOT met'} (worst {worst[1]:.2f} at {worst[0]}, {len(values)} runs)"
        )
    return lines


def plot(results: list[Result], out: Path) -> None:
    """Tokens/s and peak RSS against completion tokens per step, both sides, each point labelled
    (several points can share a number of tokens per step)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (speed, memory) = plt.subplots(1, 2, figsize=(11, 4.4))
    styles = {"trl": ("TRL", "tab:orange", "s"), "rlrun": ("rlrun", "tab:blue", "o")}
    for side, (label, colour, marker) in styles.items():
        runs = [r for r in results if r.spec.side == side and r.spec.layout == "auto"]
        for ax, value in ((speed, lambda r: r.tokens_per_s), (memory, lambda r: r.peak_rss_mib / 1024)):
            xs = [r.spec.rows * r.spec.max_new_tokens for r in runs]
            ax.scatter(xs, [value(r) for r in runs], color=colour, marker=marker, label=label)
            if side == "rlrun":
                for r, x in zip(runs, xs):
                    ax.annotate(
                        r.spec.workload, (x, value(r)), textcoords="offset points", xytext=(5, 3), fontsize=7
                    )
    for ax, title in ((speed, "completion tokens / s"), (memory, "peak RSS (GiB)")):
        ax.set_xscale("log")
        ax.set_xlabel("completion tokens per step (points: tokens x n x prompts)")
        ax.set_title(title)
        ax.grid(alpha=0.3)
        ax.legend()
    fig.tight_layout()
    fig.savefig(out, dpi=110)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--points", default=DEFAULT_POINTS, help="comma-separated TOKENSxNxPROMPTS")
    parser.add_argument(
        "--steps", type=int, default=3, help="GRPO steps a run (timed: all but the first and last)"
    )
    parser.add_argument(
        "--micro-batch-samples", type=int, default=16, help="rows per forward/backward, both sides"
    )
    parser.add_argument(
        "--kl", choices=("off", "on"), default="off", help=f"on: beta {vs_trl.KL_ON_BETA}, k3"
    )
    parser.add_argument(
        "--repeats", type=int, default=1, help="run the grid this many times, every other backwards"
    )
    parser.add_argument("--no-forced", action="store_true", help="skip rlrun's other-layout runs")
    parser.add_argument("--sides", default="trl,rlrun", help="comma-separated subset of trl,rlrun")
    parser.add_argument("--json", type=Path, help="write every run's result here (for --report)")
    parser.add_argument("--png", type=Path, help="draw the pictures here")
    parser.add_argument("--report", type=Path, nargs="+", help="only the table (and --png) from --json files")
    args = parser.parse_args()
    if args.report:
        results = [r for path in args.report for r in vs_trl.load_results(path)]
        bounds = {
            k: v for path in args.report for k, v in json.loads(path.read_text()).get("bounds", {}).items()
        }
        print(report(results, bounds))
        if args.png:
            plot(results, args.png)
        return

    from rlrun.embedded import resolve_model_path
    from rlrun.recipes import load_recipe
    from rlrun.recipes.builtin import builtin_path

    real = load_recipe(builtin_path("real/grpo_smollm2"), []).recipe
    print(f"$ python benchmarks/scaling.py {' '.join(sys.argv[1:])}\n{vs_trl.environment()}", flush=True)
    base = Spec(
        side="",
        workload="",
        model_dir=str(resolve_model_path(real.model.path)),
        beta=vs_trl.KL_ON_BETA if args.kl == "on" else 0.0,
        steps=args.steps,
        max_new_tokens=0,
        fixed_length=True,
        lr=real.actor.optimizer.lr,
        seed=0,
        val_prompts=8,  # a token few: accuracy after a few steps says nothing here
        work_dir="",
        chat=True,
    )
    points = [point_spec(base, parse_point(p), args.micro_batch_samples) for p in args.points.split(",")]
    results: list[Result] = []
    bounds: dict[str, float] = {}
    gen_bound = GenerationBound(base.model_dir)
    flip = False
    with tempfile.TemporaryDirectory(prefix="scaling_") as tmp:
        for rep in range(args.repeats):
            for spec in points if rep % 2 == 0 else points[::-1]:
                for side in (
                    s for s in (("rlrun", "trl") if flip else ("trl", "rlrun")) if s in args.sides.split(",")
                ):
                    work = Path(tmp) / f"{rep}-{spec.workload}-{side}"
                    results.append(r := run_one(replace(spec, side=side), work))
                    save(results, bounds, args.json)
                    if side == "rlrun" and not args.no_forced:
                        # the layout its cost model did not choose (all packed: padded; else packed)
                        other = "padded" if r.packed_forwards else "packed"
                        results.append(
                            run_one(
                                replace(spec, side=side, layout=other),
                                work.with_name(work.name + "-" + other),
                            )
                        )
                        save(results, bounds, args.json)
                if "rlrun" in args.sides.split(","):  # the rates next to the point's runs
                    bounds[spec.workload] = gen_bound.seconds(spec)
                    save(results, bounds, args.json)
                flip = not flip
    print("\n" + report(results, bounds), flush=True)
    if args.png:
        plot(results, args.png)


def save(results: list[Result], bounds: dict[str, float], path: Path | None) -> None:
    """Every finished run to `path`, after each run: a later run the kernel kills for memory
    (which ends the script) takes nothing with it."""
    if path:
        runs = [asdict(r) for r in results]
        path.write_text(json.dumps({"environment": vs_trl.environment(), "results": runs, "bounds": bounds}))


class GenerationBound:
    """rlrun's generation phase's bound at a point (roofline.py's), from the model's shapes and
    this machine's rates, measured when asked (so next to the point's runs)."""

    def __init__(self, model_dir: str):
        from rlrun.training.models import load_causal_lm, load_tokenizer

        model = load_causal_lm(model_dir, trainable=False)
        self.shape = roofline.DecodeShape.of(model)
        self.linear_shapes = roofline.linear_shapes(model)
        self.tokenizer = load_tokenizer(model_dir)

    def seconds(self, spec: Spec) -> float:
        machine = roofline.Machine(roofline.read_rate(), self.linear_shapes, {})
        prompts = roofline.point_prompts(self.tokenizer, spec.prompts_per_step)
        return sum(
            self.shape.bound(
                machine,
                prompts=spec.prompts_per_step,
                prompt_tokens=statistics.fmean(len(p) for p in prompts),
                rows=spec.rows,
                tokens=spec.max_new_tokens,
            ).values()
        )


def run_one(spec: Spec, work: Path) -> Result:
    started, load_before = time.perf_counter(), os.getloadavg()[0]
    r = run_side(replace(spec, work_dir=str(work)))
    phases = ", ".join(f"{p} {r.phase_s.get(p, 0.0):.1f}" for p in PHASES) if r.phase_s else ""
    layout = (
        f", layout {spec.layout}: packed {r.packed_forwards}/{r.layout_forwards} forwards"
        if spec.side == "rlrun"
        else ""
    )
    print(
        f"{spec.workload:>10} {spec.side:<5}{layout}: {len(r.step_times_s)} steps, median {r.median_step_s:.1f} s/step, "
        f"{r.tokens_per_s:,.0f} tok/s ({r.mean_response_tokens:.1f} tokens a response), "
        f"peak RSS {r.peak_rss_mib:,.0f} MiB{'; s: ' + phases if phases else ''}  "
        f"({time.perf_counter() - started:.0f} s wall, load average {load_before:.1f} -> {os.getloadavg()[0]:.1f})",
        flush=True,
    )
    return r


if __name__ == "__main__":
    main()
