"""Starting a run: the run directory it claims is the one it writes."""

from __future__ import annotations

import itertools
import json
import os
import shlex
import signal
import subprocess
import sys
import threading
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

import rlrun.training.run as run_module
from rlrun import interrupt
from rlrun.interrupt import StopRequests
from rlrun.recipes import load_recipe
from rlrun.records.record import RunMeta
from rlrun.training.run import Run, RunOptions, cpu_threads_for, slow_step_note, start_run

REPO = str(Path(__file__).resolve().parents[2])


class _TickingClock:
    """A `datetime` whose `now()` moves one second on every call (a slow model load)."""

    ticks = itertools.count()

    @classmethod
    def now(cls, tz=None):
        return datetime(2026, 11, 30, 9, 49, 6, tzinfo=timezone.utc) + timedelta(seconds=next(cls.ticks))


def _fake_session(recipe, warn):
    accelerator = SimpleNamespace(
        is_main_process=True,
        process_index=0,
        num_processes=1,
        distributed_type="NO",
        device=torch.device("cpu"),
        mixed_precision="no",
    )
    return SimpleNamespace(
        group=SimpleNamespace(accelerator=accelerator, size=1, rank=0),
        counters=SimpleNamespace(step=0),
        models=SimpleNamespace(unwrapped_policy=torch.nn.Linear(2, 2)),
        generation=SimpleNamespace(engine=None),
        strategy="none",
    )


def test_the_default_run_name_is_chosen_once(tmp_path, monkeypatch):
    monkeypatch.setattr(run_module, "datetime", _TickingClock)
    overrides = [f"trainer.output_dir={tmp_path}", "logging.console.enabled=false"]
    run = start_run(
        load_recipe("dapo", overrides), RunOptions(), print, overrides, make_session=_fake_session
    )
    made = [p for p in tmp_path.iterdir()]
    assert made == [run.dir.path] and run.dir.path.name.startswith("dapo-20261130-0949")
    assert (run.dir.path / "recipe.yaml").is_file()


def test_a_run_records_every_field_and_each_resume_adds_its_own(tmp_path):
    overrides = [f"trainer.output_dir={tmp_path}", "logging.console.enabled=false"]
    loaded = load_recipe("dapo", overrides)
    run = start_run(loaded, RunOptions(name="r"), print, overrides, make_session=_fake_session)
    run.close("interrupted")
    written = json.loads((run.dir.path / "meta.json").read_text())
    assert list(written) == ["record_version", *RunMeta.model_fields] and written["record_version"] == 3
    unknown = {"git_sha", "git_dirty", "wandb_run_id"}  # no git checkout, no W&B: null says so
    assert [key for key, value in written.items() if value is None and key not in unknown] == []
    assert (written["status"], written["final_step"], written["resumes"]) == ("interrupted", 0, [])
    assert written["setup"]["rollout_engine"] == "hf" and written["overrides"] == overrides

    again = start_run(
        loaded, RunOptions(name="r", resume=True, restart=True), print, ["x=1"], make_session=_fake_session
    )
    meta = again.dir.read_meta()
    again.close("finished")
    assert (meta.status, meta.end_time, meta.start_time) == ("running", None, written["start_time"])
    assert [(r.from_step, r.overrides, r.setup.processes) for r in meta.resumes] == [(0, ["x=1"], 1)]


def test_a_small_model_on_cpu_uses_one_thread_unless_the_user_chose():
    assert cpu_threads_for(995_200, {}) == 1  # the embedded tiny model
    assert cpu_threads_for(995_200, {"OMP_NUM_THREADS": "2"}) is None
    assert cpu_threads_for(500_000_000, {}) is None


def test_a_sweep_s_share_of_the_cores_caps_a_run_but_never_replaces_a_choice():
    share = {"RLRUN_CPU_THREADS": "4"}
    assert cpu_threads_for(995_200, share) == 1  # a small model keeps its one thread
    assert cpu_threads_for(500_000_000, share) == 4
    assert cpu_threads_for(None, share) == 4  # a run on a GPU: its CPU work shares the cores too
    assert cpu_threads_for(500_000_000, {**share, "OMP_NUM_THREADS": "2"}) is None  # the user's


