"""The ``hf`` rollout engine: transformers ``generate`` with a KV cache, on the training model.

Prompts are left-padded and generated in chunks of at most ``max_batch_samples`` rows (the
memory cap). Log-probs follow the contract in ``rlrun.rollout.base``: taken from the raw
logits ``generate`` reports (``output_logits``), divided by the temperature, before any top-k /
top-p truncation - the same numbers the trainer's forward pass gives.

The engine holds a reference to the model it was built with, normally the training model
itself, so ``sync_weights`` has nothing to copy; given a different module it loads that
module's weights into its own.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import torch
from transformers import GenerationConfig, PreTrainedModel

from rlrun.data.padding import left_pad
from rlrun.rollout.base import FINISH_LENGTH, FINISH_STOP, ROLLOUT_ENGINES, RolloutBatch, SamplingParams


@ROLLOUT_ENGINES.register("hf")
class HFRolloutEngine:
    """transformers generate with KV cache (CPU or one GPU; no extra dependency)."""

    def __init__(self, model: PreTrainedModel, tokenizer: Any, *, max_batch_samples: int = 1024):
        if max_batch_samples < 1:
            raise ValueError(f"max_batch_samples must be >= 1, got {max_batch_samples}")
        self.model = model
        self.max_batch_samples = max_batch_samples
        eos = model.generation_config.eos_token_id
        eos = tokenizer.eos_token_id if eos is None else eos
        if eos is None:
            raise ValueError("the tokenizer and the model's generation config both lack an EOS token")
        self.eos_ids = [eos] if isinstance(eos, int) else list(eos)
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else self.eos_ids[0]

    def generate(self, prompt_ids: list[list[int]], sampling: SamplingParams) -> RolloutBatch:
        """Sample ``sampling.n`` responses per prompt; rows prompt-major."""
        if not prompt_ids or any(len(p) == 0 for p in prompt_ids):
            raise ValueError("generate needs at least one prompt, and no prompt may be empty")
        device = self.model.device
        ids, mask = left_pad(prompt_ids, self.pad_id)
        ids = ids.repeat_interleave(sampling.n, 0).to(device)
        mask = mask.repeat_interleave(sampling.n, 0).to(device)
        config = self._generation_config(sampling)
        was_training = self.model.training
        self.model.eval()
        try:
            with torch.no_grad(), _seeded(sampling.seed, device):
                chunks = [
                    self._generate_chunk(ids[i : i + self.max_batch_samples], mask[i : i + self.max_batch_samples],
                                         config, sampling.temperature)
                    for i in range(0, ids.shape[0], self.max_batch_samples)
                ]
        finally:
            self.model.train(was_training)
        token_chunks, log_prob_chunks, mask_chunks = zip(*chunks)
        response_ids = _cat_right_padded(token_chunks, self.pad_id)
        log_probs = _cat_right_padded(log_prob_chunks, 0.0)
        response_mask = _cat_right_padded(mask_chunks, 0)
        stopped = (torch.isin(response_ids, torch.tensor(self.eos_ids, device=device)) & response_mask.bool()).any(-1)
        finish = [FINISH_STOP if s else FINISH_LENGTH for s in stopped.tolist()]
        return RolloutBatch(response_ids, response_mask, log_probs, finish, sampling.n)

    def sync_weights(self, model: torch.nn.Module) -> None:
        """No-op when the engine generates with the training model itself (the usual case)."""
        if model is not self.model:
            self.model.load_state_dict(model.state_dict())

    def _generate_chunk(
        self, ids: torch.Tensor, mask: torch.Tensor, config: GenerationConfig, temperature: float
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        out = self.model.generate(input_ids=ids, attention_mask=mask, generation_config=config)
        tokens = out.sequences[:, ids.shape[1] :]
        logits = torch.stack(out.logits, dim=1).float()
        log_probs = torch.log_softmax(logits / temperature, dim=-1).gather(-1, tokens.unsqueeze(-1)).squeeze(-1)
        is_eos = torch.isin(tokens, torch.tensor(self.eos_ids, device=tokens.device)).long()
        response_mask = (is_eos.cumsum(-1) - is_eos == 0).long()  # up to and including the first EOS
        return tokens.masked_fill(response_mask == 0, self.pad_id), log_probs * response_mask, response_mask

    def _generation_config(self, sampling: SamplingParams) -> GenerationConfig:
        # Every knob that changes the distribution is set explicitly: generate() would otherwise
        # fill unset ones from the model's generation_config.json (e.g. a repetition penalty).
        sampling_knobs = {} if sampling.greedy else {
            "temperature": sampling.temperature, "top_k": sampling.top_k, "top_p": sampling.top_p,
            "min_p": 0.0, "typical_p": 1.0, "epsilon_cutoff": 0.0, "eta_cutoff": 0.0,
        }
        return GenerationConfig(
            max_new_tokens=sampling.max_tokens,
            min_new_tokens=sampling.min_tokens,
            do_sample=not sampling.greedy,
            repetition_penalty=1.0,
            no_repeat_ngram_size=0,
            num_beams=1,
            eos_token_id=self.eos_ids,
            pad_token_id=self.pad_id,
            use_cache=True,
            return_dict_in_generate=True,
            output_logits=True,
            **sampling_knobs,
        )


def _cat_right_padded(parts: tuple[torch.Tensor, ...], value: float) -> torch.Tensor:
    """Chunks stop at their own longest response: pad them to a common width, then stack rows."""
    width = max(p.shape[1] for p in parts)
    return torch.cat([torch.nn.functional.pad(p, (0, width - p.shape[1]), value=value) for p in parts])


@contextlib.contextmanager
def _seeded(seed: int | None, device: torch.device) -> Iterator[None]:
    """Seed the sampler for this call only, leaving the global RNG stream untouched."""
    if seed is None:
        yield
        return
    devices = [device] if device.type == "cuda" else []
    with torch.random.fork_rng(devices=devices):
        torch.manual_seed(seed)
        yield
