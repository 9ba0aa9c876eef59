"""TRL 1.16's `GRPOConfig` keys (with the `trl grpo` script's model, data and reward keys) and
their rlrun equivalents, for `rlrun convert trl`.

Every key gets one of three fates (`rule`):
- mapped (`TABLE`): the same value, or a stated unit change;
- ignored (`IGNORED`): it cannot change the numbers (logging, memory, infrastructure);
- refused: everything else, unless it holds TRL's default (`trl_defaults`), which rlrun does too
  (`REFUSED` says what to do for the keys users set most).
Settings that are refused only in combination (a KL with TRL's bias correction, a masked
importance weight) are in `combination_refusals`.

Units. TRL counts samples per device and per accumulation step, and steps in optimizer steps;
rlrun counts samples over all processes and steps in generations (one rollout and its updates):

    actor.micro_batch_samples = per_device_train_batch_size x processes
    actor.mini_batch_samples  = micro x gradient_accumulation_steps
    trainer.prompts_per_step  = generation batch (micro x steps_per_generation) / num_generations
    optimizer steps per generation k = steps_per_generation x num_iterations / gradient_accumulation_steps
    trainer.total_steps       = max_steps / k, or num_train_epochs x floor(rows / prompts_per_step)

The lr schedule stays in TRL's unit: transformers' Trainer steps it once per optimizer step, and
so does the converted recipe (`actor.lr_scheduler.step_unit: optimizer_step`), its warm-up in
optimizer steps and its decay over total_steps x k of them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rlrun.convert.trl_defaults import (
    BASE_CONFIG,
    GRPO_CONFIG,
    MODEL_CONFIG,
    SCRIPT_ARGUMENTS,
    TRAINING_ARGUMENTS,
)
from rlrun.facts.key_table import KeyMap, Settings

PROCESSES = "num_processes"  # the `trl` CLI's accelerate key; else the converter's --num-processes
ROWS = "_rows"  # not a TRL key: the training rows, where the converter could count them
# Keys of older TRL / transformers versions (TRL 1.16 accepts transformers >= 4.56) and the CLI.
LEGACY_DEFAULTS: dict[str, Any] = {
    "warmup_ratio": 0.0,  # transformers 4.x; 5.x reads a warmup_steps < 1 as this ratio
    "torch_dtype": "float32",  # ModelConfig's older name of `dtype`
    "max_prompt_length": None,  # TRL before 1.0 truncated prompts to it (keeping their end)
    "vllm_importance_sampling_cap": None,  # the older name of vllm_importance_sampling_clip_max
    PROCESSES: None,
    "accelerate_config": None,
    "config": None,
}
# TRL 1.16's defaults for `trl grpo`: every key the converter knows, at the value TRL uses.
TRL_DEFAULTS: dict[str, Any] = {
    **TRAINING_ARGUMENTS,
    **BASE_CONFIG,
    "bf16": True,  # _BaseConfig: None means `not fp16`
    **GRPO_CONFIG,
    **MODEL_CONFIG,
    **SCRIPT_ARGUMENTS,
    **LEGACY_DEFAULTS,
}


class RefusedKey(ValueError):
    """A setting rlrun cannot honour: the key, its value and what to do."""

    def __init__(self, key: str, value: Any, reason: str):
        super().__init__(f"`{key}: {value!r}` cannot be converted: {reason}")
        self.key = key


def _int(settings: Settings, key: str, low: int = 1) -> int:
    """An integer setting, checked as TRL's dataclass would read it (`8`, not `eight`)."""
    value = settings.get(key, TRL_DEFAULTS.get(key))
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != int(value):
        raise RefusedKey(key, value, "expected a whole number")
    if value < low:
        raise RefusedKey(key, value, f"expected a number >= {low}")
    return int(value)


def _float(settings: Settings, key: str) -> float:
    value = settings.get(key, TRL_DEFAULTS.get(key))
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise RefusedKey(key, value, "expected a number")
    return float(value)


def processes(settings: Settings) -> int:
    return _int(settings, PROCESSES) if settings.get(PROCESSES) is not None else 1


def _micro(settings: Settings) -> int:
    return _int(settings, "per_device_train_batch_size") * processes(settings)


def steps_per_generation(settings: Settings) -> int:
    """TRL's steps_per_generation, derived as GRPOConfig.__post_init__ does."""
    given, batch = settings.get("steps_per_generation"), settings.get("generation_batch_size")
    if given is not None and batch is not None:
        raise RefusedKey(
            "generation_batch_size", batch, "TRL refuses it together with steps_per_generation: keep one"
        )
    if batch is not None:
        samples = _int(settings, "generation_batch_size")
        if samples % _micro(settings):
            raise RefusedKey(
                "generation_batch_size",
                batch,
                f"TRL needs it divisible by the global batch per_device_train_batch_size x processes "
                f"= {_micro(settings)}",
            )
        return samples // _micro(settings)
    return (
        _int(settings, "steps_per_generation")
        if given is not None
        else _int(settings, "gradient_accumulation_steps")
    )


