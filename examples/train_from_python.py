"""Train rlrun's tiny model on arithmetic from Python, with no YAML file: the recipe is a dict,
the reward a Python function, and a callback stops the run early; `rlrun.resume` then trains it
to the end, exactly as if it had never stopped (docs/python-api.md).

    python examples/train_from_python.py runs/from-python
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import rlrun

RECIPE = {
    "extends": "grpo",
    "model": {"path": "rlrun:tiny-base"},
    "data": {"source": "rlrun:arithmetic"},
    "trainer": {
        "total_steps": 6,
        "prompts_per_step": 4,
        "checkpoint": {"every_steps": 3},
        "eval": {"prompts": 16, "every_steps": 0},
    },
    "actor": {"mini_batch_samples": 16, "micro_batch_samples": 8},
    "logging": {"console": {"enabled": False}},
}
STOP_AT_STEP = 2  # the callback stops the run here; the resume trains steps 3 to 6


def number_reward(
    prompts: list[str], completions: list[str], ground_truths: list[str], **columns
) -> list[float]:
    """1 for the right answer, 0.1 for another number (the model learns to answer with one), else 0."""
    scores = []
    for completion, truth in zip(completions, ground_truths):
        found = re.search(r"-?\d+", completion)
        scores.append(1.0 if found and found.group() == truth else 0.1 if found else 0.0)
    return scores


class StopEarly(rlrun.Callback):
    """Prints one answer a step and the step's mean reward, and stops the run after `step`."""

    def __init__(self, step: int):
        self.step = step

    def on_rollout(self, state: rlrun.RunState, rollout: rlrun.Rollout) -> None:
        print(f"step {rollout.step}: {rollout.prompts[0]!r} -> {rollout.completions[0]!r}")

    def on_step_end(self, state: rlrun.RunState, metrics: dict[str, float]) -> None:
        print(f"step {state.step}: mean reward {metrics['critic/score/mean']:.3f}")
        if state.step == self.step:
            state.stop(f"the example stops at step {self.step}")


def main(run_dir: Path) -> None:
    recipe = rlrun.load_recipe(RECIPE, {"reward.functions": [number_reward]})
    stopped = rlrun.train(recipe, run_dir=run_dir, callbacks=[StopEarly(STOP_AT_STEP)])
    print(f"{stopped.status} at step {stopped.step}; checkpoint {stopped.checkpoint}")
    # number_reward lives in this script only (python-object:number_reward): give it again.
    finished = rlrun.resume(run_dir, {"reward.functions": [number_reward]})
    print(f"{finished.status} at step {finished.step}: val/accuracy {finished.metrics['val/accuracy']:.3f}")


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "runs/from-python"))
