import json
import socket
import threading
import time
from types import SimpleNamespace

import pytest
from rich.console import Console

from rlrun.records import sinks as m


def test_jsonl_appends_one_object_per_step_and_truncates_on_resume(tmp_path):
    path = tmp_path / "metrics.jsonl"
    sink = m.JsonlSink(path)
    for step in (1, 2, 3):
        sink.log(step, {"actor/pg_loss": 0.5 * step})
    sink.close("finished")
    assert [json.loads(line)["step"] for line in path.read_text().splitlines()] == [1, 2, 3]
    with open(path, "a") as f:
        f.write('{"step": 4, "actor/pg')  # torn by kill -9
    sink = m.JsonlSink(path, resume_step=2)
    sink.log(3, {"actor/pg_loss": 9.0})
    sink.close("finished")
    assert [json.loads(line) for line in path.read_text().splitlines()] == [
        {"step": 1, "actor/pg_loss": 0.5},
        {"step": 2, "actor/pg_loss": 1.0},
        {"step": 3, "actor/pg_loss": 9.0},
    ]


def test_samples_sink(tmp_path):
    sink = m.SamplesSink(tmp_path / "samples.jsonl")
    sink.log_samples(10, [{"prompt": "1+1=", "completion": "2", "reward": 1.0}])
    sink.close("finished")
    assert json.loads((tmp_path / "samples.jsonl").read_text()) == {
        "step": 10,
        "prompt": "1+1=",
        "completion": "2",
        "reward": 1.0,
    }


def test_console_shows_progress_and_a_table_every_n_steps():
    console = Console(record=True, width=160, force_terminal=False)
    sink = m.ConsoleSink(total_steps=4, table_every=2, console=console)
    for step in range(1, 5):
        sink.log(step, {"critic/score/mean": 0.25 * step, "actor/pg_loss": -0.1, "timing_s/step": 0.2})
    sink.close("finished")
    text = console.export_text()
    assert "step 2" in text and "step 4" in text and "step 3" not in text
    assert "critic/score/mean" in text and "4/4" in text


def test_progress_into_a_file_that_is_not_a_terminal_has_no_escape_codes():
    """A notebook's captured stderr, a log file, CI: rich sees no terminal and writes plain text
    (in Jupyter itself rich renders its own widgets)."""
    import io

    out = io.StringIO()
    sink = m.ConsoleSink(total_steps=3, table_every=3, console=Console(file=out, width=120))
    for step in range(1, 4):
        sink.log(step, {"critic/score/mean": 0.5, "timing_s/step": 0.2})
    sink.close("finished")
    text = out.getvalue()
    assert "3/3" in text and "critic/score/mean" in text
    assert "\x1b[" not in text and "\r" not in text


def test_the_sinks_a_recipe_asks_for_write_into_the_run_directory(tmp_path):
    from rlrun.records.rundir import RunDir
    from rlrun.schema.logs import Logging

    run_dir = RunDir(tmp_path)
    (tmp_path / "metrics.jsonl").write_text('{"step": 1}\n{"step": 2}\n')
    options = {"total_steps": 5, "start_step": 1, "config": {}, "wandb_id": None, "say": print}
    sinks = m.open_sinks(Logging(console={"enabled": False}), run_dir, resume_step=1, **options)
    assert [type(s) for s in sinks] == [m.JsonlSink, m.SamplesSink] and m.wandb_run_id(sinks) is None
    assert (tmp_path / "metrics.jsonl").read_text() == '{"step": 1}\n'  # cut back to the checkpoint
    for sink in sinks:
        sink.close("finished")
    quiet = Logging(console={"enabled": False}, jsonl=False, samples_every_steps=0)
    assert m.open_sinks(quiet, run_dir, resume_step=None, **options) == []


def test_logger_stamps_wall_time_and_fans_out(tmp_path):
    logger = m.MetricsLogger([m.JsonlSink(tmp_path / "m.jsonl")], start_wall=100.0)
    logger.log(1, {"x": 1.0})
    logger.close("finished")
    record = json.loads((tmp_path / "m.jsonl").read_text())
    assert record["step"] == 1 and record["wall_time_s"] >= 100.0 and record["x"] == 1.0


class _FakeRun:
    id, dir = "abc123", "/tmp/wandb/offline-run-x/files"

    def __init__(self, fail_log=False):
        self.fail_log, self.logged = fail_log, []

    def log(self, data, step):
        if self.fail_log:
            raise ConnectionError("lost")
        self.logged.append((step, data))

    def finish(self, exit_code=0):
        pass


