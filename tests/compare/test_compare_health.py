"""Health flags on crafted metrics files: each problem raises its flag, a healthy run none."""

from __future__ import annotations

import itertools
import math

import pytest

from rlrun.compare.health import health_flags
from rlrun.compare.runs import load_run

HEALTHY = {
    "critic/score/mean": lambda s: 0.1 + 0.01 * s,
    "actor/entropy": lambda s: 1.5 - 0.02 * s,
    "response_length/clip_ratio": 0.05,
    "frac_reward_zero_std": 0.2,
    "actor/grad_norm": lambda s: 1.0 + 0.3 * (s % 3),
    "train/skipped_updates": 0,
}
_names = itertools.count()


def _flags(make_run, steps, n=20, status="finished", **overrides):
    series = {**HEALTHY, **{key.replace("__", "/"): value for key, value in overrides.items()}}
    run = load_run(str(make_run(f"run{next(_names)}", steps(n, series), status=status)))
    return {flag.check: flag for flag in health_flags(run)}


def test_a_healthy_run_raises_no_flags(make_run, steps):
    assert _flags(make_run, steps) == {}


def test_nan_and_inf(make_run, steps):
    flags = _flags(
        make_run,
        steps,
        actor__grad_norm=lambda s: math.nan if s >= 12 else 1.0,
        actor__entropy=lambda s: math.inf if s == 15 else 1.0,
    )
    flag = flags["non-finite"]
    assert flag.severity == "error" and flag.step == 12
    assert "actor/entropy (1×)" in flag.message and "actor/grad_norm (9×)" in flag.message


def test_entropy_collapse(make_run, steps):
    flag = _flags(make_run, steps, actor__entropy=lambda s: 2.0 * 0.7**s)["entropy-collapse"]
    assert flag.step == 16 and "collapsed" in flag.message
    # a slow decline is not a collapse
    assert "entropy-collapse" not in _flags(make_run, steps, actor__entropy=lambda s: 2.0 - 0.05 * s)


def test_rising_response_clip_ratio(make_run, steps):
    flag = _flags(make_run, steps, response_length__clip_ratio=lambda s: 0.02 * s)["rising-clip-ratio"]
    assert "from 6% to 36%" in flag.message  # mean of steps 1-5 vs 16-20


def test_high_frac_reward_zero_std(make_run, steps):
    flag = _flags(make_run, steps, frac_reward_zero_std=lambda s: 0.7)["zero-std-groups"]
    assert flag.message.startswith("70% of prompt groups") and flag.step == 16


def test_grad_norm_spikes(make_run, steps):
    flag = _flags(make_run, steps, actor__grad_norm=lambda s: 40.0 if s in (8, 14) else 1.0)[
        "grad-norm-spikes"
    ]
    assert (
        flag.step == 8 and flag.message.startswith("2 grad-norm spike(s)") and "40× at step 8" in flag.message
    )


def test_steps_without_reward_signal_are_no_baseline_for_a_spike(make_run, steps):
    # steps 1-4: every group's rewards equal, the norm only the KL term's (1e-7); from step 5
    # the norm is ~1 (HEALTHY's 1.0-1.6): not a spike of 10^7x
    silent = {"frac_reward_zero_std": lambda s: 1.0 if s <= 4 else 0.2}
    assert "grad-norm-spikes" not in _flags(
        make_run, steps, actor__grad_norm=lambda s: 1e-7 if s <= 4 else 1.0 + 0.3 * (s % 3), **silent
    )
    # a real spike after them is still one: median of steps 5-9 (1.6, 1.0, 1.3, 1.6, 1.0) is 1.3
    flag = _flags(
        make_run,
        steps,
        actor__grad_norm=lambda s: 1e-7 if s <= 4 else (52.0 if s == 10 else 1.0 + 0.3 * (s % 3)),
        **silent,
    )["grad-norm-spikes"]
    assert flag.step == 10 and "40× at step 10" in flag.message


@pytest.mark.parametrize("name", ["training__skipped_updates", "train__skipped_updates"])
def test_skipped_updates(make_run, steps, name):
    flag = _flags(make_run, steps, **{name: lambda s: max(0, s - 17)})["skipped-updates"]
    assert flag.step == 18 and flag.message.startswith("3 update(s) skipped")


@pytest.mark.parametrize("n", [1, 3])
def test_too_few_steps_make_no_trend(make_run, steps, n):
    assert _flags(make_run, steps, n=n, actor__entropy=lambda s: 2.0 * 0.01**s) == {}


def test_reward_up_accuracy_down(make_run, steps):
    # accuracy peaks at 0.6 over steps 6-10, then falls to 0.4; the (learned) reward keeps rising
    acc = lambda s: 0.6 if 6 <= s <= 10 else (0.3 if s < 6 else 0.4)
    flags = _flags(make_run, steps, reward__acc__mean=acc, critic__score__mean=lambda s: 0.5 + 0.02 * s)
    flag = flags["reward-up-accuracy-down"]
    assert flag.step == 11 and "fell from its best 60% (steps 6-10) to 40%" in flag.message
    assert "rose from 0.66 to 0.86" in flag.message  # mean of steps 6-10 vs 16-20
    # the reward follows the accuracy (a rule reward alone): no flag, however the accuracy moves
    assert "reward-up-accuracy-down" not in _flags(
        make_run, steps, reward__acc__mean=acc, critic__score__mean=acc
    )


def test_most_responses_cut_at_the_length_limit(make_run, steps):
    # steps 7 and 9-20 are over half cut; 9, 10, 11 is the first run of 3 in a row
    flag = _flags(make_run, steps, response_length__clip_ratio=lambda s: 0.9 if s == 7 or s >= 9 else 0.1)[
        "length-limit"
    ]
    assert flag.step == 9 and flag.message.startswith("most responses hit the length limit")
    assert "`rollout.max_response_tokens`" in flag.message and "`data.prompt_template`" in flag.message


def test_all_zero_rewards_for_several_steps(make_run, steps):
    flags = _flags(
        make_run, steps, critic__score__max=lambda s: 0.0 if s <= 4 else 1.0, critic__score__min=0.0
    )
    assert flags["zero-reward"].step == 1 and "every response scored 0" in flags["zero-reward"].message
    # two all-zero steps in a row are noise, not a stall
    assert "zero-reward" not in _flags(
        make_run, steps, critic__score__max=lambda s: 0.0 if s <= 2 else 1.0, critic__score__min=0.0
    )
