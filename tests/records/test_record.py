"""The run record: every meta.json format rlrun has written reads unchanged, and `compare`,
`resume`, `eval` and `sweep` work on real runs of each (tests/records/fixtures/runs/, see its
README); a newer or damaged record is refused, naming the file; rewriting one loses nothing."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Annotated

import pytest
import yaml
from typer.testing import CliRunner

from rlrun.cli import app
from rlrun.errors import RecipeError
from rlrun.records.record import (
    AXIS_KEYS,
    RECORD_VERSION,
    Algorithm,
    MetricsRow,
    Resume,
    RunMeta,
    Setup,
    Since,
    meta_json,
    missing_fields,
    newest_version,
    parse_meta,
)
from rlrun.records.rundir import RunDir, read_meta, read_metrics

FIXTURES = Path(__file__).parent / "fixtures" / "runs"
# Each format's run: 2 steps, then resumed to 3 by the same rlrun (the README says how).
WITHOUT_SETUP = "2026-11-30-20df89f"  # pid, hostname and heartbeat; no setup
WITHOUT_ENGINE = "2026-12-01-3df4a01"  # setup, without the rollout engine
UNVERSIONED = "2026-12-03-724215f"  # setup with the rollout engine: the last unversioned format
FORMATS = [WITHOUT_SETUP, WITHOUT_ENGINE, UNVERSIONED]


def flat(text: str) -> str:
    """Output without line breaks and panel borders, so a wrapped path reads whole."""
    return re.sub(r"[\s│╭╮╰╯─]", "", text)


def invoke(*args: object):
    return CliRunner().invoke(app, [str(a) for a in args], env={"COLUMNS": "200"})


def fixture_json(name: str) -> dict:
    return json.loads((FIXTURES / name / "meta.json").read_text())


@pytest.fixture
def copy_of(tmp_path):
    """`copy_of(name, where="run")`: a fixture run copied into tmp_path (the fixtures stay as made)."""

    def copy(name: str, where: str = "run") -> Path:
        return Path(shutil.copytree(FIXTURES / name, tmp_path / where))

    return copy


# --- reading every format --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "setup", "engine"),
    [(WITHOUT_SETUP, False, None), (WITHOUT_ENGINE, True, None), (UNVERSIONED, True, "hf")],
)
def test_every_format_reads_with_what_it_recorded(name, setup, engine):
    meta = read_meta(FIXTURES / name / "meta.json")
    assert (meta.name, meta.status, meta.total_steps, meta.final_step, meta.seed) == (
        name,
        "finished",
        3,
        3,
        0,
    )
    assert meta.git_sha.startswith(name[-7:]) and meta.model == "rlrun:tiny-base"
    assert (meta.algorithm.advantage, meta.algorithm.kl_placement) == ("grpo", "loss")
    assert meta.pid > 0 and meta.hostname and meta.heartbeat
    assert [(r.from_step, r.overrides) for r in meta.resumes] == [
        (2, ["trainer.total_steps=3", "trainer.checkpoint.keep_last=1"])
    ]
    assert (meta.setup is not None, meta.resumes[0].setup is not None) == (setup, setup)
    if setup:
        assert (meta.setup.processes, meta.setup.strategy, meta.setup.rollout_engine) == (1, "none", engine)


def test_metrics_rows_of_every_format_read_alike():
    for name in FORMATS:
        notes: list[str] = []
        rows = read_metrics(FIXTURES / name / "metrics.jsonl", notes)
        assert [row["step"] for row in rows] == [0, 1, 2, 3] and notes == []
        # 4 prompts x 8 samples a step; step 0 (the evaluation before training) trained on none
        assert [row["samples"] for row in rows] == [0, 32, 64, 96]
        assert all(row["wall_time_s"] > 0 for row in rows) and "val/accuracy" in rows[3]


# --- the version and its fields -------------------------------------------------------------


def test_this_rlrun_writes_version_3_and_every_later_field_has_what_older_records_read_as():
    assert RECORD_VERSION == 3
    later = {
        f"{model.__name__}.{name}"
        for model in (RunMeta, Setup, Algorithm, Resume)
        for name, info in model.model_fields.items()
        if any(isinstance(m, Since) and m.version > 1 for m in info.metadata)
    }
    assert later == {
        "RunMeta.setup",
        "RunMeta.pid",
        "RunMeta.hostname",
        "RunMeta.heartbeat",
        "RunMeta.resumes",
        "RunMeta.final_step",
        "Setup.rollout_engine",
        "Resume.overrides",
        "Resume.setup",
        "Resume.python_objects",
        "RunMeta.python_objects",
    }
    written = meta_json(RunMeta(name="r", status="running"))
    assert list(written)[:3] == ["record_version", "name", "status"] and written["record_version"] == 3
    assert (written["setup"], written["resumes"], written["final_step"]) == (None, [], None)
    assert written["python_objects"] == []


def test_a_field_added_later_is_one_line_and_raises_the_version():
    class Later(RunMeta):
        inputs: Annotated[str | None, Since(4)] = None
        """What a later rlrun records."""

    assert newest_version(Later) == 4
    version_3 = meta_json(RunMeta(name="r", status="running"))
    assert missing_fields(Later, version_3, 3) == []  # an older record: the field reads as None
    assert missing_fields(Later, version_3, 4) == ["inputs"]  # a version-4 record lacking it is damaged
    assert Later.model_validate({**version_3, "inputs": "pkg.rewards:score"}).inputs == "pkg.rewards:score"


def test_a_record_of_a_newer_rlrun_is_refused_naming_the_file_and_its_version(tmp_path, copy_of):
    run = copy_of(UNVERSIONED)
    (run / "meta.json").write_text(json.dumps({**fixture_json(UNVERSIONED), "record_version": 4}))
    with pytest.raises(RecipeError) as caught:
        read_meta(run / "meta.json")
    (issue,) = caught.value.issues
    assert (issue.code, issue.key, issue.file) == (
        "run-meta-version",
        "record_version",
        str(run / "meta.json"),
    )
    assert "record version 4, newer than this rlrun reads (versions 1 to 3)" in issue.message
    assert "rlrun 0.1.0" in issue.fix
    for command in (["compare", run], ["resume", run, "trainer.total_steps=4"], ["eval", run]):
        result = invoke(*command)
        assert result.exit_code == 2, (command, result.output)
        assert "Traceback" not in result.output and flat(str(run / "meta.json")) in flat(result.output)
        assert "recordversion4,newerthanthisrlrunreads" in flat(result.output)


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        (lambda m: m.pop("seed"), "it lacks seed, which every version-1 record holds"),
        (lambda m: m["algorithm"].pop("kl_placement"), "it lacks algorithm.kl_placement"),
        (lambda m: m["resumes"][0].pop("from_step"), "it lacks resumes.0.from_step"),
        (lambda m: m.update(status="done"), "status: Input should be 'running', 'finished'"),
        (lambda m: m.update(heartbeat="yesterday"), "heartbeat: Value error, Invalid isoformat string"),
        (lambda m: m.update(record_version="2"), 'its record_version is "2", not a version number'),
        (
            lambda m: m.update(record_version=2),
            "it lacks setup.rollout_engine, resumes.0.setup.rollout_engine, which every version-2",
        ),
    ],
)
def test_a_damaged_record_is_refused_naming_the_file_and_what_is_wrong(tmp_path, change, reason):
    data = fixture_json(WITHOUT_ENGINE)
    change(data)
    path = tmp_path / "meta.json"
    with pytest.raises(RecipeError) as caught:
        parse_meta(data, path)
    (issue,) = caught.value.issues
    assert issue.code == "run-meta" and issue.file == str(path) and reason in issue.message, issue.message


def test_a_version_1_record_may_lack_what_later_versions_always_hold():
    data = fixture_json(WITHOUT_SETUP)
    for key in ("pid", "hostname", "heartbeat", "resumes", "final_step"):
        del data[key]  # a run from before 2026-11-30 12:30 recorded none of these
    meta = parse_meta(data, Path("meta.json"))
    assert (meta.pid, meta.heartbeat, meta.resumes, meta.final_step, meta.setup) == (
        None,
        None,
        [],
        None,
        None,
    )
    with pytest.raises(RecipeError, match="it lacks setup, pid, hostname, heartbeat, resumes, final_step"):
        parse_meta({**data, "record_version": 2}, Path("meta.json"))
    assert parse_meta(meta_json(meta), Path("meta.json")) == meta  # upgraded, it is whole


@pytest.mark.parametrize("name", FORMATS)
def test_rewriting_a_record_of_any_format_keeps_every_value_and_keys_rlrun_does_not_know(tmp_path, name):
    original = {**fixture_json(name), "note": {"by": "a user"}}
    (tmp_path / "meta.json").write_text(json.dumps(original))
    run = RunDir(tmp_path)
    run.update_meta(heartbeat="2026-12-03T13:00:00+00:00")
    rewritten = json.loads((tmp_path / "meta.json").read_text())
    assert rewritten["record_version"] == RECORD_VERSION and rewritten["note"] == {"by": "a user"}
    assert rewritten["heartbeat"] == "2026-12-03T13:00:00+00:00"
    for key, value in original.items():
        if key not in ("heartbeat", "setup", "resumes"):
            assert rewritten[key] == value, key
    # a field an older record lacked is written as null (unknown); nothing it held changes
    setups = [original.get("setup"), *(r.get("setup") for r in original["resumes"])]
    rewritten_setups = [rewritten["setup"], *(r["setup"] for r in rewritten["resumes"])]
    for was, now in zip(setups, rewritten_setups):
        assert now == (None if was is None else {"rollout_engine": None, **was})
    with pytest.raises(ValueError, match="status"):
        run.update_meta(status="done")


def test_a_metrics_row_has_its_fixed_fields_and_numbers():
    assert AXIS_KEYS == ("step", "wall_time_s", "samples")
    row = MetricsRow.parse({"step": 2, "wall_time_s": 4.5, "val/accuracy": "NaN", "text": "x", "samples": 64})
    assert (row.step, row.wall_time_s, row.samples, list(row.metrics)) == (2, 4.5, 64, ["val/accuracy"])
    assert row.flat()["step"] == 2 and row.flat()["samples"] == 64 and "text" not in row.flat()
    assert MetricsRow.parse({"step": 0, "val/accuracy": 0.5}).flat() == {
        "step": 0,
        "samples": 0,
        "val/accuracy": 0.5,
    }
    assert MetricsRow.parse({"step": 3}).flat() == {"step": 3}  # no wall time or samples said: none made up
    for not_a_row in ({"wall_time_s": 1.0}, {"step": "three"}, [1, 2]):
        with pytest.raises((KeyError, ValueError, TypeError)):
            MetricsRow.parse(not_a_row)


# --- the commands on runs of every format ----------------------------------------------------


def test_compare_reads_a_run_of_every_format(copy_of):
    runs = [copy_of(name, name) for name in FORMATS]
    result = invoke("compare", *runs, "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert [(r["name"], r["status"], r["steps_done"], r["total_steps"]) for r in data["runs"]] == [
        (name, "finished", 3, 3) for name in FORMATS
    ]
    assert [r["setup"] is None for r in data["runs"]] == [True, False, False]
    assert [r["algorithm"] for r in data["runs"]] == ["grpo × vanilla × KL in loss"] * 3
    assert [r["setup"].get("rollout_engine") for r in data["runs"][1:]] == [None, "hf"]
    folder = invoke("compare", runs[0].parent)  # a folder of runs, as a sweep's is read
    assert folder.exit_code == 0 and all(name in folder.output for name in FORMATS), folder.output


@pytest.mark.slow
@pytest.mark.parametrize("name", FORMATS)
def test_resume_continues_a_run_of_every_format_and_upgrades_its_record(copy_of, name):
    run = copy_of(name)
    before = fixture_json(name)
    result = invoke("resume", run, "trainer.total_steps=4")
    assert result.exit_code == 0, result.output
    after = json.loads((run / "meta.json").read_text())
    assert after["record_version"] == RECORD_VERSION and (
        after["status"],
        after["final_step"],
        after["total_steps"],
    ) == (
        "finished",
        4,
        4,
    )
    for key in ("name", "git_sha", "start_time", "versions", "recipe", "overrides", "algorithm"):
        assert after[key] == before[key], key
    assert after["resumes"][0]["time"] == before["resumes"][0]["time"]
    assert [r["from_step"] for r in after["resumes"]] == [2, 3]
    assert after["resumes"][1]["overrides"] == ["trainer.total_steps=4"]
    assert after["resumes"][1]["setup"]["rollout_engine"] == "hf"
    notes: list[str] = []
    assert [row["step"] for row in read_metrics(run / "metrics.jsonl", notes)] == [0, 1, 2, 3, 4]


@pytest.mark.slow
@pytest.mark.parametrize("name", FORMATS)
def test_eval_of_a_run_of_every_format_gives_its_own_last_evaluation(copy_of, name):
    run = copy_of(name)
    result = invoke("eval", run, "--json")
    assert result.exit_code == 0, result.output
    figures = json.loads(result.stdout)["metrics"]
    last = read_metrics(run / "metrics.jsonl", [])[-1]  # step 3: its checkpoint's
    assert figures == {key: value for key, value in last.items() if key.startswith("val/")}


SWEEP = {
    "name": "old",
    "recipe": "grpo",
    "overrides": {  # what the fixture runs were started with
        "trainer.output_dir": "runs",
        "trainer.total_steps": 2,
        "trainer.prompts_per_step": 4,
        "actor.mini_batch_samples": 32,
        "actor.micro_batch_samples": 32,
        "trainer.eval.prompts": 8,
        "model.lora": {"r": 2},
        "logging.console.enabled": False,
    },
    "seeds": [0],
}


@pytest.mark.parametrize("name", FORMATS)
def test_a_sweep_finds_a_run_of_every_format_finished(tmp_path, copy_of, monkeypatch, name):
    """The run's recipe is compared as this rlrun resolves it (keys added since read as their
    defaults, moved keys where they went), so an older rlrun's run is the sweep's own."""
    copy_of(name, "runs/old/default/seed-0")
    (tmp_path / "sweep.yaml").write_text(yaml.safe_dump(SWEEP))
    monkeypatch.chdir(tmp_path)
    result = invoke("sweep", "sweep.yaml", "--dry-run")
    assert result.exit_code == 0, result.output
    assert re.search(r"default/seed-0\s+grpo\s+finished\s+3/2", result.output), result.output
