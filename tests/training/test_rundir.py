import json

import pytest

from rlrun.errors import RecipeError
from rlrun.training.rundir import RunDir, git_state, package_versions


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