def test_a_step_far_slower_than_the_runs_typical_step_is_explained():
    earlier = [0.2, 0.25, 0.2, 0.3]  # median 0.225
    note = slow_step_note(9, 8.0, earlier)
    assert note.startswith("Step 9 took 8.0 s, 36x this run's typical 0.23 s") and "OMP_NUM_THREADS=1" in note
    assert slow_step_note(9, 1.0, earlier) is None  # 4.4x: within the noise of a shared machine
    assert slow_step_note(9, 0.9, [0.1, 0.1, 0.1]) is None  # under a second: not worth a line
    assert slow_step_note(3, 8.0, [0.2, 0.2]) is None  # too few steps to know what is typical


# --- signals -----------------------------------------------------------------------------------


def _supervised_run(tmp_path):
    """A `Run` with only what `supervise` touches; records its checkpoints and final status."""
    run = Run.__new__(Run)
    run.session = SimpleNamespace(counters=SimpleNamespace(step=4))
    run.main = True
    run.dir = SimpleNamespace(path=tmp_path, checkpoints=tmp_path / "checkpoints")
    run.checkpoint_due = lambda step: False
    run.said, run.saved = [], []
    run.say = run.said.append
    run.stops = StopRequests(say=run.say)

    def checkpoint():
        run.saved.append(run.session.counters.step)
        (run.dir.checkpoints / f"step_{run.session.counters.step:06d}").mkdir(parents=True)

    run.checkpoint = checkpoint
    run.close = lambda status: setattr(run, "status", status)
    return run


def _end_step(run: Run, step: int) -> None:
    """What the training loop does when a step is done: count it, then ask whether to stop."""
    run.session.counters.step = step
    run.stops.agree()


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGUSR1])
def test_a_stop_signal_ends_the_run_at_the_step_boundary_with_a_checkpoint(tmp_path, sig):
    run = _supervised_run(tmp_path)
    with run.supervise():
        os.kill(os.getpid(), sig)  # arrives mid-step
        assert run.stops.requested
        _end_step(run, 5)  # the loop finishes the step, agrees to stop and leaves
    assert run.status == "interrupted" and run.saved == [5]
    assert "finishing this step" in run.said[0]
    assert run.said[-1] == f"Interrupted at step 5, saved. Continue with `rlrun resume {tmp_path}`."
    assert signal.getsignal(sig) is not run.stops._on_stop_signal  # the previous handler is back


def test_a_second_signal_stops_at_once_and_saves_no_half_done_step(tmp_path):
    run = _supervised_run(tmp_path)
    with run.supervise():
        os.kill(os.getpid(), signal.SIGTERM)
        os.kill(os.getpid(), signal.SIGINT)  # still inside step 5: its updates are half applied
        run.session.counters.step = 5  # never reached
    assert run.status == "interrupted" and run.saved == []  # before the fix: step 4's label on half of step 5


def _second_signal_lost_in_a_library() -> None:
    """torch.save into a Python file that gets SIGINT, after a first signal, during its third
    write: torch's writer turns the handler's KeyboardInterrupt into RuntimeError("... unexpected
    pos ..."), which a CI run reported as "Training failed", exit status 1."""

    class File:
        writes = 0

        def write(self, data: bytes) -> int:
            self.writes += 1
            if self.writes == 3:
                os.kill(os.getpid(), signal.SIGINT)
            return len(data)

        def flush(self) -> None:
            pass

    torch.save({"weights": torch.zeros(1000)}, File())


def test_a_second_signal_turned_into_another_error_while_saving_still_stops_at_once(tmp_path):
    run = _supervised_run(tmp_path)
    run.checkpoint = _second_signal_lost_in_a_library
    with run.supervise():
        os.kill(os.getpid(), signal.SIGTERM)
        _end_step(run, 5)
    assert run.status == "interrupted" and run.saved == []
    assert run.said[-1] == "Interrupted at step 5, before any checkpoint was saved."


