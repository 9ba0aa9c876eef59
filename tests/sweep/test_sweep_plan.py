"""The plan of a sweep: every run validated before anything starts, run directories and their
states, the manifest and the time estimate."""

from __future__ import annotations

import fcntl
import json

import pytest
import yaml

from rlrun.errors import RecipeError
from rlrun.records.record import RunMeta
from rlrun.records.rundir import RunDir
from rlrun.sweep.plan import plan_sweep
from rlrun.sweep.spec import read_sweep


@pytest.fixture
def two_by_two(write_sweep, tmp_path):
    return write_sweep(
        {
            "name": "s",
            "recipe": "grpo",
            "overrides": {"trainer.output_dir": str(tmp_path / "runs"), "trainer.total_steps": 10},
            "grid": {"recipe": ["grpo", "dapo"]},
            "seeds": [0, 1],
        }
    )


def fake_run(plan_run, status: str, steps: int, seconds_per_step: float = 2.0) -> None:
    """A run directory as `rlrun train` leaves it, `steps` steps in."""
    plan_run.dir.mkdir(parents=True)
    (plan_run.dir / "resolved.yaml").write_text(yaml.safe_dump(plan_run.loaded.data, sort_keys=False))
    RunDir(plan_run.dir).write_meta(RunMeta(name=plan_run.dir.name, status=status, total_steps=10))
    rows = [{"step": s, "wall_time_s": seconds_per_step * s} for s in range(1, steps + 1)]
    (plan_run.dir / "metrics.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))


def test_runs_are_named_and_placed_deterministically(two_by_two, tmp_path):
    plan = plan_sweep(read_sweep(two_by_two))
    assert plan.dir == tmp_path / "runs" / "s"
    assert [run.dir.relative_to(plan.dir).as_posix() for run in plan.runs] == [
        "recipe=grpo/seed-0",
        "recipe=grpo/seed-1",
        "recipe=dapo/seed-0",
        "recipe=dapo/seed-1",
    ]
    assert [run.loaded.recipe.trainer.seed for run in plan.runs] == [0, 1, 0, 1]
    assert plan.runs[2].loaded.recipe.algorithm.group_filter.enabled  # dapo's own setting
    assert {run.state for run in plan.runs} == {"new"}
    assert plan.runs[0].samples == 10 * 16 * 8  # steps x prompts x samples per prompt (grpo's defaults)
    assert plan.runs[0].log_file == plan.dir / "recipe=grpo" / "seed-0.log"
    assert plan.runs[0].argv()[:2] == ["train", "grpo"]
    assert plan.estimated_seconds(concurrent=2) is None  # nothing finished to measure a pace on


def test_every_run_is_validated_first_and_errors_name_the_points(write_sweep, tmp_path):
    path = write_sweep(
        "recipe: grpo\n"
        "overrides:\n"
        f"  trainer.output_dir: {tmp_path / 'runs'}\n"
        "grid:\n"
        "  actor.optimizer.lr: [1.0e-4, -1]\n"
        "  rollout.n: [1, 4]\n"
        "seeds: [0, 1]\n"
    )
    with pytest.raises(RecipeError) as caught:
        plan_sweep(read_sweep(path))
    texts = [issue.format() for issue in caught.value.issues]
    lr = next(issue for issue in caught.value.issues if issue.key == "actor.optimizer.lr")
    assert (lr.file, lr.line) == (str(path), 5)
    assert lr.message.startswith(
        "sweep point `actor.optimizer.lr=-1,rollout.n=1` (every seed), point `actor.optimizer.lr=-1,rollout.n=4`"
    )
    assert any("rollout.n=1" in text and "line 6" in text for text in texts)  # grpo needs n >= 2
    assert not (tmp_path / "runs").exists()  # nothing started


def test_a_recipe_beside_the_sweep_file_and_a_missing_one(write_sweep, tmp_path):
    (tmp_path / "mine.yaml").write_text("extends: grpo\nrollout:\n  n: 16\n")
    plan = plan_sweep(
        read_sweep(write_sweep(f"recipe: mine.yaml\noverrides: {{trainer.output_dir: {tmp_path}}}\n"))
    )
    assert plan.runs[0].loaded.recipe.rollout.n == 16
    assert plan.runs[0].dir == tmp_path / "sweep" / "default" / "seed-0"
    path = write_sweep("recipe: grpo\ngrid:\n  recipe: [grpo, nope.yaml]\n", name="bad.yaml")
    with pytest.raises(RecipeError) as caught:
        plan_sweep(read_sweep(path))
    (issue,) = caught.value.issues
    assert (issue.file, issue.line, issue.key) == (str(path), 3, "recipe")
    assert "point `recipe=nope`" in issue.message and "does not exist" in issue.message


def test_a_recipe_named_with_home_or_a_variable_is_found(write_sweep, tmp_path, monkeypatch):
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "mine.yaml").write_text("extends: grpo\nrollout:\n  n: 16\n")
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("RECIPES", str(tmp_path / "lib"))
    for recipe in ("~/lib/mine.yaml", "${RECIPES}/mine.yaml"):
        sweep = write_sweep(f"recipe: {recipe}\noverrides: {{trainer.output_dir: {tmp_path}}}\n")
        assert plan_sweep(read_sweep(sweep)).runs[0].loaded.recipe.rollout.n == 16


