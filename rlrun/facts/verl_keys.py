"""verl's config keys and their rlrun equivalents: the one table behind both the converter
(`rlrun convert verl`) and the did-you-mean hints for verl names in a recipe.

Each verl key (dotted, as on a verl command line) maps to one rlrun key, with a function when
the value changes (units: verl's `ppo_mini_batch_size` counts prompts, rlrun's
`actor.mini_batch_samples` counts samples), or to None when rlrun has no equivalent, with the
reason. A key ending in `.*` covers a whole verl subtree. `VERL_DEFAULTS` holds verl's own
defaults (verl `VERL_VERSION`'s `_generated_ppo_trainer.yaml`) where they differ from rlrun's,
because a verl command line relies on them.

This module imports nothing from rlrun but `rlrun.facts.key_table`, so `rlrun.recipes.keys` can
use it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rlrun.facts.key_table import KeyMap, Settings, find

# The verl whose defaults and semantics these tables hold: scripts/verl_defaults.py checks them
# against a verl source tree (its _generated_ppo_trainer.yaml).
VERL_VERSION = "0.9.1"
TRAINER = "_verl_trainer"  # the trainer module the command runs, passed with verl's defaults
DAPO_TRAINER = "recipe.dapo.main_dapo"


def integer(settings: Settings, key: str, default: int) -> int:
    """`settings[key]` as an integer; a ValueError naming the key when it is not one (a shell
    value unknown here, a typo)."""
    value = settings.get(key, default)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise TypeError(f"{key}={value!r} is not a whole number")
    try:
        return int(value)
    except ValueError:
        names = getattr(value, "names", ())
        why = f"it waits on {', '.join(names)}, not set here" if names else "not a whole number"
        raise ValueError(f"{key}={value}: {why}") from None


def _n(settings: Settings) -> int:
    return integer(settings, "actor_rollout_ref.rollout.n", 1)


def gpus(settings: Settings) -> int:
    """verl's GPU count: trainer.n_gpus_per_node x trainer.nnodes."""
    return integer(settings, "trainer.n_gpus_per_node", 8) * integer(settings, "trainer.nnodes", 1)


def data_parallel(settings: Settings) -> int:
    """verl's data-parallel ranks: the GPUs over Ulysses sequence parallelism (a group of that
    many GPUs shares one micro-batch)."""
    sp = integer(settings, "actor_rollout_ref.actor.ulysses_sequence_parallel_size", 1)
    if sp < 1 or gpus(settings) % sp:
        raise ValueError(f"ulysses_sequence_parallel_size={sp} does not divide the {gpus(settings)} GPUs")
    return gpus(settings) // sp


def _micro_batch(value: Any, settings: Settings) -> int:
    """Samples per forward/backward over all data-parallel ranks; unset in verl: the whole
    mini-batch at once."""
    per_gpu = settings.get("actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu")
    if per_gpu and not settings.get("actor_rollout_ref.actor.use_dynamic_bsz"):
        return integer(settings, "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu", 1) * data_parallel(
            settings
        )
    total = settings.get("actor_rollout_ref.actor.ppo_micro_batch_size")
    if total and not settings.get("actor_rollout_ref.actor.use_dynamic_bsz"):
        return integer(settings, "actor_rollout_ref.actor.ppo_micro_batch_size", 1)
    return integer(settings, "actor_rollout_ref.actor.ppo_mini_batch_size", 256) * _n(settings)


def _loss_kwargs(value: Any, settings: Settings) -> dict[str, Any]:
    """The chosen loss's own parameters: `policy_loss.*` (verl passes the whole section; rlrun
    the keys the user set) and SAPO's temperatures."""
    prefix = "actor_rollout_ref.actor.policy_loss."
    kwargs = {
        key[len(prefix) :]: v
        for key, v in settings.items()
        if key.startswith(prefix) and key not in (prefix + "loss_mode", prefix + "_target_")
    }
    if _loss_mode(settings) == "sapo":
        for name in ("tau_pos", "tau_neg"):
            if f"actor_rollout_ref.actor.{name}" in settings:
                kwargs[name] = settings[f"actor_rollout_ref.actor.{name}"]
    return kwargs


def _loss_mode(settings: Settings) -> str:
    return settings.get("actor_rollout_ref.actor.policy_loss.loss_mode") or settings.get(
        "actor_rollout_ref.actor.loss_mode", "vanilla"
    )


def files(value: Any) -> list[str]:
    """verl's train_files / val_files (one path or a list) as a list."""
    listed = value if isinstance(value, list) else [value]
    for item in listed:
        if not isinstance(item, str) or not item:
            raise ValueError(f"{item!r} is not a file path")
        if getattr(item, "names", ()):
            raise ValueError(f"{item} waits on {', '.join(item.names)}, not set here")
    return list(listed)


def _source(value: Any, settings: Settings) -> str | list[str] | None:
    """One file stays a path; several become rlrun's list source (each file's rows)."""
    if value is None:
        return None
    paths = files(value)
    return paths[0] if len(paths) == 1 else paths


def _overlong(value: Any, settings: Settings) -> str:
    if settings.get("data.filter_overlong_prompts"):
        return "drop"
    truncation = settings.get("data.truncation", "error")
    if truncation in ("right", "middle"):
        raise ValueError(
            f"data.truncation={truncation} keeps a prompt's first tokens (or both ends); rlrun "
            "keeps the last ones (verl's left): use left, error, or data.filter_overlong_prompts=True"
        )
    return "error" if truncation == "error" else "truncate"


def _off_when_negative(value: Any, settings: Settings) -> int:
    return 0 if value is None or int(value) < 0 else int(value)


def _metric(value: Any, settings: Settings) -> str:
    if value == "acc":
        return "acc"
    if value in ("score", "seq_reward"):
        return "score"
    raise ValueError(
        f"algorithm.filter_groups.metric={value}: rlrun filters on acc or on the reward function's score "
        "(verl's score and seq_reward); seq_final_reward includes the KL penalty"
    )


