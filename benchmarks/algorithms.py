"""Speed of the algorithm library against verl-style per-sample loops and a memory-bound floor.

For every advantage estimator and policy loss, at a small size and at B=4096 responses × T=2048
tokens (groups of 16), it prints:
- rlrun: the registered component (best of a few runs);
- loop: a straightforward reference in the style of verl's estimators (a Python loop over samples
  building per-group lists, or verl's loop over T for GAE / REINFORCE++), and loop/rlrun;
- floor: one masked reduction pass over the same (B, T) tensor, `(rewards * mask).sum(-1)`, the
  memory-bound floor, and rlrun/floor. An outcome estimator reads rewards and mask and writes one
  B×T result, so about 2× the floor is the best it can do.
Policy losses have no loop column: verl's losses are already vectorized.

Goals: ≥ 20× faster than the loop for grpo, rloo, opo, reinforce_plus_plus_baseline at B=4096,
and within 3× of the floor for every outcome estimator.

    python benchmarks/algorithms.py            # both sizes, ~2 minutes on 2 cores
    python benchmarks/algorithms.py --small    # the small size only
    THP_MEM_ALLOC_ENABLE=1 python benchmarks/algorithms.py   # PyTorch CPU tensors on huge pages

At B=4096 most of an outcome estimator's time is the kernel zero-filling the fresh pages of its
33 MiB output (and the floor's temporary); with huge pages that cost mostly disappears, for the
loops as well, which then shows the Python overhead alone.
"""

from __future__ import annotations

import os

# On a shared machine, OpenMP workers spinning between parallel regions steal the CPU from the main
# thread and small ops stall for milliseconds; passive waiting measures the code, not the contention.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import argparse
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from rlrun.algorithms import ADVANTAGES, POLICY_LOSSES

GROUP_SIZE = 16
OUTCOME_ESTIMATORS = ("grpo", "rloo", "opo", "gpg", "grpo_passk", "reinforce_plus_plus_baseline", "gdpo")
LOOP_GOAL = ("grpo", "rloo", "opo", "reinforce_plus_plus_baseline")


@dataclass
class Batch:
    rewards: torch.Tensor  # outcome reward on each response's last token
    mask: torch.Tensor  # float32, right-padded, as verl's response_mask
    index: torch.Tensor  # long group ids (rlrun's contract)
    uids: np.ndarray  # the same groups as verl's uid strings (object array)
    values: torch.Tensor
    baselines: torch.Tensor
    old_log_prob: torch.Tensor
    log_prob: torch.Tensor
    advantages: torch.Tensor


def make_batch(batch_size: int, length: int, seed: int = 0) -> Batch:
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(1, length + 1, (batch_size,), generator=g)
    mask = (torch.arange(length)[None, :] < lengths[:, None]).float()
    rewards = torch.zeros(batch_size, length)
    rewards[torch.arange(batch_size), lengths - 1] = torch.randint(0, 2, (batch_size,), generator=g).float()
    index = torch.randperm(batch_size, generator=g) // GROUP_SIZE  # groups are not consecutive rows
    old = -torch.rand(batch_size, length, generator=g) * 3
    return Batch(
        rewards=rewards,
        mask=mask,
        index=index,
        uids=np.array([f"uid-{i}" for i in index.tolist()], dtype=object),
        values=torch.randn(batch_size, length, generator=g),
        baselines=torch.rand(batch_size, generator=g),
        old_log_prob=old,
        log_prob=old + 0.1 * torch.randn(batch_size, length, generator=g),
        advantages=torch.randn(batch_size, length, generator=g),
    )


# --- verl-style loop references --------------------------------------------------------------


def _whiten(x: torch.Tensor, m: torch.Tensor) -> torch.Tensor:
    n = m.sum()
    mean = (x * m).sum() / n
    var = ((x - mean) ** 2 * m).sum() / n * n / (n - 1)
    return (x - mean) * torch.rsqrt(var + 1e-8)


def _by_group(scores: torch.Tensor, uids: np.ndarray) -> dict[str, list[torch.Tensor]]:
    groups: dict[str, list[torch.Tensor]] = defaultdict(list)
    for i in range(len(scores)):
        groups[uids[i]].append(scores[i])
    return groups


def _group_means(groups: dict[str, list[torch.Tensor]]) -> dict[str, torch.Tensor]:
    return {k: torch.stack(v).mean() if len(v) > 1 else torch.tensor(0.0) for k, v in groups.items()}


