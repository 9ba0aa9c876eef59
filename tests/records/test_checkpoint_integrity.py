"""Every checkpoint is whole and verified, or not used: each kind of damage is named, a kill
during save or prune leaves no half checkpoint under a checkpoint's name, and only the legacy
format (before checksums.json) is accepted without checksums. Every command that reads a
checkpoint verifies it: `resume` and `eval RUN_DIR` name a damaged checkpoint and fall back to
the newest intact one, `eval CHECKPOINT` and `export` refuse it (exit 2) naming the file and the
intact one to use. A finished run's records are never overwritten, and a resume with nothing to
resume from asks for --restart first."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from rlrun.cli import app
from rlrun.errors import RecipeError
from rlrun.recipes import load_recipe
from rlrun.records import checkpoint as ckpt
from rlrun.training.run import RunOptions, train


def _state(step: int) -> dict:
    return {"step": step, "data": {"position": 7}}


def _save(root: Path, model, *steps: int, keep_last: int = 0) -> list[Path]:
    return [
        ckpt.save_checkpoint(root, step, model=model, tokenizer=None, state=_state(step), keep_last=keep_last)
        for step in steps
    ]


def _flip_bytes(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[-8:] = bytes(b ^ 0xFF for b in data[-8:])  # same size, a valid header: only a checksum tells
    path.write_bytes(bytes(data))


# Each damage: what it does to a checkpoint, and the file the report must name.
DAMAGE = {
    "missing file": (lambda c: (c / "config.json").unlink(), "config.json"),
    "truncated safetensors": (
        lambda c: (c / "model.safetensors").write_bytes((c / "model.safetensors").read_bytes()[:500]),
        "model.safetensors",
    ),
    "flipped bytes": (lambda c: _flip_bytes(c / "model.safetensors"), "model.safetensors"),
    "missing checksums.json": (lambda c: (c / ckpt.CHECKSUMS).unlink(), ckpt.CHECKSUMS),
    "checksums.json deleted and bytes flipped": (
        lambda c: ((c / ckpt.CHECKSUMS).unlink(), _flip_bytes(c / "model.safetensors")),
        ckpt.CHECKSUMS,
    ),
    "garbled checksums.json": (lambda c: (c / ckpt.CHECKSUMS).write_text("{"), ckpt.CHECKSUMS),
    "missing trainer_state.pt": (lambda c: (c / ckpt.TRAINER_STATE).unlink(), ckpt.TRAINER_STATE),
    "torn by an old prune": (  # what a kill -9 during an in-place delete left: two small files
        lambda c: [p.unlink() for p in c.iterdir() if p.name != "config.json"],
        ckpt.CHECKSUMS,
    ),
}


@pytest.mark.parametrize("kind", DAMAGE)
def test_every_kind_of_damage_is_named_and_the_newest_intact_checkpoint_is_used(tmp_path, random_lm, kind):
    damage, file = DAMAGE[kind]
    _, newest = _save(tmp_path, random_lm, 1, 2)
    damage(newest)
    found = ckpt.checkpoint_damage(newest)
    assert found and any(problem.startswith(str(newest / file)) for problem in found), found
    warnings: list[str] = []
    assert ckpt.latest_intact_checkpoint(tmp_path, warn=warnings.append) == tmp_path / "step_000001"
    assert len(warnings) == 1 and "step_000002 is damaged and skipped" in warnings[0] and file in warnings[0]
    with pytest.raises(RecipeError) as error:  # export / eval of the damaged one itself
        ckpt.check_checkpoint(newest, warn=warnings.append)
    assert any(issue.file == str(newest / file) for issue in error.value.issues)
    assert all(str(tmp_path / "step_000001") in issue.fix for issue in error.value.issues)


def test_a_torn_older_and_a_damaged_newer_checkpoint_are_refused_naming_both(tmp_path, random_lm):
    older, newer = _save(tmp_path, random_lm, 1, 2)
    DAMAGE["torn by an old prune"][0](older)
    _flip_bytes(newer / "model.safetensors")
    with pytest.raises(RecipeError) as error:
        ckpt.latest_intact_checkpoint(tmp_path, warn=lambda text: None)
    files = {issue.file for issue in error.value.issues}
    assert str(newer / "model.safetensors") in files and str(older / ckpt.CHECKSUMS) in files
    assert all("--restart" in issue.fix for issue in error.value.issues)


def test_the_legacy_format_without_checksums_is_used_and_said_to_be_unverified(tmp_path, random_lm):
    """rlrun before checksums.json (commit 6079c96) wrote no format mark into trainer_state.pt."""
    (legacy,) = _save(tmp_path, random_lm, 1)
    (legacy / ckpt.CHECKSUMS).unlink()
    state = torch.load(legacy / ckpt.TRAINER_STATE, weights_only=True)
    del state[ckpt.FORMAT_KEY]
    torch.save(state, legacy / ckpt.TRAINER_STATE)
    assert ckpt.checkpoint_damage(legacy) == []
    warnings: list[str] = []
    assert ckpt.latest_intact_checkpoint(tmp_path, warn=warnings.append) == legacy
    assert warnings == [
        f"Checkpoint {legacy} predates checksums.json (an older rlrun): its files cannot be verified."
    ]


def test_an_unreadable_trainer_state_is_named_and_never_loaded_unsafely(tmp_path, random_lm):
    (path,) = _save(tmp_path, random_lm, 1)
    torch.save({"step": 1, "bad": torch.nn.Linear(1, 1)}, path / ckpt.TRAINER_STATE)  # a pickled module
    with pytest.raises(RecipeError) as error:
        ckpt.load_trainer_state(path)
    (issue,) = error.value.issues
    assert issue.file == str(path / ckpt.TRAINER_STATE) and issue.code == "checkpoint-unreadable"
    assert "weights_only=False" not in issue.format() and "never unpickles" in issue.message


# A process that saves checkpoints and is killed (SIGKILL, no clean-up) at a chosen moment.
KILLED = """
import os, shutil, signal, sys
from pathlib import Path
import torch
from transformers import Qwen2Config, Qwen2ForCausalLM
from rlrun.records import checkpoint as ckpt

