"""The recipe's rollout engine, built the same way for training and for `rlrun eval`."""

from __future__ import annotations

from typing import Any

import torch

from rlrun.recipes.batch_plan import batch_plan
from rlrun.rollout import ROLLOUT_ENGINES, RolloutEngine
from rlrun.schema import Recipe


def build_rollout_engine(recipe: Recipe, model: torch.nn.Module, tokenizer: Any) -> RolloutEngine:
    """``recipe.rollout.engine`` on ``model``'s weights. The hf engine generates in chunks of
    `rollout.max_batch_samples` rows. vLLM holds every sequence of a call at once, so it is sized
    for the largest call the run makes, at most `rollout.max_batch_samples` sequences (its CPU
    build reserves that KV cache up front: sized by the cap alone, 1,024 sequences of a 256-token
    response budget took 14 GiB for a SmolLM2 step of 256), each of the longest prompt the data
    keeps plus the longest response. An agent's episode prompt is longer than the data's by the
    tools' descriptions and its environment's reset text, known only row by row: there the
    model's own context length bounds a sequence."""
    r = recipe.rollout
    if r.engine != "vllm":
        return ROLLOUT_ENGINES.get(r.engine)(model, tokenizer, max_batch_samples=r.max_batch_samples)
    e = recipe.trainer.eval
    # an evaluation of the whole validation set (prompts: null) may be as large as the cap
    eval_samples = r.max_batch_samples if e.prompts is None else e.prompts * e.k
    prompt_tokens = None if recipe.agent.enabled else recipe.data.max_prompt_tokens
    return ROLLOUT_ENGINES.get("vllm")(
        model,
        tokenizer,
        max_batch_samples=min(r.max_batch_samples, max(batch_plan(recipe).samples, eval_samples)),
        vllm=r.vllm,
        max_model_len=None if prompt_tokens is None else prompt_tokens + r.max_response_tokens,
    )
