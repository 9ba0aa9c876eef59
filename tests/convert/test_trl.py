"""`rlrun convert trl`: a TRL GRPOConfig YAML becomes a recipe that validates, batch sizes in
rlrun's units (samples over all processes)."""

import textwrap

import pytest
from typer.testing import CliRunner

from rlrun.cli import app
from rlrun.convert.trl import convert, read_config
from rlrun.recipes import load_recipe

CONFIG = """
    # trl grpo --config grpo.yaml
    model_name_or_path: Qwen/Qwen2.5-0.5B-Instruct
    dataset_name: trl-lib/DeepMath-103K
    reward_funcs: [trl_rewards.accuracy, trl_rewards.think_format]
    reward_weights: [1.0, 0.2]
    output_dir: Qwen2.5-0.5B-GRPO
    learning_rate: 1.0e-6
    lr_scheduler_type: cosine
    warmup_ratio: 0.1
    max_steps: 500
    per_device_train_batch_size: 8
    gradient_accumulation_steps: 4
    steps_per_generation: 8
    num_generations: 8
    max_completion_length: 1024
    beta: 0.04
    epsilon_high: 0.28
    loss_type: dr_grpo
    importance_sampling_level: sequence
    use_vllm: true
    vllm_mode: colocate
    vllm_importance_sampling_cap: 2.0
    bf16: true
    logging_steps: 10
    report_to: [wandb]
"""

REWARDS = """
def accuracy(completions, solution, **kwargs):
    return [float(c == s) for c, s in zip(completions, solution)]

def think_format(completions, **kwargs):
    return [float("<think>" in c) for c in completions]
"""


@pytest.fixture
def config(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    (tmp_path / "trl_rewards.py").write_text(REWARDS)
    (tmp_path / "grpo.yaml").write_text(textwrap.dedent(CONFIG))
    return tmp_path / "grpo.yaml"


def test_grpo_config(config):
    settings, _ = read_config(config)
    conversion = convert(settings, str(config), processes=4)
    (config.parent / "r.yaml").write_text(conversion.to_yaml())
    recipe = load_recipe(config.parent / "r.yaml", environment=False).data
    actor = recipe["actor"]
    assert actor["micro_batch_samples"] == 8 * 4  # per device x 4 processes
    assert actor["mini_batch_samples"] == 8 * 4 * 4  # x gradient_accumulation_steps
    assert recipe["trainer"]["prompts_per_step"] == 8 * 4 * 8 // 8  # steps_per_generation x micro / n
    assert recipe["rollout"]["n"] == 8 and recipe["rollout"]["engine"] == "vllm"
    assert recipe["rollout"]["importance_sampling"] == {
        "level": "sequence",
        "cap": 2.0,
    }  # TRL's sequence_mask
    assert actor["kl_loss"] == {"enabled": True, "estimator": "k3", "coef": 0.04}
    assert actor["policy_loss"] == "gspo" and actor["loss_agg_mode"] == "seq-mean-token-sum-norm"
    assert actor["clip_ratio_high"] == 0.28 and actor["optimizer"]["betas"] == [0.9, 0.999]
    assert actor["lr_scheduler"] == {"name": "cosine", "warmup_steps": 50, "min_lr_ratio": 0.0}
    assert recipe["trainer"]["total_steps"] == 500 and recipe["trainer"]["seed"] == 42  # TRL's default seed
    assert recipe["data"]["source"] == "hf:trl-lib/DeepMath-103K"
    assert recipe["reward"]["functions"] == [
        {"fn": "trl_rewards:accuracy", "weight": 1.0, "style": "trl", "kwargs": {}},
        {"fn": "trl_rewards:think_format", "weight": 0.2, "style": "trl", "kwargs": {}},
    ]
    assert "vllm_mode=colocate  [rlrun runs vLLM in the training process" in conversion.report()


def test_cli(config):
    runner = CliRunner()
    result = runner.invoke(app, ["convert", "trl", "grpo.yaml", "--num-processes", "2", "-o", "r.yaml"])
    assert result.exit_code == 0, result.output
    assert "per_device_train_batch_size=8 -> actor.micro_batch_samples: 16" in result.output
    no_rewards = config.parent / "bare.yaml"
    no_rewards.write_text("learning_rate: 2.0e-6\nmax_steps: 10\n")
    result = runner.invoke(app, ["convert", "trl", "bare.yaml"])
    assert result.exit_code == 0, result.output  # rlrun's defaults fill in; the report says what to add
    assert "reward_funcs=null (trl default) -> reward.functions" in result.output


def test_bf16_is_mixed_precision_over_float32_weights_as_in_trl():
    """TRL loads the weights in float32 unless `dtype` says otherwise, and `bf16: true` (its
    default) autocasts over them: a step of lr 1e-6 survives in float32 weights, not in bfloat16."""
    default = convert({}, "x").recipe
    assert default.get("model", {}).get("dtype", "float32") == "float32"
    assert default["trainer"]["autocast"] == "bfloat16"
    assert convert({"bf16": False}, "x").recipe["trainer"].get("autocast") is None
    weights_in_bf16 = convert({"dtype": "bfloat16"}, "x").recipe  # autocast over them: a no-op
    assert weights_in_bf16["model"]["dtype"] == "bfloat16"
    assert weights_in_bf16.get("trainer", {}).get("autocast") is None
