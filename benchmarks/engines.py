"""The hf rollout engine against the vllm engine (vLLM's CPU build) on SmolLM2-135M, on this CPU.

    python benchmarks/engines.py                  # both shapes, 4 steps a run, A B B A
    python benchmarks/engines.py --quick          # the recipe's shape only, 3 steps a run
    python benchmarks/engines.py --shapes large --steps 2   # the larger shape only, 1 timed step a run
    python benchmarks/engines.py --quick --vllm-compiled    # vLLM with torch.compile, not eager

Run it in a venv with vLLM's CPU build and `rlrun[real]` (README, "The vLLM engine"). Each run is
`rlrun train real/grpo_smollm2` in its own subprocess with one engine, the evaluations small, in
the order hf, vllm, vllm, hf per shape, so slow drift of a shared machine cancels. From each
run's metrics.jsonl, steps after the first (vLLM's first generation and both engines' first
step carry one-off costs): rollout tokens/s (`response_length/mean` x samples / `timing_s/gen`),
weight-sync seconds (`timing_s/sync`), whole-step seconds (`timing_s/step`), the step's response
tokens and its seconds per 1,000 of them (each engine samples its own responses), every phase's
(the medians of each `timing_s/*`, which say where the engines' steps differ); and the run's wall
time. The 1-minute load average is printed before and after each run.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

RECIPE = "real/grpo_smollm2"
# (name, overrides): the recipe's own shape, and a larger one
SHAPES = {
    "8x4, 32 tokens": [],
    "32x8, 256 tokens": [
        "trainer.prompts_per_step=32",
        "rollout.n=8",
        "rollout.max_response_tokens=256",
        "actor.mini_batch_samples=256",
        "actor.micro_batch_samples=16",
    ],
}
ORDER = ("hf", "vllm", "vllm", "hf")


def run_once(engine: str, overrides: list[str], steps: int, work: Path) -> dict[str, float]:
    run_dir = work / f"{engine}-{time.monotonic_ns()}"
    command = [
        sys.executable,
        "-m",
        "rlrun",
        "train",
        RECIPE,
        f"rollout.engine={engine}",
        f"trainer.total_steps={steps}",
        "trainer.eval.prompts=8",  # evaluations (start, end) are not timed here: keep them small
        "logging.console.enabled=false",
        *overrides,
        "--run-dir",
        str(run_dir),
    ]
    load_before = os.getloadavg()[0]
    start = time.monotonic()
    done = subprocess.run(command, check=False, cwd=work, capture_output=True, text=True)
    if done.returncode != 0:  # the run's own error, not just its exit status
        sys.exit(f"{engine} run failed (exit {done.returncode}):\n{done.stdout[-3000:]}{done.stderr[-3000:]}")
    wall = time.monotonic() - start
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    trained = [r for r in rows if "timing_s/gen" in r]
    steps_done = trained[1:]  # the first carries one-off costs
    # `samples` counts the samples trained on so far
    tokens = [r["response_length/mean"] * (r["samples"] - p["samples"]) for p, r in zip(trained, steps_done)]
    phases = sorted({k for r in steps_done for k in r if k.startswith("timing_s/")})
    return {
        "tokens_per_s": sum(tokens) / sum(r["timing_s/gen"] for r in steps_done),
        # each engine samples its own responses, so a step's work differs: the step per response token
        "response_tokens": statistics.median(tokens),
        "step_s_per_1k_tokens": 1000 * sum(r["timing_s/step"] for r in steps_done) / sum(tokens),
        **{
            f"{k.removeprefix('timing_s/')}_s": statistics.median(r[k] for r in steps_done if k in r)
            for k in phases
        },
        "run_wall_s": wall,
        "load_before": load_before,
        "load_after": os.getloadavg()[0],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="the recipe's shape only, 3 steps a run")
    parser.add_argument(
        "--shapes",
        choices=("both", "recipe", "large"),
        default="both",
        help="the recipe's shape, the larger one, or both (--quick: the recipe's)",
    )
    parser.add_argument("--steps", type=int, help="steps a run, the first not counted (default 4; --quick 3)")
    parser.add_argument(
        "--vllm-compiled",
        action="store_true",
        help="vLLM with torch.compile (rollout.vllm.enforce_eager=false; its compile falls in the "
        "run's wall time, before the timed steps), not the CPU build's default eager mode",
    )
    args = parser.parse_args()
    wanted = "recipe" if args.quick else args.shapes
    shapes = {k: v for k, v in SHAPES.items() if wanted == "both" or (wanted == "large") == bool(v)}
    steps = args.steps or (3 if args.quick else 4)
    if steps < 2:
        parser.error("--steps must be at least 2: the first step of a run is not counted")
    engine_overrides = {"hf": [], "vllm": ["rollout.vllm.enforce_eager=false"] if args.vllm_compiled else []}
    print(
        f"{RECIPE}, {steps} steps a run (the first not counted), order {' '.join(ORDER)}; cores: {os.cpu_count()}"
        + ("; vllm compiled" if args.vllm_compiled else "")
    )
    with tempfile.TemporaryDirectory() as tmp:
        for shape, overrides in shapes.items():
            results: dict[str, list[dict[str, float]]] = {"hf": [], "vllm": []}
            for engine in ORDER:
                result = run_once(engine, overrides + engine_overrides[engine], steps, Path(tmp))
                results[engine].append(result)
                print(
                    f"{shape:18} {engine:5} " + "  ".join(f"{k} {v:.3g}" for k, v in result.items()),
                    flush=True,
                )
            for engine, runs in results.items():
                mean = {
                    k: statistics.fmean(r[k] for r in runs)
                    for k in ("tokens_per_s", "sync_s", "step_s", "step_s_per_1k_tokens")
                }
                print(
                    f"{shape:18} {engine:5} mean of {len(runs)}: {mean['tokens_per_s']:.1f} rollout tokens/s, "
                    f"sync {mean['sync_s']:.3f} s, step {mean['step_s']:.2f} s "
                    f"({mean['step_s_per_1k_tokens']:.1f} s per 1,000 response tokens)"
                )


if __name__ == "__main__":
    main()
