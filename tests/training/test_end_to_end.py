"""End-to-end runs on the embedded tiny models: every built-in recipe for a few steps, exact
resume after kill -9, Ctrl-C, refusal to reuse a run directory, and the dry run."""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from transformers import AutoModelForCausalLM, AutoTokenizer

from rlrun.errors import RecipeError
from rlrun.recipes import builtin_names, load_recipe
from rlrun.training.run import RunOptions, train

pytestmark = pytest.mark.slow

# The algorithm recipes; those in subfolders train real models (tests/embedded/test_gguf.py, the hub).
RECIPES = [name for name in builtin_names() if name != "base" and "/" not in name]
# Quantities that depend on the clock, not on the computation.
CLOCK_KEYS = ("wall_time_s", "timing_s/", "perf/")


def small(recipe: str, steps: int = 3, **extra: object) -> list[str]:
    """Overrides that shrink a recipe to a few seconds: 4 prompts a step, 2 mini-batches of 2
    micro-batches each (so accumulation and several optimizer steps are exercised)."""
    n = load_recipe(recipe).recipe.rollout.n
    settings = {
        "trainer.total_steps": steps,
        "trainer.prompts_per_step": 4,
        "trainer.eval.prompts": 32,
        "trainer.eval.every_steps": 0,
        "trainer.checkpoint.every_steps": 2,
        "actor.mini_batch_samples": 2 * n,
        "actor.micro_batch_samples": n,
        "logging.console.enabled": False,
        "logging.samples_every_steps": 1,
        **extra,
    }
    return [f"{key}={value}" for key, value in settings.items()]


