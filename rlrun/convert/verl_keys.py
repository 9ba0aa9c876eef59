"""verl's config keys and their rlrun equivalents: the one table behind both the converter
(`rlrun convert verl`) and the did-you-mean hints for verl names in a recipe.

Each verl key (dotted, as on a verl command line) maps to one rlrun key, with a function when
the value changes (units: verl's `ppo_mini_batch_size` counts prompts, rlrun's
`actor.mini_batch_samples` counts samples), or to None when rlrun has no equivalent, with the
reason. A key ending in `.*` covers a whole verl subtree. `VERL_DEFAULTS` holds verl's own
defaults (verl 0.4-0.9 `ppo_trainer.yaml`) where they differ from rlrun's, because a verl
command line relies on them.

This module imports nothing from rlrun, so `rlrun.recipes.keys` can use it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

Settings = Mapping[str, Any]  # every verl key -> its value (the command line's, else verl's default)
Convert = Callable[[Any, Settings], Any]  # (the key's verl value, all settings) -> the rlrun value


@dataclass(frozen=True)
class VerlKey:
    rlrun: str | None  # the rlrun key; None: rlrun has no equivalent
    note: str = ""  # the unit change, or why there is no equivalent
    convert: Convert | None = None  # None: the value is the same


def _n(settings: Settings) -> int:
    return int(settings.get("actor_rollout_ref.rollout.n", 1))


def gpus(settings: Settings) -> int:
    """verl's GPU count: trainer.n_gpus_per_node x trainer.nnodes."""
    return int(settings.get("trainer.n_gpus_per_node", 8)) * int(settings.get("trainer.nnodes", 1))


def _micro_batch(value: Any, settings: Settings) -> int:
    """Samples per forward/backward over all GPUs; unset in verl: the whole mini-batch at once."""
    per_gpu = settings.get("actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu")
    if per_gpu:
        return int(per_gpu) * gpus(settings)
    total = settings.get("actor_rollout_ref.actor.ppo_micro_batch_size")
    return (
        int(total)
        if total
        else int(settings.get("actor_rollout_ref.actor.ppo_mini_batch_size", 256)) * _n(settings)
    )


def _first_file(value: Any, settings: Settings) -> Any:
    return value[0] if isinstance(value, list) and value else value


def _overlong(value: Any, settings: Settings) -> str:
    if settings.get("data.filter_overlong_prompts"):
        return "drop"
    return "error" if settings.get("data.truncation", "error") == "error" else "truncate"


def _off_when_negative(value: Any, settings: Settings) -> int:
    return 0 if value is None or value < 0 else int(value)


def _metric(value: Any, settings: Settings) -> str:
    return "acc" if value == "acc" else "score"


def _lora(value: Any, settings: Settings) -> dict[str, Any] | None:
    rank = int(settings.get("actor_rollout_ref.model.lora_rank", 0) or 0)
    if rank <= 0:
        return None
    lora: dict[str, Any] = {"r": rank, "alpha": float(settings.get("actor_rollout_ref.model.lora_alpha", 16))}
    modules = settings.get("actor_rollout_ref.model.target_modules", "all-linear")
    lora["target_modules"] = modules if modules == "all-linear" else list(modules)
    return lora


def _warmup_steps(value: Any, settings: Settings) -> int | None:
    steps = settings.get("actor_rollout_ref.actor.optim.lr_warmup_steps", -1)
    if steps is not None and steps >= 0:
        return int(steps)
    ratio = float(settings.get("actor_rollout_ref.actor.optim.lr_warmup_steps_ratio", 0.0) or 0.0)
    if not ratio:
        return 0
    total = _total_steps(None, settings)
    return None if total is None else int(ratio * total)


