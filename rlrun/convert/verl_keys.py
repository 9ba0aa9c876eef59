"""verl's config keys and their rlrun equivalents: the one table behind both the converter
(`rlrun convert verl`) and the did-you-mean hints for verl names in a recipe.

Each verl key (dotted, as on a verl command line) maps to one rlrun key, with a function when
the value changes (units: verl's `ppo_mini_batch_size` counts prompts, rlrun's
`actor.mini_batch_samples` counts samples), or to None when rlrun has no equivalent, with the
reason. A key ending in `.*` covers a whole verl subtree. `VERL_DEFAULTS` holds verl's own
defaults (verl 0.4-0.9 `ppo_trainer.yaml`) where they differ from rlrun's, because a verl
command line relies on them.

This module imports nothing from rlrun but `rlrun.convert.table`, so `rlrun.recipes.keys` can
use it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rlrun.convert.table import KeyMap, Settings, find


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


def _loss_kwargs(value: Any, settings: Settings) -> dict[str, Any]:
    prefix = "actor_rollout_ref.actor.policy_loss."
    return {
        key[len(prefix) :]: v
        for key, v in settings.items()
        if key.startswith(prefix) and key != prefix + "loss_mode"
    }


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


_MASTER_WEIGHTS = "actor_rollout_ref.actor.fsdp_config.model_dtype"


def _torch_dtype(value: Any) -> str:
    """verl's short dtype names (bf16, fp32) as rlrun's."""
    return {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32"}.get(value, value)


def _autocast(value: Any, settings: Settings) -> str | None:
    """verl's actor computes in this dtype over its master weights (FSDP mixed precision): with
    bfloat16 over float32 weights that is rlrun's autocast; over weights already in it, none."""
    compute, weights = _torch_dtype(value), _torch_dtype(settings.get(_MASTER_WEIGHTS, "fp32"))
    return "bfloat16" if compute == "bfloat16" and weights == "float32" else None


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