def test_a_second_signal_turned_into_another_error_mid_step_still_stops_at_once(tmp_path):
    run = _supervised_run(tmp_path)
    with run.supervise():
        os.kill(os.getpid(), signal.SIGTERM)
        _second_signal_lost_in_a_library()
    assert run.status == "interrupted" and run.saved == []


def test_an_error_after_one_signal_still_fails_the_run(tmp_path):
    run = _supervised_run(tmp_path)
    with pytest.raises(RuntimeError, match="a real failure"), run.supervise():
        os.kill(os.getpid(), signal.SIGTERM)
        raise RuntimeError("a real failure")
    assert run.status == "failed" and run.saved == []


def test_after_a_second_signal_the_console_names_the_checkpoint_resume_continues_from(tmp_path):
    """Step 6 done, the last checkpoint step 5: the console said "Interrupted at step 6"."""
    run = _supervised_run(tmp_path / "my run; $HOME")
    run.session.counters.step = 5
    run.checkpoint()
    run.saved.clear()
    with run.supervise():
        run.session.counters.step = 6
        os.kill(os.getpid(), signal.SIGTERM)
        os.kill(os.getpid(), signal.SIGINT)  # inside step 7
    assert run.saved == []
    quoted = shlex.quote(str(tmp_path / "my run; $HOME"))
    assert run.said[-1] == (
        f"Interrupted at step 6; the last checkpoint is step 5, where `rlrun resume {quoted}` continues "
        "(the steps after it are trained again)."
    )


def test_an_interrupted_run_without_a_checkpoint_offers_no_resume(tmp_path):
    run = _supervised_run(tmp_path)
    with run.supervise():
        os.kill(os.getpid(), signal.SIGTERM)
        os.kill(os.getpid(), signal.SIGINT)
    assert run.said[-1] == "Interrupted at step 4, before any checkpoint was saved."


def test_the_same_signal_twice_at_once_is_one_request(tmp_path):
    """SLURM signals every process and torchrun passes the signal on as well: a process gets it
    twice within milliseconds, and must still finish its step and save."""
    run = _supervised_run(tmp_path)
    with run.supervise():
        os.kill(os.getpid(), signal.SIGTERM)
        os.kill(os.getpid(), signal.SIGTERM)
        _end_step(run, 5)
    assert run.status == "interrupted" and run.saved == [5]


def test_the_same_signal_again_after_a_moment_stops_at_once(tmp_path, monkeypatch):
    monkeypatch.setattr(interrupt, "DUPLICATE_SIGNAL_S", 0.05)
    run = _supervised_run(tmp_path)
    with run.supervise():
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.5)  # the moment passes
        os.kill(os.getpid(), signal.SIGINT)
        run.session.counters.step = 5  # never reached
    assert run.status == "interrupted" and run.saved == []
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)


def test_a_duplicate_that_waits_behind_a_long_computation_is_still_one_request(tmp_path, monkeypatch):
    """The duplicate arrives within the moment, while the process is inside a call that does not
    return to Python for longer (a collective waiting for a slower process): a handler run after
    that call took it for a second request, and the process stopped mid-step alone (its peer then
    waited for ever: a CI hang)."""
    monkeypatch.setattr(interrupt, "DUPLICATE_SIGNAL_S", 0.1)
    a, b = torch.randn(2500, 2500), torch.randn(2500, 2500)
    run = _supervised_run(tmp_path)
    with run.supervise():
        os.kill(os.getpid(), signal.SIGTERM)
        threading.Timer(0.02, os.kill, (os.getpid(), signal.SIGTERM)).start()
        start = time.monotonic()
        while time.monotonic() - start < 0.4:  # matmuls of >= 0.4 s together, without the GIL
            a @ b
        _end_step(run, 5)
    assert run.status == "interrupted" and run.saved == [5]