def test_states_resume_skip_and_estimate(two_by_two):
    first = plan_sweep(read_sweep(two_by_two))
    fake_run(first.runs[0], "finished", 10, seconds_per_step=2.0)
    fake_run(first.runs[1], "interrupted", 4)
    fake_run(first.runs[2], "running", 3)
    with open(first.runs[2].lock_file, "w") as held:  # another process is training it
        fcntl.flock(held, fcntl.LOCK_EX)
        plan = plan_sweep(read_sweep(two_by_two))
    assert [run.state for run in plan.runs] == ["finished", "resume", "running", "new"]
    assert [run.steps_done for run in plan.runs] == [10, 4, 3, 0]
    assert [run.name for run in plan.to_do()] == ["recipe=grpo/seed-1", "recipe=dapo/seed-1"]
    assert plan.runs[1].argv() == ["resume", str(plan.runs[1].dir.resolve()), "--restart"]
    # 2 s a step; (10 - 4) + (10 - 0) steps left, two at once
    assert plan.estimated_seconds(concurrent=2) == pytest.approx(2.0 * 16 / 2)
    assert plan.estimated_seconds(concurrent=1) == pytest.approx(2.0 * 16)


def test_a_run_directory_of_something_else_is_never_touched(two_by_two):
    first = plan_sweep(read_sweep(two_by_two))
    fake_run(first.runs[0], "finished", 10)
    data = yaml.safe_load((first.runs[0].dir / "resolved.yaml").read_text())
    data["actor"]["optimizer"]["lr"] = 0.5  # the sweep file changed since this run started
    (first.runs[0].dir / "resolved.yaml").write_text(yaml.safe_dump(data))
    first.runs[3].dir.mkdir(parents=True)
    (first.runs[3].dir / "notes.txt").write_text("mine")
    with pytest.raises(RecipeError) as caught:
        plan_sweep(read_sweep(two_by_two))
    messages = sorted(issue.message for issue in caught.value.issues)
    assert "run `recipe=dapo/seed-1`: the run's directory exists but holds no rlrun run" in messages[0]
    assert "run `recipe=grpo/seed-0`: the run's directory holds a run of another recipe" in messages[1]
    assert "actor.optimizer.lr" in messages[1]


def test_a_run_being_started_elsewhere_is_running_before_its_meta_json_exists(two_by_two):
    # What `rlrun train` has made of the directory before it writes meta.json: a job that has just
    # started on the cluster, or a run another sweep has just started here.
    first = plan_sweep(read_sweep(two_by_two))
    for run in first.runs[:2]:
        run.dir.mkdir(parents=True)
        (run.dir / ".rlrun-run").write_text("rlrun run directory\n")
    with pytest.raises(RecipeError):  # nobody trains them: directories that hold no run
        plan_sweep(read_sweep(two_by_two))
    seen = []

    def queued(sweep_dir):
        seen.append(sweep_dir)
        return {first.runs[0].name}  # its job is queued or running on the cluster

    with open(first.runs[1].lock_file, "w") as held:  # another sweep's process is starting it
        fcntl.flock(held, fcntl.LOCK_EX)
        plan = plan_sweep(read_sweep(two_by_two), elsewhere=queued)
    assert seen == [first.dir]
    assert [run.state for run in plan.runs] == ["running", "running", "new", "new"]
    assert [run.steps_done for run in plan.runs] == [0, 0, 0, 0]


def test_the_manifest_records_the_plan(two_by_two):
    plan = plan_sweep(read_sweep(two_by_two))
    plan.write_manifest({"kind": "local", "concurrent": 2})
    manifest = json.loads(plan.manifest_file.read_text())
    assert manifest["sweep"] == "s" and manifest["seeds"] == [0, 1]
    assert manifest["executor"] == {"kind": "local", "concurrent": 2}
    run = manifest["runs"][3]
    assert run["name"] == "recipe=dapo/seed-1" and run["dir"] == "recipe=dapo/seed-1"
    assert run["recipe"] == "dapo" and run["overrides"][-1] == "trainer.seed=1"
    assert run["samples"] == plan.runs[3].samples
