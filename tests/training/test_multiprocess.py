"""Data parallelism on CPU (gloo): 2 processes with half the batch each take the same step as 1
process with the whole batch, only the main process writes the run, and checkpoints move
between process counts."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file
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
    """1 process, 2 under DDP and 2 under FSDP2 (every model sharded: the policy, ppo's critic,
    grpo's reference) take the same step, to float32 summation order: 1e-5 of the step. Each DDP
    process holds all the weights and AdamW state, as one process does; each FSDP2 process half,
    plus its own copy of AdamW's step counts (one float32 per weight tensor)."""
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
    outs = {name: tmp_path / name for name in ("one", "ddp", "fsdp2")}
    for out in outs.values():
        out.mkdir()
    cpu = {**ENV, "ACCELERATE_USE_CPU": "true"}
    second_torchrun = [*torchrun[:-1], str(_free_port())]
    runs = [
        subprocess.Popen([sys.executable, *script, str(outs["one"]), *args], env=ENV),
        subprocess.Popen([*torchrun, *script, str(outs["ddp"]), *args], env=cpu),
        subprocess.Popen(
            [*second_torchrun, *script, str(outs["fsdp2"]), *args, "trainer.strategy=fsdp2"], env=cpu
        ),
    ]
    assert [p.wait(timeout=600) for p in runs] == [0, 0, 0]
    start = AutoModelForCausalLM.from_pretrained(resolve_model_path("rlrun:tiny-base")).state_dict()
    for case in cases:
        name = case.replace("/", "-") + ".pt"
        saved = {run: torch.load(out / name) for run, out in outs.items()}
        setups = {run: (s["processes"], s["strategy"], s["sharded"]) for run, s in saved.items()}
        assert setups == {"one": (1, "none", False), "ddp": (2, "ddp", False), "fsdp2": (2, "fsdp2", True)}
        whole = saved["one"]["params"]
        moved = max((whole[k] - start[k]).abs().max().item() for k in whole)
        assert moved > 1e-2, case
        for run in ("ddp", "fsdp2"):
            apart = max((whole[k] - saved[run]["params"][k]).abs().max().item() for k in whole)
            assert apart < 1e-5 * moved, (case, run, apart, moved)
        held = {run: saved[run]["held_state_mib"] * 2**20 for run in saved}
        # ppo's critic: the policy's weight tensors (its tied output layer is the embedding) and
        # a value head instead (a weight and a bias, at most)
        tensors = 2 * len(whole) + 1 if case.startswith("ppo") else len(whole)
        assert held["ddp"] == held["one"] > 0, case
        assert 2 * held["fsdp2"] - held["one"] == pytest.approx(4 * tensors, abs=4), case


def _train_command(
    run_dir: Path, processes: int, steps: int, resume: bool = False, recipe: str = "grpo", extra: tuple = ()
) -> list[str]:
    if resume:  # `rlrun resume`: the recipe comes from the run directory
        command = ["resume", str(run_dir), f"trainer.total_steps={steps}", *extra]
    else:
        command = [
            "train",
            recipe,
            *TINY,
            *extra,
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
    return command


def _train(run_dir: Path, processes: int, steps: int, resume: bool = False) -> None:
    command = _train_command(run_dir, processes, steps, resume)
    result = subprocess.run(command, env=ENV, capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode == 0, result.stderr[-3000:]


def _all_succeed(commands: list[list[str]]) -> None:
    """Run the commands side by side; each must succeed."""
    procs = [
        subprocess.Popen(c, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        for c in commands
    ]
    errors = [p.communicate(timeout=600)[1] for p in procs]
    for proc, err in zip(procs, errors):
        assert proc.returncode == 0, err[-3000:]


def _checkpoint(run_dir: Path, step: int) -> dict[str, torch.Tensor]:
    """A checkpoint's policy and critic weights and optimizer moments, by name."""
    path = run_dir / "checkpoints" / f"step_{step:06d}"
    out = {f"policy:{k}": v for k, v in load_file(path / "model.safetensors").items()}
    out |= {f"critic:{k}": v for k, v in load_file(path / "critic.safetensors").items()}
    state = torch.load(path / "trainer_state.pt", weights_only=True)
    for role in ("optimizer", "critic_optimizer"):
        for index, moments in state[role]["state"].items():
            out |= {f"{role}:{index}:{name}": v for name, v in moments.items() if name != "step"}
    return out


def _largest_difference(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> float:
    """The largest difference of two tensors of the same name, relative to the larger's size."""
    assert a.keys() == b.keys()
    return max(
        ((a[k].double() - b[k].double()).abs().max() / a[k].double().abs().max().clamp(min=1e-30)).item()
        for k in a
    )


@pytest.mark.slow
def test_an_fsdp2_checkpoint_holds_the_whole_state_and_resumes_under_ddp_fsdp2_and_one_process(tmp_path):
    """ppo (a policy, a reference and a critic, each with its optimizer state where trained):
    FSDP2's checkpoint equals DDP's to float32 summation order (1e-4 of each tensor); resumed under FSDP2 it continues
    exactly as the run that never stopped, under DDP to summation order, in one process it runs;
    `rlrun export` writes the checkpoint's weights."""
    fsdp2, ddp = tmp_path / "fsdp2", tmp_path / "ddp"
    ppo = {"recipe": "ppo", "extra": ("trainer.strategy=fsdp2",)}
    _all_succeed([_train_command(fsdp2, 2, steps=2, **ppo), _train_command(ddp, 2, steps=1, recipe="ppo")])
    assert json.loads((fsdp2 / "meta.json").read_text())["setup"]["strategy"] == "fsdp2"
    first = _checkpoint(fsdp2, 1)
    start = {k: v for k, v in first.items() if k.startswith("policy:")}
    assert _largest_difference(first, _checkpoint(ddp, 1)) < 1e-5 * max(
        v.abs().max().item() for v in start.values()
    )

    # every resume starts from the same copy of the run at step 1
    resumed = {name: tmp_path / name for name in ("under_fsdp2", "under_ddp", "alone")}
    for run_dir in resumed.values():
        shutil.copytree(fsdp2, run_dir)
        shutil.rmtree(run_dir / "checkpoints" / "step_000002")
        # as if stopped after step 1 (a finished run's records are never resumed over)
        meta = json.loads((run_dir / "meta.json").read_text())
        (run_dir / "meta.json").write_text(json.dumps({**meta, "status": "interrupted", "final_step": 1}))
    strategies = {"under_fsdp2": (2, "fsdp2"), "under_ddp": (2, "ddp"), "alone": (1, "ddp")}
    _all_succeed(
        [
            _train_command(
                resumed[name], processes, steps=2, resume=True, extra=(f"trainer.strategy={strategy}",)
            )
            for name, (processes, strategy) in strategies.items()
        ]
    )
    for name, (processes, strategy) in strategies.items():
        meta = json.loads((resumed[name] / "meta.json").read_text())
        assert meta["status"] == "finished" and meta["resumes"][-1]["from_step"] == 1
        assert meta["resumes"][-1]["setup"]["strategy"] == (strategy if processes > 1 else "none")
    straight = _checkpoint(fsdp2, 2)
    assert _largest_difference(straight, _checkpoint(resumed["under_fsdp2"], 2)) == 0
    assert _largest_difference(straight, _checkpoint(resumed["under_ddp"], 2)) < 1e-4
    assert _checkpoint(resumed["alone"], 2).keys() == straight.keys()  # its own samples: other numbers

    out = tmp_path / "exported"
    result = subprocess.run(
        [sys.executable, "-m", "rlrun", "export", str(fsdp2 / "checkpoints" / "step_000002"), str(out)],
        env=ENV, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    exported = AutoModelForCausalLM.from_pretrained(out).state_dict()
    saved = {k.removeprefix("policy:"): v for k, v in straight.items() if k.startswith("policy:")}
    assert all(torch.equal(exported[k], v) for k, v in saved.items())


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

    def start(case: str) -> subprocess.Popen:
        return subprocess.Popen(
            [sys.executable, "-m", "rlrun", *command, "--run-dir", str(tmp_path / case)]
            + ["--num-processes", "2", "--main-process-port", str(_free_port())],
            env={**ENV, "PYTHONFAULTHANDLER": "1"},  # a hang's stacks, on SIGABRT below
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )

    # One case at a time (each trains until signalled: three at once would share 2 cores for
    # nothing); the next starts while one stops.
    names = list(cases)
    procs = {names[0]: start(names[0])}
    try:
        for case, following in zip(names, [*names[1:], None]):
            proc = procs[case]
            metrics = tmp_path / case / "metrics.jsonl"
            while proc.poll() is None and not (metrics.exists() and metrics.read_text().count("\n") >= 3):
                time.sleep(0.1)
            tree = [proc.pid, *_descendants(proc.pid)]  # rlrun, the launcher, two training processes
            assert len(tree) >= 4, tree
            targets = {"command": tree[:1], "every_process": tree, "one_training_process": tree[-1:]}[case]
            for pid in targets:
                os.kill(pid, signal.SIGTERM)
            if following:
                procs[following] = start(following)
            try:
                _, err = proc.communicate(timeout=300)
            except subprocess.TimeoutExpired:  # trained on, or hung: the rows and stacks tell which
                rows = metrics.read_text().count("\n")
                for pid in _descendants(proc.pid)[1:]:
                    os.kill(pid, signal.SIGABRT)
                pytest.fail(
                    f"{case}: running 300 s after the signal, {rows} rows: {proc.communicate(timeout=60)[1][-6000:]}"
                )
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


@pytest.mark.slow
def test_two_processes_with_half_an_agents_episodes_take_the_same_step_as_one(tmp_path, torchrun):
    """Episodes of a reset/step environment (tests/agents/envs_fixture.py:Recheck) split by group over 2
    DDP processes: the step one process takes on all of them, to float32 summation order."""
    cases = ["grpo/token-mean", "grpo/seq-mean-token-mean"]
    agent = [
        'agent={enabled: true, format: plain, environment: "tests.agents.envs_fixture:Recheck", max_turns: 3, max_turn_tokens: 8}',
        "rollout.max_response_tokens=64",
    ]
    args = [
        str(Path(__file__).with_name("dp_step.py")),
        *cases,
        "--",
        *TINY,
        *SGD_LIKE,
        *agent,
        "trainer.total_steps=1",
    ]
    outs = {name: tmp_path / name for name in ("one", "ddp")}
    for out in outs.values():
        out.mkdir()
    runs = [
        subprocess.Popen([sys.executable, args[0], str(outs["one"]), *args[1:]], env=ENV, cwd=REPO),
        subprocess.Popen(
            [*torchrun, args[0], str(outs["ddp"]), *args[1:]],
            env={**ENV, "ACCELERATE_USE_CPU": "true"},
            cwd=REPO,
        ),
    ]
    assert [p.wait(timeout=600) for p in runs] == [0, 0]
    start = AutoModelForCausalLM.from_pretrained(resolve_model_path("rlrun:tiny-base")).state_dict()
    for case in cases:
        name = case.replace("/", "-") + ".pt"
        one, ddp = (torch.load(out / name)["params"] for out in outs.values())
        moved = max((one[k] - start[k]).abs().max().item() for k in one)
        assert moved > 1e-3, case
        assert max((one[k] - ddp[k]).abs().max().item() for k in one) < 1e-5 * moved, case