def optimizer_steps_per_generation(settings: Settings) -> int:
    """k: TRL's optimizer steps per generation (rlrun's step), refused where one straddles two."""
    spg, accumulation = steps_per_generation(settings), _int(settings, "gradient_accumulation_steps")
    if spg % accumulation:
        raise RefusedKey(
            "steps_per_generation",
            spg,
            f"not a multiple of gradient_accumulation_steps={accumulation}: a TRL optimizer step then "
            "spans two generations, which rlrun's steps cannot",
        )
    return spg // accumulation * _int(settings, "num_iterations")


def prompts_per_step(settings: Settings) -> int:
    samples = _micro(settings) * steps_per_generation(settings)
    n = _int(settings, "num_generations", low=2)
    if samples % n:
        raise RefusedKey(
            "num_generations", n, f"TRL needs it to divide the generation batch of {samples} samples"
        )
    return samples // n


def _mini(value: Any, settings: Settings) -> int:
    return _micro(settings) * _int(settings, "gradient_accumulation_steps")


def _in_rlrun_steps(key: str, optimizer_steps: int, settings: Settings) -> int:
    k = optimizer_steps_per_generation(settings)
    if optimizer_steps % k:
        raise RefusedKey(
            key,
            optimizer_steps,
            f"TRL counts optimizer steps, {k} per generation here (rlrun's step): make it a multiple of {k}",
        )
    return optimizer_steps // k


def total_steps(value: Any, settings: Settings) -> int:
    """max_steps in rlrun steps; without it, num_train_epochs over the counted rows as TRL's
    RepeatSampler draws them (whole generation batches of prompts per epoch)."""
    max_steps = settings.get("max_steps", -1)
    if max_steps is not None and _int(settings, "max_steps", low=-1) > 0:
        return _in_rlrun_steps("max_steps", int(max_steps), settings)
    epochs = _float(settings, "num_train_epochs")
    rows = settings.get(ROWS)
    if rows is None:
        raise RefusedKey(
            "num_train_epochs",
            epochs,
            "TRL trains this many epochs (max_steps is unset), and rlrun cannot count the rows of "
            f"{settings.get('dataset_name')!r} here: pass `--dataset-rows N` (its train split's rows), or set "
            f"max_steps (TRL's optimizer steps) = epochs x floor(rows / {prompts_per_step(settings)}) x "
            f"{optimizer_steps_per_generation(settings)}",
        )
    per_epoch = rows // prompts_per_step(settings)
    k = optimizer_steps_per_generation(settings)
    optimizer_steps = math.ceil(epochs * per_epoch * k)  # transformers' max_steps from epochs
    if optimizer_steps < 1:
        raise RefusedKey(
            "num_train_epochs",
            epochs,
            f"{rows} rows hold no whole batch of {prompts_per_step(settings)} prompts",
        )
    return _in_rlrun_steps("num_train_epochs", optimizer_steps, settings)


def _warmup(value: Any, settings: Settings) -> int:
    """TRL's warm-up in optimizer steps, as transformers' `get_warmup_steps` counts them:
    warmup_steps, below 1 a fraction of the optimizer steps (rounded up; transformers 4's
    warmup_ratio alike); TRL's `constant` schedule has none."""
    if settings.get("lr_scheduler_type") == "constant":
        return 0
    steps = _float(settings, "warmup_steps")
    if steps >= 1:
        return int(steps)
    ratio = steps if steps > 0 else _float(settings, "warmup_ratio")
    if ratio == 0:
        return 0
    return math.ceil(ratio * total_steps(None, settings) * optimizer_steps_per_generation(settings))


def _betas(value: Any, settings: Settings) -> list[float]:
    return [_float(settings, "adam_beta1"), _float(settings, "adam_beta2")]


_LOSS_AGG = {
    "grpo": "seq-mean-token-mean",  # per micro-batch mean of sequences' token means; micro-batches equal in rows
    "dapo": "token-mean",  # tokens of the optimizer step (TRL's num_items_in_batch rescaled)
    "dr_grpo": "seq-mean-token-sum-norm",  # / (rows x max_completion_length), as rlrun's norm
    "sapo": "seq-mean-token-mean",
}


def _loss_agg(value: Any, settings: Settings) -> str:
    if value == "bnpo" and _int(settings, "gradient_accumulation_steps") == 1 and processes(settings) == 1:
        return "token-mean"  # one micro-batch per optimizer step: its own token mean is the step's
    if value not in _LOSS_AGG:
        raise RefusedKey("loss_type", value, _LOSS_TYPE_REFUSED.get(value, "not a loss type rlrun has"))
    return _LOSS_AGG[value]


