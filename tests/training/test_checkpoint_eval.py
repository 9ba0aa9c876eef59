"""`rlrun eval`: a checkpoint reproduces its run's own `val/*` figures at that step (full and
LoRA), a plain model evaluates with a recipe's rewards, and mistakes exit with code 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rlrun.cli import app
from rlrun.recipes import load_recipe
from rlrun.training.run import RunOptions, train

runner = CliRunner()

# Two steps, evaluated and checkpointed at step 2; sampled k=2 evaluation, so the seeded sampling
# path is compared too, not only greedy decoding. A large constant learning rate moves the
# weights far enough in two steps that the base model's figures would not pass for the checkpoint's.
TINY_RUN = [
    "actor.optimizer.lr=0.01",
    "actor.lr_scheduler={name: constant}",
    "trainer.total_steps=2",
    "trainer.prompts_per_step=4",
    "trainer.eval.every_steps=2",
    "trainer.eval.prompts=24",
    "trainer.eval.k=2",
    "trainer.eval.greedy=false",
    "trainer.checkpoint.every_steps=2",
    "actor.mini_batch_samples=32",
    "actor.micro_batch_samples=32",
    "logging.console.enabled=false",
]
LORA = "model.lora={r: 4, alpha: 8, target_modules: [q_proj, v_proj]}"


def val_at(run_dir: Path, step: int) -> dict[str, float]:
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    (row,) = [r for r in rows if r["step"] == step and "val/accuracy" in r]
    return {k: v for k, v in row.items() if k.startswith("val/")}


def eval_json(*args: str) -> dict:
    result = runner.invoke(app, ["eval", *args, "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


@pytest.mark.slow
@pytest.mark.parametrize("extra", [[], [LORA]], ids=["full", "lora"])
def test_eval_of_a_checkpoint_equals_the_runs_own_validation(tmp_path, extra):
    run_dir = tmp_path / "run"
    train(load_recipe("grpo", TINY_RUN + extra), RunOptions(run_dir=run_dir), say=lambda _: None)
    checkpoint = run_dir / "checkpoints" / "step_000002"
    report = eval_json(str(checkpoint), "--out", str(tmp_path / "eval.json"))
    expected = val_at(run_dir, 2)
    assert report["metrics"] == expected
    assert val_at(run_dir, 0) != expected  # the checkpoint's weights, not the starting model's
    assert {"val/pass@2", "val/maj@2", "val/response_length/mean", "val/reward/exact_match/mean"} <= set(
        expected
    )
    assert report["k"] == 2 and report["num_prompts"] == 24 and not report["greedy"]
    assert json.loads((tmp_path / "eval.json").read_text()) == report


@pytest.mark.slow
def test_eval_of_a_model_on_a_file_of_prompts_with_k_samples_and_rewards_named_on_the_command_line(tmp_path):
    data = tmp_path / "sums.jsonl"
    data.write_text(
        "".join(json.dumps({"prompt": f"{a}+{a}=", "answer": str(2 * a)}) + "\n" for a in range(10, 16))
    )
    # as in docs/rewards-and-evaluation.md: `rlrun eval rlrun:tiny-base --data my_prompts.jsonl -k 8 --out eval.json`
    report = eval_json(
        "rlrun:tiny-base", "--data", str(data), "-k", "8", "--out", str(tmp_path / "eval.json")
    )
    metrics = report["metrics"]
    assert (report["num_prompts"], report["k"], report["greedy"], report["data"]) == (6, 8, False, str(data))
    # What holds for any samples: the majority's answer is one of the samples, and some sample
    # is right wherever any is. mean@8 may exceed maj@8 (3 right of 8 beside 5 equal wrong ones).
    assert metrics["val/maj@8"] <= metrics["val/pass@8"] and metrics["val/mean@8"] <= metrics["val/pass@8"]
    assert 0 < metrics["val/mean@8"] < metrics["val/pass@8"]  # sampled: some prompts right only sometimes
    assert json.loads((tmp_path / "eval.json").read_text()) == report
    # the page's other rewards: the rule, and the reward model beside it
    rule, learned = "rlrun:exact_match", "{model: rlrun:tiny-reward, score: probability}"
    metrics = eval_json("rlrun:tiny-teacher", "--data", str(data), "--reward", rule, "--reward", learned)[
        "metrics"
    ]
    assert metrics["val/accuracy"] == metrics["val/reward/exact_match/mean"]  # greedy: acc is the rule's
    assert 0 < metrics["val/reward/tiny-reward/mean"] < 1  # a probability
    assert metrics["val/reward/score/mean"] == pytest.approx(
        metrics["val/reward/exact_match/mean"] + metrics["val/reward/tiny-reward/mean"]
    )
    assert 1 <= metrics["val/response_length/mean"] <= metrics["val/response_length/max"] <= 8


def test_eval_mistakes_exit_2_without_a_traceback(tmp_path):
    existing = tmp_path / "taken.json"
    existing.write_text("{}")
    for args, says in [
        (["rlrun:no-such-model"], "unknown embedded model"),
        ([str(tmp_path / "missing-dir")], "the model cannot be loaded: there is no such folder"),
        (["rlrun:tiny-base", "--reward", "rlrun:exact_mtch"], "unknown reward function"),
        (["rlrun:tiny-base", "--out", str(existing)], "exists"),
        (["rlrun:tiny-base", "--data", str(tmp_path / "none.jsonl")], "none.jsonl"),
    ]:
        result = runner.invoke(app, ["eval", *args])
        assert result.exit_code == 2, (args, result.output)
        assert says in " ".join(result.output.split()), (args, result.output)
        assert "Traceback" not in result.output
    assert existing.read_text() == "{}"
