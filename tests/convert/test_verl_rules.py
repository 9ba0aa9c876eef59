"""Each verl key is mapped exactly, mapped with a stated unit change, reported as ignored (only
keys that cannot change the numbers), or refused with its value and reason; and the semantics
verl gives them (data lists, DAPO generation batches, reward models, data-parallel micro-batches,
clip defaults, whole-set evaluation, step counts) come over."""

import pytest

from rlrun.convert.conversion import ConvertError
from rlrun.convert.verl import VerlRun, convert
from rlrun.facts.verl_keys import TABLE
from tests.convert.test_verl import verl_parquet


@pytest.fixture
def data(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    verl_parquet(tmp_path / "gsm8k.parquet", 7473)
    verl_parquet(tmp_path / "math.parquet", 7500, data_source="DigitalLearningGmbH/MATH-lighteval")
    verl_parquet(tmp_path / "test.parquet", 30, data_source="aime2024")
    return tmp_path


def run(data, trainer="verl.trainer.main_ppo", **settings):
    base = {
        "data.train_files": str(data / "gsm8k.parquet"),
        "data.val_files": str(data / "test.parquet"),
        "data.train_batch_size": 1024,
        "algorithm.adv_estimator": "grpo",
        "actor_rollout_ref.rollout.n": 4,
        "trainer.n_gpus_per_node": 8,
    }
    return convert(VerlRun({**base, **{k.replace("__", "."): v for k, v in settings.items()}}, trainer))


def refusal(data, trainer="verl.trainer.main_ppo", **settings) -> str:
    with pytest.raises(ConvertError) as refused:
        run(data, trainer, **settings)
    return str(refused.value)


def test_several_files_are_a_list_source_and_count_for_the_steps(data):
    files = [str(data / "gsm8k.parquet"), str(data / "math.parquet")]
    conversion = run(
        data,
        **{
            "data.train_files": files,
            "trainer.total_epochs": 15,
            "actor_rollout_ref.actor.optim.lr_warmup_steps_ratio": 0.1,
        },
    )
    recipe = conversion.recipe
    assert recipe["data"]["source"] == files
    assert recipe["trainer"]["total_steps"] == 15 * ((7473 + 7500) // 1024)  # 210, verl's drop_last
    assert recipe["actor"]["lr_scheduler"]["warmup_steps"] == int(0.1 * 210)
    assert recipe["reward"]["functions"] == [
        {"fn": "rlrun:verl_default", "weight": 1.0}
    ]  # routes by data_source
    assert recipe["trainer"]["eval"]["prompts"] is None  # the whole validation set


def test_dapo_generation_batches(data):
    dapo = {
        "data.gen_batch_size": 1536,
        "data.train_batch_size": 512,
        "algorithm.filter_groups.enable": True,
        "algorithm.filter_groups.max_num_gen_batches": 10,
        "trainer.total_epochs": 1,
        "actor_rollout_ref.actor.ppo_mini_batch_size": 32,
    }
    recipe = run(data, "recipe.dapo.main_dapo", **dapo).recipe
    assert recipe["algorithm"]["group_filter"]["gen_prompts_per_batch"] == 1536  # budget 10 x 1536 prompts
    assert recipe["trainer"]["prompts_per_step"] == 512
    assert recipe["trainer"]["total_steps"] == 7473 // 1536  # DAPO's dataloader draws generation batches
    assert (
        "stops early when its epochs of generation batches run out"
        in run(data, "recipe.dapo.main_dapo", **dapo).report()
    )
    without_filter = run(
        data, "recipe.dapo.main_dapo", **{**dapo, "algorithm.filter_groups.enable": False}
    ).recipe
    assert without_filter["trainer"]["prompts_per_step"] == 1536  # DAPO trains on the whole generation batch
    # verl 0.9's main_ppo: gen_batch_size is only its fetch size, the steps follow train_batch_size
    main_ppo = run(data, **{**dapo, "algorithm.filter_groups.enable": False}).recipe
    assert main_ppo["trainer"]["total_steps"] == 7473 // 512
    assert main_ppo["algorithm"]["group_filter"].get("gen_prompts_per_batch") is None
    assert "refills filtered groups one prompt at a time" in refusal(data, **dapo)


def test_reward_models_and_custom_functions(data):
    recipe = run(data, **{"reward_model.enable": True, "reward_model.model.path": "my/rm"}).recipe
    # verl 0.9.1 serves the reward model in reward.reward_model.rollout.dtype, bfloat16 by default
    assert recipe["reward"]["functions"] == [
        {"model": "my/rm", "weight": 1.0, "score": "logit", "dtype": "bfloat16"}
    ]
    rm_fp32 = {
        "reward_model.enable": True,
        "reward_model.model.path": "m",
        "reward_model.rollout.dtype": "fp32",
    }
    assert run(data, **rm_fp32).recipe["reward"]["functions"][0]["dtype"] == "float32"
    both = {
        "reward_model.enable": True,
        "reward_model.model.path": "m",
        "custom_reward_function.path": "r.py",
    }
    assert "verl then calls only the custom function" in refusal(data, **both)
    assert "the prime reward manager" in refusal(data, **{"reward_model.reward_manager": "prime"})
    verl_parquet(data / "eurus.parquet", 8, data_source="numina_olympiads")
    assert "data_source numina_olympiads" in refusal(
        data, **{"data.train_files": str(data / "eurus.parquet")}
    )


def test_micro_batches_are_per_data_parallel_rank(data):
    sp = {
        "actor_rollout_ref.actor.ppo_mini_batch_size": 256,
        "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu": 8,
        "actor_rollout_ref.actor.ulysses_sequence_parallel_size": 2,
        "trainer.total_training_steps": 5,
    }
    conversion = run(data, **sp)
    assert conversion.recipe["actor"]["micro_batch_samples"] == 8 * (8 // 2)  # 4 data-parallel ranks
    assert "--num-processes 4" in conversion.report() and "as 4 data-parallel ranks" in conversion.report()
    bad = refusal(data, **{**sp, "actor_rollout_ref.actor.ulysses_sequence_parallel_size": 3})
    assert "ulysses_sequence_parallel_size=3 does not divide the 8 GPUs" in bad


def test_clip_ratio_alone_keeps_verls_explicit_bounds(data):
    actor = run(
        data, **{"actor_rollout_ref.actor.clip_ratio": 0.3, "trainer.total_training_steps": 5}
    ).recipe["actor"]
    assert actor["clip_ratio"] == 0.3 and actor["clip_ratio_low"] == 0.2 and actor["clip_ratio_high"] == 0.2


@pytest.mark.parametrize(
    ("key", "value", "reason"),
    [
        ("actor_rollout_ref.model.lora_adapter_path", "/a", "starts LoRA from a trained adapter"),
        (
            "actor_rollout_ref.model.override_config.max_position_embeddings",
            32768,
            "changes the model's config",
        ),
        ("actor_rollout_ref.model.exclude_modules", ".*vision.*", "LoRA module exclusions"),
        ("actor_rollout_ref.actor.freeze_vision_tower", True, "vision-language models"),
        ("data.custom_cls.path", "my.py", "a custom dataset class"),
        ("data.image_key", "pics", "vision-language data"),
        ("actor_rollout_ref.actor.strategy", "megatron", "not Megatron"),
        ("actor_rollout_ref.actor.megatron.tensor_model_parallel_size", 2, "a Megatron setting"),
        ("actor_rollout_ref.model.path", "Qwen/Qwen2.5-VL-7B-Instruct", "a vision-language model"),
        ("data.truncation", "right", "keeps a prompt's first tokens"),
        ("critic.optim.lr_warmup_steps_ratio", 0.05, "constant learning rate"),
        ("algorithm.filter_groups.metric", "seq_final_reward", "includes the KL penalty"),
        ("actor_rollout_ref.rollout.multi_turn.interaction_config_path", "i.yaml", "an interaction"),
    ],
)
def test_what_rlrun_cannot_honour_is_refused_with_key_value_and_reason(data, key, value, reason):
    message = refusal(data, **{key: value, "trainer.total_training_steps": 5})
    assert reason in message and "nothing was written" in message
    if key != "actor_rollout_ref.model.path":
        assert f"{key}=" in message


def test_loss_scale_factor(data):
    norm = {
        "actor_rollout_ref.actor.loss_agg_mode": "seq-mean-token-sum-norm",
        "data.max_response_length": 4096,
    }
    steps = {"trainer.total_training_steps": 5}
    assert "divides seq-mean-token-sum-norm losses by the response length (4096)" in refusal(
        data, **norm, **steps, **{"actor_rollout_ref.actor.loss_scale_factor": 1000}
    )
    same = run(data, **norm, **steps, **{"actor_rollout_ref.actor.loss_scale_factor": 4096}).recipe
    assert same["actor"]["loss_agg_mode"] == "seq-mean-token-sum-norm"


def test_vision_data_is_refused_by_its_columns(data):
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pq.read_table(data / "gsm8k.parquet").append_column("images", pa.array([[b""]] * 7473))
    pq.write_table(table, data / "geo.parquet")
    assert "holds images: vision-language data" in refusal(
        data, **{"data.train_files": str(data / "geo.parquet")}
    )


# Why a key may be ignored: it cannot change the numbers. Every ignored row's reason must say
# one of these (a new reason fails here until someone has judged it).
NEUTRAL = (
    "the numbers do not depend on it",
    "nothing trained depends on it",
    "used only with",
    "used by verl's asynchronous modes only",
    "--num-processes",
    "rlrun does not use Ray",
    "rlrun train --profile",
    "names the run directory",
    "set by verl from trainer.total_*",
    "`rlrun resume` continues a run",
    "where AdamW comes from: the same update",
    "the critic's learning rate is constant: not used",
    "its order does not matter",
    "no training number changes",
    "read only with images, which rlrun refuses",
    "loads a multimodal processor; rlrun reads text data",
    "rlrun asks for it on the reward entry when needed",
    "rlrun's rollout runs the policy's own weights",
    "the verl trainer the command runs",
)


def test_ignored_keys_are_listed_one_by_one_and_only_layout_memory_or_logging(data):
    ignored = {
        "actor_rollout_ref.actor.fsdp_config.param_offload": True,
        "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu": 16,
        "trainer.experiment_name": "x",
    }
    report = run(data, **ignored, **{"trainer.total_training_steps": 5}).report()
    for key in ignored:
        assert f"{key}=" in report.split("no rlrun equivalent (left out)")[1]
    reasons = {
        row.note
        for row in TABLE.values()
        if row.rlrun is None and row.refused_unless is None and not row.convert
    }
    assert sorted(r for r in reasons if not any(n in r for n in NEUTRAL)) == []


@pytest.mark.parametrize(("critic_warmup", "frozen"), [(0, 0), (1, 0), (2, 1), (5, 4)])
@pytest.mark.parametrize("estimator", ["grpo", "gae"])
def test_critic_warmup_skips_the_actor_as_verl_counts_it(data, critic_warmup, frozen, estimator):
    """verl updates the actor once `critic_warmup <= global_steps` (counted from 1), critic or
    not (verl 0.9.1 ray_trainer.fit): c - 1 steps without an update."""
    settings = {"trainer.critic_warmup": critic_warmup, "algorithm.adv_estimator": estimator}
    assert (
        run(data, **settings, **{"trainer.total_training_steps": 9}).recipe["actor"].get("frozen_steps", 0)
        == frozen
    )


@pytest.mark.parametrize(
    ("steps", "ratio", "warmup"),
    [(-1, 0.1, 21), (0, 0.1, 21), (None, 0.1, 21), (5, 0.1, 5), (3, 0.0, 3), (0, 0.0, 0)],
)
def test_warm_up_steps_as_verls_engine_reads_them(data, steps, ratio, warmup):
    """lr_warmup_steps above 0, else int(ratio x 210 steps): verl's _build_lr_scheduler."""
    settings = {
        "trainer.total_training_steps": 210,
        "actor_rollout_ref.actor.optim.lr_warmup_steps": steps,
        "actor_rollout_ref.actor.optim.lr_warmup_steps_ratio": ratio,
    }
    assert run(data, **settings).recipe["actor"].get("lr_scheduler", {}).get("warmup_steps", 0) == warmup


def test_chat_template_arguments_are_passed_on(data):
    settings = {
        "trainer.total_training_steps": 5,
        "data.apply_chat_template_kwargs.reasoning_effort": "medium",
        "data.apply_chat_template_kwargs.enable_thinking": False,
    }
    recipe = run(data, **settings).recipe
    assert recipe["data"]["chat_template_kwargs"] == {"reasoning_effort": "medium", "enable_thinking": False}