_LOSS_TYPE_REFUSED = {
    "bnpo": "TRL normalises each micro-batch by its own tokens; rlrun's token-mean uses the optimizer "
    "step's, equal only with gradient_accumulation_steps 1 on one process. Use loss_type: dapo",
    "cispo": "TRL clips the weight at epsilon_high itself (no lower bound); rlrun's cispo clips at "
    "1 - epsilon, 1 + epsilon_high",
    "vespo": "rlrun has no VESPO loss",
    "luspo": "rlrun has no LUSPO loss",
}


def _policy_loss(value: Any, settings: Settings) -> str:
    level = settings.get("importance_sampling_level", "token")
    if level not in ("token", "sequence"):
        raise RefusedKey("importance_sampling_level", level, "TRL knows token | sequence")
    if settings.get("loss_type") == "sapo":
        if level == "sequence":
            raise RefusedKey("importance_sampling_level", level, "rlrun's sapo gates token ratios only")
        return "sapo"
    return "gspo" if level == "sequence" else "vanilla"


def _loss_kwargs(value: Any, settings: Settings) -> dict[str, float] | None:
    if settings.get("loss_type") != "sapo":
        return None
    return {
        "tau_pos": _float(settings, "sapo_temperature_pos"),
        "tau_neg": _float(settings, "sapo_temperature_neg"),
    }


_SCHEDULERS = {
    "linear": "linear",
    "cosine": "cosine",
    "constant": "constant",
    "constant_with_warmup": "constant",
}


def _scheduler(value: Any, settings: Settings) -> str:
    if value not in _SCHEDULERS:
        raise RefusedKey("lr_scheduler_type", value, f"rlrun has {', '.join(_SCHEDULERS)}")
    return _SCHEDULERS[value]


_DTYPES = ("bfloat16", "float16", "float32")


def _dtype(value: Any, settings: Settings) -> str:
    if value not in _DTYPES:
        raise RefusedKey(
            "dtype",
            value,
            f"`auto` loads the checkpoint's own dtype, unknown here: set one of {', '.join(_DTYPES)}",
        )
    return str(value)


def _weights_dtype(settings: Settings) -> str:
    return _dtype(settings.get("dtype") or settings.get("torch_dtype") or "float32", settings)


def _autocast(value: Any, settings: Settings) -> str | None:
    """TRL's `bf16: true` is mixed precision: bfloat16 autocast over the weights in their own
    dtype (`dtype`, float32 unless set). Over bfloat16 weights it changes nothing."""
    return "bfloat16" if value is True and _weights_dtype(settings) == "float32" else None


def _wandb(value: Any, settings: Settings) -> bool:
    targets = value if isinstance(value, list) else [value]
    return "wandb" in targets or "all" in targets


def _lora(value: Any, settings: Settings) -> dict[str, Any] | None:
    if not settings.get("use_peft"):
        return None
    modules = settings.get("lora_target_modules")
    if modules is None:
        raise RefusedKey(
            "lora_target_modules",
            None,
            "TRL leaves it to PEFT's per-architecture default (q_proj, v_proj for Qwen2 and Llama); "
            "rlrun needs the list: set lora_target_modules",
        )
    return {
        "r": _int(settings, "lora_r"),
        "alpha": _float(settings, "lora_alpha"),
        "dropout": _float(settings, "lora_dropout"),
        "target_modules": "all-linear" if modules == "all-linear" else list(modules),
    }


# `trl grpo`'s reward names (trl/scripts/grpo.py's registry), as rlrun reward entries.
TRL_REWARDS: dict[str, dict[str, Any]] = {
    "accuracy_reward": {"fn": "trl.rewards:accuracy_reward"},
    "reasoning_accuracy_reward": {"fn": "trl.rewards:reasoning_accuracy_reward"},
    "think_format_reward": {"fn": "trl.rewards:think_format_reward"},
    "get_soft_overlong_punishment": {
        "fn": "trl.rewards:get_soft_overlong_punishment",
        "kwargs": {"max_completion_len": 1280, "soft_punish_cache": 256},  # the script's values
    },
}


