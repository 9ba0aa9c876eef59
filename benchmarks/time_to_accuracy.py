"""How long until the model is better: `real/grpo_smollm2` and TRL's GRPOTrainer with the same
settings, over seeds, on held-out greedy accuracy.

    python benchmarks/time_to_accuracy.py                       # 3 seeds a side (hours on a CPU)
    python benchmarks/time_to_accuracy.py --recipe grpo --seeds 0 --eval-every 50   # the tiny model
    python benchmarks/time_to_accuracy.py --report a.json b.json    # the report again, runs pooled

TRL's settings are read from the rlrun recipe (`vs_trl.py`'s harness maps each knob; rlrun's
side is the recipe with those same overrides, which it already holds, and its prompts in order,
as TRL takes them). Both sides evaluate greedy accuracy on the same held-out prompts every
`--eval-every` steps on a clock that stops meanwhile, so the times are training time. Per run:
the training seconds until accuracy first reaches the start + `--gain`, and the final accuracy
(the harness's own greedy evaluation, the same code for both sides). Per side: the mean and its
95 % t-interval over the seeds. Which side goes first turns around every seed (A B B A). With
`--keep DIR`, rlrun's runs stay in DIR for `rlrun compare DIR --target val/accuracy=...`.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from dataclasses import asdict, replace
from pathlib import Path

import vs_trl
from transformers import AutoModelForCausalLM
from vs_trl import Result, Spec, arithmetic_splits, greedy_accuracy, load_tokenizer, run_side

from rlrun.compare.intervals import Summary, summarize, welch


def recipe_spec(recipe: str, eval_every: int, val_prompts: int | None) -> Spec:
    """The harness's Spec for a built-in recipe: every setting the harness maps, from the recipe."""
    from rlrun.embedded import resolve_model_path
    from rlrun.recipes import load_recipe
    from rlrun.recipes.builtin import builtin_path

    r = load_recipe(builtin_path(recipe), []).recipe
    schedule = r.actor.lr_scheduler
    return Spec(
        side="",
        workload=recipe,
        model_dir=str(resolve_model_path(r.model.path)),
        beta=r.actor.kl_loss.coef if r.actor.kl_loss.enabled else 0.0,
        steps=r.trainer.total_steps,
        max_new_tokens=r.rollout.max_response_tokens,
        fixed_length=False,
        lr=r.actor.optimizer.lr,
        seed=0,
        val_prompts=val_prompts or r.trainer.eval.prompts,
        work_dir="",
        prompts_per_step=r.trainer.prompts_per_step,
        samples_per_prompt=r.rollout.n,
        chat=r.data.prompt_template == vs_trl.CHAT_TEMPLATE,  # the harness's real-model prompts and reward
        micro_batch_samples=r.actor.micro_batch_samples,
        recipe=recipe,
        lr_scheduler=(schedule.name, schedule.warmup_steps, schedule.min_lr_ratio),
        eval_every=eval_every,
    )


def time_to(curve: list[list[float]], target: float) -> float | None:
    """Training seconds at the first evaluation at or above `target`; None if none is."""
    return next((seconds for _, seconds, acc in curve if acc >= target - 1e-9), None)


def interval(summary: Summary | None) -> str:
    """`mean [low, high]`, the 95 % t-interval (the mean alone for one run)."""
    if summary is None:
        return "-"
    if summary.low is None:
        return f"{summary.mean:.3g}"
    return f"{summary.mean:.3g} [{summary.low:.3g}, {summary.high:.3g}]"