def loop_grpo(b: Batch, norm: bool = True) -> torch.Tensor:
    scores = b.rewards.sum(-1)
    groups = _by_group(scores, b.uids)
    mean = _group_means(groups)
    std = {k: torch.stack(v).std() if len(v) > 1 else torch.tensor(1.0) for k, v in groups.items()}
    for i in range(len(scores)):
        centred = scores[i] - mean[b.uids[i]]
        scores[i] = centred / (std[b.uids[i]] + 1e-6) if norm else centred
    return scores.unsqueeze(-1) * b.mask


def loop_rloo(b: Batch) -> torch.Tensor:
    scores = b.rewards.sum(-1)
    groups = _by_group(scores, b.uids)
    mean = _group_means(groups)
    for i in range(len(scores)):
        n = len(groups[b.uids[i]])
        if n > 1:
            scores[i] = scores[i] * n / (n - 1) - mean[b.uids[i]] * n / (n - 1)
    return scores.unsqueeze(-1) * b.mask


def loop_opo(b: Batch) -> torch.Tensor:
    lengths, scores = b.mask.sum(-1), b.rewards.sum(-1)
    groups, group_lengths = _by_group(scores, b.uids), _by_group(lengths, b.uids)
    baseline = {}
    for k, v in groups.items():
        s, n = torch.stack(v), torch.stack(group_lengths[k])
        baseline[k] = (n * s).sum() / n.sum() if len(v) > 1 else torch.tensor(0.0)
    for i in range(len(scores)):
        scores[i] = scores[i] - baseline[b.uids[i]]
    return scores.unsqueeze(-1) * b.mask


def loop_gpg(b: Batch) -> torch.Tensor:
    scores = b.rewards.sum(-1)
    alpha = len(scores) / torch.count_nonzero(scores).clamp(min=1)
    mean = _group_means(_by_group(scores, b.uids))
    for i in range(len(scores)):
        scores[i] = alpha * (scores[i] - mean[b.uids[i]])
    return scores.unsqueeze(-1) * b.mask


def loop_grpo_passk(b: Batch) -> torch.Tensor:
    scores = b.rewards.sum(-1)
    advantages = torch.zeros_like(scores)
    groups, rows = _by_group(scores, b.uids), defaultdict(list)
    for i in range(len(scores)):
        rows[b.uids[i]].append(i)
    for k, v in groups.items():
        rewards = torch.stack(v)
        top, top_idx = torch.topk(rewards, 2)
        advantages[rows[k][top_idx[0].item()]] = (top[0] - top[1]) / (rewards.std() + 1e-6)
    return advantages.unsqueeze(-1) * b.mask


def loop_rfpp_baseline(b: Batch) -> torch.Tensor:
    scores = b.rewards.sum(-1)
    mean = _group_means(_by_group(scores, b.uids))
    for i in range(len(scores)):
        scores[i] = scores[i] - mean[b.uids[i]]
    tiled = scores.unsqueeze(-1).tile([1, b.rewards.shape[-1]]) * b.mask
    return _whiten(tiled, b.mask) * b.mask


def loop_gdpo(b: Batch) -> torch.Tensor:
    return _whiten(loop_grpo(b), b.mask) * b.mask


def loop_rfpp(b: Batch) -> torch.Tensor:  # verl's loop over T
    returns = torch.zeros_like(b.rewards)
    running = torch.zeros(b.rewards.shape[0])
    for t in reversed(range(b.rewards.shape[1])):
        running = b.rewards[:, t] + running
        returns[:, t] = running
        running = running * b.mask[:, t]
    return _whiten(returns, b.mask) * b.mask


def loop_gae(b: Batch, gamma: float = 0.99, lam: float = 0.95) -> torch.Tensor:  # verl's loop over T
    m, next_value, last = b.mask, torch.zeros(len(b.rewards)), torch.zeros(len(b.rewards))
    out = []
    for t in reversed(range(b.rewards.shape[1])):
        delta = b.rewards[:, t] + gamma * next_value - b.values[:, t]
        candidate = delta + gamma * lam * last
        next_value = b.values[:, t] * m[:, t] + (1 - m[:, t]) * next_value
        last = candidate * m[:, t] + (1 - m[:, t]) * last
        out.append(last)
    return _whiten(torch.stack(out[::-1], dim=1), m)


