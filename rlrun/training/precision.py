"""How the trainer's passes run a model: `trainer.autocast` (bfloat16 mixed precision) and
`trainer.compile` (torch.compile).

Both apply only where the trainer scores sequences: the policy's update and its old log-probs,
the reference, teacher and critic. The rollout engine, evaluation, the health check and
checkpoints call the models themselves, so they stay float32 and uncompiled, and a checkpoint's
weight names are the model's own (a compiled module's would gain an `_orig_mod.` prefix).

Autocast covers the model call only: its logits come out upcast to float32, so the log-softmax,
the log-probs, entropies and losses computed from them are float32, as are the weights, the
gradients and the optimizer state (autocast casts a weight to bfloat16 for each matrix product;
its gradient flows back into the float32 weight).
"""

from __future__ import annotations

from contextlib import nullcontext
from typing import Any

import torch

AUTOCAST_DTYPES = {"bfloat16": torch.bfloat16}


class TrainerForward(torch.nn.Module):
    """`module` as the trainer's passes call it: under autocast (logits upcast to float32),
    compiled, or plain. Holds no weights of its own (never save or optimize it). Calls go through
    `module` itself (a DDP wrapper keeps its gradient sync); `.module` is the model inside a DDP
    wrapper, which `response_logits` and `cache_keyword` look through, and any attribute this
    lacks is that model's."""

    def __init__(self, module: torch.nn.Module, *, autocast: str | None, compile: bool, device_type: str):
        super().__init__()
        self.module = getattr(module, "module", module)
        self._call = torch.compile(module, dynamic=True) if compile else module
        self._autocast = (
            (lambda: torch.autocast(device_type, dtype=AUTOCAST_DTYPES[autocast]))
            if autocast
            else nullcontext
        )

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        with self._autocast():
            out = self._call(*args, **kwargs)
        if isinstance(out, torch.Tensor):
            return out.float()
        if getattr(out, "logits", None) is not None:
            out.logits = out.logits.float()
        return out

    def __getattr__(self, name: str) -> Any:
        try:
            return super().__getattr__(name)
        except AttributeError:
            if name == "module":  # not set yet
                raise
            return getattr(self.module, name)
