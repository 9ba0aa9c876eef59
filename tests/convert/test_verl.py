"""`rlrun convert verl`: verl command lines written like verl's example scripts (GRPO, DAPO, PPO,
GSPO) and a verl YAML become recipes that validate, with the unit changes worked out."""

import json
import shlex
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml
from typer.testing import CliRunner

from rlrun.cli import app
from rlrun.convert.verl import ConvertError, VerlRun, convert, read_command_line, read_script, read_source
from rlrun.recipes import load_recipe


def verl_parquet(path: Path, rows: int, data_source: str = "openai/gsm8k") -> Path:
    """A file in verl's layout (as verl's examples/data_preprocess/gsm8k.py writes it)."""
    records = [
        {
            "data_source": data_source,
            "prompt": [{"role": "user", "content": f"{i}+{i}="}],
            "ability": "math",
            "reward_model": {"style": "rule", "ground_truth": str(2 * i)},
            "extra_info": {"split": path.stem, "index": i},
        }
        for i in range(rows)
    ]
    pq.write_table(pa.Table.from_pylist(records), path)
    return path


@pytest.fixture
def data_dir(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))  # as `rlrun` does for the working directory
    verl_parquet(tmp_path / "train.parquet", 2048)
    verl_parquet(tmp_path / "test.parquet", 16)
    return tmp_path


def recipe_of(script: str, data_dir: Path, environ: dict | None = None) -> tuple[dict, object]:
    """Convert `script`, write it, check it as `rlrun validate --portable` does; the resolved recipe."""
    run = read_script(textwrap.dedent(script), {"DATA_DIR": str(data_dir), **(environ or {})})
    run.name = "run.sh"
    conversion = convert(run)
    path = data_dir / "converted.yaml"
    path.write_text(conversion.to_yaml())
    return load_recipe(path, environment=False).data, conversion


GRPO = r"""
    set -x
    gsm8k_train_path=$DATA_DIR/train.parquet
    gsm8k_test_path=$DATA_DIR/test.parquet

    python3 -m verl.trainer.main_ppo \
        algorithm.adv_estimator=grpo \
        data.train_files="$gsm8k_train_path" \
        data.val_files="$gsm8k_test_path" \
        data.train_batch_size=1024 \
        data.max_prompt_length=512 \
        data.max_response_length=1024 \
        data.filter_overlong_prompts=True \
        data.truncation='error' \
        actor_rollout_ref.model.path=Qwen/Qwen2.5-7B-Instruct \
        actor_rollout_ref.actor.optim.lr=1e-6 \
        actor_rollout_ref.model.use_remove_padding=True \
        actor_rollout_ref.actor.ppo_mini_batch_size=256 \
        actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=40 \
        actor_rollout_ref.actor.use_kl_loss=True \
        actor_rollout_ref.actor.kl_loss_coef=0.001 \
        actor_rollout_ref.actor.kl_loss_type=low_var_kl \
        actor_rollout_ref.actor.entropy_coeff=0 \
        actor_rollout_ref.model.enable_gradient_checkpointing=True \
        actor_rollout_ref.actor.fsdp_config.param_offload=False \
        actor_rollout_ref.actor.fsdp_config.optimizer_offload=False \
        actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=40 \
        actor_rollout_ref.rollout.tensor_model_parallel_size=2 \
        actor_rollout_ref.rollout.name=vllm \
        actor_rollout_ref.rollout.gpu_memory_utilization=0.6 \
        actor_rollout_ref.rollout.n=5 \
        actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=40 \
        actor_rollout_ref.ref.fsdp_config.param_offload=True \
        algorithm.use_kl_in_reward=False \
        trainer.critic_warmup=0 \
        trainer.logger='["console","wandb"]' \
        trainer.project_name='verl_grpo_example_gsm8k' \
        trainer.experiment_name='qwen2_7b_function_rm' \
        trainer.n_gpus_per_node=8 \
        trainer.nnodes=1 \
        trainer.save_freq=20 \
        trainer.test_freq=5 \
        trainer.total_epochs=15 $@
"""


