"""`rlrun convert trl`: a TRL 1.16 GRPO config becomes the same experiment, in rlrun's units, or is
refused naming the key (exit code 2)."""

import math
import textwrap
from pathlib import Path

import pytest
import torch
import yaml
from typer.testing import CliRunner

from rlrun.algorithms.kl import kl_penalty
from rlrun.cli import app
from rlrun.convert.conversion import ConvertError
from rlrun.convert.trl import convert, read_config
from rlrun.convert.trl_defaults import TRANSFORMERS_VERSION, TRL_VERSION
from rlrun.convert.trl_keys import IGNORED, TABLE, TRL_DEFAULTS, rule
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
    use_bias_correction_kl: false
    epsilon_high: 0.28
    loss_type: dr_grpo
    importance_sampling_level: sequence
    entropy_coef: 0.01
    chat_template_kwargs: {enable_thinking: false}
    use_vllm: true
    vllm_mode: colocate
    vllm_importance_sampling_mode: token_truncate
    vllm_importance_sampling_clip_max: 2.0
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

BASICS = {"model_name_or_path": "m", "dataset_name": "d", "reward_funcs": ["trl_rewards.accuracy"]}


@pytest.fixture
def config(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    (tmp_path / "trl_rewards.py").write_text(REWARDS)
    (tmp_path / "grpo.yaml").write_text(textwrap.dedent(CONFIG))
    return tmp_path / "grpo.yaml"


def recipe_of(settings, processes=None, rows=None, tmp=None):
    conversion = convert({**BASICS, **settings}, "x.yaml", processes, rows)
    return conversion.recipe


def test_grpo_config(config):
    settings, _ = read_config(config)
    conversion = convert(settings, str(config), processes=4)
    (config.parent / "r.yaml").write_text(conversion.to_yaml())
    recipe = load_recipe(config.parent / "r.yaml", environment=False).data
    actor, trainer = recipe["actor"], recipe["trainer"]
    assert actor["micro_batch_samples"] == 8 * 4  # per device x 4 processes
    assert actor["mini_batch_samples"] == 8 * 4 * 4  # x gradient_accumulation_steps
    assert trainer["prompts_per_step"] == 8 * 4 * 8 // 8  # steps_per_generation x micro / n
    # 8 micro-batches per generation, 4 per optimizer step: 2 optimizer steps per rlrun step
    assert trainer["total_steps"] == 500 // 2
    # the schedule counts TRL's optimizer steps: 10 % of 500 warm up, as transformers' Trainer
    assert actor["lr_scheduler"] == {
        "name": "cosine",
        "step_unit": "optimizer_step",
        "warmup_steps": 50,
        "min_lr_ratio": 0.0,
    }
    assert recipe["rollout"]["n"] == 8 and recipe["rollout"]["engine"] == "vllm"
    assert recipe["rollout"]["max_response_tokens"] == 1024
    assert recipe["rollout"]["importance_sampling"] == {"level": "token", "cap": 2.0, "mode": "truncate"}
    assert actor["kl_loss"] == {"enabled": True, "estimator": "k3_unclamped", "coef": 0.04}
    assert actor["policy_loss"] == "gspo" and actor["loss_agg_mode"] == "seq-mean-token-sum-norm"
    assert actor["clip_ratio_low"] == 0.2 and actor["clip_ratio_high"] == 0.28
    assert actor["entropy_coef"] == 0.01 and actor["optimizer"]["betas"] == [0.9, 0.999]
    assert recipe["algorithm"]["advantage_kwargs"] == {"epsilon": 1e-4}  # TRL's (r - mean) / (std + 1e-4)
    assert trainer["seed"] == 42  # TRL's default seed
    assert recipe["data"]["source"] == "hf:trl-lib/DeepMath-103K"
    assert recipe["data"]["chat_template_kwargs"] == {"enable_thinking": False}
    assert recipe["data"]["apply_chat_template"] == "messages"  # TRL templates chat prompts only
    assert recipe["data"]["max_prompt_tokens"] is None  # TRL 1.16 has no prompt limit
    assert recipe["reward"]["functions"] == [
        {"fn": "trl_rewards:accuracy", "weight": 1.0, "style": "trl", "kwargs": {}},
        {"fn": "trl_rewards:think_format", "weight": 0.2, "style": "trl", "kwargs": {}},
    ]
    report = conversion.report()
    assert "vllm_mode=colocate  [ignored: memory, speed and infrastructure]" in report
    assert "logging_steps=10  [ignored: logging]" in report


def test_trl_defaults():
    """TRL 1.16's GRPOConfig defaults: 512 completion tokens, no prompt limit, loss dapo
    (token-mean), 8 generations, per-device batch 8, seed 42, lr 1e-6 with a linear decay."""
    recipe = recipe_of({"max_steps": 10})
    assert recipe["rollout"]["max_response_tokens"] == 512
    assert recipe["data"]["max_prompt_tokens"] is None and "overlong_prompts" not in recipe["data"]
    assert recipe.get("actor", {}).get("loss_agg_mode", "token-mean") == "token-mean"
    assert recipe["actor"]["kl_loss"]["enabled"] is False  # beta 0
    assert recipe["trainer"]["prompts_per_step"] == 8 // 8 and recipe["trainer"]["seed"] == 42
    assert recipe["actor"]["optimizer"]["lr"] == 1e-6 and recipe["actor"]["lr_scheduler"]["name"] == "linear"
    assert TRL_DEFAULTS["max_completion_length"] == 512 and TRL_DEFAULTS["num_train_epochs"] == 3.0


def test_loss_types():
    sapo = recipe_of({"max_steps": 10, "loss_type": "sapo", "sapo_temperature_neg": 1.2})["actor"]
    assert sapo["policy_loss"] == "sapo" and sapo["loss_agg_mode"] == "seq-mean-token-mean"
    assert sapo["loss_kwargs"] == {"tau_pos": 1.0, "tau_neg": 1.2}
    grpo = recipe_of({"max_steps": 10, "loss_type": "grpo"})["actor"]
    assert grpo["loss_agg_mode"] == "seq-mean-token-mean" and grpo.get("policy_loss", "vanilla") == "vanilla"
    bnpo = recipe_of({"max_steps": 10, "loss_type": "bnpo"})["actor"]  # one micro-batch per step
    assert bnpo.get("loss_agg_mode", "token-mean") == "token-mean"


def test_an_older_configs_max_prompt_length_truncates_as_trl_did():
    recipe = recipe_of({"max_steps": 10, "max_prompt_length": 256})
    assert recipe["data"]["max_prompt_tokens"] == 256 and recipe["data"]["overlong_prompts"] == "truncate"


def test_epochs_become_steps_from_the_rows():
    """16 samples per generation / 4 generations = 4 prompts a step; 30 rows hold 7 whole batches
    (TRL's sampler drops the rest); 3 epochs (TRL's default) = 21 steps, 2.5 epochs = ceil(17.5) = 18."""
    settings = {"per_device_train_batch_size": 16, "num_generations": 4}
    assert recipe_of(settings, rows=30)["trainer"]["total_steps"] == 21
    assert recipe_of({**settings, "num_train_epochs": 2.5}, rows=30)["trainer"]["total_steps"] == 18
    # a dataset is not downloaded or read to count it: the rows are given, or the key is refused
    with pytest.raises(ConvertError, match="`num_train_epochs: 3.0` .* pass `--dataset-rows N`"):
        recipe_of(settings)


def test_a_local_dataset_is_what_trls_load_dataset_reads(tmp_path, monkeypatch):
    """TRL 1.16's `trl grpo` calls datasets.load_dataset(dataset_name): a folder of data files
    loads (its train split), one file does not ("Couldn't find any data file"; seen with
    datasets 5.2), so TRL cannot train on it and neither is it converted."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "train.jsonl").write_text('{"prompt": "q", "answer": "1"}\n')
    folder = recipe_of({"dataset_name": "data", "max_steps": 10})["data"]["source"]
    assert folder == f"hf:{tmp_path / 'data'}"  # rlrun's hf: source makes the same datasets call
    for name in ("data/train.jsonl", str(tmp_path / "data" / "train.jsonl"), "missing.jsonl", "./missing"):
        with pytest.raises(ConvertError, match="`dataset_name: .*` cannot be converted: .*not one file"):
            recipe_of({"dataset_name": name, "max_steps": 10})


def test_num_processes_comes_from_the_config():
    recipe = recipe_of({"max_steps": 10, "num_processes": 4})
    assert recipe["actor"]["micro_batch_samples"] == 8 * 4 and recipe["trainer"]["prompts_per_step"] == 4
    assert recipe_of({"max_steps": 10, "num_processes": 4}, processes=4) == recipe
    with pytest.raises(ConvertError, match="the config says 4 processes and --num-processes 1"):
        recipe_of({"max_steps": 10, "num_processes": 4}, processes=1)


def test_importance_sampling_follows_trls_mode():
    vllm = {"max_steps": 10, "use_vllm": True}
    assert recipe_of(vllm)["rollout"]["importance_sampling"] == {
        "level": "sequence",
        "mode": "mask",
        "cap": 3.0,
    }
    token = recipe_of({**vllm, "vllm_importance_sampling_mode": "token_mask"})["rollout"][
        "importance_sampling"
    ]
    assert token == {"level": "token", "mode": "mask", "cap": 3.0}
    assert "importance_sampling" not in recipe_of({"max_steps": 10}).get(
        "rollout", {}
    )  # no vLLM: none in TRL
    with pytest.raises(ConvertError, match="vllm_importance_sampling_clip_min: 0.5"):
        recipe_of({**vllm, "vllm_importance_sampling_clip_min": 0.5})


def test_trls_kl_is_k3_without_a_clamp():
    """TRL: exp(ref - logp) - (ref - logp) - 1, unclamped; rlrun's k3 clamps at 10."""
    logp, ref = torch.tensor([0.0, -1.0]), torch.tensor([15.0, -1.5])
    expected = torch.tensor([math.exp(15) - 15 - 1, math.exp(-0.5) + 0.5 - 1])
    torch.testing.assert_close(kl_penalty(logp, ref, "k3_unclamped"), expected)
    assert kl_penalty(logp, ref, "k3")[0] == 10.0


@pytest.mark.parametrize(
    ("settings", "refusal"),
    [
        ({"max_steps": "eight"}, "`max_steps: 'eight'` cannot be converted: expected a whole number"),
        (
            {"max_steps": 10, "num_generations": 0},
            "`num_generations: 0` cannot be converted: expected a number >= 2",
        ),
        ({"max_steps": 10, "num_generations": 3}, "`num_generations: 3` .* divide the generation batch of 8"),
        ({"max_steps": 10, "generation_batch_size": 12}, "generation_batch_size: 12` .* divisible by .* = 8"),
        (
            {"max_steps": 10, "steps_per_generation": 3, "gradient_accumulation_steps": 2},
            "steps_per_generation: 3` .* not a multiple of gradient_accumulation_steps=2",
        ),
        ({"max_steps": 9, "steps_per_generation": 2}, "`max_steps: 9` .* make it a multiple of 2"),
        ({"max_steps": 10, "beta": 0.04}, "use_bias_correction_kl: True` .* with beta=0.04"),
        ({"max_steps": 10, "loss_type": "bnpo", "gradient_accumulation_steps": 2}, "`loss_type: 'bnpo'`"),
        ({"max_steps": 10, "loss_type": "cispo"}, "`loss_type: 'cispo'` .* clips the weight at epsilon_high"),
        ({"max_steps": 10, "scale_rewards": "batch"}, "`scale_rewards: 'batch'`"),
        ({"max_steps": 10, "loss_type": "vespo"}, "`loss_type: 'vespo'` .* no VESPO"),
        ({"max_steps": 10, "loss_type": "luspo"}, "`loss_type: 'luspo'` .* no LUSPO"),
        ({"max_steps": 10, "top_entropy_quantile": 0.2}, "`top_entropy_quantile: 0.2`"),
        ({"max_steps": 10, "use_adaptive_entropy": True}, "`use_adaptive_entropy: True`"),
        ({"max_steps": 10, "dataset_train_split": "test"}, "`dataset_train_split: 'test'` .* `train` split"),
        ({"max_steps": 10, "optim": "adafactor"}, "`optim: 'adafactor'` .* AdamW"),
        (
            {"max_steps": 10, "resume_from_checkpoint": "out/checkpoint-50"},
            "cannot continue from a TRL checkpoint",
        ),
        (
            {"max_steps": 10, "use_peft": True},
            "`lora_target_modules: None` .* PEFT's per-architecture default",
        ),
        ({"max_steps": 10, "dtype": "auto"}, "`dtype: 'auto'`"),
        ({"max_steps": 10, "lr_scheduler_type": "polynomial"}, "`lr_scheduler_type: 'polynomial'`"),
        ({"max_steps": 10, "delta": 4}, "`delta: 4` .* two-sided clip"),
        ({"max_steps": 10, "mask_truncated_completions": True}, "`mask_truncated_completions: True`"),
        ({"max_steps": 10, "label_smoothing_factor": 0.1}, "`label_smoothing_factor: 0.1` .* no equivalent"),
        ({"max_steps": 10, "packing": True}, "`packing: True` .* TRL's SFT trainer"),
        ({"max_steps": 10, "no_such_key": 1}, "`no_such_key: 1` .* not a key of TRL 1.16"),
        ({"max_steps": 10, "datasets": [{"path": "a"}, {"path": "b"}]}, "`datasets: .*` .* one data source"),
        ({"max_steps": 10, "dataset_name": None}, "`dataset_name: None` .* arithmetic generator"),
        ({"max_steps": 10, "reward_funcs": None}, "`reward_funcs: None` .* add them"),
        ({"max_steps": 10, "reward_funcs": ["nonsense"]}, "`reward_funcs: 'nonsense'`"),
    ],
)
def test_refused_naming_the_key(settings, refusal):
    with pytest.raises(ConvertError, match=refusal):
        recipe_of(settings)


def test_every_key_has_one_rule():
    """Every TRL 1.16 key is mapped, ignored (numbers-neutral) or refused; a key at TRL's
    default is accepted (rlrun does the same)."""
    assert not set(TABLE) & set(IGNORED)
    for key, default in TRL_DEFAULTS.items():
        assert rule(key, default).kind in ("mapped", "ignored", "default"), key
    assert rule("sync_ref_model", True).kind == "refused"
    assert rule("save_strategy", "epoch").kind == "ignored"
    assert rule("optim", "adamw_torch").kind == rule("use_bias_correction_kl", False).kind == "default"


@pytest.mark.parametrize(
    ("script", "outcome"),
    [
        (
            """
            from datasets import load_dataset
            from trl import GRPOConfig, GRPOTrainer
            from trl.rewards import accuracy_reward
            dataset = load_dataset("trl-lib/DeepMath-103K", split="train")
            args = GRPOConfig(max_steps=100, learning_rate=2e-6, num_generations=4)
            trainer = GRPOTrainer(model="Qwen/Qwen2.5-0.5B", args=args, reward_funcs=accuracy_reward,
                                  train_dataset=dataset)
            """,
            {
                "max_steps": 100,
                "learning_rate": 2e-6,
                "num_generations": 4,
                "model_name_or_path": "Qwen/Qwen2.5-0.5B",
                "reward_funcs": ["accuracy_reward"],
                "dataset_name": "trl-lib/DeepMath-103K",
            },
        ),
        ("args = GRPOConfig(max_steps=int(n))", "`max_steps=int\\(n\\)` is computed, not a constant"),
        ("args = GRPOConfig(**config)", "`\\*\\*config` cannot be read without running the script"),
        ("args = GRPOConfig(..., beta=0.1)", "is an excerpt"),
        (
            "parser = TrlParser((GRPOConfig,))",
            "no GRPOConfig\\(...\\) call; a script that reads its settings",
        ),
        ("args = RLOOConfig(max_steps=10)", "a TRL RLOO config"),
        ("args = SFTConfig(max_steps=10)", "a TRL SFT config"),
        ("def f(:\n", "not valid Python"),
        (
            "def mine(completions, **kw): ...\nGRPOTrainer(args=GRPOConfig(), reward_funcs=[mine])",
            "`mine` is defined in the script",
        ),
        (
            "GRPOTrainer(args=GRPOConfig(), tools=[search])",
            "GRPOTrainer\\(tools=\\[search\\]\\)`: TRL's tools are Python functions.*`agent.tools: \\[pkg.module:function\\]`",
        ),
        (
            "GRPOTrainer(args=GRPOConfig(), environment_factory=Wordle)",
            "environment_factory=Wordle\\)`: .* `agent.environment: pkg.module:Class`",
        ),
    ],
)
def test_python_scripts_are_read_by_their_syntax(tmp_path, script, outcome):
    path = tmp_path / "train.py"
    path.write_text(textwrap.dedent(script))
    if isinstance(outcome, str):
        with pytest.raises(ConvertError, match=outcome):
            read_config(path)
    else:
        settings, _ = read_config(path)
        assert settings == outcome


def test_unreadable_files_are_named(tmp_path):
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text(
        "a: &a [x, x, x, x, x, x, x, x, x, x]\n"
        + "".join(
            f"{c}: &{c} [*{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}]\n"
            for p, c in zip("abcdef", "bcdefg")
        )
    )
    with pytest.raises(ConvertError, match="bomb.yaml: not valid YAML .*aliases expand to more than"):
        read_config(bomb)
    binary = tmp_path / "latin.yaml"
    binary.write_bytes(b"learning_rate: 1e-6 # caf\xe9\n")
    with pytest.raises(ConvertError, match="latin.yaml: not UTF-8 text"):
        read_config(binary)
    listed = tmp_path / "list.yaml"
    listed.write_text("- a\n- b\n")
    with pytest.raises(ConvertError, match="list.yaml: a TRL config is a mapping"):
        read_config(listed)
    with pytest.raises(ConvertError, match="a TRL RLOO config"):
        read_config(listed, trainer="rloo")


def test_cli(config):
    runner = CliRunner()
    result = runner.invoke(app, ["convert", "trl", "grpo.yaml", "--num-processes", "2", "-o", "r.yaml"])
    assert result.exit_code == 0, result.output
    assert "per_device_train_batch_size=8 -> actor.micro_batch_samples: 16" in result.output
    for text, message in [
        ("max_steps: eight\n", "`max_steps: 'eight'` cannot be converted"),
        ("max_steps: 8\nnum_generations: 0\n", "`num_generations: 0` cannot be converted"),
    ]:
        (config.parent / "bad.yaml").write_text(text + "".join(f"{k}: {v}\n" for k, v in BASICS.items()))
        result = runner.invoke(app, ["convert", "trl", "bad.yaml"])
        assert result.exit_code == 2 and message in result.output, result.output
        assert "Traceback" not in result.output


def test_bf16_is_mixed_precision_over_float32_weights_as_in_trl():
    """TRL loads the weights in float32 unless `dtype` says otherwise, and `bf16: true` (its
    default) autocasts over them: a step of lr 1e-6 survives in float32 weights, not in bfloat16."""
    default = recipe_of({"max_steps": 10})
    assert default.get("model", {}).get("dtype", "float32") == "float32"
    assert default["trainer"]["autocast"] == "bfloat16"
    assert recipe_of({"max_steps": 10, "bf16": False})["trainer"].get("autocast") is None
    weights_in_bf16 = recipe_of({"max_steps": 10, "dtype": "bfloat16"})  # autocast over them: a no-op
    assert weights_in_bf16["model"]["dtype"] == "bfloat16"
    assert weights_in_bf16.get("trainer", {}).get("autocast") is None


@pytest.mark.skipif(
    tuple(int(x) for x in __import__("transformers").__version__.split(".")[:2]) < (4, 56),
    reason="TRL 1.16 needs transformers >= 4.56.2, whose TrainingArguments take a fractional warmup_steps",
)
@pytest.mark.parametrize("scheduler", ["linear", "cosine", "constant_with_warmup"])
def test_the_lr_at_every_update_is_trls(tmp_path, scheduler):
    """4 micro-batches per generation in optimizer steps of 2, 2 passes: 4 optimizer steps per
    generation, each at the lr transformers' Trainer (so TRL) gives it: warm-up 0.1 x 40 = 4
    optimizer steps, decay over max_steps = 40."""
    from transformers import TrainingArguments, get_scheduler

    from rlrun.recipes.batch_plan import schedule_steps
    from rlrun.training.optim import build_scheduler

    settings = {
        "max_steps": 40,
        "steps_per_generation": 4,
        "gradient_accumulation_steps": 2,
        "num_iterations": 2,
        "lr_scheduler_type": scheduler,
        "warmup_steps": 0.1,
    }
    path = tmp_path / "r.yaml"
    path.write_text(convert({**BASICS, **settings}, "x.yaml").to_yaml())
    recipe = load_recipe(path, environment=False).recipe
    assert recipe.trainer.total_steps == 10 and schedule_steps(recipe) == 40

    def rates(scheduler: torch.optim.lr_scheduler.LRScheduler) -> list[float]:
        used = []
        for _ in range(40):
            used.append(scheduler.get_last_lr()[0])
            scheduler.optimizer.step()
            scheduler.step()
        return used

    def optimizer() -> torch.optim.Optimizer:
        return torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0)

    args = TrainingArguments(output_dir=str(tmp_path / "out"), warmup_steps=0.1, report_to="none")
    trl = get_scheduler(
        scheduler, optimizer(), num_warmup_steps=args.get_warmup_steps(40), num_training_steps=40
    )
    rlrun = build_scheduler(optimizer(), recipe.actor.lr_scheduler, schedule_steps(recipe))
    assert args.get_warmup_steps(40) == recipe.actor.lr_scheduler.warmup_steps == 4
    assert rates(rlrun) == pytest.approx(rates(trl), abs=1e-15)


