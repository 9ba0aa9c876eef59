"""verl's own example scripts (fixtures/verl/README.md): each converts to a recipe that validates,
with every key it sets accounted for in the report, or is refused with the reason; none ends in a
traceback. A representative set is checked key by key against values worked out by hand."""

import re

import pytest

from tests.convert.verl_corpus import SCRIPTS, run_script, tally

pytestmark = pytest.mark.slow  # 151 scripts, with data files of the real sizes


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory):
    import os

    root = tmp_path_factory.mktemp("verl_examples")
    cwd = os.getcwd()
    os.chdir(root)
    try:
        results = {o.script: o for o in (run_script(script, root) for script in SCRIPTS)}
    finally:
        os.chdir(cwd)
    print(tally(list(results.values())))  # the tally for the README (pytest -s shows it)
    return results


def test_no_script_ends_in_a_traceback_and_each_refusal_gives_its_reason(outcomes):
    assert len(outcomes) == len(SCRIPTS) >= 150
    assert [o.script for o in outcomes.values() if o.kind == "traceback"] == []
    for o in outcomes.values():
        if o.kind == "refused":
            assert re.search(r"\b[a-z_]+\.[a-z_.]+\w|`|runs ", o.detail), o.detail  # names a key or what


def test_every_key_a_converted_script_sets_is_accounted_for(outcomes):
    converted = [o for o in outcomes.values() if o.kind == "converted"]
    assert len(converted) >= 40
    for o in converted:
        assert "not a verl key rlrun knows" not in o.detail  # unknown keys are refused, never dropped


def test_the_tally(outcomes):
    kinds = [o.kind for o in outcomes.values()]
    # The README's "Coming from verl" states these numbers.
    assert (kinds.count("converted"), kinds.count("refused"), kinds.count("traceback")) == (52, 99, 0)


def recipe(outcomes, name):
    outcome = outcomes[name]
    assert outcome.kind == "converted", outcome.detail
    return outcome.recipe


