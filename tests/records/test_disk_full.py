"""A full disk ends a run with the path and the free space named, `failed` recorded in meta.json
(even when meta.json's own atomic write no longer fits), no temporary files left behind, and the
last good checkpoint kept. The disk fills by fault injection: writes raise ENOSPC."""

from __future__ import annotations

import errno
import json
import os
import re
import tempfile

import pytest
import torch
from transformers import PreTrainedTokenizerBase
from typer.testing import CliRunner

from rlrun.cli import app
from rlrun.cli._app import RUN_FAILED
from rlrun.records import rundir
from rlrun.records.checkpoint import TRAINER_STATE
from rlrun.records.sinks import JsonlSink

pytestmark = pytest.mark.slow
runner = CliRunner()

TINY_RUN = [
    "trainer.total_steps=3",
    "trainer.prompts_per_step=4",
    "trainer.eval.every_steps=0",
    "trainer.eval.prompts=4",
    "trainer.checkpoint.every_steps=1",
    "actor.mini_batch_samples=32",
    "actor.micro_batch_samples=32",
    "logging.console.enabled=false",
]


def no_space(*args, **kwargs):
    raise OSError(errno.ENOSPC, "No space left on device")


def trainer_state_on_a_full_device(monkeypatch) -> None:
    """Step 2's checkpoint writes its trainer state to /dev/full, where every write fails with
    ENOSPC as on a full disk: torch.save's own writer then says only "unexpected pos N vs M"."""
    real, saves = PreTrainedTokenizerBase.save_pretrained, []

    def save_then_fill(self, folder, *args, **kwargs):
        saves.append(folder)
        if len(saves) == 2:
            os.symlink("/dev/full", os.path.join(folder, TRAINER_STATE))
        return real(self, folder, *args, **kwargs)

    monkeypatch.setattr(PreTrainedTokenizerBase, "save_pretrained", save_then_fill)


@pytest.mark.parametrize(
    "full_at",
    ["checkpoint", "checkpoint, then meta.json", "metrics.jsonl", "trainer state, on a full device"],
)
def test_a_full_disk_fails_the_run_cleanly_and_keeps_the_last_checkpoint(tmp_path, monkeypatch, full_at):
    run_dir = tmp_path / "run"
    real_save, real_log, saves, logs = torch.save, JsonlSink.log, [], []

    def save_until_full(obj, path, *args, **kwargs):
        saves.append(path)
        if len(saves) == 2:  # step 2's checkpoint: its weights are written, its trainer state is not
            if full_at == "checkpoint, then meta.json":
                monkeypatch.setattr(tempfile, "mkstemp", no_space)
            raise RuntimeError(
                "[enforce fail at inline_container.cc:664] . unexpected pos: No space left on device"
            )
        return real_save(obj, path, *args, **kwargs)

    def log_until_full(self, step, metrics):
        logs.append(step)
        if step == 2:
            no_space()
        return real_log(self, step, metrics)

    if full_at == "metrics.jsonl":
        monkeypatch.setattr(JsonlSink, "log", log_until_full)
    elif full_at == "trainer state, on a full device":
        trainer_state_on_a_full_device(monkeypatch)
    else:
        monkeypatch.setattr(torch, "save", save_until_full)
    torch.set_num_threads(1)
    result = runner.invoke(app, ["train", "grpo", *TINY_RUN, "--run-dir", str(run_dir)])
    text = re.sub(r"\s+", "", result.output)
    assert result.exit_code == RUN_FAILED, result.output
    assert "Traceback" not in result.output
    assert "nospaceleftonthediskholding" in text and "MiBfree" in text
    named = run_dir if full_at == "metrics.jsonl" else run_dir / "checkpoints"
    assert re.sub(r"\s+", "", str(named)) in text
    meta = json.loads((run_dir / "meta.json").read_text())
    assert meta["status"] == "failed" and meta["end_time"]
    assert sorted(p.name for p in (run_dir / "checkpoints").iterdir()) == ["step_000001"]
    assert not [p.name for p in run_dir.iterdir() if p.name.startswith(f".{rundir.META}.")]
