import json
from types import SimpleNamespace

import pytest
import torch
from accelerate.utils import DistributedType

from rlrun.errors import RecipeError
from rlrun.training.rundir import RunDir, git_state, package_versions, run_setup


def test_new_run_dir_is_created(tmp_path):
    run = RunDir.open(tmp_path / "runs" / "a")
    assert run.path.is_dir()
    run.write_recipe("extends: grpo\n", {"a": 1}, ["x=1"])
    run.write_meta({"status": "running"})
    assert json.loads((run.path / "overrides.json").read_text()) == ["x=1"]
    assert run.update_meta(status="finished")["status"] == "finished"


def test_existing_run_dir_is_refused_without_resume_or_overwrite(tmp_path):
    RunDir.open(tmp_path / "a").write_meta({"status": "finished"})
    with pytest.raises(RecipeError, match="already exists.*--resume.*--overwrite"):
        RunDir.open(tmp_path / "a")


def test_overwrite_replaces_a_run_but_never_a_users_directory(tmp_path):
    run = RunDir.open(tmp_path / "a")
    run.write_meta({"status": "failed"})
    (run.path / "metrics.jsonl").write_text("{}\n")
    RunDir.open(tmp_path / "a", overwrite=True)
    assert not (tmp_path / "a" / "metrics.jsonl").exists()

    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "thesis.tex").write_text("precious")
    with pytest.raises(RecipeError, match="not an rlrun run"):
        RunDir.open(mine, overwrite=True)
    assert (mine / "thesis.tex").read_text() == "precious"


def test_resume_needs_a_run(tmp_path):
    with pytest.raises(RecipeError, match="no run to resume"):
        RunDir.open(tmp_path / "nothing", resume=True)
    RunDir.open(tmp_path / "a").write_meta({"status": "interrupted"})
    assert RunDir.open(tmp_path / "a", resume=True).read_meta()["status"] == "interrupted"


def test_empty_existing_directory_is_fine(tmp_path):
    (tmp_path / "empty").mkdir()
    assert RunDir.open(tmp_path / "empty").path.is_dir()


def test_provenance_helpers():
    sha, _ = git_state()
    assert sha is None or len(sha) == 40
    assert {"python", "torch", "transformers"} <= set(package_versions())


def _accelerator(processes: int, distributed: str, **state: object) -> SimpleNamespace:
    return SimpleNamespace(
        num_processes=processes,
        distributed_type=DistributedType(distributed),
        state=SimpleNamespace(**state),
        device=torch.device("cpu"),
        mixed_precision="bf16",
    )


@pytest.mark.parametrize(
    ("accelerator", "local", "expected"),
    [
        (_accelerator(1, "NO"), None, (1, 1, "none")),
        (_accelerator(4, "MULTI_CPU"), "4", (4, 1, "ddp")),
        (_accelerator(16, "FSDP", fsdp_plugin=SimpleNamespace(fsdp_version=2)), "8", (16, 2, "fsdp2")),
        (
            _accelerator(8, "DEEPSPEED", deepspeed_plugin=SimpleNamespace(zero_stage=3)),
            "8",
            (8, 1, "deepspeed_zero3"),
        ),
    ],
)
def test_run_setup_records_processes_machines_strategy_device_and_dtype(
    monkeypatch, accelerator, local, expected
):
    if local is None:
        monkeypatch.delenv("LOCAL_WORLD_SIZE", raising=False)
    else:
        monkeypatch.setenv("LOCAL_WORLD_SIZE", local)
    setup = run_setup(accelerator, "bfloat16")
    assert (setup["processes"], setup["machines"], setup["strategy"]) == expected
    assert (setup["device"], setup["dtype"], setup["mixed_precision"]) == ("cpu", "bfloat16", "bf16")
    assert setup["device_name"]  # the CPU model here