def _reward_functions(value: Any, settings: Settings) -> list[dict[str, Any]] | None:
    """`reward_funcs` (the script's built-ins, or `pkg.module.function` paths) as TRL-style
    entries, after the reward model, in the script's order; weighted by `reward_weights`."""
    names = list(settings.get("reward_funcs") or [])
    entries: list[dict[str, Any]] = []
    if settings.get("reward_model_name_or_path"):
        entries.append({"model": str(settings["reward_model_name_or_path"])})
    for name in names:
        if name in TRL_REWARDS:
            entries.append({**TRL_REWARDS[name], "style": "trl"})
        elif "." in str(name):
            module, _, function = str(name).rpartition(".")
            entries.append({"fn": f"{module}:{function}", "style": "trl"})
        else:
            raise RefusedKey(
                "reward_funcs", name, f"TRL knows {', '.join(TRL_REWARDS)} or a dotted import path"
            )
    if not entries:
        return None
    weights = settings.get("reward_weights") or [1.0] * len(entries)
    if len(weights) != len(entries):
        raise RefusedKey("reward_weights", weights, f"TRL needs one weight per reward ({len(entries)})")
    return [{**entry, "weight": float(w)} for entry, w in zip(entries, weights)]


def _dataset(value: Any, settings: Settings) -> str | None:
    """What TRL's `load_dataset(dataset_name, name=dataset_config)` reads: a hub dataset, or a
    local folder of data files (both rlrun's `hf:` source, read by the same `datasets` call). A
    single file it cannot read (datasets finds no data file there), so neither is it converted."""
    name = settings.get("dataset_name")
    if not name:
        return None
    local = Path(str(name)).expanduser()
    if local.is_dir():
        name = str(local.resolve())
    elif local.exists() or str(name).startswith(("/", "./", "../", "~")) or local.suffix in _DATA_FILES:
        where = "a file" if local.exists() else "not a folder here"
        raise RefusedKey(
            "dataset_name",
            name,
            f"{where}: TRL passes it to datasets.load_dataset, which reads a hub dataset or a folder of data "
            'files, not one file ("Couldn\'t find any data file"), so TRL would not train on it. Put the file '
            "in a folder (as train.jsonl) and name the folder",
        )
    config = settings.get("dataset_config")
    return f"hf:{name}:{config}" if config else f"hf:{name}"


_DATA_FILES = (".json", ".jsonl", ".parquet", ".csv", ".txt", ".arrow")


def _top_k(value: Any, settings: Settings) -> int:
    return 0 if value is None or value < 0 else int(value)


def _grad_clip(value: Any, settings: Settings) -> float | None:
    return float(value) if value else None  # transformers clips only when > 0


_IS_MODES = {  # TRL's vllm_importance_sampling_mode -> rlrun's (level, mode)
    "token_truncate": ("token", "truncate"),
    "token_mask": ("token", "mask"),
    "sequence_truncate": ("sequence", "truncate"),
    "sequence_mask": ("sequence", "mask"),
}


def _importance(settings: Settings) -> tuple[str, str, float] | None:
    """TRL's vLLM importance-sampling correction as rlrun's (level, mode, cap); None when off."""
    if not settings.get("use_vllm") or not settings.get("vllm_importance_sampling_correction"):
        return None
    mode = settings.get("vllm_importance_sampling_mode")
    if mode not in _IS_MODES:
        raise RefusedKey("vllm_importance_sampling_mode", mode, f"TRL knows {', '.join(_IS_MODES)}")
    if settings.get("vllm_importance_sampling_clip_min") is not None:
        raise RefusedKey(
            "vllm_importance_sampling_clip_min",
            settings["vllm_importance_sampling_clip_min"],
            "rlrun bounds the weights from above only",
        )
    cap_key = (
        "vllm_importance_sampling_cap"
        if settings.get("vllm_importance_sampling_cap")
        else "vllm_importance_sampling_clip_max"
    )
    cap = settings.get(cap_key)
    if isinstance(cap, bool) or not isinstance(cap, (int, float)) or cap < 1:
        raise RefusedKey(cap_key, cap, "rlrun needs a bound >= 1 on the weights")
    return (*_IS_MODES[mode], float(cap))


def _importance_level(value: Any, settings: Settings) -> str:
    found = _importance(settings)
    return found[0] if found else "off"


def _importance_mode(value: Any, settings: Settings) -> str | None:
    found = _importance(settings)
    return found[1] if found else None


def _importance_cap(value: Any, settings: Settings) -> float | None:
    found = _importance(settings)
    return found[2] if found else None


def _max_prompt(value: Any, settings: Settings) -> int | None:
    return _int(settings, "max_prompt_length") if value is not None else None


