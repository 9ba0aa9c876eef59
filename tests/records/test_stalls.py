"""Stalls: most responses cut, or every reward 0, for STALL_STEPS steps in a row."""

import pytest

from rlrun.recipes import load_recipe
from rlrun.records.stalls import CUT_FRACTION, STALL_STEPS, StallWatch, find_stalls
from rlrun.training.run import RunOptions, train


def rows(clip_ratios, score_max=1.0):
    return [
        {
            "step": step,
            "response_length/clip_ratio": ratio,
            "critic/score/max": score_max,
            "critic/score/min": 0.0,
        }
        for step, ratio in enumerate(clip_ratios, 1)
    ]


def test_thresholds():
    assert (CUT_FRACTION, STALL_STEPS) == (0.5, 3)


def test_three_steps_over_half_cut_are_a_length_stall_from_the_first_of_them():
    (stall,) = find_stalls(rows([0.6, 0.5, 0.75, 0.8, 0.51, 0.9]))  # 0.5 is not "most"
    assert (stall.check, stall.step) == ("length-limit", 3)
    assert find_stalls(rows([0.6, 0.6, 0.1, 0.6, 0.6])) == []


def test_all_zero_scores_are_a_stall_but_a_constant_nonzero_score_is_not():
    (stall,) = find_stalls(rows([0.0] * 3, score_max=0.0))
    assert (stall.check, stall.step) == ("zero-reward", 1)
    assert find_stalls([{**row, "critic/score/min": 1.0} for row in rows([0.0] * 3, score_max=1.0)]) == []


def test_a_run_in_progress_hears_of_each_stall_once_the_step_it_shows():
    watch = StallWatch()
    heard = []
    for row in rows([0.6, 0.6, 0.6, 0.6, 0.1, 0.6, 0.6, 0.6], score_max=0.0):
        step, metrics = row["step"], {k: v for k, v in row.items() if k != "step"}
        heard.append([(stall.check, stall.step) for stall in watch.new_stalls(step, metrics)])
    # both show at step 3 (steps 1-3); they are not said again, not even when they show anew
    assert heard == [[], [], [("length-limit", 1), ("zero-reward", 1)], [], [], [], [], []]


def test_rows_without_the_metrics_raise_nothing():
    assert find_stalls([{"step": s, "val/accuracy": 0.0} for s in range(5)]) == []


@pytest.mark.slow
def test_training_warns_once_when_most_responses_are_cut_and_every_reward_is_0(tmp_path):
    # One response token: every response is cut before `81` + EOS, and exact_match scores all 0.
    overrides = [
        "rollout.max_response_tokens=1",
        "trainer.total_steps=4",
        "trainer.prompts_per_step=2",
        "rollout.n=2",
        "actor.mini_batch_samples=4",
        "actor.micro_batch_samples=4",
        "trainer.eval.prompts=4",
        "logging.console.enabled=false",
    ]
    said: list[str] = []
    train(load_recipe("grpo", overrides), RunOptions(run_dir=tmp_path / "run"), say=said.append)
    warnings = [line for line in said if line.startswith("Warning:")]
    assert len(warnings) == 2  # each stall once, at step 3, not again at step 4
    assert "most responses hit the length limit (3 steps from step 1" in warnings[0]
    assert "every response scored 0 for 3 steps from step 1" in warnings[1]
