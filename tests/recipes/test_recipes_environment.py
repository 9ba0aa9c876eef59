"""Environment checks: a recipe this machine cannot run (vLLM, a GPU) is an error located at the
key that asks for it, unless validation is told the recipe is for another machine."""

from __future__ import annotations

import importlib.util
from importlib.machinery import ModuleSpec

import pytest

from rlrun.errors import RecipeError
from rlrun.recipes import load_recipe


def _codes(exc: RecipeError) -> dict[str, str]:
    return {issue.code: issue.format() for issue in exc.issues}


def test_vllm_without_vllm_is_an_error_at_the_engine_key(tmp_path, monkeypatch):
    monkeypatch.setattr("rlrun.rollout.vllm.availability_problem", lambda: "vLLM is not installed")
    recipe = tmp_path / "r.yaml"
    recipe.write_text("extends: grpo\nrollout:\n  engine: vllm\n")
    with pytest.raises(RecipeError) as caught:
        load_recipe(recipe)
    message = _codes(caught.value)["engine-unavailable"]
    assert "line 3, column 3" in message and "`rollout.engine`" in message
    assert "vLLM is not installed" in message and "--portable" in message


def test_vllm_where_it_can_run_is_fine(tmp_path, monkeypatch):
    monkeypatch.setattr("rlrun.rollout.vllm.availability_problem", lambda: None)
    recipe = tmp_path / "r.yaml"
    recipe.write_text("extends: grpo\nrollout:\n  engine: vllm\n")
    assert load_recipe(recipe).recipe.rollout.engine == "vllm"


def test_cuda_without_a_gpu_is_an_error_unless_portable(monkeypatch):
    monkeypatch.setattr("torch.cuda.is_available", lambda: False)
    with pytest.raises(RecipeError) as caught:
        load_recipe("grpo", ["trainer.device=cuda"])
    message = _codes(caught.value)["device-unavailable"]
    assert "trainer.device=cuda" in message and "torch sees none" in message
    assert load_recipe("grpo", ["trainer.device=cuda"], environment=False).recipe.trainer.device == "cuda"


def test_autocast_on_a_cpu_without_bf16_arithmetic_is_an_error_unless_portable(monkeypatch):
    monkeypatch.setattr("rlrun.facts.machine.bf16_supported", lambda device: False)
    overrides = ["trainer.autocast=bfloat16", "trainer.device=cpu"]
    with pytest.raises(RecipeError) as caught:
        load_recipe("grpo", overrides)
    message = _codes(caught.value)["autocast-unsupported"]
    assert "trainer.autocast=bfloat16" in message and "its CPU has no bfloat16 arithmetic" in message
    assert load_recipe("grpo", overrides, environment=False).recipe.trainer.autocast == "bfloat16"


def test_compile_on_cpu_without_a_cpp_compiler_is_an_error(monkeypatch):
    monkeypatch.setattr("rlrun.facts.machine.cpp_compiler", lambda: None)
    with pytest.raises(RecipeError) as caught:
        load_recipe("grpo", ["trainer.compile=true", "trainer.device=cpu"])
    message = _codes(caught.value)["compiler-missing"]
    assert "`trainer.compile`" in message and "no C++ compiler was found" in message


def test_deepspeed_without_the_package_is_an_error_at_the_strategy_key(monkeypatch):
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        "importlib.util.find_spec", lambda name, *a: None if name == "deepspeed" else real_find_spec(name, *a)
    )
    with pytest.raises(RecipeError) as caught:
        load_recipe("grpo", ["trainer.strategy=deepspeed_zero3"])
    message = _codes(caught.value)["strategy-unavailable"]
    assert "`trainer.strategy`" in message and "DeepSpeed is not installed" in message


def test_deepspeed_on_a_cpu_is_an_error_even_where_it_is_installed(monkeypatch):
    """Accelerate sets up ZeRO only off the CPU: on a CPU the processes would run plain DDP."""
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        "importlib.util.find_spec",
        lambda name, *a: ModuleSpec("deepspeed", None) if name == "deepspeed" else real_find_spec(name, *a),
    )
    with pytest.raises(RecipeError) as caught:
        load_recipe("grpo", ["trainer.strategy=deepspeed_zero2", "trainer.device=cpu"])
    assert "only on GPUs" in _codes(caught.value)["strategy-unavailable"]
    monkeypatch.setattr("torch.cuda.is_available", lambda: True)
    assert (
        load_recipe("grpo", ["trainer.strategy=deepspeed_zero2"]).recipe.trainer.strategy == "deepspeed_zero2"
    )


def test_fsdp2_needs_torchs_fully_shard(monkeypatch):
    assert load_recipe("grpo", ["trainer.strategy=fsdp2"]).recipe.trainer.strategy == "fsdp2"  # torch 2.6+
    monkeypatch.setattr("rlrun.facts.machine.fsdp_module_class", lambda: None)
    with pytest.raises(RecipeError) as caught:
        load_recipe("grpo", ["trainer.strategy=fsdp2"])
    assert "has no FSDP2" in _codes(caught.value)["strategy-unavailable"]