def test_a_stop_signal_leaves_an_alarm_that_user_code_holds_alone(tmp_path):
    """A reward's timeout may hold SIGALRM (verl-style `signal.alarm` guards): the stop signal
    arms no timer of its own then, so the reward's alarm is neither replaced nor fired early."""
    run = _supervised_run(tmp_path)
    fired = []
    with run.supervise():
        previous = signal.signal(signal.SIGALRM, lambda *_: fired.append(True))
        signal.alarm(30)
        os.kill(os.getpid(), signal.SIGTERM)
        assert 29 < signal.getitimer(signal.ITIMER_REAL)[0] <= 30 and not fired
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
        _end_step(run, 5)
    assert run.status == "interrupted" and run.saved == [5]


def test_a_signal_handled_during_the_stop_agreement_is_agreed_on_at_the_next_step(tmp_path, monkeypatch):
    """Two processes: a signal that reaches this one while it waits in the collective agreeing on
    a stop, after its own flag was read, is handled when the collective returns. That agreement
    says "go on" (nobody had asked yet), and the request must stand for the next step: it was
    overwritten with the answer and lost, and the run trained on to its end (two CI failures)."""
    run = _supervised_run(tmp_path)
    run.stops = StopRequests(processes=2, device="cpu", say=run.say)
    flags = []

    def all_reduce(flag, op):  # the other process asks nothing: the maximum is this one's flag
        flags.append(flag.item())
        if len(flags) == 1:
            os.kill(os.getpid(), signal.SIGTERM)  # handled before the collective returns

    monkeypatch.setattr(torch.distributed, "all_reduce", all_reduce)
    with run.supervise():
        _end_step(run, 4)
        assert not run.stops.stopping and run.stops.requested
        _end_step(run, 5)
    assert flags == [0.0, 1.0]
    assert run.status == "interrupted" and run.saved == [5]


def test_a_signal_after_the_last_agreement_leaves_the_run_finished(tmp_path):
    """The loop has agreed on its last step and ends: a signal now changes nothing. Every process
    must end alike; one that called itself interrupted would save a checkpoint (a collective) alone
    and wait for the others for ever."""
    run = _supervised_run(tmp_path)
    with run.supervise():
        _end_step(run, 5)
        os.kill(os.getpid(), signal.SIGTERM)
    assert run.status == "finished" and run.saved == []


def test_a_second_signal_while_the_end_is_recorded_still_leaves_the_status_written(tmp_path):
    """The CI failure this guards: SIGTERM, the step ended, SIGINT landed while meta.json was
    being written and the run was left marked "running"."""
    run = _supervised_run(tmp_path)
    written = []
    run.main = True
    run.logger = SimpleNamespace(close=lambda status: None)
    run.dir = SimpleNamespace(path=tmp_path, checkpoints=tmp_path / "checkpoints", release=lambda: None)

    def record_end(**fields):
        os.kill(os.getpid(), signal.SIGINT)  # the impatient second signal, mid-write
        written.append(fields["status"])

    run.dir.record_end = record_end
    del run.close  # the real one
    with run.supervise():
        os.kill(os.getpid(), signal.SIGTERM)
        _end_step(run, 4)
    assert written == ["interrupted"] and run.status == "interrupted" and run.saved == [4]


def _cli(*args: str) -> subprocess.Popen:
    env = {
        **os.environ,
        "OMP_NUM_THREADS": "1",
        "PYTHONPATH": os.pathsep.join(filter(None, [REPO, os.environ.get("PYTHONPATH")])),
    }
    return subprocess.Popen([sys.executable, "-m", "rlrun", *args], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)  # fmt: skip