def _turns(value: Any, settings: Settings) -> int:
    """TRL's loop runs the tools at most `value` times after the first turn: one turn more."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise RefusedKey(
            "max_tool_calling_iterations", value, "a number of iterations is a whole number, 0 or more"
        )
    return value + 1


TABLE: dict[str, KeyMap] = {
    # --- the `trl grpo` script's model, data and rewards ---
    "model_name_or_path": KeyMap("model.path"),
    "dataset_name": KeyMap(
        "data.source", "a hub dataset or a local folder: hf:<name or absolute folder>[:<config>]", _dataset
    ),
    "dataset_config": KeyMap("data.source", "hf:<name>:<config>", _dataset),
    "reward_funcs": KeyMap(
        "reward.functions",
        "the script's built-ins (trl.rewards) or a.b.c -> a.b:c, called TRL style",
        _reward_functions,
    ),
    "reward_weights": KeyMap("reward.functions", "each reward entry's weight", _reward_functions),
    "reward_model_name_or_path": KeyMap("reward.functions", "a {model: ...} entry, first", _reward_functions),
    "torch_dtype": KeyMap("model.dtype", "", _dtype),
    "dtype": KeyMap("model.dtype", "", _dtype),
    "bf16": KeyMap("trainer.autocast", "mixed precision over the weights' dtype", _autocast),
    "trust_remote_code": KeyMap("model.trust_remote_code"),
    "use_peft": KeyMap(
        "model.lora", "LoRA from lora_r, lora_alpha, lora_dropout, lora_target_modules", _lora
    ),
    "lora_r": KeyMap("model.lora", "model.lora.r", _lora),
    "lora_alpha": KeyMap("model.lora", "model.lora.alpha", _lora),
    "lora_dropout": KeyMap("model.lora", "model.lora.dropout", _lora),
    "lora_target_modules": KeyMap("model.lora", "model.lora.target_modules", _lora),
    # --- batch sizes and steps (units change) ---
    "per_device_train_batch_size": KeyMap(
        "actor.micro_batch_samples",
        "per device -> over all processes: x num_processes",
        lambda v, s: _micro(s),
    ),
    "gradient_accumulation_steps": KeyMap(
        "actor.mini_batch_samples", "accumulation steps -> samples per optimizer step: x micro-batch", _mini
    ),
    "num_generations": KeyMap("rollout.n", "", lambda v, s: _int(s, "num_generations", low=2)),
    "steps_per_generation": KeyMap(
        "trainer.prompts_per_step", "generation batch / num_generations", lambda v, s: prompts_per_step(s)
    ),
    "generation_batch_size": KeyMap(
        "trainer.prompts_per_step", "samples -> prompts: / num_generations", lambda v, s: prompts_per_step(s)
    ),
    "max_steps": KeyMap(
        "trainer.total_steps",
        "optimizer steps -> generations: / (steps_per_generation x num_iterations / accumulation)",
        total_steps,
    ),
    "num_train_epochs": KeyMap(
        "trainer.total_steps",
        "epochs (max_steps unset) -> epochs x floor(rows / prompts_per_step)",
        total_steps,
    ),
    # --- generation ---
    "max_prompt_length": KeyMap(
        "data.max_prompt_tokens", "older TRL: longer prompts cut to their last tokens", _max_prompt
    ),
    "max_completion_length": KeyMap("rollout.max_response_tokens"),
    # TRL runs the tools at most this many times, so the model acts once more (docs/agents.md)
    "max_tool_calling_iterations": KeyMap(
        "agent.max_turns", "model turns = tool-calling iterations + 1", _turns
    ),
    "chat_template_kwargs": KeyMap("data.chat_template_kwargs", "", lambda v, s: dict(v or {})),
    "temperature": KeyMap("rollout.temperature"),
    "top_p": KeyMap("rollout.top_p"),
    "top_k": KeyMap("rollout.top_k", "None -> 0 (off)", _top_k),
    "use_vllm": KeyMap("rollout.engine", "true = vllm", lambda v, s: "vllm" if v else "hf"),
    "vllm_gpu_memory_utilization": KeyMap("rollout.vllm.gpu_memory_utilization"),
    "vllm_tensor_parallel_size": KeyMap("rollout.vllm.tensor_parallel_size"),
    "vllm_enable_sleep_mode": KeyMap("rollout.vllm.enable_sleep_mode"),
    "vllm_importance_sampling_correction": KeyMap(
        "rollout.importance_sampling.level",
        "with vLLM: token_* -> token, sequence_* -> sequence",
        _importance_level,
    ),
    "vllm_importance_sampling_mode": KeyMap(
        "rollout.importance_sampling.mode", "*_truncate -> truncate, *_mask -> mask", _importance_mode
    ),
    "vllm_importance_sampling_clip_max": KeyMap(
        "rollout.importance_sampling.cap", "with vLLM", _importance_cap
    ),
    "vllm_importance_sampling_cap": KeyMap("rollout.importance_sampling.cap", "with vLLM", _importance_cap),
    # --- the loss ---
    "beta": KeyMap("actor.kl_loss.coef", "TRL's k3 KL to the reference (unclamped), in the loss"),
    "epsilon": KeyMap("actor.clip_ratio_low"),
    "epsilon_high": KeyMap(
        "actor.clip_ratio_high", "None = epsilon", lambda v, s: v if v is not None else s.get("epsilon", 0.2)
    ),
    "loss_type": KeyMap(
        "actor.loss_agg_mode",
        "grpo, sapo = seq-mean-token-mean; dapo = token-mean; dr_grpo = seq-mean-token-sum-norm",
        _loss_agg,
    ),
    "importance_sampling_level": KeyMap(
        "actor.policy_loss",
        "token = vanilla (PPO clip), sequence = gspo; loss_type sapo = sapo",
        _policy_loss,
    ),
    "sapo_temperature_pos": KeyMap("actor.loss_kwargs", "sapo's tau_pos", _loss_kwargs),
    "sapo_temperature_neg": KeyMap("actor.loss_kwargs", "sapo's tau_neg", _loss_kwargs),
    "scale_rewards": KeyMap(
        "algorithm.norm_adv_by_std_in_grpo",
        "group/true = true; none/false = false",
        lambda v, s: v in (True, "group"),
    ),
    "num_iterations": KeyMap("actor.ppo_epochs", "", lambda v, s: _int(s, "num_iterations")),
    "entropy_coef": KeyMap(
        "actor.entropy_coef",
        "the entropy's token mean over the optimizer step (TRL: per micro-batch, then averaged; the same "
        "when micro-batches hold equal token counts)",
    ),
    # --- optimizer and schedule ---
    "learning_rate": KeyMap("actor.optimizer.lr"),
    "weight_decay": KeyMap("actor.optimizer.weight_decay"),
    "adam_beta1": KeyMap("actor.optimizer.betas", "(adam_beta1, adam_beta2)", _betas),
    "adam_beta2": KeyMap("actor.optimizer.betas", "(adam_beta1, adam_beta2)", _betas),
    "adam_epsilon": KeyMap("actor.optimizer.eps"),
    "max_grad_norm": KeyMap("actor.grad_clip", "0 = no clipping (null)", _grad_clip),
    "lr_scheduler_type": KeyMap(
        "actor.lr_scheduler.name",
        "constant_with_warmup = constant; stepped once per optimizer step, as transformers' Trainer "
        "(actor.lr_scheduler.step_unit: optimizer_step)",
        _scheduler,
    ),
    "warmup_steps": KeyMap(
        "actor.lr_scheduler.warmup_steps", "optimizer steps; below 1 a fraction of them", _warmup
    ),
    "warmup_ratio": KeyMap("actor.lr_scheduler.warmup_steps", "a fraction of the optimizer steps", _warmup),
    # --- the run ---
    "seed": KeyMap("trainer.seed"),
    "data_seed": KeyMap("data.seed"),
    "output_dir": KeyMap("trainer.output_dir", "rlrun adds <recipe>-<time> under it"),
    "save_steps": KeyMap("trainer.checkpoint.every_steps", "", lambda v, s: int(v)),
    "save_total_limit": KeyMap("trainer.checkpoint.keep_last"),
    "eval_steps": KeyMap("trainer.eval.every_steps", "", lambda v, s: int(v) if v else 0),
    "report_to": KeyMap("logging.wandb.enabled", "whether W&B logs", _wandb),
    "shuffle_dataset": KeyMap("data.shuffle"),
}

# Keys that cannot change the numbers: logging, memory, speed, infrastructure, evaluation.
_IGNORED_GROUPS: dict[str, tuple[str, ...]] = {
    "logging": (
        "logging_steps",
        "logging_strategy",
        "logging_first_step",
        "logging_dir",
        "logging_nan_inf_filter",
        "log_level",
        "log_level_replica",
        "log_on_each_node",
        "log_completions",
        "log_multimodal",
        "num_completions_to_print",
        "log_unique_prompts",
        "log_completions_hub_repo",
        "run_name",
        "project",
        "trackio_space_id",
        "trackio_bucket_id",
        "trackio_static_space_id",
        "disable_tqdm",
        "include_num_input_tokens_seen",
        "skip_memory_metrics",
        "debug",
    ),
    "checkpoints and the hub": (
        "save_strategy",
        "save_only_model",
        "save_on_each_node",
        "enable_jit_checkpoint",
        "push_to_hub",
        "hub_token",
        "hub_private_repo",
        "hub_model_id",
        "hub_strategy",
        "hub_always_push",
        "hub_revision",
        "overwrite_output_dir",
        "restore_callback_states_from_checkpoint",
        "ignore_data_skip",
        "load_best_model_at_end",
        "metric_for_best_model",
        "greater_is_better",
    ),
    "evaluation (rlrun evaluates on data.val_source every trainer.eval.every_steps)": (
        "eval_strategy",
        "evaluation_strategy",
        "eval_delay",
        "per_device_eval_batch_size",
        "prediction_loss_only",
        "eval_on_start",
        "eval_do_concat_batches",
        "eval_use_gather_object",
        "eval_accumulation_steps",
        "include_for_metrics",
        "batch_eval_metrics",
        "bf16_full_eval",
        "fp16_full_eval",
        "num_generations_eval",
        "do_eval",
        "do_predict",
        "do_train",
        "dataset_test_split",
        "test_split_size",
    ),
    "memory, speed and infrastructure": (
        "gradient_checkpointing",
        "gradient_checkpointing_kwargs",
        "activation_checkpointing",
        "activation_checkpointing_kwargs",
        "use_liger_kernel",
        "liger_kernel_config",
        "torch_empty_cache_steps",
        "torch_compile",
        "torch_compile_backend",
        "torch_compile_mode",
        "use_cache",
        "ds3_gather_for_generation",
        "pad_to_multiple_of",
        "cache_implementation",
        "attn_implementation",
        "use_transformers_continuous_batching",
        "transformers_continuous_batching_config",
        "use_transformers_paged",
        "vllm_mode",
        "vllm_model_impl",
        "vllm_server_base_url",
        "vllm_server_host",
        "vllm_server_port",
        "vllm_server_timeout",
        "vllm_group_port",
        "vllm_max_model_length",
        "dataloader_num_workers",
        "dataloader_pin_memory",
        "dataloader_persistent_workers",
        "dataloader_prefetch_factor",
        "dataloader_multiprocessing_context",
        "dataloader_in_order",
        "ddp_find_unused_parameters",
        "ddp_bucket_cap_mb",
        "ddp_broadcast_buffers",
        "ddp_static_graph",
        "ddp_backend",
        "ddp_timeout",
        "fsdp",
        "fsdp_config",
        "deepspeed",
        "accelerator_config",
        "parallelism_config",
        "accelerate_config",
        "local_rank",
        "use_cpu",
        "full_determinism",
        "average_tokens_across_devices",
        "optim_target_modules",
        "config",
        "remove_unused_columns",
    ),
}
IGNORED: dict[str, str] = {key: group for group, keys in _IGNORED_GROUPS.items() for key in keys}

# What to do, for keys users set that rlrun cannot honour (any other non-default value is refused
# with "rlrun has no equivalent").
REFUSED: dict[str, str] = {
    "datasets": "rlrun reads one data source per run (data.source); a list of datasets is not "
    "converted. Merge them into one file, or use dataset_name",
    "use_bias_correction_kl": "TRL multiplies the k3 KL by the importance ratio (its default); rlrun's KL "
    "term is not weighted: set use_bias_correction_kl: false to convert",
    "use_adaptive_entropy": "rlrun's entropy coefficient is fixed",
    "delta": "TRL's two-sided clip bound is not implemented in rlrun",
    "top_entropy_quantile": "rlrun trains on every token",
    "mask_truncated_completions": "rlrun keeps truncated completions in the loss",
    "off_policy_mask_threshold": "rlrun has no off-policy sequence mask",
    "sync_ref_model": "rlrun's reference model is fixed",
    "multi_objective_aggregation": "rlrun sums the weighted rewards, then normalises (sum_then_normalize)",
    "disable_dropout": "rlrun trains the model as loaded, dropout included (TRL's default)",
    "min_p": "rlrun samples with temperature, top_p and top_k only",
    "repetition_penalty": "rlrun samples without a repetition penalty",
    "generation_kwargs": "rlrun's sampling settings are rollout.temperature, top_p, top_k",
    "model_init_kwargs": "rlrun loads the model with model.dtype and model.trust_remote_code only",
    "model_revision": "rlrun loads a model path's default revision: download the revision to a folder",
    "fp16": "rlrun trains in float32 or bfloat16 (bf16: true)",
    "optim": "rlrun's optimizer is AdamW (TRL's adamw_torch / adamw_torch_fused)",
    "lr_scheduler_kwargs": "rlrun's schedules take no extra keywords",
    "neftune_noise_alpha": "rlrun adds no embedding noise",
    "use_rslora": "rlrun's LoRA scales by alpha / r",
    "use_dora": "rlrun's LoRA is plain LoRA",
    "load_in_4bit": "rlrun does not quantise",
    "load_in_8bit": "rlrun does not quantise",
    "cast_lm_head_to_fp32": "set dtype: float32 instead (rlrun then computes everything in float32)",
    "vllm_structured_outputs_regex": "rlrun's sampling is unconstrained",
    "reward_clip_range": "an RLOOConfig key: rlrun converts GRPO configs",
    "normalize_advantages": "an RLOOConfig key: rlrun converts GRPO configs",
    "router_aux_loss_coef": "rlrun adds no MoE router loss",
    "dataset_train_split": "rlrun trains on a hub dataset's `train` split: save the split you want to a file",
    "dataset_streaming": "rlrun reads the whole dataset and shuffles it; TRL streams it in order",
    "streaming": "rlrun reads the whole dataset and shuffles it; TRL streams it in order",
    "resume_from_checkpoint": "rlrun cannot continue from a TRL checkpoint: it would start afresh",
    "tf32": "rlrun computes float32 matrix products in float32 (TF32 changes the numbers)",
}

# Values other than TRL's default that are what rlrun does.
RLRUN_DOES: dict[str, tuple[Any, ...]] = {
    "use_bias_correction_kl": (False,),
    "optim": ("adamw_torch", "adamw_torch_fused"),  # transformers 4.x's and 5.x's default AdamW
}

_FIELDS_OF_OTHER_TRAINERS = {
    "dataset_text_field": "SFT",
    "packing": "SFT",
    "completion_only_loss": "SFT",
    "assistant_only_loss": "SFT",
    "max_length": "SFT or DPO",
    "max_seq_length": "SFT",
    "loss_type_dpo": "DPO",
    "rpo_alpha": "DPO",
    "desirable_weight": "KTO",
    "center_rewards_coefficient": "reward-model",
}


@dataclass(frozen=True)
class Rule:
    kind: str  # mapped | ignored | default (TRL's default: rlrun does the same) | refused
    reason: str = ""


def rule(key: str, value: Any) -> Rule:
    """What becomes of `key: value` (rules in the module docstring)."""
    if key in TABLE or key == PROCESSES:  # the process count scales the batch sizes
        return Rule("mapped")
    if key in IGNORED:
        return Rule("ignored", IGNORED[key])
    if key in TRL_DEFAULTS and _same(value, TRL_DEFAULTS[key]):
        return Rule("default")
    if any(_same(value, does) for does in RLRUN_DOES.get(key, ())):
        return Rule("default", "what rlrun does")
    if key in REFUSED:
        return Rule("refused", REFUSED[key])
    if key in TRL_DEFAULTS:
        return Rule(
            "refused",
            "rlrun has no equivalent; remove it to use TRL's default "
            f"({TRL_DEFAULTS[key]!r}), which rlrun does",
        )
    other = _FIELDS_OF_OTHER_TRAINERS.get(key)
    if other:
        return Rule("refused", f"a key of TRL's {other} trainer: rlrun converts GRPO configs (`trl grpo`)")
    return Rule("refused", "not a key of TRL 1.16's GRPOConfig, ModelConfig or the `trl grpo` script")


def _same(value: Any, default: Any) -> bool:
    if isinstance(default, float) or isinstance(value, float):
        return isinstance(value, (int, float)) and not isinstance(value, bool) and float(value) == default
    return value == default or (value in (None, []) and default in (None, []))


def combination_refusals(settings: Settings) -> list[RefusedKey]:
    """Settings refused only together: TRL's KL bias correction when a KL is on, a reward scaling
    rlrun lacks, fp16."""
    refused = []
    if _float(settings, "beta") > 0 and settings.get("use_bias_correction_kl"):
        refused.append(
            RefusedKey(
                "use_bias_correction_kl",
                True,
                f"with beta={settings['beta']}: {REFUSED['use_bias_correction_kl']}",
            )
        )
    if settings.get("scale_rewards") not in (True, False, "group", "none"):
        refused.append(
            RefusedKey(
                "scale_rewards", settings.get("scale_rewards"), "rlrun normalises per group or not at all"
            )
        )
    if settings.get("fp16"):
        refused.append(RefusedKey("fp16", True, REFUSED["fp16"]))
    return refused


def fixed_values(settings: Settings) -> dict[str, Any]:
    """rlrun values that follow from TRL's behaviour rather than from one key."""
    on = _float(settings, "beta") > 0
    values: dict[str, Any] = {
        "actor.kl_loss.enabled": on,
        # TRL templates prompts written as chat messages and tokenizes text prompts as they are
        "data.apply_chat_template": "messages",
        "actor.lr_scheduler.step_unit": "optimizer_step",  # transformers' Trainer steps it so
    }
    if on:
        values["actor.kl_loss.estimator"] = "k3_unclamped"
    if {"accuracy_reward", "reasoning_accuracy_reward"} & set(settings.get("reward_funcs") or []):
        values["data.answer_key"] = "solution"  # the column TRL's accuracy rewards read
    if settings.get("scale_rewards") in (True, "group"):
        values["algorithm.advantage_kwargs"] = {"epsilon": 1e-4}  # TRL: (r - mean) / (std + 1e-4)
    if settings.get("max_prompt_length") is None:
        values["data.max_prompt_tokens"] = None  # TRL 1.16 does not limit prompts
    else:
        values["data.overlong_prompts"] = "truncate"
    return values
