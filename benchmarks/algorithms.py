"""Speed of the algorithm library against verl-style per-sample loops and a memory-bound floor.

For every advantage estimator and policy loss, at a small size and at B=4096 responses × T=2048
tokens (groups of 16), it prints:
- rlrun: the registered component (median of several runs; rlrun, loop and floor take turns, so
  a shared machine's load falls on all three alike), and its minor page faults per call;
- loop: a reference that does what verl's estimator does, op for op (a Python loop over samples
  building per-uid lists, or verl's loop over T for GAE / REINFORCE++; whitening as verl's
  masked_whiten), and loop/rlrun. At the small size each loop is checked against rlrun's output;
- floor: one masked reduction pass over the same (B, T) tensor, `(rewards * mask).sum(-1)`, the
  memory-bound floor (it writes one B×T temporary and reads it back), and rlrun/floor. An outcome
  estimator reads rewards and mask and writes one B×T result, so about 1–2× the floor is the best
  it can do.
Policy losses have no loop column: verl's losses are already vectorized.

Goals: ≥ 20× faster than the loop for grpo, rloo, opo, reinforce_plus_plus_baseline at B=4096,
and within 3× of the floor for every outcome estimator.

The whole table is measured once per allocator setting, each in a fresh process whose
environment differs only in these variables (the loop, rlrun and the floor alike):
- default: glibc malloc as shipped. A B×T float32 buffer at B=4096, T=2048 is 32 MiB, above
  glibc's mmap threshold, so every fresh tensor is a new mapping and the kernel zero-fills its
  8192 pages on first touch (one page fault each); freeing it unmaps it again.
- glibc-reuse: MALLOC_MMAP_MAX_=0 MALLOC_TRIM_THRESHOLD_=1073741824 (mallopt(3)): large blocks
  come from the heap and freed ones are kept, so after a warm-up a fresh tensor reuses memory
  that is already mapped (no page faults), at the price of a process that holds on to freed
  memory (a few hundred MiB more peak RSS here).
- thp: THP_MEM_ALLOC_ENABLE=1 (PyTorch ≥ 2.2: c10's CPU allocator 2 MiB-aligns buffers of
  ≥ 2 MiB and madvises them for transparent huge pages): one fault per 2 MiB instead of per
  4 KiB, but the kernel still zero-fills each new buffer, and needs free huge pages.

    python benchmarks/algorithms.py                 # all settings, both sizes (~4 min on 2 cores)
    python benchmarks/algorithms.py --small         # the small size only
    python benchmarks/algorithms.py --alloc default # one setting
"""

from __future__ import annotations

import os

# On a shared machine, OpenMP workers spinning between parallel regions steal the CPU from the main
# thread and small ops stall for milliseconds; passive waiting measures the code, not the contention.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import argparse
import resource
import statistics
import subprocess
import sys
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
#
# Each follows the control flow and tensor ops of the corresponding function in verl 0.9.x's
# verl/trainer/ppo/core_algos.py (per-sample loops building per-uid lists, one torch.stack per
# group, per-sample normalisation, then `scores.unsqueeze(-1) * response_mask`), and whitening
# follows verl/utils/torch_functional.py's masked_whiten (masked_mean via `where(mask.bool())`,
# masked_var computing its own mean). Same ops, same count: not faster, not slower than verl.


def _masked_mean(x: torch.Tensor, m: torch.Tensor) -> torch.Tensor:
    return (torch.where(m.bool(), x, 0.0) * m).sum() / (m.sum() + 1e-8)


def _masked_whiten(x: torch.Tensor, m: torch.Tensor) -> torch.Tensor:
    mean = _masked_mean(x, m)
    var = _masked_mean((x - _masked_mean(x, m)) ** 2, m)
    var = var * (m.sum() / (m.sum() - 1))  # unbiased
    return (x - mean) * torch.rsqrt(var + 1e-8)


def _scores_by_uid(scores: torch.Tensor, uids: np.ndarray) -> dict[str, list[torch.Tensor]]:
    id2score: dict[str, list[torch.Tensor]] = defaultdict(list)
    for i in range(scores.shape[0]):
        id2score[uids[i]].append(scores[i])
    return id2score