def _sink(tmp_path, monkeypatch, init, mode="online"):
    import wandb

    monkeypatch.setattr(wandb, "init", init)
    said = []
    sink = m.WandbSink(
        project="p",
        entity=None,
        mode=mode,
        config={},
        run_dir=tmp_path,
        name="r",
        run_id=None,
        say=said.append,
    )
    return sink, said


def test_wandb_without_api_key_goes_offline_and_prints_the_sync_command(tmp_path, monkeypatch):
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    monkeypatch.delenv("WANDB_MODE", raising=False)
    monkeypatch.setattr(m, "wandb_has_api_key", lambda: False)
    modes = []
    sink, said = _sink(tmp_path, monkeypatch, lambda **kw: modes.append(kw["mode"]) or _FakeRun())
    assert modes == ["offline"] and sink.run_id == "abc123"
    assert any("wandb sync /tmp/wandb/offline-run-x" in s for s in said)


def test_wandb_init_failure_falls_back_to_offline_then_off(tmp_path, monkeypatch):
    monkeypatch.setenv("WANDB_API_KEY", "x" * 40)
    monkeypatch.delenv("WANDB_MODE", raising=False)
    modes = []

    def failing(**kw):
        modes.append(kw["mode"])
        raise RuntimeError("network down")

    sink, said = _sink(tmp_path, monkeypatch, failing)
    assert modes == ["online", "offline"] and sink.run is None
    assert "switched off" in said[-1]
    sink.log(1, {"x": 1.0})  # a no-op, not an error
    sink.close("finished")


def test_wandb_mode_env_overrides_recipe(tmp_path, monkeypatch):
    monkeypatch.setenv("WANDB_MODE", "disabled")
    sink, said = _sink(tmp_path, monkeypatch, lambda **kw: pytest.fail("init must not run"))
    assert sink.run is None and said == []


def test_wandb_log_failure_never_stops_training(tmp_path, monkeypatch):
    monkeypatch.setenv("WANDB_MODE", "offline")
    sink, said = _sink(tmp_path, monkeypatch, lambda **kw: _FakeRun(fail_log=True))
    sink.log(1, {"x": 1.0})
    assert sink.run is None and "training continues" in said[-1]
    sink.log(2, {"x": 2.0})


def test_wandb_samples_table_keeps_the_samples_counter_of_the_same_step():
    logged: dict[int, dict] = {}
    sink = m.WandbSink.__new__(m.WandbSink)
    sink._wandb, sink.say = pytest.importorskip("wandb"), print
    sink.run = SimpleNamespace(log=lambda data, step: logged.setdefault(step, {}).update(data))
    sink.log(10, {"samples": 320.0, "actor/pg_loss": 0.1})
    sink.log_samples(10, [{"prompt": "1+1=", "completion": "2", "reward": 1.0}])
    assert logged[10]["samples"] == 320.0  # W&B merges a step's logs by key: the table used to replace it
    assert logged[10][m.WANDB_SAMPLES_KEY].columns == ["step", "prompt", "completion", "reward"]


@pytest.mark.slow
def test_wandb_online_with_an_unresponsive_server_falls_back_to_offline_within_the_timeout(
    tmp_path, monkeypatch
):
    pytest.importorskip("wandb")
    server = socket.create_server(("127.0.0.1", 0))  # accepts connections, never answers
    threading.Thread(target=lambda: [server.accept() for _ in iter(int, 1)], daemon=True).start()
    monkeypatch.setenv("WANDB_BASE_URL", f"http://127.0.0.1:{server.getsockname()[1]}")
    monkeypatch.setenv("WANDB_API_KEY", "x" * 40)
    monkeypatch.delenv("WANDB_MODE", raising=False)
    monkeypatch.delenv("WANDB_INIT_TIMEOUT", raising=False)
    monkeypatch.setattr(m, "WANDB_INIT_TIMEOUT_S", 2.0)
    said = []
    start = time.monotonic()
    sink = m.WandbSink(
        project="p",
        entity=None,
        mode="online",
        config={},
        run_dir=tmp_path,
        name="r",
        run_id=None,
        say=said.append,
    )
    took = time.monotonic() - start
    sink.close("finished")
    assert sink.mode == "offline" and said[0].startswith("W&B: init in online mode failed (CommError")
    assert "wandb sync" in said[-1]
    assert took < 60  # W&B's default timeout alone is 90 s
