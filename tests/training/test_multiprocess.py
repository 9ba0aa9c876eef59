"""Data parallelism on CPU (gloo): 2 processes with half the batch each take the same step as 1
process with the whole batch, only the main process writes the run, and checkpoints move
between process counts."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from transformers import AutoModelForCausalLM

from rlrun.embedded import resolve_model_path
from rlrun.errors import RecipeError
from rlrun.launch import check_data_parallel
from rlrun.recipes import load_recipe

REPO = str(Path(__file__).resolve().parents[2])
ENV = {
    **os.environ,
    "OMP_NUM_THREADS": "1",
    "PYTHONPATH": os.pathsep.join(filter(None, [REPO, os.environ.get("PYTHONPATH")])),
}
ENV.pop("RLRUN_LAUNCHED", None)
# Adam with eps far above the gradients is plain SGD (update ∝ gradient), and no clipping: a
# wrongly scaled loss would show in the parameters instead of being normalised away.
SGD_LIKE = [
    "actor.optimizer.lr=1.0",
    "actor.optimizer.eps=1.0",
    "actor.lr_scheduler.warmup_steps=0",
    "actor.grad_clip=null",
]
TINY = [
    "trainer.prompts_per_step=4",
    "rollout.n=4",
    "actor.mini_batch_samples=16",  # one optimizer step ...
    "actor.micro_batch_samples=4",  # ... over several micro-batches on each process
]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_sample_counts_must_split_over_the_processes():
    recipe = load_recipe(
        "grpo",
        [
            "trainer.prompts_per_step=6",
            "rollout.n=4",
            "actor.mini_batch_samples=24",
            "actor.micro_batch_samples=6",
        ],
    ).recipe
    check_data_parallel(recipe, 3)
    with pytest.raises(RecipeError) as err:
        check_data_parallel(recipe, 4)
    assert {i.key for i in err.value.issues} == {"trainer.prompts_per_step", "actor.micro_batch_samples"}


@pytest.mark.slow
def test_two_processes_with_half_the_batch_take_the_same_step_as_one(tmp_path, torchrun):
    # Every loss normalisation, and the estimators that whiten over the whole batch: GAE (ppo,
    # with a critic) and REINFORCE++ (whose advantages each process alone would get wrong).
    cases = [
        "grpo/token-mean",
        "grpo/seq-mean-token-mean",
        "grpo/seq-mean-token-sum",
        "ppo/token-mean",
        "reinforce_pp/token-mean",
    ]
    script = [str(Path(__file__).with_name("dp_step.py"))]
    args = [*cases, "--", *TINY, *SGD_LIKE, "trainer.total_steps=1"]
    one, two = tmp_path / "one", tmp_path / "two"
    one.mkdir(), two.mkdir()
    runs = [
        subprocess.Popen([sys.executable, *script, str(one), *args], env=ENV),
        subprocess.Popen([*torchrun, *script, str(two), *args], env={**ENV, "ACCELERATE_USE_CPU": "true"}),
    ]
    assert [p.wait(timeout=300) for p in runs] == [0, 0]
    start = AutoModelForCausalLM.from_pretrained(resolve_model_path("rlrun:tiny-base")).state_dict()
    for case in cases:
        name = case.replace("/", "-") + ".pt"
        whole, halves = torch.load(one / name), torch.load(two / name)
        assert (whole["processes"], halves["processes"]) == (1, 2)  # really data-parallel
        whole, halves = whole["params"], halves["params"]
        moved = max((whole[k] - start[k]).abs().max().item() for k in whole)
        apart = max((whole[k] - halves[k]).abs().max().item() for k in whole)
        assert moved > 1e-2, case
        assert apart < 1e-5 * moved, (case, apart, moved)


def _train(run_dir: Path, processes: int, steps: int, resume: bool = False) -> None:
    if resume:  # `rlrun resume`: the recipe comes from the run directory
        command = ["resume", str(run_dir), f"trainer.total_steps={steps}"]
    else:
        command = [
            "train",
            "grpo",
            *TINY,
            f"trainer.total_steps={steps}",
            "trainer.eval.prompts=8",
            "trainer.checkpoint.every_steps=1",
            "logging.console.enabled=false",
            "logging.samples_every_steps=1",
            "--run-dir",
            str(run_dir),
        ]
    command = [sys.executable, "-m", "rlrun", *command, "--num-processes", str(processes)]
    if processes > 1:
        command += ["--main-process-port", str(_free_port())]
    result = subprocess.run(command, env=ENV, capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode == 0, result.stderr[-3000:]


@pytest.mark.slow
@pytest.mark.parametrize("first, then", [(2, 1), (1, 2)])
def test_a_checkpoint_resumes_in_another_number_of_processes(tmp_path, first, then):
    run_dir = tmp_path / "run"
    _train(run_dir, first, steps=1)
    _train(run_dir, then, steps=2, resume=True)
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [0, 1, 2]  # one writer: no line twice
    assert [r["samples"] for r in rows[1:]] == [16, 32]  # all processes' responses, whatever their number
    assert {json.loads(line)["step"] for line in (run_dir / "samples.jsonl").read_text().splitlines()} == {
        1,
        2,
    }
    meta = json.loads((run_dir / "meta.json").read_text())
    assert meta["status"] == "finished" and meta["resumes"][0]["from_step"] == 1
    assert (meta["setup"]["processes"], meta["resumes"][0]["setup"]["processes"]) == (first, then)
    assert meta["setup"]["strategy"] == ("ddp" if first > 1 else "none")
    assert sorted(p.name for p in (run_dir / "checkpoints").iterdir()) == ["step_000001", "step_000002"]


def _descendants(pid: int) -> list[int]:
    children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    return [p for child in map(int, children) for p in (child, *_descendants(child))]


@pytest.mark.slow
def test_a_stop_signal_ends_both_processes_at_the_same_step_with_a_checkpoint(tmp_path):
    """Kubernetes and a terminal signal the rlrun command, SLURM every process of the job, and a
    signal may reach one training process only: in each case both processes finish the same
    step, it is saved, nothing is left running and no launcher traceback is printed. The
    command's exit code is 130 whenever it got the signal itself."""
    cases = {"command": 130, "every_process": 130, "one_training_process": 0}
    command = ["train", "grpo", *TINY, "trainer.total_steps=500", "trainer.eval.every_steps=0", "trainer.checkpoint.every_steps=0", "logging.console.enabled=false"]  # fmt: skip
    procs = {
        case: subprocess.Popen(
            [
                sys.executable,
                "-m",
                "rlrun",
                *command,
                "--run-dir",
                str(tmp_path / case),
                "--num-processes",
                "2",
                "--main-process-port",
                str(_free_port()),
            ],
            env=ENV,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        for case in cases
    }
    try:
        for case, proc in procs.items():
            metrics = tmp_path / case / "metrics.jsonl"
            while proc.poll() is None and not (metrics.exists() and metrics.read_text().count("\n") >= 3):
                time.sleep(0.1)
            tree = [proc.pid, *_descendants(proc.pid)]  # rlrun, the launcher, two training processes
            assert len(tree) >= 4, tree
            targets = {"command": tree[:1], "every_process": tree, "one_training_process": tree[-1:]}[case]
            for pid in targets:
                os.kill(pid, signal.SIGTERM)
            _, err = proc.communicate(timeout=300)
            assert proc.returncode == cases[case], (case, err[-3000:])
            assert "Traceback" not in err and "ChildFailedError" not in err, err[-3000:]
            assert not [pid for pid in tree if Path(f"/proc/{pid}").exists()]
            meta = json.loads((tmp_path / case / "meta.json").read_text())
            assert meta["status"] == "interrupted", case
            saved = sorted(p.name for p in (tmp_path / case / "checkpoints").glob("step_*"))
            assert saved == [f"step_{meta['final_step']:06d}"], case
            assert err.count("Interrupted at step") == 1  # said by the main process only
    finally:  # a failed check leaves nothing training for minutes
        for proc in procs.values():
            with contextlib.suppress(OSError):  # ended meanwhile
                for pid in [*_descendants(proc.pid), proc.pid] if proc.poll() is None else []:
                    os.kill(pid, signal.SIGKILL)


def _launcher_started(pid: int) -> bool:
    with contextlib.suppress(OSError):  # a short-lived child may be gone already
        return any(
            b"accelerate" in Path(f"/proc/{child}/cmdline").read_bytes() for child in _descendants(pid)
        )
    return False


@pytest.mark.slow
def test_a_stop_signal_before_the_training_processes_start_ends_the_launch(tmp_path):
    command = [sys.executable, "-m", "rlrun", "train", "grpo", *TINY, "--run-dir", str(tmp_path / "run"), "--num-processes", "2", "--main-process-port", str(_free_port())]  # fmt: skip
    proc = subprocess.Popen(command, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        while proc.poll() is None and not _launcher_started(proc.pid):
            time.sleep(0.01)
        time.sleep(0.3)  # past the moment the launcher starts (a signal then is lost); it imports torch
        tree = [proc.pid, *_descendants(proc.pid)]
        assert len(tree) == 2, tree
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    finally:
        with contextlib.suppress(OSError):
            for pid in [*_descendants(proc.pid), proc.pid] if proc.poll() is None else []:
                os.kill(pid, signal.SIGKILL)
    assert proc.returncode == 130 and "Traceback" not in err, err[-3000:]
    time.sleep(1)  # a worker spawned at the last moment would show up now
    assert not [pid for pid in tree if Path(f"/proc/{pid}").exists()]
    assert not (tmp_path / "run").exists()