def test_where_trls_optimizer_steps_still_differ_the_report_says_so():
    several = {"max_steps": 40, "steps_per_generation": 4, "gradient_accumulation_steps": 2}
    notes = convert({**BASICS, **several, "num_iterations": 2}, "x.yaml").notes
    assert any("makes its num_iterations=2 passes over the same split; rlrun reshuffles" in n for n in notes)
    assert any("loss_type dapo: TRL divides each optimizer step's token sum" in n for n in notes)
    one = convert({**BASICS, "max_steps": 10}, "x.yaml")  # one optimizer step per generation
    assert not any("reshuffles" in n or "loss_type dapo" in n for n in one.notes)
    assert one.report().startswith(f"read as TRL {TRL_VERSION} (transformers {TRANSFORMERS_VERSION}) runs it")


def test_every_refused_key_is_listed():
    settings = {"max_steps": 10, "delta": 4, "top_entropy_quantile": 0.2, "loss_type": "cispo"}
    with pytest.raises(ConvertError) as refused:
        convert({**settings, "dataset_name": "d", "reward_funcs": ["nonsense"]}, "x.yaml")
    message = str(refused.value)
    assert message.startswith("x.yaml: rlrun cannot run this TRL experiment as it is; nothing was written.")
    for key in ("delta", "top_entropy_quantile", "loss_type", "reward_funcs", "model_name_or_path"):
        assert f"\n  - `{key}: " in message, key