def records(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


def without_clock(rows: list[dict]) -> list[dict]:
    return [{k: v for k, v in row.items() if not k.startswith(CLOCK_KEYS)} for row in rows]


@pytest.mark.parametrize("recipe", RECIPES)
def test_every_recipe_trains_checkpoints_and_resumes(recipe, tmp_path):
    overrides = small(recipe)
    run_dir = tmp_path / recipe
    run = train(load_recipe(recipe, overrides), RunOptions(run_dir=run_dir), overrides=overrides)
    assert run.status == "finished"
    rows = records(run_dir)
    assert [r["step"] for r in rows] == [0, 1, 2, 3]
    for key in (
        "actor/grad_norm",
        "actor/entropy",
        "actor/lr",
        "critic/score/mean",
        "response_length/mean",
        "timing_s/gen",
        "timing_s/update_actor",
        "timing_s/sync",
        "perf/throughput",
        "samples",
    ):
        assert key in rows[1], key
    assert "val/accuracy" in rows[0] and "val/accuracy" in rows[-1]
    # each evaluation's seconds, within its row's wall time (step 0: nearly all of it; wall times
    # are kept to the millisecond)
    assert all(0 < r["timing_s/eval"] <= r["wall_time_s"] + 0.0005 for r in (rows[0], rows[-1]))
    assert all("timing_s/eval" not in r for r in rows[1:-1])  # no evaluation there
    meta = json.loads((run_dir / "meta.json").read_text())
    assert meta["status"] == "finished" and meta["end_time"] and meta["algorithm"]["advantage"]
    setup = {key: value for key, value in meta["setup"].items() if key != "device_name"}
    assert setup == {"processes": 1, "machines": 1, "strategy": "none", "device": "cpu", "dtype": "float32",
                     "mixed_precision": "no", "rollout_engine": "hf"}  # fmt: skip
    assert (run_dir / "resolved.yaml").exists() and json.loads(
        (run_dir / "overrides.json").read_text()
    ) == overrides
    assert sorted(p.name for p in (run_dir / "checkpoints").iterdir()) == ["step_000002", "step_000003"]
    last = run_dir / "checkpoints" / "step_000003"
    AutoModelForCausalLM.from_pretrained(last)  # plain transformers reads it
    AutoTokenizer.from_pretrained(last)
    assert [json.loads(line)["step"] for line in (run_dir / "samples.jsonl").read_text().splitlines()][
        -1
    ] == 3

    more = [*overrides, "trainer.total_steps=4"]
    resumed = train(load_recipe(recipe, more), RunOptions(run_dir=run_dir, resume=True), overrides=more)
    assert resumed.status == "finished"
    assert [r["step"] for r in records(run_dir)] == [0, 1, 2, 3, 4]
    assert without_clock(records(run_dir))[:4] == without_clock(rows)


# Subprocesses import this checkout's rlrun, whatever is installed and wherever they run.
REPO = str(Path(__file__).resolve().parents[2])
ENV = {
    **os.environ,
    "OMP_NUM_THREADS": "1",
    "PYTHONPATH": os.pathsep.join(filter(None, [REPO, os.environ.get("PYTHONPATH")])),
}


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-c", "from rlrun.cli import app; app()", *args]


def _run_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    """`rlrun ARGS` in `cwd`, asserted to exit 0; returns its output."""
    result = subprocess.run(_cli(*args), check=False, capture_output=True, text=True, env=ENV, cwd=cwd)
    assert result.returncode == 0, result.stderr
    return result


def test_kill_9_then_resume_ends_exactly_like_an_uninterrupted_run(tmp_path):
    overrides = small("grpo", steps=8)
    subprocess.run(
        _cli("train", "grpo", *overrides, "--run-dir", str(tmp_path / "straight")),
        env=ENV,
        check=True,
        capture_output=True,
    )

    killed = tmp_path / "killed"
    proc = subprocess.Popen(
        _cli("train", "grpo", *overrides, "--run-dir", str(killed)),
        env=ENV,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.time() + 300
    while time.time() < deadline and not (killed / "checkpoints" / "step_000004").is_dir():
        time.sleep(0.005)
    assert proc.poll() is None, "the run ended before it could be killed"
    proc.send_signal(signal.SIGKILL)  # somewhere in step 5 or 6: no chance to clean up
    proc.wait()
    assert json.loads((killed / "meta.json").read_text())["status"] == "running"
    assert records(killed)[-1]["step"] < 8

    subprocess.run(_cli("resume", str(killed)), env=ENV, check=True, capture_output=True)
    assert without_clock(records(killed)) == without_clock(records(tmp_path / "straight"))
    assert json.loads((killed / "meta.json").read_text())["status"] == "finished"


def test_a_run_directory_is_never_reused_by_accident(tmp_path):
    overrides = small("grpo", steps=1)
    loaded = load_recipe("grpo", overrides)
    train(loaded, RunOptions(run_dir=tmp_path / "r"), overrides=overrides)
    with pytest.raises(RecipeError, match="already exists"):
        train(loaded, RunOptions(run_dir=tmp_path / "r"))
    # resuming it further (a finished run resumes only to a raised total_steps) with other data
    changed = load_recipe("grpo", [*overrides, "data.arithmetic.digits=3", "trainer.total_steps=2"])
    with pytest.raises(RecipeError, match="data.arithmetic"):
        train(changed, RunOptions(run_dir=tmp_path / "r", resume=True))
    train(loaded, RunOptions(run_dir=tmp_path / "r", overwrite=True))
    assert [r["step"] for r in records(tmp_path / "r")] == [0, 1]


def test_ctrl_c_saves_a_checkpoint_and_marks_the_run_interrupted(tmp_path):
    run_dir = tmp_path / "r"
    proc = subprocess.Popen(
        _cli("train", "grpo", *small("grpo", steps=200), "--run-dir", str(run_dir)),
        env=ENV,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.time() + 300
    while time.time() < deadline and not (
        (run_dir / "metrics.jsonl").exists() and len(records(run_dir)) >= 2
    ):
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    meta = json.loads((run_dir / "meta.json").read_text())
    assert meta["status"] == "interrupted"
    saved = sorted(p.name for p in (run_dir / "checkpoints").iterdir())
    assert saved and int(saved[-1].removeprefix("step_")) == meta["final_step"]
    assert "rlrun resume" in err


def test_dry_run_writes_nothing(tmp_path):
    result = _run_cli("train", "dapo", f"trainer.output_dir={tmp_path}", "--dry-run", cwd=tmp_path)
    assert "update_actor" in result.stdout and "peak rss" in result.stdout
    assert list(tmp_path.iterdir()) == []


def test_the_dry_run_of_a_sharding_strategy_says_its_step_is_one_unsharded_process(tmp_path):
    result = _run_cli("train", "grpo", "trainer.strategy=fsdp2", "--dry-run", cwd=tmp_path)
    said = "".join(result.stderr.replace("│", "").split())
    assert "`train--dry-run`takesitsstepinoneprocess,unsharded" in said


def test_wandb_offline_run_is_resumed_under_the_same_id(tmp_path, monkeypatch):
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    overrides = small("grpo", steps=2, **{"logging.wandb.enabled": True})
    said: list[str] = []
    train(
        load_recipe("grpo", overrides),
        RunOptions(run_dir=tmp_path / "r"),
        say=said.append,
        overrides=overrides,
    )
    run_id = json.loads((tmp_path / "r" / "meta.json").read_text())["wandb_run_id"]
    assert run_id and any("wandb sync" in line for line in said)
    assert any((tmp_path / "r" / "wandb").glob(f"offline-run-*-{run_id}"))

    more = [*overrides, "trainer.total_steps=3"]
    train(
        load_recipe("grpo", more),
        RunOptions(run_dir=tmp_path / "r", resume=True),
        say=said.append,
        overrides=more,
    )
    assert json.loads((tmp_path / "r" / "meta.json").read_text())["wandb_run_id"] == run_id


@pytest.mark.parametrize(
    ("recipe", "variant"),
    [
        ("opd", ["distillation.loss=forward_kl_topk", "distillation.use_policy_gradient=false"]),
        ("opd", ["distillation.use_task_rewards=true", "distillation.coef=0.5"]),
        (
            "grpo",
            ["actor.ppo_epochs=2", "rollout.importance_sampling.level=token", "actor.entropy_coef=0.01"],
        ),
        ("rloo", ["algorithm.kl_in_reward.controller=adaptive", "actor.policy_loss=cispo"]),
        ("dapo", ["algorithm.group_filter.metric=score", "actor.loss_agg_mode=seq-mean-token-mean"]),
    ],
)
def test_component_variants_train(recipe, variant, tmp_path):
    overrides = [*small(recipe, steps=2), *variant]
    run = train(load_recipe(recipe, overrides), RunOptions(run_dir=tmp_path / "r"), overrides=overrides)
    assert run.status == "finished"
    last = records(tmp_path / "r")[-1]
    assert not any(math.isnan(v) for v in last.values()), last


def test_profile_records_the_loop_phases_of_steps_2_to_4(tmp_path):
    run_dir = tmp_path / "run"
    _run_cli("train", "grpo", *small("grpo", steps=5), "--run-dir", str(run_dir), "--profile", cwd=tmp_path)
    events = json.loads((run_dir / "profile" / "trace.json").read_text())["traceEvents"]
    phases = [e["name"] for e in events if e.get("name") in ("step", "gen", "update_actor")]
    assert sorted(phases) == sorted(["step", "gen", "update_actor"] * 3)
    assert "aten::mm" in (run_dir / "profile" / "ops.txt").read_text()
    assert len(records(run_dir)) == 6  # the run itself is complete: step 0 (evaluation) and 1-5


def test_token_budget_micro_batches_train_like_sample_micro_batches(tmp_path):
    """The same step with micro-batches cut by tokens: the same gradients, so the same metrics."""
    by_rows = small("grpo", steps=2)
    by_tokens = [*by_rows, "actor.micro_batch_tokens=80"]  # 72 is the longest possible row; real rows are ~15
    for name, overrides in (("rows", by_rows), ("tokens", by_tokens)):
        train(load_recipe("grpo", overrides), RunOptions(run_dir=tmp_path / name), overrides=overrides)
    rows, tokens = (without_clock(records(tmp_path / name)) for name in ("rows", "tokens"))
    assert [r.keys() for r in rows] == [t.keys() for t in tokens]
    for row, token in zip(rows, tokens):
        for key, value in row.items():
            assert token[key] == pytest.approx(value, rel=1e-4, abs=1e-6), key