def _mean_std_by_uid(
    id2score: dict[str, list[torch.Tensor]],
) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
    id2mean, id2std = {}, {}
    for uid, group in id2score.items():
        if len(group) == 1:
            id2mean[uid], id2std[uid] = torch.tensor(0.0), torch.tensor(1.0)
        else:
            stacked = torch.stack(group)
            id2mean[uid], id2std[uid] = torch.mean(stacked), torch.std(stacked)
    return id2mean, id2std


def _mean_by_uid(id2score: dict[str, list[torch.Tensor]]) -> dict[str, torch.Tensor]:
    return {
        uid: torch.tensor(0.0) if len(group) == 1 else torch.mean(torch.stack(group))
        for uid, group in id2score.items()
    }


def loop_grpo(b: Batch, epsilon: float = 1e-6, norm: bool = True) -> torch.Tensor:
    scores = b.rewards.sum(dim=-1)
    id2mean, id2std = _mean_std_by_uid(_scores_by_uid(scores, b.uids))
    for i in range(scores.shape[0]):
        if norm:
            scores[i] = (scores[i] - id2mean[b.uids[i]]) / (id2std[b.uids[i]] + epsilon)
        else:
            scores[i] = scores[i] - id2mean[b.uids[i]]
    return scores.unsqueeze(-1) * b.mask


def loop_rloo(b: Batch) -> torch.Tensor:
    scores = b.rewards.sum(dim=-1)
    id2score = _scores_by_uid(scores, b.uids)
    id2mean = _mean_by_uid(id2score)
    for i in range(scores.shape[0]):
        n = len(id2score[b.uids[i]])
        if n > 1:
            scores[i] = scores[i] * n / (n - 1) - id2mean[b.uids[i]] * n / (n - 1)
    return scores.unsqueeze(-1) * b.mask


def loop_opo(b: Batch) -> torch.Tensor:
    lengths, scores = b.mask.sum(dim=-1), b.rewards.sum(dim=-1)
    id2score, id2len = defaultdict(list), defaultdict(list)
    for i in range(scores.shape[0]):  # one loop collects both, as verl
        id2score[b.uids[i]].append(scores[i])
        id2len[b.uids[i]].append(lengths[i])
    id2baseline = {}
    for uid, group in id2score.items():
        if len(group) == 1:
            id2baseline[uid] = torch.tensor(0.0)
        else:
            s, n = torch.stack(group), torch.stack(id2len[uid])
            id2baseline[uid] = (n * s).sum() / n.sum()
    for i in range(scores.shape[0]):
        scores[i] = scores[i] - id2baseline[b.uids[i]]
    return scores.unsqueeze(-1) * b.mask


def loop_gpg(b: Batch, f_norm: float = 1.0) -> torch.Tensor:
    scores = b.rewards.sum(dim=-1)
    alpha = scores.shape[0] / torch.count_nonzero(scores).clamp(min=1)
    id2mean, _ = _mean_std_by_uid(_scores_by_uid(scores, b.uids))  # verl computes the std too
    for i in range(scores.shape[0]):
        scores[i] = alpha * (scores[i] - id2mean[b.uids[i]]) / f_norm
    return scores.unsqueeze(-1) * b.mask


def loop_grpo_passk(b: Batch, epsilon: float = 1e-6) -> torch.Tensor:
    scores = b.rewards.sum(dim=-1)
    advantages = torch.zeros_like(scores)
    id2scores, id2rows = defaultdict(list), defaultdict(list)
    for i in range(scores.shape[0]):
        id2scores[b.uids[i]].append(scores[i])
        id2rows[b.uids[i]].append(i)
    for uid, group in id2scores.items():
        rewards = torch.stack(group)
        top, top_idx = torch.topk(rewards, 2)
        advantages[id2rows[uid][top_idx[0].item()]] = (top[0] - top[1]) / (torch.std(rewards) + epsilon)
    return advantages.unsqueeze(-1) * b.mask


def loop_rfpp_baseline(b: Batch) -> torch.Tensor:
    scores = b.rewards.sum(dim=-1)
    id2mean = _mean_by_uid(_scores_by_uid(scores, b.uids))
    for i in range(scores.shape[0]):
        scores[i] = scores[i] - id2mean[b.uids[i]]
    tiled = scores.unsqueeze(-1).tile([1, b.rewards.shape[-1]]) * b.mask
    return _masked_whiten(tiled, b.mask) * b.mask


def loop_gdpo(b: Batch) -> torch.Tensor:  # one reward component, weight 1 (float32 tensor, as verl)
    weighted = torch.ones(1)[0] * loop_grpo(b)
    return _masked_whiten(weighted, b.mask) * b.mask