TABLE: dict[str, KeyMap] = {
    # --- data -------------------------------------------------------------------------------
    "data.train_files": KeyMap("data.source", "rlrun reads one file: the first is taken", _first_file),
    "data.val_files": KeyMap("data.val_source", "rlrun reads one file: the first is taken", _first_file),
    "data.prompt_key": KeyMap("data.prompt_key"),
    "data.max_prompt_length": KeyMap("data.max_prompt_tokens"),
    "data.max_response_length": KeyMap("rollout.max_response_tokens"),
    "data.train_batch_size": KeyMap("trainer.prompts_per_step", "both count prompts per step"),
    "data.shuffle": KeyMap("data.shuffle"),
    "data.seed": KeyMap("data.seed"),
    "data.tokenizer": KeyMap("model.tokenizer"),
    "data.filter_overlong_prompts": KeyMap(
        "data.overlong_prompts", "true = drop; else data.truncation decides", _overlong
    ),
    "data.truncation": KeyMap(
        "data.overlong_prompts",
        "error = error; left/right/middle = truncate (rlrun keeps a prompt's last tokens, like left)",
        _overlong,
    ),
    "data.gen_batch_size": KeyMap(
        None, "rlrun's dynamic sampling generates trainer.prompts_per_step prompts per generation batch"
    ),
    "data.reward_fn_key": KeyMap(None, "rlrun passes the data_source column to every reward function"),
    "data.val_batch_size": KeyMap(None, "rlrun evaluates trainer.eval.prompts prompts in batches of its own"),
    "data.*": KeyMap(None, _NO_EFFECT),
    # --- model ------------------------------------------------------------------------------
    "actor_rollout_ref.model.path": KeyMap("model.path"),
    "actor_rollout_ref.model.enable_gradient_checkpointing": KeyMap("model.gradient_checkpointing"),
    "actor_rollout_ref.model.trust_remote_code": KeyMap("model.trust_remote_code"),
    "actor_rollout_ref.model.lora_rank": KeyMap("model.lora", "0 = no LoRA; else model.lora.r", _lora),
    "actor_rollout_ref.model.lora_alpha": KeyMap("model.lora", "model.lora.alpha", _lora),
    "actor_rollout_ref.model.target_modules": KeyMap("model.lora", "model.lora.target_modules", _lora),
    "actor_rollout_ref.rollout.dtype": KeyMap(None, "rlrun's rollout runs the policy's own weights"),
    _MASTER_WEIGHTS: KeyMap("model.dtype", "the actor's master weights", lambda v, s: _torch_dtype(v)),
    "actor_rollout_ref.actor.fsdp_config.mixed_precision.param_dtype": KeyMap(
        "trainer.autocast", "the actor's compute dtype over its master weights", _autocast
    ),
    "actor_rollout_ref.actor.fsdp_config.dtype": KeyMap(  # its name in verl's newer engine
        "trainer.autocast", "the actor's compute dtype over its master weights", _autocast
    ),
    "actor_rollout_ref.model.*": KeyMap(None, _NO_EFFECT),
    # --- actor ------------------------------------------------------------------------------
    "actor_rollout_ref.actor.optim.lr": KeyMap("actor.optimizer.lr"),
    "actor_rollout_ref.actor.optim.weight_decay": KeyMap("actor.optimizer.weight_decay"),
    "actor_rollout_ref.actor.optim.betas": KeyMap("actor.optimizer.betas", "", lambda v, s: list(v)),
    "actor_rollout_ref.actor.optim.lr_warmup_steps": KeyMap(
        "actor.lr_scheduler.warmup_steps", "-1 = use lr_warmup_steps_ratio", _warmup_steps
    ),
    "actor_rollout_ref.actor.optim.lr_warmup_steps_ratio": KeyMap(
        "actor.lr_scheduler.warmup_steps", "a fraction of the steps -> a step count", _warmup_steps
    ),
    "actor_rollout_ref.actor.optim.warmup_style": KeyMap("actor.lr_scheduler.name"),
    "actor_rollout_ref.actor.optim.lr_scheduler_type": KeyMap("actor.lr_scheduler.name"),
    "actor_rollout_ref.actor.optim.min_lr_ratio": KeyMap(
        "actor.lr_scheduler.min_lr_ratio", "", lambda v, s: 0.0 if v is None else v
    ),
    "actor_rollout_ref.actor.optim.clip_grad": KeyMap("actor.grad_clip"),
    "actor_rollout_ref.actor.optim.*": KeyMap(None, "set by the run itself in verl (total steps) or unused"),
    "actor_rollout_ref.actor.grad_clip": KeyMap("actor.grad_clip"),
    "actor_rollout_ref.actor.ppo_mini_batch_size": KeyMap(
        "actor.mini_batch_samples",
        "verl counts prompts, rlrun samples: x rollout.n",
        lambda v, s: int(v) * _n(s),
    ),
    "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu": KeyMap(
        "actor.micro_batch_samples",
        "verl counts samples per GPU, rlrun samples over all processes: x GPUs (n_gpus_per_node x nnodes)",
        _micro_batch,
    ),
    "actor_rollout_ref.actor.ppo_micro_batch_size": KeyMap(
        "actor.micro_batch_samples", "both count samples over all GPUs", _micro_batch
    ),
    "actor_rollout_ref.actor.clip_ratio": KeyMap("actor.clip_ratio"),
    "actor_rollout_ref.actor.clip_ratio_low": KeyMap("actor.clip_ratio_low"),
    "actor_rollout_ref.actor.clip_ratio_high": KeyMap("actor.clip_ratio_high"),
    "actor_rollout_ref.actor.clip_ratio_c": KeyMap("actor.clip_ratio_c"),
    "actor_rollout_ref.actor.loss_agg_mode": KeyMap("actor.loss_agg_mode"),
    "actor_rollout_ref.actor.entropy_coeff": KeyMap("actor.entropy_coef"),
    "actor_rollout_ref.actor.use_kl_loss": KeyMap("actor.kl_loss.enabled"),
    "actor_rollout_ref.actor.kl_loss_coef": KeyMap("actor.kl_loss.coef"),
    "actor_rollout_ref.actor.kl_loss_type": KeyMap("actor.kl_loss.estimator"),
    "actor_rollout_ref.actor.ppo_epochs": KeyMap("actor.ppo_epochs"),
    "actor_rollout_ref.actor.policy_loss.loss_mode": KeyMap("actor.policy_loss"),
    "actor_rollout_ref.actor.loss_mode": KeyMap("actor.policy_loss"),
    "actor_rollout_ref.actor.policy_loss.*": KeyMap(
        "actor.loss_kwargs",
        "the chosen loss's own parameters (clip_cov_ratio, kl_cov_ratio, ...)",
        _loss_kwargs,
    ),
    "actor_rollout_ref.actor.strategy": KeyMap(
        "trainer.strategy",
        "fsdp and fsdp2 -> fsdp2 (rlrun's FSDP); megatron has no equivalent",
        lambda v, s: "fsdp2" if v in ("fsdp", "fsdp2") else v,
    ),
    "actor_rollout_ref.actor.use_dynamic_bsz": KeyMap(None, "rlrun batches by sample count"),
    "actor_rollout_ref.actor.ppo_max_token_len_per_gpu": KeyMap(None, "rlrun batches by sample count"),
    "actor_rollout_ref.actor.shuffle": KeyMap(None, "rlrun keeps the rollout order within a step"),
    "actor_rollout_ref.actor.*": KeyMap(None, _NO_EFFECT),
    "actor_rollout_ref.ref.*": KeyMap(None, "the reference model is sized like the policy (reference.path)"),
    "actor_rollout_ref.hybrid_engine": KeyMap(None, _NO_EFFECT),
    # --- rollout ----------------------------------------------------------------------------
    "actor_rollout_ref.rollout.name": KeyMap(
        "rollout.engine",
        "vllm and sglang -> vllm; hf -> hf",
        lambda v, s: "hf" if v == "hf" else "vllm",
    ),
    "actor_rollout_ref.rollout.n": KeyMap("rollout.n"),
    "actor_rollout_ref.rollout.temperature": KeyMap("rollout.temperature"),
    "actor_rollout_ref.rollout.top_p": KeyMap("rollout.top_p", "", lambda v, s: float(v)),
    "actor_rollout_ref.rollout.top_k": KeyMap("rollout.top_k", "-1 (off) -> 0 (off)", _off_when_negative),
    "actor_rollout_ref.rollout.response_length": KeyMap("rollout.max_response_tokens"),
    "actor_rollout_ref.rollout.prompt_length": KeyMap("data.max_prompt_tokens"),
    "actor_rollout_ref.rollout.gpu_memory_utilization": KeyMap("rollout.vllm.gpu_memory_utilization"),
    "actor_rollout_ref.rollout.tensor_model_parallel_size": KeyMap("rollout.vllm.tensor_parallel_size"),
    "actor_rollout_ref.rollout.free_cache_engine": KeyMap(
        "rollout.vllm.enable_sleep_mode", "freeing vLLM's memory while training = sleep mode"
    ),
    "actor_rollout_ref.rollout.val_kwargs.n": KeyMap("trainer.eval.k"),
    "actor_rollout_ref.rollout.val_kwargs.do_sample": KeyMap(
        "trainer.eval.greedy", "do_sample false = greedy", lambda v, s: not v
    ),
    "actor_rollout_ref.rollout.val_kwargs.*": KeyMap(
        None, "rlrun evaluates greedily or at the rollout's sampling"
    ),
    "actor_rollout_ref.rollout.*": KeyMap(None, _NO_EFFECT),
    # --- critic -----------------------------------------------------------------------------
    "critic.enable": KeyMap(
        "critic.enabled",
        "verl enables the critic for gae by itself; rlrun states it",
        lambda v, s: bool(v) if v is not None else s.get("algorithm.adv_estimator") == "gae",
    ),
    "critic.optim.lr": KeyMap("critic.optimizer.lr"),
    "critic.optim.weight_decay": KeyMap("critic.optimizer.weight_decay"),
    "critic.optim.betas": KeyMap("critic.optimizer.betas", "", lambda v, s: list(v)),
    "critic.model.path": KeyMap("critic.model_path"),
    "critic.cliprange_value": KeyMap("critic.cliprange_value"),
    "critic.grad_clip": KeyMap("critic.grad_clip"),
    "critic.loss_agg_mode": KeyMap("critic.loss_agg_mode"),
    "critic.*": KeyMap(None, "the critic trains on the actor's batches (actor.mini/micro_batch_samples)"),
    # --- reward -----------------------------------------------------------------------------
    "custom_reward_function.path": KeyMap(
        "reward.functions",
        "a file -> its module, called verl style; without one, the built-in verl uses for the data_source",
        _reward_functions,
    ),
    "custom_reward_function.name": KeyMap(
        "reward.functions", "the function in that module", _reward_functions
    ),
    "custom_reward_function.reward_kwargs.*": KeyMap(
        "reward.functions", "the reward entry's kwargs", _reward_functions
    ),
    "reward_model.overlong_buffer.enable": KeyMap("reward.overlong_shaping.enabled"),
    "reward_model.overlong_buffer.len": KeyMap("reward.overlong_shaping.buffer_tokens"),
    "reward_model.overlong_buffer.penalty_factor": KeyMap("reward.overlong_shaping.penalty_factor"),
    "reward_model.reward_kwargs.overlong_buffer_cfg.enable": KeyMap("reward.overlong_shaping.enabled"),
    "reward_model.reward_kwargs.overlong_buffer_cfg.len": KeyMap("reward.overlong_shaping.buffer_tokens"),
    "reward_model.reward_kwargs.overlong_buffer_cfg.penalty_factor": KeyMap(
        "reward.overlong_shaping.penalty_factor"
    ),
    "reward_model.reward_manager": KeyMap(
        None, "rlrun has one reward path (DAPO's shaping: reward.overlong_shaping)"
    ),
    "reward_model.enable": KeyMap(None, "rlrun has no model-based reward; name a reward function instead"),
    "reward_model.*": KeyMap(None, "rlrun has no model-based reward"),
    # --- algorithm --------------------------------------------------------------------------
    "algorithm.adv_estimator": KeyMap("algorithm.advantage"),
    "algorithm.norm_adv_by_std_in_grpo": KeyMap("algorithm.norm_adv_by_std_in_grpo"),
    "algorithm.gamma": KeyMap("algorithm.gamma"),
    "algorithm.lam": KeyMap("algorithm.lam"),
    "algorithm.use_kl_in_reward": KeyMap("algorithm.kl_in_reward.enabled"),
    "algorithm.kl_penalty": KeyMap("algorithm.kl_in_reward.estimator"),
    "algorithm.kl_ctrl.type": KeyMap("algorithm.kl_in_reward.controller"),
    "algorithm.kl_ctrl.kl_coef": KeyMap("algorithm.kl_in_reward.coef"),
    "algorithm.kl_ctrl.target_kl": KeyMap("algorithm.kl_in_reward.target_kl"),
    "algorithm.kl_ctrl.horizon": KeyMap("algorithm.kl_in_reward.horizon"),
    "algorithm.filter_groups.enable": KeyMap("algorithm.group_filter.enabled"),
    "algorithm.filter_groups.metric": KeyMap(
        "algorithm.group_filter.metric", "acc = acc; seq_reward, seq_final_reward, score = score", _metric
    ),
    "algorithm.filter_groups.max_num_gen_batches": KeyMap("algorithm.group_filter.max_num_gen_batches"),
    "algorithm.rollout_correction.rollout_is": KeyMap(
        "rollout.importance_sampling.level", "null = off", lambda v, s: v or "off"
    ),
    "algorithm.rollout_correction.rollout_is_threshold": KeyMap("rollout.importance_sampling.cap"),
    "algorithm.*": KeyMap(None, "not implemented in rlrun"),
    # --- trainer ----------------------------------------------------------------------------
    "trainer.total_training_steps": KeyMap("trainer.total_steps", "", _total_steps),
    "trainer.total_epochs": KeyMap(
        "trainer.total_steps",
        "epochs -> steps: epochs x (training rows // data.train_batch_size)",
        _total_steps,
    ),
    "trainer.test_freq": KeyMap(
        "trainer.eval.every_steps", "-1 (never) -> 0 (start and end)", _off_when_negative
    ),
    "trainer.save_freq": KeyMap(
        "trainer.checkpoint.every_steps", "-1 (never) -> 0 (at the end)", _off_when_negative
    ),
    "trainer.max_actor_ckpt_to_keep": KeyMap("trainer.checkpoint.keep_last"),
    "trainer.critic_warmup": KeyMap("critic.warmup_steps"),
    "trainer.device": KeyMap("trainer.device"),
    "trainer.project_name": KeyMap("logging.wandb.project"),
    "trainer.logger": KeyMap(
        "logging.wandb.enabled", "a logger list -> whether W&B logs", lambda v, s: "wandb" in (v or [])
    ),
    "trainer.default_local_dir": KeyMap("trainer.output_dir", "rlrun adds <recipe>-<time> under it"),
    "trainer.n_gpus_per_node": KeyMap(None, "no recipe key: `rlrun train --num-processes N`"),
    "trainer.nnodes": KeyMap(None, "no recipe key: one `rlrun train --num-processes N` per machine"),
    "trainer.experiment_name": KeyMap(None, "rlrun names the run directory after the recipe"),
    "trainer.*": KeyMap(None, _NO_EFFECT),
    "global_profiler.*": KeyMap(None, "rlrun train --profile"),
    "ray_init.*": KeyMap(None, "rlrun does not use Ray"),
    "ray_kwargs.*": KeyMap(None, "rlrun does not use Ray"),
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
    "actor_rollout_ref.actor.fsdp_config.mixed_precision.param_dtype": "bf16",
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


def lookup(verl_key: str) -> tuple[str, KeyMap] | None:
    """The table row for `verl_key` (see `table.find`)."""
    return find(TABLE, verl_key)
