"""TRL's `GRPOConfig` keys (and the `trl grpo --config` script keys: model, dataset, reward
functions) and their rlrun equivalents, for `rlrun convert trl`.

Batch sizes change unit: TRL counts samples per device and per accumulation step; rlrun counts
samples over all processes (`num_processes`, which a TRL config does not hold, is given to the
converter):

    actor.micro_batch_samples = per_device_train_batch_size x processes
    actor.mini_batch_samples  = micro x gradient_accumulation_steps
    trainer.prompts_per_step  = generation batch (default: micro x steps_per_generation) / num_generations
"""

from __future__ import annotations

from typing import Any

from rlrun.convert.table import KeyMap, Settings

PROCESSES = "num_processes"  # not a TRL key: the converter's own setting, from the command line


def _micro(settings: Settings) -> int:
    return int(settings.get("per_device_train_batch_size", 8)) * int(settings.get(PROCESSES, 1))


def _mini(value: Any, settings: Settings) -> int:
    return _micro(settings) * int(settings.get("gradient_accumulation_steps", 1))


def _prompts_per_step(value: Any, settings: Settings) -> int:
    steps = settings.get("steps_per_generation") or settings.get("gradient_accumulation_steps", 1)
    samples = settings.get("generation_batch_size") or _micro(settings) * int(steps)
    return int(samples) // int(settings.get("num_generations", 8))


def _betas(value: Any, settings: Settings) -> list[float]:
    return [float(settings.get("adam_beta1", 0.9)), float(settings.get("adam_beta2", 0.999))]


def _loss_agg(value: Any, settings: Settings) -> str | None:
    return {
        "grpo": "seq-mean-token-mean",
        "bnpo": "token-mean",
        "dapo": "token-mean",
        "dr_grpo": "seq-mean-token-sum-norm",
    }.get(value)


def _scheduler(value: Any, settings: Settings) -> str | None:
    return {
        "linear": "linear",
        "cosine": "cosine",
        "constant": "constant",
        "constant_with_warmup": "constant",
    }.get(value)


def _warmup(value: Any, settings: Settings) -> int | None:
    if settings.get("warmup_steps"):
        return int(settings["warmup_steps"])
    ratio = float(settings.get("warmup_ratio", 0.0) or 0.0)
    steps = int(settings.get("max_steps", -1) or -1)
    if not ratio:
        return 0
    return int(ratio * steps) if steps > 0 else None


def _dtype(value: Any, settings: Settings) -> str | None:
    return {"bfloat16": "bfloat16", "float16": "float16", "float32": "float32", "auto": None}.get(value)


def _autocast(value: Any, settings: Settings) -> str | None:
    """TRL's `bf16: true` is mixed precision: bfloat16 autocast over the weights in their own
    dtype (`dtype`, float32 unless set). Over bfloat16 weights it changes nothing."""
    weights = _dtype(settings.get("dtype", settings.get("torch_dtype", "float32")), settings)
    return "bfloat16" if value is True and weights in ("float32", None) else None  # None: "auto"


def _wandb(value: Any, settings: Settings) -> bool:
    targets = value if isinstance(value, list) else [value]
    return "wandb" in targets or "all" in targets


def _lora(value: Any, settings: Settings) -> dict[str, Any] | None:
    if not settings.get("use_peft"):
        return None
    lora: dict[str, Any] = {
        "r": int(settings.get("lora_r", 16)),
        "alpha": float(settings.get("lora_alpha", 32)),
        "dropout": float(settings.get("lora_dropout", 0.05)),
    }
    modules = settings.get("lora_target_modules")
    lora["target_modules"] = list(modules) if isinstance(modules, list) else "all-linear"
    return lora


def _reward_functions(value: Any, settings: Settings) -> list[dict[str, Any]] | None:
    """`reward_funcs` names (TRL's built-ins, or `pkg.module.function` paths) as TRL-style entries."""
    names = settings.get("reward_funcs") or []
    if not names:
        return None
    weights = settings.get("reward_weights") or [1.0] * len(names)
    entries = []
    for name, weight in zip(names, weights):
        module, _, function = str(name).rpartition(".")
        spec = f"{module}:{function}" if module else f"trl.rewards:{function}"
        entries.append({"fn": spec, "weight": float(weight), "style": "trl"})
    return entries


def _dataset(value: Any, settings: Settings) -> str | None:
    name = settings.get("dataset_name")
    if not name:
        return None
    config = settings.get("dataset_config")
    return f"hf:{name}:{config}" if config else f"hf:{name}"


def _top_k(value: Any, settings: Settings) -> int:
    return 0 if value is None or value < 0 else int(value)