root, moment = Path(sys.argv[1]), sys.argv[2]
torch.manual_seed(0)
model = Qwen2ForCausalLM(Qwen2Config(vocab_size=24, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                     num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64))
save = lambda step, **kw: ckpt.save_checkpoint(root, step, model=model, tokenizer=None, state={"step": step}, **kw)
save(1)

def die():
    os.kill(os.getpid(), signal.SIGKILL)

if moment == "save":  # the weights are written, the trainer state is not
    torch.save = lambda *a, **k: die()
    save(2)
rmtree = shutil.rmtree
def delete_half_then_die(path, *a, **k):  # a delete cut short: config.json left, as seen in the field
    path = Path(path)
    if path.is_dir() and (path / "config.json").is_file():
        for p in path.iterdir():
            if p.name != "config.json":
                p.unlink()
        die()
    return rmtree(path, *a, **k)
shutil.rmtree = delete_half_then_die
if moment == "prune":
    save(2, keep_last=1)
if moment == "re-save":
    save(1)
"""


@pytest.mark.slow
@pytest.mark.parametrize("moment", ["save", "prune", "re-save"])
def test_a_kill_during_save_or_prune_leaves_only_whole_checkpoints(tmp_path, moment):
    root = tmp_path / "checkpoints"
    result = subprocess.run(
        [sys.executable, "-c", KILLED, str(root), moment],
        check=False,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == -signal.SIGKILL, result.stderr[-2000:]
    listed = ckpt.list_checkpoints(root)
    assert listed and all(ckpt.checkpoint_damage(path) == [] for _, path in listed), listed
    assert all((path / "model.safetensors").is_file() for _, path in listed)
    expected = {"save": [1], "prune": [2], "re-save": [1]}[moment]
    assert [step for step, _ in listed] == expected
    ckpt.remove_partial_checkpoints(root)
    assert sorted(p.name for p in root.iterdir()) == [f"step_{step:06d}" for step in expected]


def test_a_save_that_fails_removes_its_partial_folder_and_keeps_the_last_good_one(
    tmp_path, random_lm, monkeypatch
):
    _save(tmp_path, random_lm, 1)

    def full_disk(*args, **kwargs):
        raise RuntimeError(
            "[enforce fail at inline_container.cc:626] . unexpected pos: No space left on device"
        )

    monkeypatch.setattr(torch, "save", full_disk)
    with pytest.raises(ckpt.DiskFullError) as error:
        _save(tmp_path, random_lm, 2)
    message = str(error.value)
    assert str(tmp_path) in message and "MiB free" in message and str(tmp_path / "step_000001") in message
    assert sorted(p.name for p in tmp_path.iterdir()) == ["step_000001"]  # no .tmp-step_000002 left


def test_checksums_list_every_file_and_the_trainer_state_carries_the_format(tmp_path, random_lm):
    (path,) = _save(tmp_path, random_lm, 1)
    listed = json.loads((path / ckpt.CHECKSUMS).read_text())
    assert sorted(listed) == sorted(p.name for p in path.iterdir() if p.name != ckpt.CHECKSUMS)
    assert ckpt.load_trainer_state(path)[ckpt.FORMAT_KEY] == ckpt.FORMAT
    assert os.listdir(tmp_path) == ["step_000001"]


# --- the commands ------------------------------------------------------------------------

runner = CliRunner()

TINY_RUN = [
    "trainer.total_steps=3",
    "trainer.prompts_per_step=4",
    "trainer.eval.every_steps=0",
    "trainer.eval.prompts=4",
    "trainer.checkpoint.every_steps=1",
    "trainer.checkpoint.keep_last=10",
    "actor.mini_batch_samples=32",
    "actor.micro_batch_samples=32",
    "logging.console.enabled=false",
]


@pytest.fixture(scope="module")
def finished(tmp_path_factory) -> Path:
    """A finished 3-step run with a checkpoint at every step (copied by each test)."""
    run_dir = tmp_path_factory.mktemp("finished") / "run"
    torch.set_num_threads(1)
    run = train(load_recipe("grpo", TINY_RUN), RunOptions(run_dir=run_dir), overrides=TINY_RUN)
    assert run.status == "finished"
    return run_dir


@pytest.fixture
def run(finished, tmp_path) -> Path:
    copy = tmp_path / "run"
    shutil.copytree(finished, copy)
    return copy


def flat(text: str) -> str:
    """Output without line breaks and panel borders, so a wrapped path reads whole."""
    return re.sub(r"[\s│╭╮╰╯─]", "", text)


def invoke(*args: str):
    result = runner.invoke(app, [str(a) for a in args])
    assert not isinstance(result.exception, Exception) or isinstance(result.exception, SystemExit), (
        result.output
    )
    return result


def step(run: Path, number: int) -> Path:
    return run / "checkpoints" / f"step_{number:06d}"


DAMAGED = [
    "missing file",
    "truncated safetensors",
    "flipped bytes",
    "missing checksums.json",
    "checksums.json deleted and bytes flipped",
]


@pytest.mark.parametrize("kind", DAMAGED)
@pytest.mark.parametrize("command", ["resume", "eval RUN_DIR", "eval CHECKPOINT", "export"])
@pytest.mark.slow
def test_every_command_that_reads_a_checkpoint_names_the_damage(run, kind, command):
    damage, file = DAMAGE[kind]
    damage(step(run, 3))
    named = flat(str(step(run, 3) / file))
    if command == "resume":
        result = invoke("resume", run, "trainer.total_steps=4")
        assert result.exit_code == 0, result.output
        assert named in flat(result.output) and "Resuming" in result.output
        assert "fromstep_000002" in flat(result.output)
        rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
        assert [r["step"] for r in rows] == [0, 1, 2, 3, 4]
    elif command == "eval RUN_DIR":
        result = invoke("eval", run, "--prompts", "2", "--json")
        assert result.exit_code == 0, result.output
        assert named in flat(result.stderr)
        assert json.loads(result.stdout)["model"] == str(step(run, 2))
    else:
        out = run.parent / "exported"
        args = (
            ["eval", step(run, 3), "--prompts", "2"]
            if command == "eval CHECKPOINT"
            else ["export", step(run, 3), out]
        )
        result = invoke(*args)
        assert result.exit_code == 2, result.output
        assert named in flat(result.output) and flat(str(step(run, 2))) in flat(result.output)
        assert not out.exists()


@pytest.mark.slow
def test_a_torn_older_and_a_damaged_newer_checkpoint_refuse_until_restart(run):
    for number in (1, 2):
        DAMAGE["torn by an old prune"][0](step(run, number))
    _flip_bytes(step(run, 3) / "model.safetensors")
    metrics = (run / "metrics.jsonl").read_bytes()
    outputs = []
    for args in (["resume", run, "trainer.total_steps=4"], ["eval", run, "--prompts", "2"]):
        result = invoke(*args)
        assert result.exit_code == 2, result.output
        text = flat(result.output)
        assert flat(str(step(run, 3) / "model.safetensors")) in text
        assert flat(str(step(run, 1) / ckpt.CHECKSUMS)) in text
        outputs.append(result.output)
    assert "--restart" in outputs[0]
    assert (run / "metrics.jsonl").read_bytes() == metrics
    result = invoke("resume", run, "trainer.total_steps=4", "--restart")
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [0, 1, 2, 3, 4]
    assert [s for s, _ in ckpt.list_checkpoints(run / "checkpoints")] == [1, 2, 3, 4]  # none of the damaged


@pytest.mark.slow
def test_resuming_a_finished_run_changes_nothing(run):
    before = {p: p.read_bytes() for p in run.rglob("*") if p.is_file()}
    result = invoke("resume", run)
    assert result.exit_code == 0, result.output
    assert "Nothing to resume" in result.output and "trainer.total_steps=6" in flat(result.output)
    shutil.rmtree(run / "checkpoints")  # even with its checkpoints deleted
    result = invoke("train", "--resume", run)
    assert result.exit_code == 0 and "Nothing to resume" in result.output
    assert {p: p.read_bytes() for p in run.rglob("*") if p.is_file()} == {
        p: b for p, b in before.items() if "checkpoints" not in p.parts
    }


@pytest.mark.slow
def test_a_resume_without_a_checkpoint_asks_for_restart_before_touching_the_records(run):
    shutil.rmtree(run / "checkpoints")
    metrics = (run / "metrics.jsonl").read_bytes()
    result = invoke("resume", run, "trainer.total_steps=4")
    assert result.exit_code == 2, result.output
    assert "no checkpoint to resume from" in result.output and "--restart" in result.output
    assert "`--restart`:" not in flat(result.output)  # named as the fix, not as a flag given
    assert (run / "metrics.jsonl").read_bytes() == metrics
    assert json.loads((run / "meta.json").read_text())["status"] == "finished"


@pytest.mark.slow
def test_garbage_meta_json_on_resume_is_named(run):
    (run / "meta.json").write_bytes(b"\xff\xfe garbage")
    result = invoke("resume", run, "trainer.total_steps=4")
    assert result.exit_code == 2, result.output
    assert flat(str(run / "meta.json")) in flat(result.output) and "cannotberead" in flat(result.output)


@pytest.mark.slow
def test_resume_with_an_unreadable_trainer_state_exits_2_naming_it(run):
    checkpoint = step(run, 3)
    torch.save({"step": 3, "module": torch.nn.Linear(1, 1)}, checkpoint / ckpt.TRAINER_STATE)
    # its checksums updated too: the file is what was saved, it just is not a trainer state
    (checkpoint / ckpt.CHECKSUMS).write_text(json.dumps(ckpt._checksums(checkpoint)))
    result = invoke("resume", run, "trainer.total_steps=4")
    assert result.exit_code == 2, result.output
    assert flat(str(checkpoint / ckpt.TRAINER_STATE)) in flat(result.output)
    assert "weights_only=False" not in result.output and "Traceback" not in result.output


@pytest.mark.slow
def test_eval_of_a_checkpoint_without_its_trainer_state_refuses(run):
    (step(run, 3) / ckpt.TRAINER_STATE).unlink()
    result = invoke("eval", step(run, 3), "--prompts", "2")
    assert result.exit_code == 2, result.output
    assert flat(str(step(run, 3) / ckpt.TRAINER_STATE)) in flat(result.output)


@pytest.mark.slow
def test_resume_removes_what_interrupted_writes_left(run):
    (run / ".meta.json.abc123").write_text("")
    (run / "checkpoints" / ".tmp-step_000004").mkdir()
    (run / "checkpoints" / ".trash-step_000001").mkdir()
    result = invoke("resume", run, "trainer.total_steps=4")
    assert result.exit_code == 0, result.output
    assert not list(run.glob(".meta.json.*"))
    assert sorted(p.name for p in (run / "checkpoints").iterdir()) == [f"step_00000{n}" for n in (1, 2, 3, 4)]