def report(results: list[Result], before: float, gain: float) -> str:
    target = before + gain
    lines = [
        f"held-out greedy accuracy before training: {before:.1%}; target {target:.1%} (+{gain * 100:.0f} points)",
        "",
        "| side | seed | accuracy at each evaluation (step: %) | training s to target | final accuracy |",
        "|---|---|---|---:|---:|",
    ]
    for r in results:
        curve = " ".join(f"{int(step)}: {acc:.1%}" for step, _, acc in r.curve)
        reached = time_to(r.curve, target)
        lines.append(
            f"| {r.spec.side} | {r.spec.seed} | {curve} | "
            f"{'not reached' if reached is None else f'{reached:.0f}'} | {r.acc_after:.1%} |"
        )
    lines += [
        "",
        "| side | runs | reached the target | training s to target, mean [95 % interval] | final accuracy (%) |",
        "|---|---|---|---|---|",
    ]
    times, finals = {}, {}
    for side in ("trl", "rlrun"):
        runs = [r for r in results if r.spec.side == side]
        reached = [t for r in runs if (t := time_to(r.curve, target)) is not None]
        times[side], finals[side] = summarize(reached), summarize([r.acc_after * 100 for r in runs])
        if runs:
            lines.append(
                f"| {side} | {len(runs)} | {len(reached)} | {interval(times[side])} | {interval(finals[side])} |"
            )
    lines.append("")
    for what, per_side, unit in (("training s to target", times, "s"), ("final accuracy", finals, "points")):
        if per_side["trl"] and per_side["rlrun"]:
            d = welch(per_side["rlrun"], per_side["trl"])
            span = f" [{d.low:+.3g}, {d.high:+.3g}]" if d.low is not None else ""
            lines.append(f"rlrun - TRL, {what}: {d.delta:+.3g} {unit}{span} (Welch, 95 %)")
    if times["trl"] and times["rlrun"]:
        lines.append(
            f"rlrun reaches the target in {times['rlrun'].mean / times['trl'].mean:.2f}x TRL's training time"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--recipe", default="real/grpo_smollm2", help="the built-in recipe both sides follow")
    parser.add_argument("--seeds", default="0,1,2", help="comma-separated seeds, each run by both sides")
    parser.add_argument("--eval-every", type=int, default=3, help="steps between held-out evaluations")
    parser.add_argument("--val-prompts", type=int, help="held-out prompts (default: the recipe's)")
    parser.add_argument("--gain", type=float, default=0.15, help="the target: this much over the start")
    parser.add_argument("--sides", default="trl,rlrun", help="comma-separated subset of trl,rlrun")
    parser.add_argument("--keep", type=Path, help="keep rlrun's run directories here")
    parser.add_argument("--json", type=Path, help="write every run's result here")
    parser.add_argument(
        "--report", type=Path, nargs="+", help="only the report, from --json files (runs pooled)"
    )
    args = parser.parse_args()
    if args.report:
        befores = {json.loads(path.read_text())["before"] for path in args.report}
        if len(befores) != 1:
            parser.error(f"the files disagree on the accuracy before training: {sorted(befores)}")
        print(
            report([r for path in args.report for r in vs_trl.load_results(path)], befores.pop(), args.gain)
        )
        return

    base = recipe_spec(args.recipe, args.eval_every, args.val_prompts)
    print(
        f"$ python benchmarks/time_to_accuracy.py {' '.join(sys.argv[1:])}\n{vs_trl.environment()}",
        flush=True,
    )
    _, val = arithmetic_splits(base.val_prompts)
    before = greedy_accuracy(
        AutoModelForCausalLM.from_pretrained(base.model_dir),
        load_tokenizer(base.model_dir),
        val,
        chat=base.chat,
        max_new_tokens=base.eval_tokens,
    )
    results: list[Result] = []
    with tempfile.TemporaryDirectory(prefix="time_to_accuracy_") as tmp:
        for i, seed in enumerate(int(s) for s in args.seeds.split(",")):
            order = ("trl", "rlrun") if i % 2 == 0 else ("rlrun", "trl")
            for side in (s for s in order if s in args.sides.split(",")):
                spec = replace(base, side=side, seed=seed, work_dir=str(Path(tmp) / f"{side}-seed{seed}"))
                started, load_before = time.perf_counter(), os.getloadavg()[0]
                r = run_side(spec)
                results.append(r)
                print(
                    f"{side:<5} seed {seed}: "
                    + " ".join(f"step {int(st)} ({t:.0f} s) {acc:.1%}" for st, t, acc in r.curve)
                    + f"; final {r.acc_after:.1%}, peak RSS {r.peak_rss_mib:,.0f} MiB "
                    f"({time.perf_counter() - started:.0f} s wall, load average {load_before:.1f} -> "
                    f"{os.getloadavg()[0]:.1f})",
                    flush=True,
                )
                if args.keep and side == "rlrun":
                    shutil.copytree(
                        Path(spec.work_dir) / "run", args.keep / f"seed{seed}", dirs_exist_ok=False
                    )
                if args.json:
                    args.json.write_text(
                        json.dumps({"before": before, "results": [asdict(x) for x in results]})
                    )
    print("\n" + report(results, before, args.gain), flush=True)


if __name__ == "__main__":
    main()
