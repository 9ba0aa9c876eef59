"""TRL's own GRPO configs and examples (tests/convert/fixtures/trl, see its README): each one
converts to the same experiment, checked key by key, or is refused with the reason naming the
key. None is changed silently or ends in a traceback.

Tally (73 inputs; hub datasets' rows given as `--dataset-rows 1000`): 4 converted faithfully,
69 refused with a reason, 0 silently changed, 0 tracebacks."""

import shutil
from pathlib import Path

import pytest

from rlrun.convert.conversion import ConvertError
from rlrun.convert.trl import convert, read_config

FIXTURES = Path(__file__).parent / "fixtures" / "trl"
ROWS = 1000  # `--dataset-rows`: the hub datasets are not downloaded here

# What every faithful conversion shares: TRL 1.16's defaults in rlrun's keys.
TRL_DEFAULT_RECIPE = {
    "data.max_prompt_tokens": None,  # TRL 1.16 has no prompt limit
    "data.apply_chat_template": "messages",  # chat prompts templated, text prompts as they are
    "data.answer_key": "solution",  # the column TRL's accuracy_reward reads
    "rollout.max_response_tokens": 512,
    "actor.optimizer.lr": 1e-6,
    "actor.lr_scheduler.name": "linear",
    "actor.kl_loss.enabled": False,  # beta 0
    "actor.clip_ratio_low": 0.2,
    "actor.clip_ratio_high": 0.2,
    "algorithm.advantage_kwargs": {"epsilon": 1e-4},
    "trainer.seed": 42,
    "trainer.autocast": "bfloat16",  # bf16 over float32 weights
    "reward.functions": [{"fn": "trl.rewards:accuracy_reward", "style": "trl", "weight": 1.0}],
}
POLARIS = {"model.path": "Qwen/Qwen2.5-0.5B", "data.source": "hf:HuggingFaceH4/Polaris-Dataset-53K"}
ONE_PROCESS = {  # 8 samples per device, 8 generations: one prompt a step; 3 epochs of 1000 rows
    "actor.micro_batch_samples": 8,
    "actor.mini_batch_samples": 8,
    "trainer.prompts_per_step": 1,
    "trainer.total_steps": 3 * 1000,
}
FAITHFUL = {
    "clis_grpo_1.yaml": {**POLARIS, **ONE_PROCESS},
    "clis_grpo_2.yaml": {  # num_processes: 4
        **POLARIS,
        "actor.micro_batch_samples": 32,
        "actor.mini_batch_samples": 32,
        "trainer.prompts_per_step": 4,
        "trainer.total_steps": 3 * (1000 // 4),
    },
    "clis_grpo_3.yaml": {**POLARIS, **ONE_PROCESS},  # accelerate_config: zero2 (infrastructure)
    "docs_vllm_integration_1.py.txt": {
        "model.path": "Qwen/Qwen2.5-7B",
        "data.source": "hf:trl-lib/DeepMath-103K",
        "rollout.engine": "vllm",
        "rollout.importance_sampling": {
            "level": "sequence",
            "mode": "mask",
            "cap": 3.0,
        },  # sequence_mask, 3.0
        **ONE_PROCESS,
    },
}
EXCERPT = "is an excerpt|not valid Python"
SCRIPT_REWARD = "is defined in the script, which rlrun does not run"
NO_DATASET = "`dataset_name: None` cannot be converted"
RLOO = "a TRL RLOO config. TRL's RLOO trainer takes a sequence-level ratio"
SFT = "a TRL SFT config"
ENVIRONMENT = "environment_factory=spec.environment_factory\\)`: TRL's environment_factory is a Python class.*agent.environment"
REFUSED = {
    "clis_grpo_4.yaml": "`datasets: .*` cannot be converted: rlrun reads one data source",
    **{f"clis_rloo_{n}.yaml": RLOO for n in range(1, 5)},
    **{f"clis_sft_{n}.yaml": SFT for n in range(1, 5)},
    "examples_cli_example_config.yaml": SFT,
    "docs_grpo_trainer_1.py.txt": EXCERPT,
    "docs_grpo_trainer_2.py.txt": EXCERPT,
    "docs_grpo_trainer_3.py.txt": EXCERPT,
    "docs_grpo_trainer_4.py.txt": "`vllm_server_host=args.vllm_server_host.*` is computed",
    "docs_grpo_trainer_5.py.txt": EXCERPT,
    "docs_grpo_trainer_6.py.txt": EXCERPT,
    "docs_grpo_trainer_7.py.txt": "GRPOTrainer\\(environment_factory=IncrementEnv\\)",
    "docs_grpo_trainer_8.py.txt": f"`format_reward` {SCRIPT_REWARD}",
    "docs_grpo_trainer_9.py.txt": f"`reward_func` {SCRIPT_REWARD}",
    "docs_gspo_token_1.py.txt": EXCERPT,
    "docs_harbor_1.py.txt": ENVIRONMENT,
    "docs_liger_kernel_integration_1.py.txt": EXCERPT,
    "docs_lora_without_regret_1.py.txt": "GRPOTrainer\\(peft_config=peft_config\\)",
    "docs_openenv_1.py.txt": f"`reward_func` {SCRIPT_REWARD}",
    "docs_openenv_2.py.txt": NO_DATASET,
    "docs_openenv_3.py.txt": f"`reward_func` {SCRIPT_REWARD}",
    "docs_openreward_1.py.txt": ENVIRONMENT,
    "docs_paper_index_1.py.txt": NO_DATASET,
    "docs_paper_index_2.py.txt": f"`accuracy_reward` {SCRIPT_REWARD}",
    "docs_paper_index_3.py.txt": NO_DATASET,
    "docs_paper_index_4.py.txt": EXCERPT,
    "docs_paper_index_5.py.txt": "`delta: 4` cannot be converted",
    "docs_paper_index_6.py.txt": "`use_adaptive_entropy: True` cannot be converted",
    "docs_paper_index_7.py.txt": EXCERPT,
    "docs_paper_index_8.py.txt": NO_DATASET,
    "docs_paper_index_9.py.txt": EXCERPT,
    "docs_paper_index_10.py.txt": EXCERPT,
    "docs_paper_index_11.py.txt": EXCERPT,
    "docs_paper_index_12.py.txt": "`cast_lm_head_to_fp32: True` cannot be converted",
    "docs_paper_index_13.py.txt": NO_DATASET,
    "docs_paper_index_14.py.txt": EXCERPT,
    "docs_paper_index_15.py.txt": EXCERPT,
    "docs_paper_index_16.py.txt": EXCERPT,
    "docs_paper_index_17.py.txt": EXCERPT,
    "docs_paper_index_18.py.txt": NO_DATASET,
    "docs_paper_index_19.py.txt": NO_DATASET,
    "docs_paper_index_20.py.txt": RLOO,
    "docs_paper_index_21.py.txt": RLOO,
    "docs_peft_integration_1.py.txt": EXCERPT,
    "docs_quickstart_1.py.txt": NO_DATASET,
    "docs_rapidfire_integration_1.py.txt": "no GRPOConfig\\(...\\) call",
    **{f"docs_reducing_memory_usage_{n}.py.txt": EXCERPT for n in range(1, 6)},
    "docs_rloo_trainer_1.py.txt": EXCERPT,
    "docs_rloo_trainer_2.py.txt": EXCERPT,
    "docs_rloo_trainer_3.py.txt": "`vllm_server_host=args.vllm_server_host.*` is computed",
    **{f"docs_speeding_up_training_{n}.py.txt": EXCERPT for n in range(1, 4)},
    "docs_vllm_integration_2.py.txt": RLOO,
    **{f"docs_vllm_integration_{n}.py.txt": EXCERPT for n in range(3, 7)},
    "examples_grpo_2048.py.txt": f"`reward_score` {SCRIPT_REWARD}",
    "examples_rloo.py.txt": "`model_init_kwargs=.*` is computed",
}


def _trainer(name: str) -> str:
    """The `trl` command a YAML fixture was written for (its `# <trainer>_config.yaml` line)."""
    return "rloo" if "rloo" in name else "sft" if "sft" in name or "cli_example" in name else "grpo"


def _convert(name: str, tmp_path: Path, rows: int | None = ROWS):
    source = tmp_path / name.removesuffix(".txt")
    shutil.copy(FIXTURES / name, source)
    settings, _ = read_config(source, _trainer(name))
    return convert(settings, str(source), None, rows)


def _at(recipe: dict, key: str):
    node = recipe
    for part in key.split("."):
        node = node[part]
    return node


def test_every_fixture_has_a_verdict():
    inputs = {p.name for p in FIXTURES.iterdir() if p.name != "README.md"}
    assert inputs == set(FAITHFUL) | set(REFUSED) and not set(FAITHFUL) & set(REFUSED)
    assert (len(inputs), len(FAITHFUL), len(REFUSED)) == (73, 4, 69)  # the tally in the docstring


@pytest.mark.parametrize("name", sorted(FAITHFUL))
def test_converted_faithfully(name, tmp_path):
    recipe = _convert(name, tmp_path).recipe
    for key, value in {**TRL_DEFAULT_RECIPE, **FAITHFUL[name]}.items():
        assert _at(recipe, key) == value, key
    (tmp_path / "again").mkdir()  # without the rows, TRL's 3 epochs cannot be counted: refused
    with pytest.raises(ConvertError, match="`num_train_epochs: 3.0` .* pass `--dataset-rows N`"):
        _convert(name, tmp_path / "again", rows=None)


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_refused_with_the_reason(name, tmp_path):
    with pytest.raises(ConvertError, match=REFUSED[name]):
        _convert(name, tmp_path)


def test_a_faithful_conversion_validates_with_trl_installed(tmp_path):
    """The recipes name TRL's reward functions: with TRL installed, they validate."""
    pytest.importorskip("trl.rewards")
    from rlrun.recipes import load_recipe

    path = tmp_path / "r.yaml"
    path.write_text(_convert("docs_vllm_integration_1.py.txt", tmp_path).to_yaml())
    load_recipe(path, environment=False)