def _total_steps(value: Any, settings: Settings) -> int | None:
    """verl's step count: total_training_steps, else epochs x (rows // train_batch_size) as verl's
    dataloader (drop_last) gives; None when the training file cannot be counted here."""
    if settings.get("trainer.total_training_steps"):
        return int(settings["trainer.total_training_steps"])
    rows = count_rows(_first_file(settings.get("data.train_files"), settings))
    batch = int(settings.get("data.train_batch_size", 1024))
    if rows is None or rows < batch:
        return None
    return int(settings.get("trainer.total_epochs", 30)) * (rows // batch)


def count_rows(path: Any) -> int | None:
    """Rows of a .parquet (needs pyarrow) or .jsonl/.json file; None when it cannot be read."""
    if not isinstance(path, str):
        return None
    file = Path(path).expanduser()
    try:
        if file.suffix == ".parquet":
            import pyarrow.parquet as pq

            return pq.ParquetFile(file).metadata.num_rows
        if file.suffix == ".jsonl":
            return sum(1 for line in file.read_text(encoding="utf-8").splitlines() if line.strip())
        if file.suffix == ".json":
            return len(json.loads(file.read_text(encoding="utf-8")))
    except (ImportError, OSError, ValueError):
        return None
    return None


def _reward_functions(value: Any, settings: Settings) -> list[dict[str, Any]]:
    """verl's custom_reward_function (a file and a function name) as a reward entry; without one,
    the built-in verl would pick for the data: GSM8K's scorer, else a math-answer scorer."""
    prefix = "custom_reward_function.reward_kwargs."
    kwargs = {key[len(prefix) :]: v for key, v in settings.items() if key.startswith(prefix)}
    path = settings.get("custom_reward_function.path")
    if path:
        name = settings.get("custom_reward_function.name") or "compute_score"
        return [{"fn": f"{module_of(str(path))}:{name}", "weight": 1.0, "style": "verl", "kwargs": kwargs}]
    source = _first_file(settings.get("data.train_files"), settings)
    hints = f"{source} {first_data_source(source)}".lower()
    builtin = "rlrun:gsm8k" if "gsm8k" in hints else "rlrun:math_answer"
    return [{"fn": builtin, "weight": 1.0, **({"kwargs": kwargs} if kwargs else {})}]


def first_data_source(path: Any) -> str:
    """The `data_source` of a verl parquet file's first row ("" when it cannot be read here)."""
    if not isinstance(path, str) or not path.endswith(".parquet"):
        return ""
    try:
        import pyarrow.parquet as pq

        column = pq.ParquetFile(Path(path).expanduser()).read_row_group(0, columns=["data_source"]).column(0)
        return str(column[0]) if len(column) else ""
    except (ImportError, OSError, ValueError, KeyError, IndexError):
        return ""


def module_of(path: str) -> str:
    """The import name of a Python file: dotted from the working directory when it lies below it
    (`recipe/dapo/reward.py` -> `recipe.dapo.reward`), else its file name."""
    file = Path(path).expanduser()
    try:
        relative = file.resolve().relative_to(Path.cwd().resolve())
    except ValueError:
        relative = Path(file.name)
    return ".".join(relative.with_suffix("").parts)


_NO_EFFECT = "a performance or infrastructure setting; rlrun chooses its own"

TABLE: dict[str, VerlKey] = {
    # --- data -------------------------------------------------------------------------------
    "data.train_files": VerlKey("data.source", "rlrun reads one file: the first is taken", _first_file),
    "data.val_files": VerlKey("data.val_source", "rlrun reads one file: the first is taken", _first_file),
    "data.prompt_key": VerlKey("data.prompt_key"),
    "data.max_prompt_length": VerlKey("data.max_prompt_tokens"),
    "data.max_response_length": VerlKey("rollout.max_response_tokens"),
    "data.train_batch_size": VerlKey("trainer.prompts_per_step", "both count prompts per step"),
    "data.shuffle": VerlKey("data.shuffle"),
    "data.seed": VerlKey("data.seed"),
    "data.tokenizer": VerlKey("model.tokenizer"),
    "data.filter_overlong_prompts": VerlKey(
        "data.overlong_prompts", "true = drop; else data.truncation decides", _overlong
    ),
    "data.truncation": VerlKey(
        "data.overlong_prompts",
        "error = error; left/right/middle = truncate (rlrun keeps a prompt's last tokens, like left)",
        _overlong,
    ),
    "data.gen_batch_size": VerlKey(
        None, "rlrun's dynamic sampling generates trainer.prompts_per_step prompts per generation batch"
    ),
    "data.reward_fn_key": VerlKey(None, "rlrun passes the data_source column to every reward function"),
    "data.val_batch_size": VerlKey(
        None, "rlrun evaluates trainer.eval.prompts prompts in batches of its own"
    ),
    "data.*": VerlKey(None, _NO_EFFECT),
    # --- model ------------------------------------------------------------------------------
    "actor_rollout_ref.model.path": VerlKey("model.path"),
    "actor_rollout_ref.model.enable_gradient_checkpointing": VerlKey("model.gradient_checkpointing"),
    "actor_rollout_ref.model.trust_remote_code": VerlKey("model.trust_remote_code"),
    "actor_rollout_ref.model.lora_rank": VerlKey("model.lora", "0 = no LoRA; else model.lora.r", _lora),
    "actor_rollout_ref.model.lora_alpha": VerlKey("model.lora", "model.lora.alpha", _lora),
    "actor_rollout_ref.model.target_modules": VerlKey("model.lora", "model.lora.target_modules", _lora),
    "actor_rollout_ref.rollout.dtype": VerlKey(
        "model.dtype",
        "verl trains fp32 master weights under bf16 mixed precision; rlrun trains in one dtype",
        lambda v, s: {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32"}.get(v, v),
    ),
    "actor_rollout_ref.model.*": VerlKey(None, _NO_EFFECT),
    # --- actor ------------------------------------------------------------------------------
    "actor_rollout_ref.actor.optim.lr": VerlKey("actor.optimizer.lr"),
    "actor_rollout_ref.actor.optim.weight_decay": VerlKey("actor.optimizer.weight_decay"),
    "actor_rollout_ref.actor.optim.betas": VerlKey("actor.optimizer.betas", "", lambda v, s: list(v)),
    "actor_rollout_ref.actor.optim.lr_warmup_steps": VerlKey(
        "actor.lr_scheduler.warmup_steps", "-1 = use lr_warmup_steps_ratio", _warmup_steps
    ),
    "actor_rollout_ref.actor.optim.lr_warmup_steps_ratio": VerlKey(
        "actor.lr_scheduler.warmup_steps", "a fraction of the steps -> a step count", _warmup_steps
    ),
    "actor_rollout_ref.actor.optim.warmup_style": VerlKey("actor.lr_scheduler.name"),
    "actor_rollout_ref.actor.optim.lr_scheduler_type": VerlKey("actor.lr_scheduler.name"),
    "actor_rollout_ref.actor.optim.min_lr_ratio": VerlKey(
        "actor.lr_scheduler.min_lr_ratio", "", lambda v, s: 0.0 if v is None else v
    ),
    "actor_rollout_ref.actor.optim.clip_grad": VerlKey("actor.grad_clip"),
    "actor_rollout_ref.actor.optim.*": VerlKey(None, "set by the run itself in verl (total steps) or unused"),
    "actor_rollout_ref.actor.grad_clip": VerlKey("actor.grad_clip"),
    "actor_rollout_ref.actor.ppo_mini_batch_size": VerlKey(
        "actor.mini_batch_samples",
        "verl counts prompts, rlrun samples: x rollout.n",
        lambda v, s: int(v) * _n(s),
    ),
    "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu": VerlKey(
        "actor.micro_batch_samples",
        "verl counts samples per GPU, rlrun samples over all processes: x GPUs (n_gpus_per_node x nnodes)",
        _micro_batch,
    ),
    "actor_rollout_ref.actor.ppo_micro_batch_size": VerlKey(
        "actor.micro_batch_samples", "both count samples over all GPUs", _micro_batch
    ),
    "actor_rollout_ref.actor.clip_ratio": VerlKey("actor.clip_ratio"),
    "actor_rollout_ref.actor.clip_ratio_low": VerlKey("actor.clip_ratio_low"),
    "actor_rollout_ref.actor.clip_ratio_high": VerlKey("actor.clip_ratio_high"),
    "actor_rollout_ref.actor.clip_ratio_c": VerlKey("actor.clip_ratio_c"),
    "actor_rollout_ref.actor.loss_agg_mode": VerlKey("actor.loss_agg_mode"),
    "actor_rollout_ref.actor.entropy_coeff": VerlKey("actor.entropy_coef"),
    "actor_rollout_ref.actor.use_kl_loss": VerlKey("actor.kl_loss.enabled"),
    "actor_rollout_ref.actor.kl_loss_coef": VerlKey("actor.kl_loss.coef"),
    "actor_rollout_ref.actor.kl_loss_type": VerlKey("actor.kl_loss.estimator"),
    "actor_rollout_ref.actor.ppo_epochs": VerlKey("actor.ppo_epochs"),
    "actor_rollout_ref.actor.policy_loss.loss_mode": VerlKey("actor.policy_loss"),
    "actor_rollout_ref.actor.loss_mode": VerlKey("actor.policy_loss"),
    "actor_rollout_ref.actor.strategy": VerlKey(
        "trainer.strategy",
        "fsdp and fsdp2 -> fsdp2 (rlrun's FSDP); megatron has no equivalent",
        lambda v, s: "fsdp2" if v in ("fsdp", "fsdp2") else v,
    ),
    "actor_rollout_ref.actor.use_dynamic_bsz": VerlKey(None, "rlrun batches by sample count"),
    "actor_rollout_ref.actor.ppo_max_token_len_per_gpu": VerlKey(None, "rlrun batches by sample count"),
    "actor_rollout_ref.actor.shuffle": VerlKey(None, "rlrun keeps the rollout order within a step"),
    "actor_rollout_ref.actor.*": VerlKey(None, _NO_EFFECT),
    "actor_rollout_ref.ref.*": VerlKey(None, "the reference model is sized like the policy (reference.path)"),
    "actor_rollout_ref.hybrid_engine": VerlKey(None, _NO_EFFECT),
    # --- rollout ----------------------------------------------------------------------------
    "actor_rollout_ref.rollout.name": VerlKey(
        "rollout.engine",
        "vllm and sglang -> vllm; hf -> hf",
        lambda v, s: "hf" if v == "hf" else "vllm",
    ),
    "actor_rollout_ref.rollout.n": VerlKey("rollout.n"),
    "actor_rollout_ref.rollout.temperature": VerlKey("rollout.temperature"),
    "actor_rollout_ref.rollout.top_p": VerlKey("rollout.top_p", "", lambda v, s: float(v)),
    "actor_rollout_ref.rollout.top_k": VerlKey("rollout.top_k", "-1 (off) -> 0 (off)", _off_when_negative),
    "actor_rollout_ref.rollout.response_length": VerlKey("rollout.max_response_tokens"),
    "actor_rollout_ref.rollout.prompt_length": VerlKey("data.max_prompt_tokens"),
    "actor_rollout_ref.rollout.gpu_memory_utilization": VerlKey("rollout.vllm.gpu_memory_utilization"),
    "actor_rollout_ref.rollout.tensor_model_parallel_size": VerlKey("rollout.vllm.tensor_parallel_size"),
    "actor_rollout_ref.rollout.free_cache_engine": VerlKey(
        "rollout.vllm.enable_sleep_mode", "freeing vLLM's memory while training = sleep mode"
    ),
    "actor_rollout_ref.rollout.val_kwargs.n": VerlKey("trainer.eval.k"),
    "actor_rollout_ref.rollout.val_kwargs.do_sample": VerlKey(
        "trainer.eval.greedy", "do_sample false = greedy", lambda v, s: not v
    ),
    "actor_rollout_ref.rollout.val_kwargs.*": VerlKey(
        None, "rlrun evaluates greedily or at the rollout's sampling"
    ),
    "actor_rollout_ref.rollout.*": VerlKey(None, _NO_EFFECT),
    # --- critic -----------------------------------------------------------------------------
    "critic.enable": VerlKey(
        "critic.enabled",
        "verl enables the critic for gae by itself; rlrun states it",
        lambda v, s: bool(v) if v is not None else s.get("algorithm.adv_estimator") == "gae",
    ),
    "critic.optim.lr": VerlKey("critic.optimizer.lr"),
    "critic.optim.weight_decay": VerlKey("critic.optimizer.weight_decay"),
    "critic.optim.betas": VerlKey("critic.optimizer.betas", "", lambda v, s: list(v)),
    "critic.model.path": VerlKey("critic.model_path"),
    "critic.cliprange_value": VerlKey("critic.cliprange_value"),
    "critic.grad_clip": VerlKey("critic.grad_clip"),
    "critic.loss_agg_mode": VerlKey("critic.loss_agg_mode"),
    "critic.*": VerlKey(None, "the critic trains on the actor's batches (actor.mini/micro_batch_samples)"),
    # --- reward -----------------------------------------------------------------------------
    "custom_reward_function.path": VerlKey(
        "reward.functions",
        "a file -> its module, called verl style; without one, the built-in verl uses for the data_source",
        _reward_functions,
    ),
    "custom_reward_function.name": VerlKey(
        "reward.functions", "the function in that module", _reward_functions
    ),
    "custom_reward_function.reward_kwargs.*": VerlKey(
        "reward.functions", "the reward entry's kwargs", _reward_functions
    ),
    "reward_model.overlong_buffer.enable": VerlKey("reward.overlong_shaping.enabled"),
    "reward_model.overlong_buffer.len": VerlKey("reward.overlong_shaping.buffer_tokens"),
    "reward_model.overlong_buffer.penalty_factor": VerlKey("reward.overlong_shaping.penalty_factor"),
    "reward_model.reward_kwargs.overlong_buffer_cfg.enable": VerlKey("reward.overlong_shaping.enabled"),
    "reward_model.reward_kwargs.overlong_buffer_cfg.len": VerlKey("reward.overlong_shaping.buffer_tokens"),
    "reward_model.reward_kwargs.overlong_buffer_cfg.penalty_factor": VerlKey(
        "reward.overlong_shaping.penalty_factor"
    ),
    "reward_model.reward_manager": VerlKey(
        None, "rlrun has one reward path (DAPO's shaping: reward.overlong_shaping)"
    ),
    "reward_model.enable": VerlKey(None, "rlrun has no model-based reward; name a reward function instead"),
    "reward_model.*": VerlKey(None, "rlrun has no model-based reward"),
    # --- algorithm --------------------------------------------------------------------------
    "algorithm.adv_estimator": VerlKey("algorithm.advantage"),
    "algorithm.norm_adv_by_std_in_grpo": VerlKey("algorithm.norm_adv_by_std_in_grpo"),
    "algorithm.gamma": VerlKey("algorithm.gamma"),
    "algorithm.lam": VerlKey("algorithm.lam"),
    "algorithm.use_kl_in_reward": VerlKey("algorithm.kl_in_reward.enabled"),
    "algorithm.kl_penalty": VerlKey("algorithm.kl_in_reward.estimator"),
    "algorithm.kl_ctrl.type": VerlKey("algorithm.kl_in_reward.controller"),
    "algorithm.kl_ctrl.kl_coef": VerlKey("algorithm.kl_in_reward.coef"),
    "algorithm.kl_ctrl.target_kl": VerlKey("algorithm.kl_in_reward.target_kl"),
    "algorithm.kl_ctrl.horizon": VerlKey("algorithm.kl_in_reward.horizon"),
    "algorithm.filter_groups.enable": VerlKey("algorithm.group_filter.enabled"),
    "algorithm.filter_groups.metric": VerlKey(
        "algorithm.group_filter.metric", "acc = acc; seq_reward, seq_final_reward, score = score", _metric
    ),
    "algorithm.filter_groups.max_num_gen_batches": VerlKey("algorithm.group_filter.max_num_gen_batches"),
    "algorithm.rollout_correction.rollout_is": VerlKey(
        "rollout.importance_sampling.level", "null = off", lambda v, s: v or "off"
    ),
    "algorithm.rollout_correction.rollout_is_threshold": VerlKey("rollout.importance_sampling.cap"),
    "algorithm.*": VerlKey(None, "not implemented in rlrun"),
    # --- trainer ----------------------------------------------------------------------------
    "trainer.total_training_steps": VerlKey("trainer.total_steps", "", _total_steps),
    "trainer.total_epochs": VerlKey(
        "trainer.total_steps",
        "epochs -> steps: epochs x (training rows // data.train_batch_size)",
        _total_steps,
    ),
    "trainer.test_freq": VerlKey(
        "trainer.eval.every_steps", "-1 (never) -> 0 (start and end)", _off_when_negative
    ),
    "trainer.save_freq": VerlKey(
        "trainer.checkpoint.every_steps", "-1 (never) -> 0 (at the end)", _off_when_negative
    ),
    "trainer.max_actor_ckpt_to_keep": VerlKey("trainer.checkpoint.keep_last"),
    "trainer.critic_warmup": VerlKey("critic.warmup_steps"),
    "trainer.device": VerlKey("trainer.device"),
    "trainer.project_name": VerlKey("logging.wandb.project"),
    "trainer.logger": VerlKey(
        "logging.wandb.enabled", "a logger list -> whether W&B logs", lambda v, s: "wandb" in (v or [])
    ),
    "trainer.default_local_dir": VerlKey("trainer.output_dir", "rlrun adds <recipe>-<time> under it"),
    "trainer.n_gpus_per_node": VerlKey(None, "no recipe key: `rlrun train --num-processes N`"),
    "trainer.nnodes": VerlKey(None, "no recipe key: one `rlrun train --num-processes N` per machine"),
    "trainer.experiment_name": VerlKey(None, "rlrun names the run directory after the recipe"),
    "trainer.*": VerlKey(None, _NO_EFFECT),
    "global_profiler.*": VerlKey(None, "rlrun train --profile"),
    "ray_init.*": VerlKey(None, "rlrun does not use Ray"),
    "ray_kwargs.*": VerlKey(None, "rlrun does not use Ray"),
}

# verl's defaults that differ from rlrun's: a verl command line that leaves them out means these.
VERL_DEFAULTS: dict[str, Any] = {
    "algorithm.adv_estimator": "gae",
    "data.max_prompt_length": 512,
    "data.max_response_length": 512,
    "data.train_batch_size": 1024,
    "data.truncation": "error",
    "data.filter_overlong_prompts": False,
    "actor_rollout_ref.model.enable_gradient_checkpointing": True,
    "actor_rollout_ref.rollout.dtype": "bfloat16",
    "actor_rollout_ref.rollout.n": 1,
    "actor_rollout_ref.rollout.name": "vllm",
    "actor_rollout_ref.rollout.tensor_model_parallel_size": 2,
    "actor_rollout_ref.rollout.top_k": -1,
    "actor_rollout_ref.rollout.val_kwargs.do_sample": False,
    "actor_rollout_ref.actor.optim.lr": 1.0e-6,
    "actor_rollout_ref.actor.optim.weight_decay": 0.01,
    "actor_rollout_ref.actor.optim.betas": [0.9, 0.999],
    "actor_rollout_ref.actor.ppo_mini_batch_size": 256,
    "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu": None,
    "critic.enable": None,
    "custom_reward_function.path": None,
    "critic.optim.lr": 1.0e-5,
    "critic.optim.weight_decay": 0.01,
    "critic.optim.betas": [0.9, 0.999],
    "trainer.test_freq": -1,
    "trainer.save_freq": -1,
    "trainer.device": "cuda",
    "trainer.n_gpus_per_node": 8,
    "trainer.nnodes": 1,
    "trainer.total_epochs": 30,
}


def lookup(verl_key: str) -> tuple[str, VerlKey] | None:
    """The table row for `verl_key` (Hydra's `+`/`++` prefixes ignored): its own, else the
    nearest `.*` subtree row, as ``(row key, row)``; None when the table has neither."""
    key = verl_key.lstrip("+")
    if key in TABLE:
        return key, TABLE[key]
    parts = key.split(".")
    for end in range(len(parts) - 1, 0, -1):
        pattern = ".".join(parts[:end]) + ".*"
        if pattern in TABLE:
            return pattern, TABLE[pattern]
    return None