def test_a_recipe_that_does_not_validate_leaves_no_file(config):
    """TRL's built-in rewards import `trl.rewards` (TRL installed); an import path that does not
    resolve stops the command the same way: exit 2, the recipe printed with the error, no file."""
    (config.parent / "grpo.yaml").write_text(
        textwrap.dedent(CONFIG).replace("trl_rewards.accuracy", "nowhere.accuracy")
    )
    result = CliRunner().invoke(app, ["convert", "trl", "grpo.yaml", "-o", "out/r.yaml"])
    assert result.exit_code == 2 and "cannot import module 'nowhere'" in " ".join(result.output.split())
    assert "the recipe above (not written to out/r.yaml)" in result.output
    assert not (config.parent / "out").exists()


@pytest.mark.parametrize(("iterations", "turns"), [(0, 1), (3, 4), (25, 26)])
def test_max_tool_calling_iterations_is_one_turn_fewer_than_max_turns(iterations, turns):
    # TRL 1.16 _tool_call_loop: `while idxs_with_tool and iteration_num < max_tool_calling_iterations`
    # runs the tools after each of the first `iterations` turns, so the model acts iterations + 1 times
    conversion = convert(
        {**BASICS, "max_steps": 10, "max_tool_calling_iterations": iterations, "max_completion_length": 512},
        "x.yaml",
    )
    assert conversion.recipe["agent"] == {"max_turns": turns}  # the agent stays off: no tools here
    (row,) = [r for r in conversion.rows if r.key == "max_tool_calling_iterations"]
    assert (row.kind, row.rlrun_key, row.rlrun_value) == ("converted", "agent.max_turns", turns)
    (note,) = [n for n in conversion.notes if "max_tool_calling_iterations" in n]
    assert "TRL's tools= and environment_factory= are Python objects" in note
    assert "agent.max_turn_tokens: 512" in note


def test_an_unset_max_tool_calling_iterations_writes_no_agent():
    conversion = convert({**BASICS, "max_steps": 10}, "x.yaml")
    assert "agent" not in conversion.recipe
    assert not any("max_tool_calling_iterations" in n for n in conversion.notes)


def test_a_negative_max_tool_calling_iterations_is_refused():
    with pytest.raises(ConvertError, match="`max_tool_calling_iterations: -1` .* 0 or more"):
        recipe_of({"max_steps": 10, "max_tool_calling_iterations": -1})


def test_the_converted_max_turns_validates(config):
    text = config.read_text() + "max_tool_calling_iterations: 2\n"
    config.write_text(text)
    result = CliRunner().invoke(app, ["convert", "trl", str(config), "-o", "out.yaml"])
    assert result.exit_code == 0, result.output  # the command validates what it writes
    assert yaml.safe_load(Path("out.yaml").read_text())["agent"] == {"max_turns": 3}