LOOPS: dict[str, Callable[[Batch], torch.Tensor]] = {
    "grpo": loop_grpo,
    "rloo": loop_rloo,
    "opo": loop_opo,
    "gpg": loop_gpg,
    "grpo_passk": loop_grpo_passk,
    "reinforce_plus_plus_baseline": loop_rfpp_baseline,
    "gdpo": loop_gdpo,
    "reinforce_plus_plus": loop_rfpp,
    "gae": loop_gae,
}


# --- timing ----------------------------------------------------------------------------------


def best_ms(fn: Callable[[], object], repeats: int) -> float:
    fn()  # warm-up
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times) * 1e3


def estimator_call(name: str, b: Batch) -> Callable[[], object]:
    fn = ADVANTAGES.get(name)
    return lambda: fn(
        b.rewards,
        b.mask,
        b.index,
        values=b.values,
        reward_baselines=b.baselines,
        gamma=1.0 if name != "gae" else 0.99,
        lam=0.95,
    )


def loss_call(name: str, b: Batch) -> Callable[[], object]:
    fn = POLICY_LOSSES.get(name)
    generator = torch.Generator().manual_seed(0)
    return lambda: fn(b.old_log_prob, b.log_prob, b.advantages, b.mask, generator=generator)


def run(batch_size: int, length: int, repeats: int, loop_repeats: int) -> list[tuple]:
    b = make_batch(batch_size, length)
    floor = best_ms(lambda: (b.rewards * b.mask).sum(-1), repeats)
    rows = []
    for name in ADVANTAGES.names():
        ours = best_ms(estimator_call(name, b), repeats)
        loop = best_ms(lambda fn=LOOPS[name]: fn(b), loop_repeats) if name in LOOPS else None
        rows.append(("advantage", name, batch_size, length, ours, loop, floor))
    for name in POLICY_LOSSES.names():
        rows.append(
            ("policy loss", name, batch_size, length, best_ms(loss_call(name, b), repeats), None, floor)
        )
    return rows


def format_table(rows: list[tuple]) -> str:
    header = f"{'kind':<12} {'component':<38} {'B×T':>10} {'rlrun ms':>9} {'loop ms':>9} {'loop/rlrun':>10} {'floor ms':>9} {'rlrun/floor':>11}"
    lines = [header, "-" * len(header)]
    for kind, name, batch_size, length, ours, loop, floor in rows:
        loop_ms = f"{loop:9.1f}" if loop is not None else f"{'n/a':>9}"
        speedup = f"{loop / ours:9.1f}×" if loop is not None else f"{'':>10}"
        tag = " (outcome)" if name in OUTCOME_ESTIMATORS and kind == "advantage" else ""
        lines.append(
            f"{kind:<12} {name + tag:<38} {f'{batch_size}×{length}':>10} {ours:9.1f} {loop_ms} {speedup} "
            f"{floor:9.1f} {ours / floor:10.2f}×"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--small", action="store_true", help="only the small size")
    args = parser.parse_args()
    torch.set_num_threads(2)
    rows = run(256, 512, repeats=7, loop_repeats=3)
    if not args.small:
        rows += run(4096, 2048, repeats=5, loop_repeats=2)
    load = ", load average {:.1f} {:.1f} {:.1f}".format(*os.getloadavg()) if hasattr(os, "getloadavg") else ""
    thp = "on" if os.environ.get("THP_MEM_ALLOC_ENABLE") == "1" else "off"
    print(
        f"torch {torch.__version__}, {torch.get_num_threads()} threads{load}, huge pages {thp}, "
        f"float32, groups of {GROUP_SIZE}"
    )
    print("times: best of several runs (ms); index: LongTensor for rlrun, uid strings for the loops")
    print(format_table(rows))
    large = {
        name: (ours, loop, floor)
        for kind, name, b, t, ours, loop, floor in rows
        if b == 4096 and kind == "advantage"
    }
    if large:
        loop_ok = all(large[n][1] / large[n][0] >= 20 for n in LOOP_GOAL)
        floor_ok = all(large[n][0] / large[n][2] <= 3 for n in OUTCOME_ESTIMATORS)
        print(f"goal ≥20× vs loop ({', '.join(LOOP_GOAL)}): {'met' if loop_ok else 'NOT met'}")
        print(f"goal ≤3× floor (outcome estimators): {'met' if floor_ok else 'NOT met'}")


if __name__ == "__main__":
    main()