def loop_rfpp(b: Batch, gamma: float = 1.0) -> torch.Tensor:  # verl's loop over T
    returns = torch.zeros_like(b.rewards)
    running = 0
    for t in reversed(range(b.rewards.shape[1])):
        running = b.rewards[:, t] + gamma * running
        returns[:, t] = running
        running = running * b.mask[:, t]
    return _masked_whiten(returns, b.mask) * b.mask


def loop_gae(b: Batch, gamma: float = 0.99, lam: float = 0.95) -> torch.Tensor:  # verl's loop over T
    m, next_value, last = b.mask, 0, 0
    out = []
    for t in reversed(range(b.rewards.shape[1])):
        delta = b.rewards[:, t] + gamma * next_value - b.values[:, t]
        candidate = delta + gamma * lam * last
        next_value = b.values[:, t] * m[:, t] + (1 - m[:, t]) * next_value
        last = candidate * m[:, t] + (1 - m[:, t]) * last
        out.append(last)
    advantages = torch.stack(out[::-1], dim=1)
    returns = advantages + b.values  # noqa: F841 (verl returns it)
    return _masked_whiten(advantages, m)


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

ALLOC_SETTINGS: dict[str, dict[str, str]] = {
    "default": {},
    "glibc-reuse": {"MALLOC_MMAP_MAX_": "0", "MALLOC_TRIM_THRESHOLD_": "1073741824"},
    "thp": {"THP_MEM_ALLOC_ENABLE": "1"},
}
ALLOC_VARIABLES = sorted({k for v in ALLOC_SETTINGS.values() for k in v} | {"MALLOC_MMAP_THRESHOLD_"})


def minor_faults() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def interleaved_ms(calls: dict[str, tuple[Callable[[], object], int]]) -> dict[str, tuple[float, float]]:
    """{name: (median wall time in ms, minor page faults per call)} for {name: (fn, repeats)}.

    After one warm-up call each, the calls take turns (a, b, c, a, b, c, ...), so the load of a
    shared machine falls on all of them alike and their ratios hold better than their times.
    The median, not the best: without allocator tuning a call's time is bimodal (an output that
    happens to fit in memory glibc already holds skips the page faults), and the best run would
    report the lucky case."""
    for fn, _ in calls.values():
        fn()
    times: dict[str, list[float]] = {name: [] for name in calls}
    faults = dict.fromkeys(calls, 0)
    for turn in range(max(repeats for _, repeats in calls.values())):
        for name, (fn, repeats) in calls.items():
            if turn < repeats:
                before, start = minor_faults(), time.perf_counter()
                fn()
                times[name].append(time.perf_counter() - start)
                faults[name] += minor_faults() - before
    return {name: (statistics.median(t) * 1e3, faults[name] / len(t)) for name, t in times.items()}


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


def check_loops(b: Batch) -> None:
    """Every loop reference computes what the rlrun estimator computes (float32 tolerance)."""
    for name, loop in LOOPS.items():
        ours, ref = estimator_call(name, b)()[0], loop(b)
        if not torch.allclose(ours, ref, rtol=1e-4, atol=1e-5):
            raise AssertionError(f"loop reference for {name} differs: max |Δ| {(ours - ref).abs().max():.3g}")


def run(batch_size: int, length: int, repeats: int, loop_repeats: int) -> list[tuple]:
    """One row per component: rlrun, its loop reference and the floor, timed in turns."""
    b = make_batch(batch_size, length)
    floor_call = (lambda: (b.rewards * b.mask).sum(-1), repeats)
    rows = []
    components = [("advantage", name, estimator_call(name, b)) for name in ADVANTAGES.names()]
    components += [("policy loss", name, loss_call(name, b)) for name in POLICY_LOSSES.names()]
    for kind, name, call in components:
        calls = {"rlrun": (call, repeats), "floor": floor_call}
        if kind == "advantage" and name in LOOPS:
            calls["loop"] = (lambda fn=LOOPS[name]: fn(b), loop_repeats)
        result = interleaved_ms(calls)
        ours, faults = result["rlrun"]
        loop = result["loop"][0] if "loop" in result else None
        rows.append((kind, name, batch_size, length, ours, faults, loop, result["floor"][0]))
    return rows


def _ms(value: float) -> str:
    return f"{value:9.2f}" if value < 10 else f"{value:9.1f}"


