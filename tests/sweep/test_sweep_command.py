"""`rlrun sweep` on the command line: located errors with exit code 2, and the dry run's plan."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from rlrun.cli import app
from rlrun.sweep.plan import plan_sweep
from rlrun.sweep.spec import read_sweep

runner = CliRunner()
REPO = Path(__file__).parents[2]


def test_a_bad_sweep_exits_2_with_the_line_and_no_traceback(write_sweep, tmp_path):
    path = write_sweep("recipe: grpo\ngrid:\n  recipe: [grpo, dapo]\n  actor.optimizer.lr: [1.0e-4, 0]\n")
    result = runner.invoke(app, ["sweep", str(path), "--dry-run"])
    assert result.exit_code == 2
    assert result.exception is None or isinstance(result.exception, SystemExit)
    text = "".join(result.output.replace("│", "").split())  # the panel wraps long paths anywhere
    assert f"{path},line4,column32,`actor.optimizer.lr`:sweeppoint" in text
    assert "`recipe=grpo,actor.optimizer.lr=0`(everyseed)" in text and "greaterthan0" in text
    assert not (tmp_path / "runs").exists()


def test_the_dry_run_prints_the_plan_and_starts_nothing(write_sweep, tmp_path):
    path = write_sweep(
        {
            "name": "lr",
            "recipe": "grpo",
            "overrides": {"trainer.output_dir": str(tmp_path / "runs"), "trainer.total_steps": 20},
            "grid": {"actor.optimizer.lr": [1.0e-4, 3.0e-4]},
            "seeds": [0, 1, 2],
        }
    )
    result = runner.invoke(app, ["sweep", str(path), "--dry-run", "--jobs", "2"])
    assert result.exit_code == 0, result.output
    text = "".join(result.output.split())
    assert "2point(s)×3seed(s)=6runs" in text and "6tostart,0toresume,0finished" in text
    assert "actor.optimizer.lr=0.0003/seed-2grpotostart0/202,560" in text  # 20 steps x 16 prompts x 8
    assert "executor:local(concurrent2" in text and "nofinishedruntoestimatethetimefrom" in text
    assert not (tmp_path / "runs").exists()


def _refused(result) -> str:
    assert result.exit_code == 2, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    return " ".join(result.output.split())


@pytest.mark.parametrize(
    "flags", [["--partition", "gpu"], ["--gpus-per-run", "0"], ["--cpus-per-run", "8"], ["--time", "30"]]
)
def test_slurm_options_with_the_local_executor_are_refused_naming_the_option(write_sweep, tmp_path, flags):
    path = write_sweep({"recipe": "grpo", "overrides": {"trainer.output_dir": str(tmp_path / "runs")}})
    text = _refused(runner.invoke(app, ["sweep", str(path), *flags]))
    assert text.startswith(f"error: {flags[0]}: SLURM options, which the local executor does not use")
    assert not (tmp_path / "runs").exists()
    text = _refused(runner.invoke(app, ["sweep", str(path), "--executor", "slurm", "--jobs", "2"]))
    assert text.startswith("error: --jobs: the runs at once on this machine, which the SLURM executor")


def test_a_sweep_name_that_is_no_folder_name_is_refused_in_rlruns_words(write_sweep, tmp_path):
    path = write_sweep("name: ../x\nrecipe: grpo\n")
    text = _refused(runner.invoke(app, ["sweep", str(path), "--dry-run"]))
    text = "".join(text.replace("│", "").split())  # the panel wraps long paths anywhere
    assert f"{path},line1,column1,`name`:thesweep'sname`../x`cannotbeafolder" in text
    assert "shouldmatchpattern" not in text


def test_the_documented_sweep_example_and_file_plan_cleanly(tmp_path, monkeypatch):
    page = (REPO / "docs" / "sweeps.md").read_text()
    example = page[page.index("```yaml\n") + len("```yaml\n") :]
    (tmp_path / "my_sweep.yaml").write_text(example[: example.index("```")])
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, ["sweep", "my_sweep.yaml", "--dry-run"])
    assert result.exit_code == 0, result.output
    assert "8 point(s) × 3 seed(s) = 24 runs" in " ".join(result.output.split())

    monkeypatch.chdir(REPO)  # the page's own command, as written
    result = runner.invoke(app, ["sweep", "sweeps/grpo_vs_dapo.yaml", "--dry-run"])
    assert result.exit_code == 0, result.output
    assert "2 point(s) × 3 seed(s) = 6 runs" in " ".join(result.output.split())


@pytest.mark.parametrize("path", sorted((REPO / "sweeps").glob("*.yaml")), ids=lambda p: p.name)
def test_every_shipped_sweep_file_plans_cleanly(path):
    # not this machine's checks: the engine comparisons need vLLM, which the main venv lacks
    plan = plan_sweep(read_sweep(path), environment=False)
    assert plan.runs and len({run.dir for run in plan.runs}) == len(plan.runs)