def _policy_loss(value: Any, settings: Settings) -> str:
    if settings.get("loss_type") in ("cispo", "sapo"):
        return str(settings["loss_type"])
    return "gspo" if value == "sequence" else "vanilla"


def _importance_level(value: Any, settings: Settings) -> str:
    if not settings.get("use_vllm") or not value:
        return "off"
    return (
        "token"
        if str(settings.get("vllm_importance_sampling_mode", "sequence_mask")).startswith("token")
        else "sequence"
    )


_NO_EFFECT = "a performance or logging setting; rlrun chooses its own"

TABLE: dict[str, KeyMap] = {
    # --- the `trl grpo` script's model, data and rewards ---
    "model_name_or_path": KeyMap("model.path"),
    "dataset_name": KeyMap("data.source", "a hub dataset: hf:<name>[:<config>]", _dataset),
    "dataset_config": KeyMap("data.source", "hf:<name>:<config>", _dataset),
    "dataset_train_split": KeyMap(None, "rlrun trains on `train` and evaluates on `validation` or `test`"),
    "reward_funcs": KeyMap(
        "reward.functions",
        "TRL's built-ins (trl.rewards) or a.b.c -> a.b:c, called TRL style",
        _reward_functions,
    ),
    "reward_weights": KeyMap("reward.functions", "each reward entry's weight", _reward_functions),
    "torch_dtype": KeyMap("model.dtype", "", _dtype),
    "dtype": KeyMap("model.dtype", "", _dtype),
    "bf16": KeyMap("trainer.autocast", "mixed precision over the weights' dtype", _autocast),
    "trust_remote_code": KeyMap("model.trust_remote_code"),
    "gradient_checkpointing": KeyMap("model.gradient_checkpointing"),
    "use_peft": KeyMap("model.lora", "LoRA from lora_r, lora_alpha, lora_dropout", _lora),
    "lora_r": KeyMap("model.lora", "model.lora.r", _lora),
    "lora_alpha": KeyMap("model.lora", "model.lora.alpha", _lora),
    "lora_dropout": KeyMap("model.lora", "model.lora.dropout", _lora),
    "lora_target_modules": KeyMap("model.lora", "model.lora.target_modules", _lora),
    # --- batch sizes (units change) ---
    "per_device_train_batch_size": KeyMap(
        "actor.micro_batch_samples",
        "per device -> over all processes: x num_processes",
        lambda v, s: _micro(s),
    ),
    "gradient_accumulation_steps": KeyMap(
        "actor.mini_batch_samples", "accumulation steps -> samples per optimizer step: x micro-batch", _mini
    ),
    "num_generations": KeyMap("rollout.n"),
    "steps_per_generation": KeyMap(
        "trainer.prompts_per_step", "generation batch / num_generations", _prompts_per_step
    ),
    "generation_batch_size": KeyMap(
        "trainer.prompts_per_step", "samples -> prompts: / num_generations", _prompts_per_step
    ),
    # --- generation ---
    "max_prompt_length": KeyMap("data.max_prompt_tokens"),
    "max_completion_length": KeyMap("rollout.max_response_tokens"),
    "temperature": KeyMap("rollout.temperature"),
    "top_p": KeyMap("rollout.top_p"),
    "top_k": KeyMap("rollout.top_k", "None -> 0 (off)", _top_k),
    "use_vllm": KeyMap("rollout.engine", "true = vllm", lambda v, s: "vllm" if v else "hf"),
    "vllm_gpu_memory_utilization": KeyMap("rollout.vllm.gpu_memory_utilization"),
    "vllm_tensor_parallel_size": KeyMap("rollout.vllm.tensor_parallel_size"),
    "vllm_enable_sleep_mode": KeyMap("rollout.vllm.enable_sleep_mode"),
    "vllm_importance_sampling_correction": KeyMap(
        "rollout.importance_sampling.level",
        "with vLLM: token_* modes -> token, sequence_* -> sequence (rlrun truncates; *_mask modes drop instead)",
        _importance_level,
    ),
    "vllm_importance_sampling_cap": KeyMap("rollout.importance_sampling.cap"),
    # --- the loss ---
    "beta": KeyMap("actor.kl_loss.coef", "TRL's KL to the reference (k3), in the loss"),
    "epsilon": KeyMap("actor.clip_ratio_low"),
    "epsilon_high": KeyMap(
        "actor.clip_ratio_high", "None = epsilon", lambda v, s: v if v is not None else s.get("epsilon", 0.2)
    ),
    "loss_type": KeyMap(
        "actor.loss_agg_mode",
        "grpo = seq-mean-token-mean; dapo, bnpo = token-mean; dr_grpo = seq-mean-token-sum-norm",
        _loss_agg,
    ),
    "importance_sampling_level": KeyMap(
        "actor.policy_loss", "token = vanilla (PPO clip); sequence = gspo", _policy_loss
    ),
    "scale_rewards": KeyMap(
        "algorithm.norm_adv_by_std_in_grpo",
        "group/true = true; none/false = false; batch has no equivalent",
        lambda v, s: v in (True, "group"),
    ),
    "num_iterations": KeyMap("actor.ppo_epochs"),
    # --- optimizer and schedule ---
    "learning_rate": KeyMap("actor.optimizer.lr"),
    "weight_decay": KeyMap("actor.optimizer.weight_decay"),
    "adam_beta1": KeyMap("actor.optimizer.betas", "(adam_beta1, adam_beta2)", _betas),
    "adam_beta2": KeyMap("actor.optimizer.betas", "(adam_beta1, adam_beta2)", _betas),
    "adam_epsilon": KeyMap("actor.optimizer.eps"),
    "max_grad_norm": KeyMap("actor.grad_clip"),
    "lr_scheduler_type": KeyMap("actor.lr_scheduler.name", "constant_with_warmup = constant", _scheduler),
    "warmup_steps": KeyMap("actor.lr_scheduler.warmup_steps", "", _warmup),
    "warmup_ratio": KeyMap("actor.lr_scheduler.warmup_steps", "a fraction of max_steps -> steps", _warmup),
    # --- the run ---
    "max_steps": KeyMap(
        "trainer.total_steps", "-1 = from num_train_epochs", lambda v, s: v if v and v > 0 else None
    ),
    "num_train_epochs": KeyMap(None, "rlrun counts steps: set trainer.total_steps (max_steps)"),
    "seed": KeyMap("trainer.seed"),
    "output_dir": KeyMap("trainer.output_dir", "rlrun adds <recipe>-<time> under it"),
    "save_steps": KeyMap("trainer.checkpoint.every_steps", "", lambda v, s: int(v)),
    "save_total_limit": KeyMap("trainer.checkpoint.keep_last"),
    "eval_steps": KeyMap("trainer.eval.every_steps", "", lambda v, s: int(v) if v else 0),
    "report_to": KeyMap("logging.wandb.enabled", "whether W&B logs", _wandb),
    "shuffle_dataset": KeyMap("data.shuffle"),
    "logging_steps": KeyMap(None, _NO_EFFECT),
    "log_completions": KeyMap(None, "rlrun logs samples every logging.samples_every_steps"),
    "use_liger_kernel": KeyMap(None, _NO_EFFECT),
    "bf16_full_eval": KeyMap(None, _NO_EFFECT),
    "ds3_gather_for_generation": KeyMap(None, _NO_EFFECT),
    "vllm_mode": KeyMap(None, "rlrun runs vLLM in the training process (TRL's colocate)"),
    "mask_truncated_completions": KeyMap(None, "not implemented in rlrun (overlong shaping instead)"),
    "delta": KeyMap(None, "TRL's two-sided clip bound is not implemented in rlrun"),
    "top_entropy_quantile": KeyMap(None, "not implemented in rlrun"),
    "disable_dropout": KeyMap(None, "rlrun's models train as loaded"),
    "remove_unused_columns": KeyMap(None, "rlrun passes every column to the reward functions"),
    PROCESSES: KeyMap(None, "`rlrun train RECIPE --num-processes N`"),
}

# TRL's (and transformers' TrainingArguments') defaults that differ from rlrun's.
TRL_DEFAULTS: dict[str, Any] = {
    "learning_rate": 1.0e-6,
    "adam_beta2": 0.999,
    "per_device_train_batch_size": 8,
    "gradient_accumulation_steps": 1,
    "steps_per_generation": None,
    "max_completion_length": 256,
    "gradient_checkpointing": True,
    "bf16": True,
    "lr_scheduler_type": "linear",
    "seed": 42,
    "reward_funcs": None,
    "beta": 0.0,
    "importance_sampling_level": "token",
    "vllm_importance_sampling_correction": True,
    "save_steps": 500,
    "report_to": "none",
}


def kl_loss_switch(settings: Settings) -> dict[str, Any]:
    """The KL switch and estimator that follow TRL's `beta` (k3, unclamped)."""
    on = float(settings.get("beta") or 0.0) > 0
    return {"actor.kl_loss.enabled": on, **({"actor.kl_loss.estimator": "k3"} if on else {})}
