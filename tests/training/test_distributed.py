"""Advantages under data parallelism: two gloo processes, each holding a share of the rows (of
a different response width, with the same local group ids), get exactly their rows of what one
process computes on the whole batch. Run by torchrun, this file is the worker."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from rlrun.algorithms.registries import ADVANTAGES
from rlrun.training.distributed import global_advantages
from rlrun.training.sequences import pad_response

ESTIMATORS = ["gae", "reinforce_plus_plus", "reinforce_plus_plus_baseline", "grpo"]
OPTIONS = {"gamma": 0.9, "lam": 0.8}


def shares() -> list[dict]:
    """Two processes' inputs: 4 rows each in groups 0, 0, 1, 1; widths 3 and 2."""
    masks = [
        torch.tensor([[1.0, 1, 1], [1, 1, 0], [1, 0, 0], [1, 1, 1]]),
        torch.tensor([[1.0, 1], [1, 0], [1, 1], [1, 1]]),
    ]
    scores = [torch.tensor([1.0, 0.0, 2.0, 1.0]), torch.tensor([0.0, 0.0, 3.0, 1.0])]
    out = []
    for rank, (mask, score) in enumerate(zip(masks, scores)):
        last = mask.sum(1).long() - 1
        rewards = torch.zeros_like(mask).scatter_(1, last[:, None], score[:, None])
        values = torch.linspace(-1, 1, mask.numel()).view_as(mask) * (rank + 1) * mask
        out.append(
            {
                "rewards": rewards,
                "mask": mask,
                "index": torch.tensor([0, 0, 1, 1]),
                "values": values,
                "baselines": score / 2,
                "components": {"acc": (score > 0).float()},
            }
        )
    return out


def whole_batch() -> dict:
    """Both shares as one process holds them: padded to width 3, groups numbered 0..3."""
    parts = shares()
    return {
        "rewards": torch.cat([pad_response(p["rewards"], 3) for p in parts]),
        "mask": torch.cat([pad_response(p["mask"], 3) for p in parts]),
        "index": torch.tensor([0, 0, 1, 1, 2, 2, 3, 3]),
        "values": torch.cat([pad_response(p["values"], 3) for p in parts]),
        "baselines": torch.cat([p["baselines"] for p in parts]),
        "components": {"acc": torch.cat([p["components"]["acc"] for p in parts])},
    }


def advantages(accelerator, name: str, x: dict) -> tuple[torch.Tensor, torch.Tensor]:
    return global_advantages(
        accelerator,
        ADVANTAGES.get(name),
        x["rewards"],
        x["mask"],
        x["index"],
        values=x["values"],
        reward_baselines=x["baselines"],
        reward_components=x["components"],
        **OPTIONS,
    )


ONE_PROCESS = SimpleNamespace(num_processes=1)


def test_one_process_calls_the_estimator_directly():
    x = whole_batch()
    got = advantages(ONE_PROCESS, "gae", x)
    want = ADVANTAGES.get("gae")(x["rewards"], x["mask"], x["index"], values=x["values"], **OPTIONS)
    assert all(torch.equal(g, w) for g, w in zip(got, want))


@pytest.mark.slow
def test_each_process_gets_its_rows_of_the_whole_batch_advantages(tmp_path, torchrun):
    env = {**os.environ, "OMP_NUM_THREADS": "1", "ACCELERATE_USE_CPU": "true"}
    subprocess.run([*torchrun, __file__, str(tmp_path)], env=env, check=True, timeout=300)
    x, parts = whole_batch(), shares()
    for name in ESTIMATORS:
        want = advantages(ONE_PROCESS, name, x)
        for rank, rows in enumerate([slice(0, 4), slice(4, 8)]):
            got = torch.load(tmp_path / f"rank{rank}.pt")[name]
            width = parts[rank]["mask"].shape[1]
            assert [g.shape for g in got] == [(4, width)] * 2, name
            assert all(torch.equal(g, w[rows, :width]) for g, w in zip(got, want)), (name, rank)
    # the point: the second share alone would whiten over its own tokens only, to other numbers
    alone = advantages(ONE_PROCESS, "reinforce_plus_plus", parts[1])[0]
    assert not torch.allclose(alone, advantages(ONE_PROCESS, "reinforce_plus_plus", x)[0][4:, :2])


def main(out: Path) -> None:
    from accelerate import Accelerator

    accelerator = Accelerator()
    mine = shares()[accelerator.process_index]
    results = {name: advantages(accelerator, name, mine) for name in ESTIMATORS}
    torch.save(results, out / f"rank{accelerator.process_index}.pt")
    torch.distributed.destroy_process_group()  # a clean exit: a live gloo group can abort at shutdown


if __name__ == "__main__":
    main(Path(sys.argv[1]))