def format_table(rows: list[tuple]) -> str:
    header = (
        f"{'kind':<12} {'component':<38} {'B×T':>10} {'rlrun ms':>9} {'faults':>7} {'loop ms':>9} "
        f"{'loop/rlrun':>10} {'floor ms':>9} {'rlrun/floor':>11}"
    )
    lines = [header, "-" * len(header)]
    for kind, name, batch_size, length, ours, faults, loop, floor in rows:
        loop_ms = _ms(loop) if loop is not None else f"{'n/a':>9}"
        speedup = f"{loop / ours:9.1f}×" if loop is not None else f"{'':>10}"
        tag = " (outcome)" if name in OUTCOME_ESTIMATORS and kind == "advantage" else ""
        lines.append(
            f"{kind:<12} {name + tag:<38} {f'{batch_size}×{length}':>10} {_ms(ours)} {faults:7.0f} {loop_ms} "
            f"{speedup} {_ms(floor)} {ours / floor:10.2f}×"
        )
    return "\n".join(lines)


def measure(setting: str, small: bool) -> None:
    """One table, in this process, whose environment must already be `setting`'s."""
    torch.set_num_threads(2)
    check_loops(make_batch(256, 512))
    rows = run(256, 512, repeats=7, loop_repeats=3)
    if not small:
        rows += run(4096, 2048, repeats=9, loop_repeats=3)
    load = ", load average {:.1f} {:.1f} {:.1f}".format(*os.getloadavg()) if hasattr(os, "getloadavg") else ""
    variables = " ".join(f"{k}={os.environ[k]}" for k in ALLOC_VARIABLES if k in os.environ) or "none set"
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"## allocator setting: {setting} ({variables})")
    print(
        f"torch {torch.__version__}, {torch.get_num_threads()} threads{load}, float32, groups of {GROUP_SIZE}, "
        f"peak RSS {peak:.0f} MiB"
    )
    print(
        "times: median of several runs (ms), rlrun, loop and floor taking turns; faults: rlrun's minor "
        "page faults per call; index: LongTensor for rlrun, uid strings for the loops; loops checked against rlrun"
    )
    print(format_table(rows))
    large = {
        name: (ours, loop, floor)
        for kind, name, b, t, ours, faults, loop, floor in rows
        if b == 4096 and kind == "advantage"
    }
    if large:
        loop_ratios = ", ".join(f"{n} {large[n][1] / large[n][0]:.1f}×" for n in LOOP_GOAL)
        floor_ratios = ", ".join(f"{n} {large[n][0] / large[n][2]:.2f}×" for n in OUTCOME_ESTIMATORS)
        loop_ok = all(large[n][1] / large[n][0] >= 20 for n in LOOP_GOAL)
        floor_ok = all(large[n][0] / large[n][2] <= 3 for n in OUTCOME_ESTIMATORS)
        print(f"goal ≥20× vs loop at 4096×2048 ({loop_ratios}): {'met' if loop_ok else 'NOT met'}")
        print(f"goal ≤3× floor at 4096×2048 ({floor_ratios}): {'met' if floor_ok else 'NOT met'}")
    sys.stdout.flush()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--small", action="store_true", help="only the small size")
    parser.add_argument(
        "--alloc",
        default=",".join(ALLOC_SETTINGS),
        help=f"comma-separated allocator settings, each measured in a fresh process ({', '.join(ALLOC_SETTINGS)})",
    )
    parser.add_argument("--in-process", metavar="SETTING", help=argparse.SUPPRESS)  # a child's own table
    args = parser.parse_args()
    if args.in_process:
        measure(args.in_process, args.small)
        return
    settings = [s.strip() for s in args.alloc.split(",") if s.strip()]
    unknown = [s for s in settings if s not in ALLOC_SETTINGS]
    if unknown:
        parser.error(f"unknown --alloc {unknown}; choose from {list(ALLOC_SETTINGS)}")
    for i, setting in enumerate(settings):
        env = {k: v for k, v in os.environ.items() if k not in ALLOC_VARIABLES}
        env.update(ALLOC_SETTINGS[setting])
        command = [sys.executable, os.path.abspath(__file__), "--in-process", setting]
        if i:
            print()
        sys.stdout.flush()
        subprocess.run(command + (["--small"] if args.small else []), env=env, check=True)


if __name__ == "__main__":
    main()