def _lora(value: Any, settings: Settings) -> dict[str, Any] | None:
    rank = integer(settings, "actor_rollout_ref.model.lora_rank", 0)
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


def _warmup_steps(value: Any, settings: Settings) -> int:
    """verl's engine takes lr_warmup_steps when it is above 0, else lr_warmup_steps_ratio x the
    step count (verl/workers/engine/fsdp/transformer_impl.py, _build_lr_scheduler)."""
    steps = settings.get("actor_rollout_ref.actor.optim.lr_warmup_steps", -1)
    if steps is not None and integer(settings, "actor_rollout_ref.actor.optim.lr_warmup_steps", -1) > 0:
        return int(steps)
    ratio = float(settings.get("actor_rollout_ref.actor.optim.lr_warmup_steps_ratio", 0.0) or 0.0)
    return int(ratio * _total_steps(None, settings)) if ratio else 0


def generation_batch(settings: Settings) -> int:
    """Prompts per generation batch: DAPO's data.gen_batch_size, else the training batch."""
    train = integer(settings, "data.train_batch_size", 1024)
    if settings.get(TRAINER) == DAPO_TRAINER:
        return integer(settings, "data.gen_batch_size", train) or train
    return train


def _total_steps(value: Any, settings: Settings) -> int:
    """verl's step count: total_training_steps, else epochs x (training rows // batch) with
    the batch its dataloader draws (drop_last): data.train_batch_size, or under DAPO's trainer
    data.gen_batch_size."""
    if settings.get("trainer.total_training_steps") is not None:
        return integer(settings, "trainer.total_training_steps", 1)
    paths = files(settings.get("data.train_files"))
    counts = [count_rows(path) for path in paths]
    unread = [path for path, count in zip(paths, counts) if count is None]
    if unread:
        raise ValueError(
            f"the step count is epochs x rows // batch, and {unread[0]} cannot be read here to count its "
            "rows: convert where the data is, or set trainer.total_training_steps"
        )
    rows, batch = sum(counts), generation_batch(settings)
    if rows < batch:
        raise ValueError(
            f"{rows} training rows make no batch of {batch} prompts (verl drops the last partial one)"
        )
    return integer(settings, "trainer.total_epochs", 30) * (rows // batch)


def _chat_template_kwargs(value: Any, settings: Settings) -> dict[str, Any]:
    """verl's data.apply_chat_template_kwargs (the section, or its keys one by one)."""
    prefix = "data.apply_chat_template_kwargs."
    kwargs = dict(settings.get(prefix[:-1]) or {})
    kwargs |= {key[len(prefix) :]: v for key, v in settings.items() if key.startswith(prefix)}
    return kwargs


def _prompts_per_step(value: Any, settings: Settings) -> int:
    """verl's prompts per step; DAPO's trainer without group filtering trains on whole
    generation batches (data.gen_batch_size prompts)."""
    if settings.get(TRAINER) == DAPO_TRAINER and not settings.get("algorithm.filter_groups.enable"):
        return generation_batch(settings)
    return integer(settings, "data.train_batch_size", 1024)


def _gen_prompts(value: Any, settings: Settings) -> int | None:
    if settings.get(TRAINER) != DAPO_TRAINER or not settings.get("algorithm.filter_groups.enable"):
        return None
    return generation_batch(settings)


def _max_num_gen_batches(value: Any, settings: Settings) -> int:
    return max(integer(settings, "algorithm.filter_groups.max_num_gen_batches", 0), 0)


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
            with file.open(encoding="utf-8") as lines:
                return sum(1 for line in lines if line.strip())
        if file.suffix == ".json":
            return len(json.loads(file.read_text(encoding="utf-8")))
    except (ImportError, OSError, ValueError, TypeError):
        return None
    return None


def columns(path: str) -> set[str]:
    """A parquet file's column names (empty when it cannot be read here)."""
    if not path.endswith(".parquet"):
        return set()
    try:
        import pyarrow.parquet as pq

        return set(pq.read_schema(Path(path).expanduser()).names)
    except (ImportError, OSError, ValueError):
        return set()


def data_sources(path: str) -> set[str] | None:
    """The `data_source` values of a verl parquet file; None when it cannot be read here."""
    return column_values(path, "data_source")


def column_values(path: str, column: str) -> set[str] | None:
    """The distinct values of one column of a verl parquet file; None when the file or the column
    cannot be read here."""
    if not path.endswith(".parquet"):
        return None
    try:
        import pyarrow.parquet as pq

        table = pq.read_table(Path(path).expanduser(), columns=[column])
    except (ImportError, OSError, ValueError, KeyError):
        return None
    return {str(value) for value in table.column(0).unique().to_pylist()}


def _reward_functions(value: Any, settings: Settings) -> list[dict[str, Any]]:
    """verl's reward: a custom_reward_function (a file and a function name), else the reward
    model when one is enabled, else verl's default routing by each row's data_source."""
    prefix = "custom_reward_function.reward_kwargs."
    kwargs = {key[len(prefix) :]: v for key, v in settings.items() if key.startswith(prefix)}
    path = settings.get("custom_reward_function.path")
    if path:
        name = settings.get("custom_reward_function.name") or "compute_score"
        return [{"fn": f"{module_of(str(path))}:{name}", "weight": 1.0, "style": "verl", "kwargs": kwargs}]
    if settings.get("reward_model.enable"):
        model = settings.get("reward_model.model.path")
        if not model:
            raise ValueError("reward_model.enable=True names no reward_model.model.path")
        dtype = _torch_dtype(settings.get("reward_model.rollout.dtype") or "bfloat16")
        return [{"model": str(model), "weight": 1.0, "score": "logit", "dtype": dtype}]
    return [{"fn": "rlrun:verl_default", "weight": 1.0}]  # verl's default scorers take no reward_kwargs


def module_of(path: str) -> str:
    """The import name of a Python file: dotted from the working directory when it lies below it
    (`recipe/dapo/reward.py` -> `recipe.dapo.reward`), else its file name."""
    file = Path(path).expanduser()
    try:
        relative = file.resolve().relative_to(Path.cwd().resolve())
    except ValueError:
        relative = Path(file.name)
    return ".".join(relative.with_suffix("").parts)


def _same_as(key: str, default: Any) -> Any:
    """A converter refusing a value that differs from `key`'s (rlrun has one setting for both)."""

    def check(value: Any, settings: Settings) -> None:
        other = settings.get(key, default)
        if value is not None and value != other:
            raise ValueError(f"rlrun uses {key}={other} for both")

    return check


def _loss_scale(value: Any, settings: Settings) -> None:
    """verl divides seq-mean-token-sum-norm losses by this (null: the response length); rlrun
    by rollout.max_response_tokens."""
    mode = settings.get("actor_rollout_ref.actor.loss_agg_mode", "token-mean")
    length = settings.get("data.max_response_length", 512)
    if value is not None and mode == "seq-mean-token-sum-norm" and value != length:
        raise ValueError(
            f"rlrun divides seq-mean-token-sum-norm losses by the response length ({length}); "
            "set it to that or remove it"
        )


def _reward_manager(value: Any, settings: Settings) -> None:
    if value not in (None, "naive", "dapo"):
        raise ValueError(
            f"the {value} reward manager scores batches its own way: rlrun scores each sample as verl's naive "
            "and dapo managers do"
        )


def _engine(value: Any, settings: Settings) -> str:
    if value not in ("vllm", "sglang", "hf"):
        raise ValueError(f"rollout engine {value!r}: rlrun samples with vllm or hf (sglang -> vllm)")
    return "hf" if value == "hf" else "vllm"


def _strategy(value: Any, settings: Settings) -> str:
    if value not in ("fsdp", "fsdp2"):
        raise ValueError(f"strategy {value!r}: rlrun trains with FSDP (fsdp, fsdp2) or DDP, not Megatron")
    return "fsdp2"


def _val_sampling(value: Any, settings: Settings) -> float | int | None:
    """verl's sampled evaluation (val_kwargs.do_sample) uses val_kwargs' own sampling settings;
    greedy evaluation none of them."""
    if _val_greedy(None, settings):
        return None
    return 0 if isinstance(value, int) and value < 0 else value  # top_k -1: off


def _val_greedy(value: Any, settings: Settings) -> bool:
    """verl evaluates greedily without val_kwargs.do_sample, and at its temperature 0 (its default)."""
    sampled = settings.get("actor_rollout_ref.rollout.val_kwargs.do_sample")
    return not sampled or float(settings.get("actor_rollout_ref.rollout.val_kwargs.temperature", 0.0)) == 0


# Keys that cannot change the numbers (parallel layout, memory, speed, logging, infrastructure):
# reported as ignored, one by one.
_LAYOUT = "parallel layout: the numbers do not depend on it"
_MEMORY = "memory or speed: the numbers do not depend on it"
_INFRA = "infrastructure or logging: nothing trained depends on it"
_MEGATRON = "a Megatron setting: rlrun trains with FSDP or DDP"


def _refuse(reason: str, *harmless: Any) -> KeyMap:
    """A key rlrun cannot honour: refused with `reason` unless it holds one of `harmless`
    (verl's default, which changes nothing)."""
    return KeyMap(None, reason, refused_unless=harmless)


_ROLLOUT_IGNORED = [
    "mode",
    "nnodes",
    "n_gpus_per_node",
    "data_parallel_size",
    "expert_parallel_size",
    "pipeline_model_parallel_size",
    "enforce_eager",
    "cudagraph_capture_sizes",
    "max_num_batched_tokens",
    "max_model_len",
    "max_num_seqs",
    "enable_chunked_prefill",
    "enable_prefix_caching",
    "scheduling_policy",
    "load_format",
    "layered_summon",
    "log_prob_micro_batch_size",
    "log_prob_micro_batch_size_per_gpu",
    "log_prob_use_dynamic_bsz",
    "log_prob_max_token_len_per_gpu",
    "disable_log_stats",
    "multi_stage_wake_up",
    "skip_tokenizer_init",
    "calculate_log_probs",
    "moe_load_balance_metrics_interval",
    "seed",
    "full_determinism",
    "router_config_path",
]
_ACTOR_IGNORED = [
    "use_dynamic_bsz",
    "ppo_max_token_len_per_gpu",
    "ulysses_sequence_parallel_size",
    "entropy_from_logits_with_chunking",
    "entropy_from_logits_chunk_size",
    "entropy_checkpointing",
    "use_torch_compile",
    "use_fused_kernels",
    "pad_to_length",
    "calculate_entropy",
    "calculate_sum_pi_squared",
    "use_prefix_grouper",
    "data_loader_seed",
    "rollout_n",
]

TABLE: dict[str, KeyMap] = {
    TRAINER: KeyMap(None, "the verl trainer the command runs"),
    # --- data -------------------------------------------------------------------------------
    "data.train_files": KeyMap(
        "data.source", "several files: rlrun's list source, each file's rows", _source
    ),
    "data.val_files": KeyMap(
        "data.val_source", "several files: rlrun's list source, each file's rows", _source
    ),
    "data.prompt_key": KeyMap("data.prompt_key"),
    "data.max_prompt_length": KeyMap("data.max_prompt_tokens"),
    "data.max_response_length": KeyMap("rollout.max_response_tokens"),
    "data.train_batch_size": KeyMap(
        "trainer.prompts_per_step",
        "both count prompts per step (DAPO's trainer without group filtering: data.gen_batch_size)",
        _prompts_per_step,
    ),
    "data.gen_batch_size": KeyMap(
        "algorithm.group_filter.gen_prompts_per_batch",
        "DAPO's prompts per generation batch (verl.trainer.main_ppo: its fetch size, no effect)",
        _gen_prompts,
    ),
    "data.shuffle": KeyMap("data.shuffle"),
    "data.seed": KeyMap("data.seed"),
    "data.tokenizer": KeyMap("model.tokenizer"),
    "data.filter_overlong_prompts": KeyMap(
        "data.overlong_prompts", "true = drop; else data.truncation decides", _overlong
    ),
    "data.truncation": KeyMap(
        "data.overlong_prompts",
        "error = error; left = truncate (keep the last tokens); right/middle refused",
        _overlong,
    ),
    "data.val_batch_size": KeyMap(None, _MEMORY),
    "data.validation_shuffle": KeyMap(
        None, "rlrun evaluates the whole validation set: its order does not matter"
    ),
    "data.dataloader_num_workers": KeyMap(None, _MEMORY),
    "data.filter_overlong_prompts_workers": KeyMap(None, _MEMORY),
    "data.use_shm": KeyMap(None, _MEMORY),
    "data.return_raw_chat": KeyMap(None, "how verl's workers pass prompts: nothing trained depends on it"),
    "data.return_raw_input_ids": KeyMap(
        None, "how verl's workers pass prompts: nothing trained depends on it"
    ),
    "data.return_full_prompt": KeyMap(None, "how verl's workers pass prompts: nothing trained depends on it"),
    "data.trust_remote_code": KeyMap(None, "loads a multimodal processor; rlrun reads text data"),
    "data.reward_fn_key": _refuse("rlrun routes verl's rewards by the data_source column", "data_source"),
    "data.train_max_samples": _refuse(
        "rlrun trains on every row of the files: cut the file instead", -1, None
    ),
    "data.val_max_samples": _refuse("rlrun evaluates every row of the files: cut the file instead", -1, None),
    "data.image_key": _refuse("vision-language data: rlrun trains on text prompts", "images"),
    "data.video_key": _refuse("vision-language data: rlrun trains on text prompts", "videos"),
    "data.audio_key": _refuse("audio data: rlrun trains on text prompts", "audios"),
    "data.image_patch_size": KeyMap(None, "read only with images, which rlrun refuses"),
    "data.return_multi_modal_inputs": KeyMap(None, "read only with images, which rlrun refuses"),
    "data.mm_processor_kwargs.*": _refuse("vision-language data: rlrun trains on text prompts", None, {}),
    "data.custom_cls.*": _refuse("a custom dataset class: rlrun reads the files itself", None),
    "data.sampler.*": _refuse(
        "a custom prompt sampler (a curriculum): rlrun draws prompts in a seeded shuffle", None
    ),
    "data.apply_chat_template_kwargs": KeyMap(
        "data.chat_template_kwargs", "keywords of the chat template", _chat_template_kwargs
    ),
    "data.apply_chat_template_kwargs.*": KeyMap(
        "data.chat_template_kwargs",
        "keywords of the chat template (reasoning_effort, ...)",
        _chat_template_kwargs,
    ),
    # Only the length of each prompt with the tools' schemas, for filter_overlong_prompts: the
    # converter's agent checks (rlrun.convert.verl_agent) refuse where that changes the rows.
    "data.tool_config_path": KeyMap(
        None, "used only with data.filter_overlong_prompts, to measure prompts with the tools' schemas"
    ),
    "data.function_tool_path": KeyMap(
        None, "used only with data.filter_overlong_prompts, to measure prompts with the tools' schemas"
    ),
    # --- model ------------------------------------------------------------------------------
    "actor_rollout_ref.model.path": KeyMap("model.path"),
    "actor_rollout_ref.model.tokenizer_path": KeyMap("model.tokenizer"),
    "actor_rollout_ref.model.enable_gradient_checkpointing": KeyMap("model.gradient_checkpointing"),
    "actor_rollout_ref.model.trust_remote_code": KeyMap("model.trust_remote_code"),
    "actor_rollout_ref.model.lora_rank": KeyMap("model.lora", "0 = no LoRA; else model.lora.r", _lora),
    "actor_rollout_ref.model.lora_alpha": KeyMap("model.lora", "model.lora.alpha", _lora),
    "actor_rollout_ref.model.target_modules": KeyMap("model.lora", "model.lora.target_modules", _lora),
    "actor_rollout_ref.model.lora_adapter_path": _refuse(
        "starts LoRA from a trained adapter; rlrun starts from a fresh one (merge the adapter into the model "
        "and name the merged folder as the model)",
        None,
    ),
    "actor_rollout_ref.model.exclude_modules": _refuse(
        "LoRA module exclusions: list the modules to adapt in target_modules instead", None
    ),
    "actor_rollout_ref.model.lora.*": _refuse(
        _MEGATRON + " (Megatron LoRA)", None, 0, 32, "lora", False, True, []
    ),
    "actor_rollout_ref.model.override_config.*": _refuse(
        "changes the model's config (max_position_embeddings, dropout): rlrun trains the model as saved; "
        "save the changed config with the model",
        None,
        {},
    ),
    "actor_rollout_ref.model.external_lib": _refuse("imports a library that registers model code", None),
    "actor_rollout_ref.model.custom_chat_template": _refuse(
        "a chat template of its own: put it in the tokenizer's files", None
    ),
    "actor_rollout_ref.model.hf_config_path": _refuse("a model config from elsewhere", None),
    "actor_rollout_ref.model.mtp.*": _refuse(
        "multi-token prediction: rlrun trains next-token models", None, False
    ),
    "actor_rollout_ref.model.use_remove_padding": KeyMap(None, _MEMORY),
    "actor_rollout_ref.model.use_fused_kernels": KeyMap(None, _MEMORY),
    "actor_rollout_ref.model.fused_kernel_options.*": KeyMap(None, _MEMORY),
    "actor_rollout_ref.model.use_liger": KeyMap(None, _MEMORY),
    "actor_rollout_ref.model.enable_activation_offload": KeyMap(None, _MEMORY),
    "actor_rollout_ref.model.use_shm": KeyMap(None, _MEMORY),
    "actor_rollout_ref.model.tiled_mlp.*": KeyMap(None, _MEMORY),
    _MASTER_WEIGHTS: KeyMap("model.dtype", "the actor's master weights", lambda v, s: _torch_dtype(v)),
    "actor_rollout_ref.actor.fsdp_config.mixed_precision.param_dtype": KeyMap(
        "trainer.autocast", "the actor's compute dtype over its master weights", _autocast
    ),
    "actor_rollout_ref.actor.fsdp_config.dtype": KeyMap(  # its name in verl's newer engine
        "trainer.autocast", "the actor's compute dtype over its master weights", _autocast
    ),
    "actor_rollout_ref.actor.fsdp_config.mixed_precision.reduce_dtype": _refuse(
        "rlrun reduces gradients in float32", "fp32", "float32"
    ),
    "actor_rollout_ref.actor.fsdp_config.mixed_precision.buffer_dtype": _refuse(
        "rlrun keeps buffers in float32", "fp32", "float32"
    ),
    "actor_rollout_ref.actor.fsdp_config.strategy": KeyMap(
        "trainer.strategy", "fsdp and fsdp2 -> fsdp2", _strategy
    ),
    "actor_rollout_ref.actor.fsdp_config.qat.*": _refuse("quantisation-aware training", False, None),
    "actor_rollout_ref.actor.fsdp_config.*": KeyMap(None, _LAYOUT + " (FSDP sharding, offload, prefetch)"),
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
    "actor_rollout_ref.actor.optim.num_cycles": _refuse("rlrun's cosine decays over half a cycle", 0.5),
    "actor_rollout_ref.actor.optim.optimizer": _refuse("rlrun's optimizer is AdamW", "AdamW"),
    "actor_rollout_ref.actor.optim.optimizer_impl": KeyMap(None, "where AdamW comes from: the same update"),
    "actor_rollout_ref.actor.optim.total_training_steps": KeyMap(None, "set by verl from trainer.total_*"),
    "actor_rollout_ref.actor.optim.zero_indexed_step": _refuse("rlrun's schedule counts from step 0", True),
    "actor_rollout_ref.actor.optim.override_optimizer_config.*": _refuse(
        _MEGATRON + " (its optimizer)", None
    ),
    "actor_rollout_ref.actor.grad_clip": KeyMap("actor.grad_clip"),
    "actor_rollout_ref.actor.ppo_mini_batch_size": KeyMap(
        "actor.mini_batch_samples",
        "verl counts prompts, rlrun samples: x rollout.n",
        lambda v, s: int(v) * _n(s),
    ),
    "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu": KeyMap(
        "actor.micro_batch_samples",
        "verl counts samples per GPU, rlrun samples over all data-parallel processes: x GPUs / "
        "ulysses_sequence_parallel_size (with use_dynamic_bsz: the mini-batch)",
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
    "actor_rollout_ref.actor.loss_scale_factor": KeyMap(
        None, "the divisor of seq-mean-token-sum-norm", _loss_scale
    ),
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
    "actor_rollout_ref.actor.tau_pos": KeyMap("actor.loss_kwargs", "SAPO's temperatures", _loss_kwargs),
    "actor_rollout_ref.actor.tau_neg": KeyMap("actor.loss_kwargs", "SAPO's temperatures", _loss_kwargs),
    "actor_rollout_ref.actor.strategy": KeyMap("trainer.strategy", "fsdp and fsdp2 -> fsdp2", _strategy),
    "actor_rollout_ref.actor.shuffle": _refuse("rlrun keeps the rollout order within a step", False),
    "actor_rollout_ref.actor.freeze_vision_tower": _refuse(
        "vision-language models: rlrun trains text models", False
    ),
    "actor_rollout_ref.actor.router_replay.*": _refuse(
        "MoE routing replay: rlrun routes as the model does", None, "disabled"
    ),
    "actor_rollout_ref.actor.qat.*": _refuse("quantisation-aware training", False, None),
    "actor_rollout_ref.actor.megatron.*": _refuse(_MEGATRON),
    "actor_rollout_ref.actor.checkpoint.*": KeyMap(None, _INFRA),
    "actor_rollout_ref.actor.profiler.*": KeyMap(None, _INFRA),
    **{f"actor_rollout_ref.actor.{key}": KeyMap(None, _MEMORY) for key in _ACTOR_IGNORED},
    "actor_rollout_ref.ref.strategy": KeyMap(None, "the reference follows the actor", _strategy),
    "actor_rollout_ref.ref.megatron.*": _refuse(_MEGATRON),
    "actor_rollout_ref.ref.*": KeyMap(None, _MEMORY + " (the reference's log-prob batching and sharding)"),
    "actor_rollout_ref.hybrid_engine": KeyMap(None, _LAYOUT),
    "actor_rollout_ref.nccl_timeout": KeyMap(None, _INFRA),
    # --- rollout ----------------------------------------------------------------------------
    "actor_rollout_ref.rollout.name": KeyMap("rollout.engine", "vllm and sglang -> vllm; hf -> hf", _engine),
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
    "actor_rollout_ref.rollout.dtype": KeyMap(None, "rlrun's rollout runs the policy's own weights"),
    "actor_rollout_ref.rollout.val_kwargs.n": KeyMap("trainer.eval.k"),
    "actor_rollout_ref.rollout.val_kwargs.do_sample": KeyMap(
        "trainer.eval.greedy",
        "do_sample false, or val_kwargs.temperature 0 (verl's default) = greedy",
        _val_greedy,
    ),
    "actor_rollout_ref.rollout.val_kwargs.temperature": KeyMap("trainer.eval.temperature", "", _val_sampling),
    "actor_rollout_ref.rollout.val_kwargs.top_p": KeyMap("trainer.eval.top_p", "", _val_sampling),
    "actor_rollout_ref.rollout.val_kwargs.top_k": KeyMap(
        "trainer.eval.top_k", "-1 (off) -> 0 (off)", _val_sampling
    ),
    "actor_rollout_ref.rollout.do_sample": _refuse(
        "rlrun's rollout samples (greedy rollouts give GRPO no groups)", True
    ),
    "actor_rollout_ref.rollout.ignore_eos": _refuse("rlrun's responses end at EOS", False),
    "actor_rollout_ref.rollout.over_sample_rate": _refuse("rlrun waits for every response of a step", 0, 0.0),
    "actor_rollout_ref.rollout.quantization": _refuse(
        "a quantised rollout: rlrun samples from the policy's weights", None
    ),
    "actor_rollout_ref.rollout.quantization_config_file": _refuse("a quantised rollout", None),
    "actor_rollout_ref.rollout.logprobs_mode": _refuse(
        "rlrun's rollout log-probs are processed_logprobs", "processed_logprobs"
    ),
    "actor_rollout_ref.rollout.enable_rollout_routing_replay": _refuse("MoE routing replay", False),
    # Which rows run verl's tool_agent loop, and whether rlrun can run it, is decided by the
    # converter's agent checks (rlrun.convert.verl_agent) before these rows are read.
    "actor_rollout_ref.rollout.multi_turn.enable": KeyMap(
        None,
        "used by verl's asynchronous modes only: main_ppo runs each row's agent loop (agent_name, "
        "default_agent_loop)",
    ),
    "actor_rollout_ref.rollout.multi_turn.interaction_config_path": _refuse(
        "an interaction (a simulated user) is not a verl 0.9.1 setting, and rlrun has none", None
    ),
    "actor_rollout_ref.rollout.multi_turn.*": KeyMap(
        None, "used only with verl's tool_agent loop, which no row runs here"
    ),
    "actor_rollout_ref.rollout.agent.default_agent_loop": KeyMap(
        None, "single_turn_agent, one response per prompt as rlrun samples: no training number changes"
    ),
    "actor_rollout_ref.rollout.agent.custom_async_server.*": _refuse("a custom rollout server", None),
    "actor_rollout_ref.rollout.agent.agent_loop_config_path": _refuse("an agent loop", None),
    "actor_rollout_ref.rollout.agent.num_workers": KeyMap(None, _MEMORY),
    "actor_rollout_ref.rollout.mtp": _refuse("speculative decoding by multi-token prediction", None),
    "actor_rollout_ref.rollout.disaggregation.*": _refuse("a disaggregated rollout", False, None),
    "actor_rollout_ref.rollout.engine_kwargs.*": KeyMap(
        None, "the inference engine's own options: " + _MEMORY
    ),
    "actor_rollout_ref.rollout.checkpoint_engine.*": KeyMap(None, _INFRA),
    "actor_rollout_ref.rollout.trace.*": KeyMap(None, _INFRA),
    "actor_rollout_ref.rollout.prometheus.*": KeyMap(None, _INFRA),
    "actor_rollout_ref.rollout.profiler.*": KeyMap(None, _INFRA),
    **{f"actor_rollout_ref.rollout.{key}": KeyMap(None, _MEMORY) for key in _ROLLOUT_IGNORED},
    # --- critic -----------------------------------------------------------------------------
    "critic.enable": KeyMap(
        "critic.enabled",
        "verl enables the critic for gae by itself; rlrun states it",
        lambda v, s: bool(v) if v is not None else s.get("algorithm.adv_estimator") == "gae",
    ),
    "critic.optim.lr": KeyMap("critic.optimizer.lr"),
    "critic.optim.weight_decay": KeyMap("critic.optimizer.weight_decay"),
    "critic.optim.betas": KeyMap("critic.optimizer.betas", "", lambda v, s: list(v)),
    "critic.optim.clip_grad": KeyMap("critic.grad_clip"),
    "critic.optim.lr_warmup_steps_ratio": _refuse("rlrun's critic keeps a constant learning rate", 0, 0.0),
    "critic.optim.lr_warmup_steps": _refuse("rlrun's critic keeps a constant learning rate", -1, 0, None),
    "critic.optim.warmup_style": _refuse("rlrun's critic keeps a constant learning rate", None, "constant"),
    "critic.optim.lr_scheduler_type": _refuse("rlrun's critic keeps a constant learning rate", "constant"),
    "critic.optim.min_lr_ratio": KeyMap(None, "the critic's learning rate is constant: not used"),
    "critic.optim.optimizer": _refuse("rlrun's optimizer is AdamW", "AdamW"),
    "critic.optim.*": KeyMap(None, "set by verl from trainer.total_* or where AdamW comes from"),
    "critic.model.path": KeyMap("critic.model_path"),
    "critic.model.override_config.*": _refuse("changes the critic model's config", None, {}),
    "critic.model.lora_rank": _refuse("a LoRA critic: rlrun trains the whole critic", 0),
    "critic.model.external_lib": _refuse("imports a library that registers model code", None),
    "critic.model.*": KeyMap(None, _MEMORY + " (the critic's checkpointing, padding, sharding)"),
    "critic.cliprange_value": KeyMap("critic.cliprange_value"),
    "critic.grad_clip": KeyMap("critic.grad_clip"),
    "critic.loss_agg_mode": KeyMap("critic.loss_agg_mode"),
    "critic.loss_scale_factor": KeyMap(None, "the divisor of seq-mean-token-sum-norm", _loss_scale),
    "critic.ppo_mini_batch_size": KeyMap(
        None,
        "rlrun's critic takes the actor's mini-batches",
        _same_as("actor_rollout_ref.actor.ppo_mini_batch_size", 256),
    ),
    "critic.ppo_epochs": KeyMap(
        None, "rlrun's critic makes the actor's epochs", _same_as("actor_rollout_ref.actor.ppo_epochs", 1)
    ),
    "critic.strategy": KeyMap(None, "the critic follows the actor", _strategy),
    "critic.megatron.*": _refuse(_MEGATRON),
    "critic.*": KeyMap(None, _MEMORY + " (the critic's micro-batches, sequence parallelism, offload)"),
    # --- reward -----------------------------------------------------------------------------
    "custom_reward_function.path": KeyMap(
        "reward.functions",
        "a file -> its module, called verl style; without one, verl's routing by data_source",
        _reward_functions,
    ),
    "custom_reward_function.name": KeyMap(
        "reward.functions", "the function in that module", _reward_functions
    ),
    "custom_reward_function.reward_kwargs.*": KeyMap(
        "reward.functions",
        "the custom function's kwargs (verl's default scorers ignore them, and so does the converted recipe)",
        _reward_functions,
    ),
    "reward_model.enable": KeyMap(
        "reward.functions", "the reward model as a {model: ...} entry", _reward_functions
    ),
    "reward_model.model.path": KeyMap("reward.functions", "the reward model's folder", _reward_functions),
    "reward_model.model.external_lib": _refuse("imports a library that registers model code", None),
    "reward_model.model.trust_remote_code": KeyMap(None, "rlrun asks for it on the reward entry when needed"),
    "reward_model.model.*": KeyMap(None, _MEMORY + " (the reward model's padding and sharding)"),
    "reward_model.rollout.dtype": KeyMap(
        "reward.functions",
        "the reward model's dtype (verl serves it in bfloat16 by default)",
        _reward_functions,
    ),
    "reward_model.rollout.*": KeyMap(None, "how verl serves the reward model: " + _MEMORY),
    "reward_model.overlong_buffer.enable": KeyMap("reward.overlong_shaping.enabled"),
    "reward_model.overlong_buffer.len": KeyMap("reward.overlong_shaping.buffer_tokens"),
    "reward_model.overlong_buffer.penalty_factor": KeyMap("reward.overlong_shaping.penalty_factor"),
    "reward_model.overlong_buffer.log": KeyMap(None, _INFRA),
    "reward_model.reward_kwargs.overlong_buffer_cfg.enable": KeyMap("reward.overlong_shaping.enabled"),
    "reward_model.reward_kwargs.overlong_buffer_cfg.len": KeyMap("reward.overlong_shaping.buffer_tokens"),
    "reward_model.reward_kwargs.overlong_buffer_cfg.penalty_factor": KeyMap(
        "reward.overlong_shaping.penalty_factor"
    ),
    "reward_model.reward_kwargs.overlong_buffer_cfg.log": KeyMap(None, _INFRA),
    "reward_model.reward_kwargs.max_resp_len": KeyMap(
        None,
        "DAPO's penalty ramps up to the response limit",
        _same_as("data.max_response_length", 512),
    ),
    "reward_model.reward_manager": KeyMap(
        None,
        "naive and dapo score each sample, as rlrun does; DAPO's overlong penalty is reward.overlong_shaping",
        _reward_manager,
    ),
    "reward_model.use_reward_loop": KeyMap(None, "how verl schedules reward calls: " + _MEMORY),
    "reward_model.launch_reward_fn_async": KeyMap(None, "how verl schedules reward calls: " + _MEMORY),
    "reward_model.num_workers": KeyMap(None, _MEMORY),
    "reward_model.micro_batch_size_per_gpu": KeyMap(None, _MEMORY),
    "reward_model.micro_batch_size": KeyMap(None, _MEMORY),
    "reward_model.enable_resource_pool": KeyMap(None, _LAYOUT),
    "reward_model.n_gpus_per_node": KeyMap(None, _LAYOUT),
    "reward_model.nnodes": KeyMap(None, _LAYOUT),
    "reward_model.sandbox_fusion.*": _refuse("code execution rewards in a sandbox", None, 64, 1024),
    "reward_model.reward_loop_source": _refuse("a reward loop of its own", None, "register"),
    "reward_model.reward_loop_module_path": _refuse("a reward loop of its own", None),
    "reward_model.reward_loop_class_name": _refuse("a reward loop of its own", None),
    "sandbox_fusion.*": _refuse("code execution rewards in a sandbox", None, 64, 1024),
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
        "algorithm.group_filter.metric", "acc = acc; score, seq_reward = score", _metric
    ),
    "algorithm.filter_groups.max_num_gen_batches": KeyMap(
        "algorithm.group_filter.max_num_gen_batches", "0 or less = unlimited (0)", _max_num_gen_batches
    ),
    "algorithm.filter_groups.max_inflight_gen_batches": KeyMap(
        None, "verl 0.9's concurrent generation: " + _MEMORY
    ),
    "algorithm.rollout_correction.rollout_is": KeyMap(
        "rollout.importance_sampling.level", "null = off", lambda v, s: v or "off"
    ),
    "algorithm.rollout_correction.rollout_is_threshold": KeyMap("rollout.importance_sampling.cap"),
    "algorithm.rollout_correction.rollout_rs": _refuse("rejection sampling by importance weight", None),
    "algorithm.rollout_correction.rollout_rs_threshold": _refuse(
        "rejection sampling by importance weight", None
    ),
    "algorithm.rollout_correction.rollout_rs_threshold_lower": _refuse(
        "rejection sampling by importance weight", None
    ),
    "algorithm.rollout_correction.rollout_token_veto_threshold": _refuse(
        "token vetoes by importance weight", None
    ),
    "algorithm.rollout_correction.bypass_mode": _refuse(
        "bypass mode (rollout log-probs as the old policy)", False
    ),
    "algorithm.rollout_correction.loss_type": _refuse("a rollout-correction loss of its own", "ppo_clip"),
    "algorithm.rollout_correction.rollout_is_batch_normalize": _refuse(
        "batch-normalised importance weights", False
    ),
    "algorithm.use_pf_ppo": _refuse("preference-feedback PPO (reweighted sampling)", False),
    "algorithm.pf_ppo.*": _refuse("preference-feedback PPO (reweighted sampling)", "pow", 2.0),
    # --- trainer ----------------------------------------------------------------------------
    "trainer.total_training_steps": KeyMap("trainer.total_steps", "", _total_steps),
    "trainer.total_epochs": KeyMap(
        "trainer.total_steps",
        "epochs -> steps: epochs x (training rows // batch), verl's drop_last dataloader (rows counted in the "
        "files, before filter_overlong_prompts drops any)",
        _total_steps,
    ),
    "trainer.test_freq": KeyMap(
        "trainer.eval.every_steps", "-1 (never) -> 0 (start and end)", _off_when_negative
    ),
    "trainer.save_freq": KeyMap(
        "trainer.checkpoint.every_steps",
        "-1 (never) -> 0 (at the end)",
        _off_when_negative,
        infrastructure=True,
    ),
    "trainer.max_actor_ckpt_to_keep": KeyMap(
        "trainer.checkpoint.keep_last",
        "null (keep all) -> 0 (keep all)",
        lambda v, s: 0 if v is None else integer(s, "trainer.max_actor_ckpt_to_keep", 0),
        infrastructure=True,
    ),
    "trainer.critic_warmup": KeyMap(
        "actor.frozen_steps",
        "verl updates the actor once critic_warmup <= its step, counted from 1: c - 1 steps without an "
        "update, with or without a critic",
        lambda v, s: max(integer(s, "trainer.critic_warmup", 0) - 1, 0),
    ),
    "trainer.device": KeyMap("trainer.device"),
    "trainer.project_name": KeyMap("logging.wandb.project", infrastructure=True),
    "trainer.logger": KeyMap(
        "logging.wandb.enabled",
        "a logger list -> whether W&B logs",
        lambda v, s: "wandb" in (v or []),
        infrastructure=True,
    ),
    "trainer.default_local_dir": KeyMap(
        "trainer.output_dir", "rlrun adds <recipe>-<time> under it", infrastructure=True
    ),
    "trainer.val_before_train": KeyMap(
        None, "rlrun evaluates before training either way: no training number changes"
    ),
    "trainer.val_only": _refuse("an evaluation without training: use `rlrun eval`", False),
    "trainer.n_gpus_per_node": KeyMap(None, "no recipe key: `rlrun train --num-processes N`"),
    "trainer.nnodes": KeyMap(None, "no recipe key: one `rlrun train --num-processes N` per machine"),
    "trainer.experiment_name": KeyMap(None, "rlrun names the run directory after the recipe"),
    "trainer.use_v1": KeyMap(None, "verl's trainer implementation: " + _INFRA),
    "trainer.use_legacy_worker_impl": KeyMap(None, "verl's worker implementation: " + _INFRA),
    "trainer.v1.trainer_mode": _refuse("asynchronous training: rlrun trains on-policy, step by step", "sync"),
    "trainer.v1.*": KeyMap(None, "used by verl's asynchronous modes only"),
    "trainer.balance_batch": KeyMap(None, _LAYOUT + " (which GPU gets which samples)"),
    "trainer.resume_mode": KeyMap(None, "`rlrun resume` continues a run"),
    "trainer.resume_from_path": KeyMap(None, "`rlrun resume` continues a run"),
    "trainer.*": KeyMap(None, _INFRA),
    "distillation.enabled": _refuse(
        "on-policy distillation: write rlrun's distillation section by hand", False
    ),
    "distillation.*": KeyMap(None, "used only with distillation.enabled"),
    "global_profiler.*": KeyMap(None, "rlrun train --profile"),
    "ray_init.*": KeyMap(None, "rlrun does not use Ray"),
    "ray_kwargs.*": KeyMap(None, "rlrun does not use Ray"),
    "transfer_queue.*": KeyMap(None, _INFRA),
    "skip.*": _refuse("replays cached rollouts", False, None, "cache", []),
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
    # verl 0.9 sets both explicitly, so clip_ratio alone does not move them
    "actor_rollout_ref.actor.clip_ratio_low": 0.2,
    "actor_rollout_ref.actor.clip_ratio_high": 0.2,
    "actor_rollout_ref.rollout.n": 1,
    "actor_rollout_ref.rollout.name": "vllm",
    "actor_rollout_ref.rollout.tensor_model_parallel_size": 2,
    "actor_rollout_ref.rollout.top_k": -1,
    "actor_rollout_ref.rollout.val_kwargs.do_sample": False,
    "actor_rollout_ref.rollout.val_kwargs.temperature": 0.0,
    "actor_rollout_ref.actor.optim.lr": 1.0e-6,
    "actor_rollout_ref.actor.optim.weight_decay": 0.01,
    "actor_rollout_ref.actor.optim.betas": [0.9, 0.999],
    "actor_rollout_ref.actor.ppo_mini_batch_size": 256,
    "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu": None,
    "critic.enable": None,
    "custom_reward_function.path": None,
    "data.gen_batch_size": None,
    "data.train_files": "~/data/rlhf/gsm8k/train.parquet",
    "data.val_files": "~/data/rlhf/gsm8k/test.parquet",
    "critic.optim.lr": 1.0e-5,
    "critic.optim.weight_decay": 0.01,
    "critic.optim.betas": [0.9, 0.999],
    "trainer.test_freq": -1,
    "trainer.save_freq": -1,
    "trainer.max_actor_ckpt_to_keep": None,
    "trainer.device": "cuda",
    "trainer.n_gpus_per_node": 8,
    "trainer.nnodes": 1,
    "trainer.total_epochs": 30,
}


def lookup(verl_key: str) -> tuple[str, KeyMap] | None:
    """The table row for `verl_key` (see `table.find`)."""
    return find(TABLE, verl_key)
