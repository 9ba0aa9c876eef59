"""`rollout`: how responses are sampled."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from rlrun.schema.base import NonNegativeInt, PositiveInt, Section


class ImportanceSampling(Section):
    """Truncated importance weights for the rollout engine / trainer log-prob mismatch."""

    level: Literal["off", "token", "sequence"] = "off"
    cap: Annotated[float, Field(ge=1)] = 2.0


class Vllm(Section):
    gpu_memory_utilization: Annotated[float, Field(gt=0, le=1)] = 0.5
    tensor_parallel_size: PositiveInt = 1
    enable_sleep_mode: bool = False


class Rollout(Section):
    engine: Literal["hf", "vllm"] = "hf"  # not a registry lookup: importing the engines loads transformers
    n: PositiveInt = 8
    max_response_tokens: PositiveInt = 8
    min_response_tokens: NonNegativeInt = 0  # EOS masked until then
    temperature: Annotated[float, Field(gt=0)] = 1.0
    top_p: Annotated[float, Field(gt=0, le=1)] = 1.0
    top_k: NonNegativeInt = 0
    max_batch_samples: PositiveInt = 1024
    importance_sampling: ImportanceSampling = ImportanceSampling()
    vllm: Vllm = Vllm()