@pytest.mark.parametrize("sent", [signal.SIGINT, signal.SIGTERM, signal.SIGUSR1], ids=lambda s: s.name)
def test_a_stop_signal_while_starting_up_ends_quietly_and_leaves_nothing(tmp_path, sent):
    proc = _cli("train", "grpo", "trainer.total_steps=1", "--run-dir", str(tmp_path / "run"))
    maps = Path(f"/proc/{proc.pid}/maps")  # pydantic's library loads while the CLI module is imported
    while proc.poll() is None and "pydantic_core" not in maps.read_text():
        time.sleep(0.002)
    proc.send_signal(sent)  # within the first second of `rlrun train`
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 130 and "Traceback" not in err and "Interrupted before" in err, err
    assert not (tmp_path / "run").exists()


def _meta_status(run_dir: Path) -> str | None:
    try:
        return json.loads((run_dir / "meta.json").read_text())["status"]
    except (OSError, ValueError):  # not written yet, or being replaced
        return None


@pytest.mark.slow
def test_sigterm_stops_a_real_run_cleanly_and_a_second_signal_promptly(tmp_path):
    """SIGTERM alone: the step ends and is saved. A second signal soon after stops at once; one
    that comes after the run has recorded its end (the process tears down torch for a second or
    more) changes nothing: the exit status stays 130, never death by the signal."""
    small = ["trainer.total_steps=500", "trainer.prompts_per_step=4", "actor.mini_batch_samples=32", "actor.micro_batch_samples=32", "trainer.eval.every_steps=0",
             "trainer.eval.prompts=16", "trainer.checkpoint.every_steps=0", "logging.console.enabled=false"]  # fmt: skip
    cases = ("once", "soon", "after_the_end")
    runs = {cases[0]: _cli("train", "grpo", *small, "--run-dir", str(tmp_path / cases[0]))}
    for name, following in zip(cases, [*cases[1:], None]):
        proc = runs[name]
        metrics = tmp_path / name / "metrics.jsonl"
        while proc.poll() is None and not (metrics.exists() and metrics.read_text().count("\n") >= 3):
            time.sleep(0.05)
        proc.send_signal(signal.SIGTERM)
        if name == "soon":
            time.sleep(0.05)
            sent = time.monotonic()
            proc.send_signal(signal.SIGINT)
        if name == "after_the_end":
            while proc.poll() is None and _meta_status(tmp_path / name) == "running":
                time.sleep(0.01)
            proc.send_signal(signal.SIGINT)
        if following:  # one run at a time, the next starting while one stops: each trains until signalled
            runs[following] = _cli("train", "grpo", *small, "--run-dir", str(tmp_path / following))
        _, err = proc.communicate(timeout=120)
        if name == "soon":
            assert time.monotonic() - sent < 10  # not after the step: at once
        assert proc.returncode == 130, (name, err)
        meta = json.loads((tmp_path / name / "meta.json").read_text())
        assert meta["status"] == "interrupted" and "SIGTERM: finishing this step" in err
        assert "Traceback" not in err and "Interrupted before" not in err
        saved = sorted(p.name for p in (tmp_path / name / "checkpoints").glob("step_*"))
        if name != "soon":
            assert saved == [f"step_{meta['final_step']:06d}"]


def test_a_run_that_fails_while_loading_leaves_no_directory(tmp_path):
    def broken_model(recipe, warn):
        raise OSError("model.safetensors: no such file")

    overrides = [f"trainer.output_dir={tmp_path / 'runs'}"]
    with pytest.raises(OSError):
        start_run(
            load_recipe("dapo", overrides), RunOptions(name="x"), print, overrides, make_session=broken_model
        )
    assert list(tmp_path.iterdir()) == []


def test_an_interrupt_a_library_swallowed_still_stops_the_run_before_it_starts(tmp_path, monkeypatch):
    monkeypatch.setattr(interrupt, "_requested", True)  # Ctrl-C came, its KeyboardInterrupt got lost
    overrides = [f"trainer.output_dir={tmp_path / 'runs'}"]
    with pytest.raises(KeyboardInterrupt):
        start_run(
            load_recipe("dapo", overrides), RunOptions(name="x"), print, overrides, make_session=_fake_session
        )
    assert list(tmp_path.iterdir()) == []