def test_grpo_script(data_dir):
    recipe, conversion = recipe_of(GRPO, data_dir)
    assert recipe["algorithm"]["advantage"] == "grpo"
    assert recipe["rollout"]["n"] == 5 and recipe["rollout"]["engine"] == "vllm"
    assert recipe["trainer"]["prompts_per_step"] == 1024
    assert recipe["actor"]["mini_batch_samples"] == 256 * 5  # prompts -> samples
    assert recipe["actor"]["micro_batch_samples"] == 40 * 8  # per GPU -> over all 8 GPUs
    assert recipe["trainer"]["total_steps"] == 15 * (2048 // 1024)  # epochs -> steps (drop_last)
    assert recipe["actor"]["kl_loss"] == {"enabled": True, "estimator": "low_var_kl", "coef": 0.001}
    assert recipe["actor"]["optimizer"]["lr"] == 1e-6
    assert recipe["actor"]["optimizer"]["weight_decay"] == 0.01  # verl's default, not rlrun's 0
    assert recipe["data"]["source"] == str(data_dir / "train.parquet")
    assert recipe["data"]["answer_key"] == "answer"  # absent: rlrun falls back to verl's reward_model
    assert recipe["data"]["max_prompt_tokens"] == 512 and recipe["rollout"]["max_response_tokens"] == 1024
    assert recipe["data"]["overlong_prompts"] == "drop"
    assert recipe["reward"]["functions"][0]["fn"] == "rlrun:verl_default"  # verl's routing by data_source
    assert recipe["trainer"]["eval"]["prompts"] is None  # verl scores the whole validation set
    assert (
        recipe["actor"]["clip_ratio_low"] == recipe["actor"]["clip_ratio_high"] == 0.2
    )  # verl's explicit defaults
    assert (
        recipe["trainer"]["eval"]["every_steps"] == 5 and recipe["trainer"]["checkpoint"]["every_steps"] == 20
    )
    assert (
        recipe["logging"]["wandb"]["enabled"]
        and recipe["logging"]["wandb"]["project"] == "verl_grpo_example_gsm8k"
    )
    assert recipe["critic"]["enabled"] is False
    report = conversion.report()
    assert report.startswith("read as verl 0.9.1 runs it")  # the version the table describes
    assert "actor_rollout_ref.actor.ppo_mini_batch_size=256 -> actor.mini_batch_samples: 1280" in report
    assert "verl counts prompts, rlrun samples: x rollout.n" in report
    assert "actor_rollout_ref.model.use_remove_padding=true  [memory or speed" in report
    assert "trainer.critic_warmup=0 -> actor.frozen_steps: 0" in report  # verl: no step skipped
    assert "--num-processes 8" in report


DAPO = r"""
    #!/usr/bin/env bash
    set -xeuo pipefail

    project_name='DAPO'
    exp_name='DAPO-Qwen2.5-7B-Math'

    adv_estimator=grpo
    use_kl_in_reward=False
    kl_coef=0.0
    use_kl_loss=False
    kl_loss_coef=0.0

    clip_ratio_low=0.2
    clip_ratio_high=0.28

    max_prompt_length=$((1024 * 2))
    max_response_length=$((1024 * 8))
    enable_overlong_buffer=True
    overlong_buffer_len=$((1024 * 4))
    overlong_penalty_factor=1.0

    loss_agg_mode="token-mean"

    enable_filter_groups=True
    filter_groups_metric=acc
    max_num_gen_batches=10
    train_prompt_bsz=512
    gen_prompt_bsz=$((train_prompt_bsz * 3))
    n_resp_per_prompt=16
    train_prompt_mini_bsz=32

    NNODES=${NNODES:-2}
    RAY_DATA_HOME=${RAY_DATA_HOME:-"${DATA_DIR}"}
    MODEL_PATH=${MODEL_PATH:-"Qwen/Qwen2.5-Math-7B"}
    TRAIN_FILE=${TRAIN_FILE:-"${RAY_DATA_HOME}/train.parquet"}
    TEST_FILE=${TEST_FILE:-"${RAY_DATA_HOME}/test.parquet"}

    temperature=1.0
    top_p=1.0
    top_k=-1 # 0 for HF rollout, -1 for vLLM rollout

    python3 -m recipe.dapo.main_dapo \
        data.train_files="${TRAIN_FILE}" \
        data.val_files="${TEST_FILE}" \
        data.prompt_key=prompt \
        data.truncation='left' \
        data.max_prompt_length=${max_prompt_length} \
        data.max_response_length=${max_response_length} \
        data.gen_batch_size=${gen_prompt_bsz} \
        data.train_batch_size=${train_prompt_bsz} \
        actor_rollout_ref.rollout.n=${n_resp_per_prompt} \
        algorithm.adv_estimator=${adv_estimator} \
        algorithm.use_kl_in_reward=${use_kl_in_reward} \
        algorithm.kl_ctrl.kl_coef=${kl_coef} \
        actor_rollout_ref.actor.use_kl_loss=${use_kl_loss} \
        actor_rollout_ref.actor.kl_loss_coef=${kl_loss_coef} \
        actor_rollout_ref.actor.clip_ratio_low=${clip_ratio_low} \
        actor_rollout_ref.actor.clip_ratio_high=${clip_ratio_high} \
        actor_rollout_ref.actor.clip_ratio_c=10.0 \
        algorithm.filter_groups.enable=${enable_filter_groups} \
        algorithm.filter_groups.max_num_gen_batches=${max_num_gen_batches} \
        algorithm.filter_groups.metric=${filter_groups_metric} \
        actor_rollout_ref.model.use_remove_padding=True \
        actor_rollout_ref.actor.use_dynamic_bsz=True \
        actor_rollout_ref.actor.ppo_max_token_len_per_gpu=$((max_prompt_length + max_response_length)) \
        actor_rollout_ref.model.path="${MODEL_PATH}" \
        actor_rollout_ref.model.enable_gradient_checkpointing=True \
        actor_rollout_ref.actor.optim.lr=1e-6 \
        actor_rollout_ref.actor.optim.lr_warmup_steps=10 \
        actor_rollout_ref.actor.optim.weight_decay=0.1 \
        actor_rollout_ref.actor.ppo_mini_batch_size=${train_prompt_mini_bsz} \
        actor_rollout_ref.actor.fsdp_config.param_offload=False \
        actor_rollout_ref.actor.entropy_coeff=0 \
        actor_rollout_ref.actor.grad_clip=1.0 \
        actor_rollout_ref.actor.loss_agg_mode=${loss_agg_mode} \
        actor_rollout_ref.rollout.gpu_memory_utilization=0.80 \
        actor_rollout_ref.rollout.tensor_model_parallel_size=4 \
        actor_rollout_ref.rollout.enable_chunked_prefill=True \
        actor_rollout_ref.rollout.temperature=${temperature} \
        actor_rollout_ref.rollout.top_p=${top_p} \
        actor_rollout_ref.rollout.top_k="${top_k}" \
        actor_rollout_ref.rollout.val_kwargs.do_sample=True \
        actor_rollout_ref.rollout.val_kwargs.n=1 \
        reward_model.reward_manager=dapo \
        reward_model.overlong_buffer.enable=${enable_overlong_buffer} \
        reward_model.overlong_buffer.len=${overlong_buffer_len} \
        reward_model.overlong_buffer.penalty_factor=${overlong_penalty_factor} \
        custom_reward_function.path=rewards/dapo_score.py \
        custom_reward_function.name=compute_score \
        trainer.logger='["console","wandb"]' \
        trainer.project_name="${project_name}" \
        trainer.experiment_name="${exp_name}" \
        trainer.n_gpus_per_node=8 \
        trainer.nnodes="${NNODES}" \
        trainer.val_before_train=True \
        trainer.test_freq=5 \
        trainer.save_freq=5 \
        trainer.total_epochs=1 \
        trainer.resume_mode=auto 2>&1 | tee dapo.log
"""

DAPO_REWARD = '''
def compute_score(data_source, solution_str, ground_truth, extra_info=None):
    """verl style: one sample, a dict with score and acc."""
    right = solution_str.strip() == ground_truth
    return {"score": 1.0 if right else -1.0, "acc": right, "pred": solution_str.strip()}
'''


def test_dapo_script_with_shell_arithmetic_defaults_and_a_verl_reward_file(data_dir):
    (data_dir / "rewards").mkdir()
    (data_dir / "rewards" / "dapo_score.py").write_text(DAPO_REWARD)
    recipe, conversion = recipe_of(DAPO, data_dir)
    assert recipe["data"]["max_prompt_tokens"] == 2048 and recipe["rollout"]["max_response_tokens"] == 8192
    assert recipe["data"]["overlong_prompts"] == "truncate"  # verl truncation=left
    assert recipe["trainer"]["prompts_per_step"] == 512 and recipe["rollout"]["n"] == 16
    assert recipe["actor"]["mini_batch_samples"] == 32 * 16
    assert recipe["actor"]["micro_batch_samples"] == 32 * 16  # dynamic batch size: no fixed micro-batch
    assert recipe["actor"]["clip_ratio_low"] == 0.2 and recipe["actor"]["clip_ratio_high"] == 0.28
    assert recipe["actor"]["clip_ratio_c"] == 10.0 and recipe["actor"]["kl_loss"]["enabled"] is False
    assert recipe["actor"]["lr_scheduler"]["warmup_steps"] == 10
    assert recipe["algorithm"]["group_filter"] == {
        "enabled": True,
        "metric": "acc",
        "max_num_gen_batches": 10,
        "gen_prompts_per_batch": 512 * 3,  # DAPO draws data.gen_batch_size prompts per generation batch
    }
    assert recipe["reward"]["overlong_shaping"] == {
        "enabled": True,
        "buffer_tokens": 4096,
        "penalty_factor": 1.0,
    }
    assert recipe["reward"]["functions"] == [
        {"fn": "rewards.dapo_score:compute_score", "weight": 1.0, "style": "verl", "kwargs": {}}
    ]
    assert recipe["rollout"]["top_k"] == 0 and recipe["rollout"]["vllm"]["tensor_parallel_size"] == 4
    assert recipe["trainer"]["eval"]["greedy"] is True  # do_sample at val_kwargs.temperature 0: greedy
    assert recipe["trainer"]["total_steps"] == 2048 // 1536  # DAPO's dataloader draws generation batches
    report = conversion.report()
    assert "data.gen_batch_size=1536 -> algorithm.group_filter.gen_prompts_per_batch: 1536" in report
    assert "reward_model.reward_manager=dapo  [naive and dapo score each sample" in report
    assert "--num-processes 16" in report  # 8 GPUs x NNODES=2 (the script's default)


PPO = r"""
    set -x

    python3 -m verl.trainer.main_ppo \
        data.train_files=$DATA_DIR/train.parquet \
        data.val_files=$DATA_DIR/test.parquet \
        data.train_batch_size=1024 \
        data.max_prompt_length=512 \
        data.max_response_length=512 \
        data.filter_overlong_prompts=True \
        data.truncation='error' \
        actor_rollout_ref.model.path=deepseek-ai/deepseek-llm-7b-chat \
        actor_rollout_ref.actor.optim.lr=1e-6 \
        actor_rollout_ref.model.use_remove_padding=True \
        actor_rollout_ref.actor.ppo_mini_batch_size=256 \
        actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=16 \
        actor_rollout_ref.actor.fsdp_config.param_offload=False \
        actor_rollout_ref.actor.fsdp_config.optimizer_offload=False \
        actor_rollout_ref.actor.use_kl_loss=False \
        actor_rollout_ref.model.enable_gradient_checkpointing=True \
        actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=32 \
        actor_rollout_ref.rollout.tensor_model_parallel_size=4 \
        actor_rollout_ref.rollout.name=vllm \
        actor_rollout_ref.rollout.gpu_memory_utilization=0.4 \
        critic.optim.lr=1e-5 \
        critic.model.use_remove_padding=True \
        critic.model.path=deepseek-ai/deepseek-llm-7b-chat \
        critic.model.enable_gradient_checkpointing=True \
        critic.ppo_micro_batch_size_per_gpu=32 \
        critic.model.fsdp_config.param_offload=False \
        algorithm.use_kl_in_reward=False \
        trainer.critic_warmup=0 \
        trainer.logger='["console","wandb"]' \
        trainer.project_name='verl_example_gsm8k' \
        trainer.experiment_name='deepseek_llm_7b_function_rm' \
        trainer.n_gpus_per_node=8 \
        trainer.nnodes=1 \
        trainer.save_freq=20 \
        trainer.test_freq=1 \
        trainer.total_training_steps=300 $@
"""


def test_ppo_script_relies_on_verl_defaults(data_dir):
    recipe, conversion = recipe_of(PPO, data_dir)
    assert recipe["algorithm"]["advantage"] == "gae"  # verl's default estimator, not set in the script
    assert recipe["critic"]["enabled"] is True  # verl turns the critic on for gae by itself
    assert (
        recipe["critic"]["optimizer"]["lr"] == 1e-5
        and recipe["critic"]["model_path"] == "deepseek-ai/deepseek-llm-7b-chat"
    )
    assert recipe["actor"]["frozen_steps"] == 0
    assert recipe["rollout"]["n"] == 1  # verl's default
    assert recipe["actor"]["mini_batch_samples"] == 256 and recipe["actor"]["micro_batch_samples"] == 16 * 8
    assert recipe["trainer"]["total_steps"] == 300
    assert "algorithm.adv_estimator=gae (verl default) -> algorithm.advantage: gae" in conversion.report()
    assert (
        "critic.ppo_micro_batch_size_per_gpu=32  [memory or speed: the numbers do not depend on it"
        in conversion.report()
    )


GSPO = r"""
    loss_mode=gspo
    adv_estimator=grpo
    clip_ratio_low=0.0003
    clip_ratio_high=0.0004
    loss_agg_mode="seq-mean-token-mean"
    train_batch_size=256
    ppo_mini_batch_size=64
    n_resp_per_prompt=16

    python3 -m verl.trainer.main_ppo \
        algorithm.adv_estimator=${adv_estimator} \
        actor_rollout_ref.actor.policy_loss.loss_mode=${loss_mode} \
        data.train_files="['$DATA_DIR/train.parquet']" \
        data.val_files="['$DATA_DIR/test.parquet']" \
        data.train_batch_size=${train_batch_size} \
        data.max_prompt_length=1024 \
        data.max_response_length=4096 \
        actor_rollout_ref.model.path=Qwen/Qwen3-8B \
        actor_rollout_ref.actor.optim.lr=1e-6 \
        actor_rollout_ref.actor.optim.lr_warmup_steps_ratio=0.05 \
        actor_rollout_ref.actor.optim.warmup_style=cosine \
        actor_rollout_ref.actor.ppo_mini_batch_size=${ppo_mini_batch_size} \
        actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=8 \
        actor_rollout_ref.actor.use_kl_loss=False \
        actor_rollout_ref.actor.clip_ratio_low=${clip_ratio_low} \
        actor_rollout_ref.actor.clip_ratio_high=${clip_ratio_high} \
        actor_rollout_ref.actor.loss_agg_mode=${loss_agg_mode} \
        actor_rollout_ref.rollout.name=sglang \
        actor_rollout_ref.rollout.n=${n_resp_per_prompt} \
        algorithm.use_kl_in_reward=False \
        trainer.n_gpus_per_node=4 \
        trainer.nnodes=1 \
        trainer.total_training_steps=500 \
        trainer.device=cuda
"""


def test_gspo_script(data_dir):
    recipe, conversion = recipe_of(GSPO, data_dir)
    actor = recipe["actor"]
    assert actor["policy_loss"] == "gspo" and actor["loss_agg_mode"] == "seq-mean-token-mean"
    assert actor["clip_ratio_low"] == 3e-4 and actor["clip_ratio_high"] == 4e-4
    assert actor["mini_batch_samples"] == 64 * 16 and actor["micro_batch_samples"] == 8 * 4
    assert (
        actor["lr_scheduler"]["name"] == "cosine" and actor["lr_scheduler"]["warmup_steps"] == 25
    )  # 5% of 500
    assert recipe["data"]["source"] == str(data_dir / "train.parquet")  # the list's one file
    assert recipe["rollout"]["engine"] == "vllm"  # sglang -> vllm, reported
    assert "actor_rollout_ref.rollout.name=sglang -> rollout.engine: vllm" in conversion.report()


def test_verl_yaml_with_interpolations(data_dir):
    text = f"""
    defaults:
      - ppo_trainer
      - _self_
    data:
      train_files: {data_dir}/train.parquet
      val_files: {data_dir}/test.parquet
      train_batch_size: 64
      max_prompt_length: 256
      max_response_length: 768
    actor_rollout_ref:
      model:
        path: Qwen/Qwen2.5-0.5B-Instruct
      actor:
        _target_: verl.workers.config.FSDPActorConfig
        ppo_mini_batch_size: 16
        ppo_micro_batch_size_per_gpu: 4
      rollout:
        n: 4
        response_length: ${{data.max_response_length}}
        log_prob_max_token_len_per_gpu: ${{oc.select:actor_rollout_ref.actor.ppo_max_token_len_per_gpu,16384}}
    algorithm:
      adv_estimator: rloo
    custom_reward_function:
      reward_kwargs:
        method: flexible
    trainer:
      n_gpus_per_node: 2
      total_training_steps: 40
    """
    (data_dir / "verl.yaml").write_text(textwrap.dedent(text))
    run = read_source([str(data_dir / "verl.yaml")])
    assert run.settings["actor_rollout_ref.rollout.response_length"] == 768
    assert "Hydra `defaults:`" in run.notes[0]
    conversion = convert(run)
    (data_dir / "r.yaml").write_text(conversion.to_yaml())
    recipe = load_recipe(data_dir / "r.yaml", environment=False).data
    assert recipe["algorithm"]["advantage"] == "rloo" and recipe["rollout"]["max_response_tokens"] == 768
    assert recipe["actor"]["mini_batch_samples"] == 64 and recipe["actor"]["micro_batch_samples"] == 8
    # verl's default scorers ignore reward_kwargs (only a custom_reward_function gets them)
    assert recipe["reward"]["functions"] == [
        {"fn": "rlrun:verl_default", "weight": 1.0, "style": "auto", "kwargs": {}}
    ]


def settings_run(settings: dict) -> VerlRun:
    """A command line's settings, with a step count so that no data file is counted."""
    return VerlRun({"trainer.total_training_steps": 10, **settings})


def test_command_line_forms():
    args = ["python3", "-m", "verl.trainer.main_ppo", "+trainer.val_only=False", "--config-path=x"]
    run = read_command_line([*args, "data.train_batch_size=8", "trainer.logger=['console']", ""])
    assert run.settings == {
        "trainer.val_only": False,
        "data.train_batch_size": 8,
        "trainer.logger": ["console"],
    }
    assert run.trainer == "verl.trainer.main_ppo"
    with pytest.raises(ConvertError, match="`oops` is not a verl override"):
        read_command_line(["oops"])
    with pytest.raises(ConvertError, match="Hydra deletion"):
        read_command_line(["~trainer.logger"])
    with pytest.raises(ConvertError, match="no command running verl's trainer"):
        read_script("echo hello\n")
    run = read_script("python3 -m verl.trainer.main_ppo data.train_files=$NOT_SET/x.parquet\n", {})
    assert run.settings["data.train_files"] == "$NOT_SET/x.parquet"
    with pytest.raises(ConvertError, match=r"data.train_files=\$NOT_SET/x.parquet: it waits on \$NOT_SET"):
        convert(run)


def test_a_loss_keeps_its_own_parameters():
    run = read_command_line(
        [
            "actor_rollout_ref.actor.policy_loss.loss_mode=clip_cov",
            "actor_rollout_ref.actor.policy_loss.clip_cov_ratio=0.0005",
            "actor_rollout_ref.actor.policy_loss.clip_cov_ub=4.0",
        ]
    )
    nested = convert(settings_run(run.settings)).recipe["actor"]
    assert nested["policy_loss"] == "clip_cov"
    assert nested["loss_kwargs"] == {"clip_cov_ratio": 0.0005, "clip_cov_ub": 4.0}


def test_unknown_keys_are_refused_not_lost():
    with pytest.raises(ConvertError, match=r"my_team.flag=1: not a verl key rlrun knows"):
        convert(settings_run({"actor_rollout_ref.actor.optim.lr": 2e-6, "my_team.flag": 1}))


def test_the_actor_computes_in_bf16_over_float32_master_weights_as_in_verl():
    """verl's FSDP actor keeps float32 master weights and computes in bf16 (its default): that
    is rlrun's autocast, not bfloat16 weights (where a step of lr 1e-6 would round away)."""
    default = convert(settings_run({})).recipe
    assert default.get("model", {}).get("dtype", "float32") == "float32"
    assert default["trainer"]["autocast"] == "bfloat16"
    run = read_command_line(["+actor_rollout_ref.actor.fsdp_config.mixed_precision.param_dtype=fp32"])
    assert (
        convert(settings_run(run.settings)).recipe["trainer"].get("autocast") is None
    )  # the user's key wins
    newer_name = convert(settings_run({"actor_rollout_ref.actor.fsdp_config.dtype": "float32"})).recipe
    assert newer_name["trainer"].get("autocast") is None
    master_in_bf16 = convert(settings_run({"actor_rollout_ref.actor.fsdp_config.model_dtype": "bf16"})).recipe
    assert master_in_bf16["model"]["dtype"] == "bfloat16"
    assert master_in_bf16.get("trainer", {}).get("autocast") is None
    assert "rollout.dtype=bf16  [rlrun's rollout runs the policy's own weights]" in (
        convert(settings_run({"actor_rollout_ref.rollout.dtype": "bf16"})).report()
    )


runner = CliRunner()


def test_cli_writes_once_and_validates(data_dir):
    (data_dir / "run.sh").write_text(textwrap.dedent(GRPO).replace("$DATA_DIR", str(data_dir)))
    result = runner.invoke(app, ["convert", "verl", "run.sh", "-o", "out/grpo.yaml"])
    assert result.exit_code == 0, result.output
    assert "a valid recipe" in result.output and "actor.mini_batch_samples: 1280" in result.output
    assert yaml.safe_load((data_dir / "out" / "grpo.yaml").read_text())["rollout"]["n"] == 5
    again = runner.invoke(app, ["convert", "verl", "run.sh", "-o", "out/grpo.yaml"])
    assert again.exit_code == 2 and "already exists" in again.output
    verl = [
        "python3",
        "-m",
        "verl.trainer.main_ppo",
        "data.train_batch_size=64",
        "data.train_files=train.parquet",
    ]
    verl.append("data.val_files=test.parquet")
    printed = runner.invoke(app, ["convert", "verl", *verl, "actor_rollout_ref.actor.ppo_mini_batch_size=16"])
    assert printed.exit_code == 0, printed.output
    assert "prompts_per_step: 64" in printed.output
    broken = runner.invoke(app, ["convert", "verl", "missing.yaml"])
    assert broken.exit_code == 2 and "missing.yaml: cannot read it" in broken.output


def test_cli_reports_a_recipe_that_does_not_validate(data_dir):
    # verl would refuse this too: 64 prompts a step cannot make mini-batches of 256 prompts
    verl = ["data.train_batch_size=64", "data.train_files=train.parquet", "data.val_files=test.parquet"]
    for output in ("bad.yaml", "out/bad.yaml"):  # checked beside where it would go, or elsewhere
        result = runner.invoke(app, ["convert", "verl", *verl, "-o", output])
        assert result.exit_code == 2
        assert f"the recipe above (not written to {output})" in result.output
        assert "actor.mini_batch_samples" in result.output and "prompts_per_step: 64" in result.output
        assert sorted(p.name for p in data_dir.iterdir()) == ["test.parquet", "train.parquet"]  # nothing left


E2E_RUN = r"""
    python3 -m verl.trainer.main_ppo \
        algorithm.adv_estimator=grpo \
        data.train_files=train.parquet \
        data.val_files=test.parquet \
        data.train_batch_size=4 \
        data.max_prompt_length=64 \
        data.max_response_length=8 \
        actor_rollout_ref.model.path=rlrun:tiny-base \
        actor_rollout_ref.model.enable_gradient_checkpointing=False \
        +actor_rollout_ref.actor.fsdp_config.mixed_precision.param_dtype=fp32 \
        actor_rollout_ref.rollout.name=hf \
        actor_rollout_ref.rollout.n=4 \
        actor_rollout_ref.actor.optim.lr=3e-4 \
        actor_rollout_ref.actor.ppo_mini_batch_size=2 \
        actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=4 \
        actor_rollout_ref.actor.use_kl_loss=True \
        custom_reward_function.path=my_reward.py \
        custom_reward_function.name=compute_score \
        trainer.n_gpus_per_node=1 \
        trainer.device=cpu \
        trainer.logger=['console'] \
        trainer.total_training_steps=2
"""


@pytest.mark.slow
def test_a_verl_run_and_its_reward_function_train_without_edits(tmp_path, monkeypatch):
    """The issue's "done when": verl parquet, a verl compute_score and a verl command line -> a run."""
    for split, rows in (("train", 64), ("test", 16)):
        records = [
            {
                "data_source": "arithmetic",
                "prompt": [{"role": "user", "content": f"{10 + i}+{20 + i}="}],
                "ability": "math",
                "reward_model": {"style": "rule", "ground_truth": str(30 + 2 * i)},
                "extra_info": {"split": split, "index": i},
            }
            for i in range(rows)
        ]
        pq.write_table(pa.Table.from_pylist(records), tmp_path / f"{split}.parquet")
    (tmp_path / "my_reward.py").write_text(DAPO_REWARD)
    (tmp_path / "run.sh").write_text(textwrap.dedent(E2E_RUN))
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    converted = runner.invoke(app, ["convert", "verl", "run.sh", "-o", "recipe.yaml"])
    assert converted.exit_code == 0, converted.output
    train = [
        sys.executable,
        "-c",
        "from rlrun.cli import app; app(prog_name='rlrun')",
        "train",
        "recipe.yaml",
    ]
    done = subprocess.run(
        [*train, "--name", "run"], check=False, cwd=tmp_path, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    last = json.loads((tmp_path / "runs" / "run" / "metrics.jsonl").read_text().splitlines()[-1])
    assert last["step"] == 2
    assert "reward/compute_score/acc/mean" in last and "reward/compute_score/pred/mean" not in last


def test_the_documented_convert_command(tmp_path, monkeypatch):
    """docs/coming-from-verl-trl.md's `rlrun convert verl` command, exactly as written, in a fresh
    clone's folders (examples/, recipes/) with nothing in $HOME: its overrides point the run at
    the shipped GSM8K sample."""
    from tests.test_docs import docs

    repo = Path(__file__).resolve().parents[2]
    page = (repo / "docs" / "coming-from-verl-trl.md").read_text()
    (command,) = [
        s.command for s in docs.read_page(page) if (s.command or "").startswith("rlrun convert verl ")
    ]
    for folder in ("examples", "recipes"):
        shutil.copytree(repo / folder, tmp_path / folder)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))  # no ~/data/gsm8k
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, shlex.split(command)[1:])
    assert result.exit_code == 0, result.output
    recipe = load_recipe(tmp_path / "grpo_gsm8k.yaml", environment=False).recipe
    assert (
        recipe.data.source == recipe.data.val_source == str(tmp_path / "recipes" / "gsm8k" / "sample.parquet")
    )
    assert recipe.trainer.prompts_per_step == 16 and recipe.rollout.n == 8
    assert recipe.actor.mini_batch_samples == 16 * 8 and recipe.actor.micro_batch_samples == 16 * 4
    assert recipe.trainer.total_steps == 15 * (20 // 16)  # 15 epochs of the 20-row sample
    assert recipe.reward.functions[0].fn == "rlrun:verl_default"  # GSM8K's scorer, by data_source
    assert "--num-processes 4" in result.output
