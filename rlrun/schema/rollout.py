"""`rollout`: how responses are sampled."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from rlrun.schema.base import NonNegativeInt, PositiveInt, Section

# The temperatures vLLM samples at as given (vLLM 0.30-0.32's SamplingParams): it refuses one
# above 2 and silently raises one below 0.01 to 0.01. Checked at validation for engine: vllm.
VLLM_TEMPERATURE = (0.01, 2.0)


class ImportanceSampling(Section):
    """Truncated importance weights for the rollout engine / trainer log-prob mismatch."""

    level: Literal["off", "token", "sequence"] = "off"
    """Weights per token, one per sequence, or none: off | token | sequence"""
    cap: Annotated[float, Field(ge=1)] = 2.0
    """Upper bound of each truncated importance weight (>= 1)."""
    mode: Literal["truncate", "mask"] = "truncate"
    """A weight above cap: truncate = cut to cap (verl's TIS) | mask = 0 (TRL's *_mask modes)"""


class Vllm(Section):
    gpu_memory_utilization: Annotated[float, Field(gt=0, le=1)] = 0.5
    """Share of the GPU's memory vLLM may take, 0 to 1 (CUDA; vLLM's CPU build sizes its KV cache
    for the run's largest generation call, at most rollout.max_batch_samples sequences, instead)."""
    tensor_parallel_size: PositiveInt = 1
    """GPUs one vLLM engine spans."""
    enable_sleep_mode: bool = False
    """Free vLLM's weights and KV cache while the trainer runs (woken for each generation; CUDA only)."""
    enforce_eager: bool | None = None
    """Run vLLM's model without torch.compile (and CUDA graphs). On vLLM's CPU build, compiling
    SmolLM2 added about 55 s to every start, sampled no faster and slowed the trainer beside it
    (2 cores, benchmarks/README.md). true | false | null = eager on the CPU build, compiled on CUDA."""


class Rollout(Section):
    engine: Literal["hf", "vllm"] = "hf"  # not a registry lookup: importing the engines loads transformers
    """The sampler (hf = rlrun's own loop): hf | vllm"""
    n: PositiveInt = 8
    """samples per prompt (the group of GRPO-style estimators)"""
    max_response_tokens: PositiveInt = 8
    """Longest response in tokens; longer ones are cut (truncated)."""
    min_response_tokens: NonNegativeInt = 0  # EOS masked until then
    """EOS is masked until this many tokens (fixed-length benchmarks)"""
    temperature: Annotated[float, Field(gt=0)] = 1.0
    """Sampling temperature; log-probs are taken under the same temperature (vllm: 0.01 to 2)."""
    top_p: Annotated[float, Field(gt=0, le=1)] = 1.0
    """Nucleus sampling: keep the smallest set of tokens with this much probability (1 = off)."""
    top_k: NonNegativeInt = 0
    """Keep the k most likely tokens; 0 = off"""
    max_batch_samples: PositiveInt = 1024
    """the most sequences generated in one batch (caps memory; vllm: at most this many at once)"""
    importance_sampling: ImportanceSampling = ImportanceSampling()
    """correction when the engine's log-probs differ from the trainer's"""
    vllm: Vllm = Vllm()
    """Settings of the vllm engine (used when engine is vllm)."""
