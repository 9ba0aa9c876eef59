"""One training step on a fixed rollout, in however many processes launched it (torchrun or
plain python): every process samples the whole batch with the same seed, keeps its share of the
prompts and trains on it. The main process saves the updated policy's parameters (whole, under
FSDP2), the strategy that ran, whether the policy was sharded and the mean state a process
holds (`memory/held_state_mib`).

Usage: python dp_step.py OUT_DIR RECIPE/LOSS_AGG_MODE... -- OVERRIDE...
(writes OUT_DIR/RECIPE-LOSS_AGG_MODE.pt for each case)
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch
from torch.distributed.tensor import DTensor

from rlrun.launch import end_launched_process, release_process_group
from rlrun.recipes import load_recipe
from rlrun.training.experience import Experience, select_groups
from rlrun.training.loop import training_step
from rlrun.training.profiling import Timer
from rlrun.training.session import Session
from rlrun.training.sharding import gathered


def train_one_step(recipe: str, overrides: list[str], out: Path) -> None:
    s = Session(load_recipe(recipe, overrides).recipe)
    rank, world = s.group.rank, s.group.size
    collector = s.generation.collector
    whole_batch = collector.collect
    collector.rank, collector.world = 0, 1  # every process samples the whole batch alike

    def my_share(num_prompts: int, seed: int, *, timer: Timer) -> tuple[Experience, int]:
        exp, batches = whole_batch(num_prompts * world, seed, timer=timer)
        return select_groups(exp, torch.arange(rank * num_prompts, (rank + 1) * num_prompts)), batches

    collector.collect = my_share
    metrics, _ = training_step(s, 1)
    sharded = [isinstance(p, DTensor) for p in s.models.policy.parameters()]
    with gathered(s.models.policy):  # the whole weights (every process takes part)
        params = {k: v.detach().clone() for k, v in s.models.unwrapped_policy.named_parameters()}
    if s.group.accelerator.is_main_process:
        torch.save(
            {
                "processes": world,
                "strategy": s.strategy,
                "sharded": all(sharded),
                "params": params,
                "held_state_mib": metrics["memory/held_state_mib"],
            },
            out,
        )
    s.group.accelerator.wait_for_everyone()


def main() -> None:
    torch.set_num_threads(1)
    args = sys.argv[1:]
    cut = args.index("--")
    out, cases, overrides = Path(args[0]), args[1:cut], args[cut + 1 :]
    for case in cases:
        recipe, mode = case.split("/")
        train_one_step(recipe, [*overrides, f"actor.loss_agg_mode={mode}"], out / f"{recipe}-{mode}.pt")
    # as a launched `rlrun train` ends, so that gloo's threads cannot abort the exit
    release_process_group(meet=True)
    end_launched_process(0)


if __name__ == "__main__":
    main()
