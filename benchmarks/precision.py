"""Break-even of `trainer.autocast: bfloat16` and `trainer.compile: true` against the float32,
uncompiled trainer, in one process.

One session trains the recipe; its trainer passes (policy, reference) switch between the two
settings from one slot of steps to the next, in A B B A order, so a busy machine slows both
alike and both see the same kind of batches. A slot is `--steps` training steps; each pair's
ratio is option / float32 (below 1: the option is faster), for the update phase (`update_actor`)
and the whole step (the option's whole step includes what it adds: autocast recomputes the old
log-probs, since the sampler's float32 ones are not the autocast policy's). For compile, the
first compiled slot is timed apart: compile time = its first step - the compiled median step,
and break-even = compile time / (float32 step - compiled step). Afterwards both settings score
the same batch: the log-prob difference (max and mean over response tokens).

    python benchmarks/precision.py --option autocast [--recipe grpo] [--pairs 2] [--steps 3]
"""

from __future__ import annotations

import argparse
import statistics
from dataclasses import replace

import torch
import torch._dynamo.utils

from rlrun.recipes import load_recipe
from rlrun.training import loop
from rlrun.training.allocator import keep_freed_memory
from rlrun.training.precision import TrainerForward
from rlrun.training.profiling import Timer
from rlrun.training.sequences import response_log_probs
from rlrun.training.session import Session
from rlrun.training.stages import Pipeline

QUIET = ["logging.console.enabled=false", "trainer.eval.prompts=1", "trainer.total_steps=1000"]


def settings(s: Session, option: str, on: bool) -> dict[str, TrainerForward | None]:
    """The trainer-pass models of one setting (built once: a compiled one keeps its graphs)."""
    m = s.models
    kwargs = {
        "autocast": "bfloat16" if on and option == "autocast" else None,
        "device_type": s.group.device.type,
    }
    reference = m.reference.module if m.reference is not None else None
    return {
        "policy_forward": TrainerForward(m.policy, compile=on and option == "compile", **kwargs),
        "reference": TrainerForward(reference, compile=False, **kwargs) if reference is not None else None,
    }


def run_slot(s: Session, models: dict, old_log_probs: str, first_step: int, steps: int) -> list[dict]:
    s.models.policy_forward, s.models.reference = models["policy_forward"], models["reference"]
    s.pipeline = Pipeline.build(s.recipe, replace(s.needs, old_log_probs=old_log_probs))
    return [loop.training_step(s, step)[0] for step in range(first_step, first_step + steps)]


def compiles() -> int:
    return int(torch._dynamo.utils.counters["stats"]["unique_graphs"])


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--option", choices=["autocast", "compile"], required=True)
    parser.add_argument("--recipe", default="grpo")
    parser.add_argument("--pairs", type=int, default=2)
    parser.add_argument("--steps", type=int, default=3, help="training steps per slot")
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    parser.add_argument("overrides", nargs="*", help="recipe overrides, as for rlrun train")
    args = parser.parse_args()
    keep_freed_memory()  # as `rlrun train` does: measure the memory reuse a run has
    torch.set_num_threads(args.threads)
    recipe = load_recipe(args.recipe, [*QUIET, *args.overrides]).recipe
    s = Session(recipe)
    base = s.needs.old_log_probs  # autocast: the sampler's (float32) are not the trainer's
    variants = {
        False: (settings(s, args.option, False), base),
        True: (
            settings(s, args.option, True),
            "recompute" if base == "sampler" and args.option == "autocast" else base,
        ),
    }
    print(f"recipe {args.recipe} {' '.join(args.overrides)}; option {args.option}; threads {args.threads}")
    step = 1
    run_slot(s, *variants[False], step, 1)  # warm-up: allocations, first-call costs
    step += 1
    first_compiled = None
    if args.option == "compile":
        before = compiles()
        first = run_slot(s, *variants[True], step, 1)[0]
        step += 1
        first_compiled = (first["timing_s/update_actor"], first["timing_s/step"], compiles() - before)
    timed = {False: [], True: []}
    ratios = []
    before = compiles()
    for _ in range(args.pairs):
        pair = {}
        for on in (False, True, True, False):
            metrics = run_slot(s, *variants[on], step, args.steps)
            step += args.steps
            update = sum(m["timing_s/update_actor"] for m in metrics) / args.steps
            whole = sum(m["timing_s/step"] for m in metrics) / args.steps
            timed[on].append((update, whole))
            pair.setdefault(on, []).append((update, whole))
        mean = {on: [statistics.mean(x) for x in zip(*pair[on])] for on in pair}
        ratios.append((mean[True][0] / mean[False][0], mean[True][1] / mean[False][1]))
    recompiled = compiles() - before

    print("\n| setting | update s/step (range over slots) | whole step s/step |")
    print("|---|---|---|")
    for on, name in ((False, "float32"), (True, args.option)):
        updates, wholes = zip(*timed[on])
        print(
            f"| {name} | {statistics.median(updates):.3f} ({min(updates):.3f}-{max(updates):.3f}) "
            f"| {statistics.median(wholes):.3f} ({min(wholes):.3f}-{max(wholes):.3f}) |"
        )
    updates, wholes = zip(*ratios)
    print(
        f"\n{args.option} / float32 per A B B A pair: update {', '.join(f'{r:.2f}' for r in updates)}; "
        f"whole step {', '.join(f'{r:.2f}' for r in wholes)}"
    )
    if first_compiled is not None:
        compiled_step = statistics.median(w for _, w in timed[True])
        saved = statistics.median(w for _, w in timed[False]) - compiled_step
        compile_s = first_compiled[1] - compiled_step
        even = f"{compile_s / saved:.0f} steps" if saved > 0 else "never (no step is faster)"
        print(
            f"first compiled step {first_compiled[1]:.1f} s ({first_compiled[2]} graphs compiled): "
            f"compile time {compile_s:.1f} s; break-even after {even}"
        )
        print(f"graphs compiled during the timed slots (recompiles): {recompiled}")

    exp, _ = s.generation.collector.collect(recipe.trainer.prompts_per_step, seed=12345, timer=Timer())
    with torch.no_grad():
        base = response_log_probs(variants[False][0]["policy_forward"], exp.seq, recipe.rollout.temperature)[
            0
        ]
        other = response_log_probs(variants[True][0]["policy_forward"], exp.seq, recipe.rollout.temperature)[
            0
        ]
    mask = exp.seq.response_mask.bool()
    diff = (other - base).abs()[mask]
    print(
        f"log-prob |{args.option} - float32| over {int(mask.sum())} response tokens: "
        f"max {diff.max():.4f}, mean {diff.mean():.4f}, 99th percentile {diff.quantile(0.99):.4f}"
    )


if __name__ == "__main__":
    main()