def test_grpo_on_gsm8k_and_math(outcomes):
    r = recipe(outcomes, "examples/grpo_trainer__run_qwen2-7b_math.sh")
    assert [p.rsplit("/", 2)[-2] for p in r["data"]["source"]] == ["gsm8k", "math"]  # both files
    assert r["trainer"]["total_steps"] == 15 * ((7473 + 7500) // 1024)  # 210, as verl counts
    assert r["trainer"]["prompts_per_step"] == 1024 and r["rollout"]["n"] == 5
    assert r["actor"]["mini_batch_samples"] == 256 * 5 and r["actor"]["micro_batch_samples"] == 16 * 8
    assert r["actor"]["kl_loss"] == {"enabled": True, "estimator": "low_var_kl", "coef": 0.001}
    assert r["actor"]["clip_ratio_low"] == r["actor"]["clip_ratio_high"] == 0.2
    assert r["reward"]["functions"][0]["fn"] == "rlrun:verl_default"
    assert r["trainer"]["eval"]["prompts"] is None and r["trainer"]["eval"]["every_steps"] == 5
    assert r["data"]["max_prompt_tokens"] == 1024 and r["data"]["overlong_prompts"] == "drop"


def test_dapo(outcomes):
    r = recipe(outcomes, "recipe_dapo/test_dapo_7b.sh")
    assert r["algorithm"]["group_filter"] == {
        "enabled": True,
        "metric": "acc",
        "max_num_gen_batches": 10,
        "gen_prompts_per_batch": 512 * 3,
    }
    assert r["trainer"]["prompts_per_step"] == 512 and r["trainer"]["total_steps"] == 17917 // 1536
    assert r["reward"]["overlong_shaping"] == {"enabled": True, "buffer_tokens": 512, "penalty_factor": 1.0}
    assert r["actor"]["clip_ratio_low"] == 0.2 and r["actor"]["clip_ratio_high"] == 0.28
    assert r["actor"]["clip_ratio_c"] == 10.0 and r["actor"]["loss_agg_mode"] == "token-mean"
    assert r["data"]["overlong_prompts"] == "truncate"  # truncation=left
    assert (
        r["trainer"]["eval"]["greedy"] is False and r["trainer"]["eval"]["temperature"] == 1.0
    )  # val_kwargs
    assert r["reward"]["functions"][0]["fn"] == "rlrun:verl_default"  # math_dapo / aime data_source
    big = recipe(outcomes, "recipe_dapo/run_dapo_qwen2.5_32b.sh")
    assert big["trainer"]["eval"]["top_p"] == 0.7 and big["rollout"]["top_p"] == 1.0  # its own val_top_p
    assert (
        big["rollout"]["max_response_tokens"] == 20480
        and big["reward"]["overlong_shaping"]["buffer_tokens"] == 4096
    )
    # 8 GPUs x 16 nodes in groups of 8 for Ulysses sequence parallelism: 16 data-parallel ranks
    assert "as 16 data-parallel ranks" in outcomes["recipe_dapo/run_dapo_qwen2.5_32b.sh"].detail


def test_ppo_with_a_reward_model(outcomes):
    r = recipe(outcomes, "examples/ppo_trainer__run_qwen2-7b_rm_seq_balance.sh")
    assert r["reward"]["functions"] == [
        {"model": "sfairXC/FsfairX-LLaMA3-RM-v0.1", "weight": 1.0, "score": "logit"}
        | {k: v for k, v in r["reward"]["functions"][0].items() if k not in ("model", "weight", "score")}
    ]
    assert r["reward"]["functions"][0]["dtype"] == "bfloat16"  # as verl serves it
    assert r["algorithm"]["advantage"] == "gae" and r["critic"]["enabled"] is True
    assert r["critic"]["model_path"] == "Qwen/Qwen2-7B-Instruct" and r["critic"]["optimizer"]["lr"] == 1e-5
    assert r["trainer"]["total_steps"] == 15 * ((7473 + 7500) // 4096)


def test_lora_and_sequence_parallel(outcomes):
    lora = recipe(outcomes, "examples/grpo_trainer__run_qwen2_5-3b_gsm8k_grpo_lora.sh")
    assert lora["model"]["lora"]["r"] == 64 and lora["model"]["lora"]["alpha"] == 32.0
    assert lora["actor"]["micro_batch_samples"] == 40 * 2 and lora["trainer"]["total_steps"] == 15 * (
        7473 // 16
    )
    sp = recipe(outcomes, "examples/ppo_trainer__run_deepseek7b_llm_sp2.sh")
    assert sp["actor"]["micro_batch_samples"] == 32 * (8 // 2)  # per data-parallel rank: SP 2 on 8 GPUs


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        ("examples/grpo_trainer__run_qwen2_5_vl-7b.sh", "a vision-language model"),
        ("examples/grpo_trainer__run_qwen2_5-3b_gsm8k_grpo_lora_from_adapter.sh", "lora_adapter_path"),
        ("recipe_dapo/test_dapo_7b_math.sh", "override_config.max_position_embeddings=32768"),
        ("examples/grpo_trainer__run_qwen2-7b_math_megatron.sh", "Megatron"),
        # NNODES=${SLURM_JOB_NUM_NODES}: the variable the user can set
        ("examples/gspo_trainer__test_gspo_3b_math.sh", "it waits on $SLURM_JOB_NUM_NODES (through $NNODES)"),
        ("examples/tuning__0.5b__qwen2-0.5b_grpo-lora_1_h100_fsdp_vllm.sh", "Expected rollout.n >= 2"),
        ("examples/grpo_trainer__run_qwen2-7b_math_megatron_lora.sh", "bash array `DATA`"),
        ("examples/ppo_trainer__run_deepseek7b_llm_sandbox_fusion.sh", "data_source numina_olympiads"),
        ("examples/sglang_multiturn__run_qwen2.5-3b_gsm8k_multiturn.sh", "gsm8k_multiturn_grpo"),
        ("examples/split_placement__run_deepseek7b_llm.sh", "main_ppo_split.py"),
    ],
)
def test_refusals_name_the_key(outcomes, name, reason):
    assert outcomes[name].kind == "refused" and reason in outcomes[name].detail


def test_what_is_not_infrastructure_no_longer_blocks(outcomes):
    """A logger or output folder the script leaves to the environment is reported, not refused;
    verl's chat-template keywords come over."""
    tuning = outcomes["examples/tuning__7b__qwen2-7b_grpo-lora_1_h100_fsdp_vllm.sh"]
    assert tuning.kind == "converted"
    assert "trainer.project_name=${WANDB_PROJECT} -> logging.wandb.project  [it waits on" in tuning.detail
    gptoss = outcomes["examples/grpo_trainer__run_gptoss_20b.sh"]
    assert "apply_chat_template_kwargs" not in gptoss.detail  # refused only for its unset data paths
    assert "data.train_files=$gsm8k_train_path: it waits on $gsm8k_train_path" in gptoss.detail
