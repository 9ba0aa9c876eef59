"""The hf engine's linear layers while it samples: on CPU in float32, each large weight is packed
once into oneDNN's blocked layout and every decode step multiplies by that copy.

torch's CPU ``linear`` repacks the weight into its GEMM's layout on every call. A decode step
multiplies few rows (the decode batch) by each weight once, so that repacking costs about as much
as the product: every linear weight of SmolLM2-135M once, in its order, took 1/2.0 of the time
packed at 8-32 rows and 1/1.5 at 1 and 128 rows (2 threads; `benchmarks/packed_linear.py`,
benchmarks/README.md, "Decode products over packed weights"). Small weights lose (the tiny
models' 128-wide layers: 0.4-0.9x), hence ``MIN_SIDE``.

Packed copies are made at a layer's first call inside ``PackedLinears.active()`` and kept until
``release()`` (a ``generate`` call, or a conversation's whole life across its turns). A copy is
used only while its weight is the same tensor at the same version (``Tensor._version`` counts
in-place writes: an optimizer step, ``load_state_dict``), so a changed weight is packed again,
never read stale. Calls with autograd on or under autocast go to ``linear`` unchanged. The
products equal ``linear``'s up to float rounding (another order of summation), tested.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch
from torch.nn import functional as F

# A weight is packed when both its sides are at least this (`benchmarks/packed_linear.py`, 2
# threads, 1-128 rows): 576x576 1.1-1.7x faster packed, 1536x576 1.3-2.2x, SmolLM2's LM head
# 1.6-3.6x; 192x576 0.96-1.22x over two days, so kept; 128x128 and below 0.4-0.9x.
MIN_SIDE = 256


def pack(weight: torch.Tensor, rows: int) -> torch.Tensor:
    """A float32 weight (out, in) packed for oneDNN products of ``rows`` rows (the layout is
    chosen for that many; any number gives the same products)."""
    return torch.ops.mkldnn._reorder_linear_weight(weight.detach(), rows)


def product(x: torch.Tensor, packed: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
    """``linear(x, weight, bias)`` over ``pack(weight, ...)``, to float rounding."""
    return torch.ops.mkldnn._linear_pointwise(x, packed, bias, "none", [], "")


def packs(module: torch.nn.Module) -> bool:
    """Whether ``module`` computes exactly ``linear(x, weight, bias)`` (torch's own Linear, its
    forward not replaced by anyone) over a ``packable`` weight."""
    if type(module).forward is not torch.nn.Linear.forward or "forward" in vars(module):
        return False
    return packable(module.weight)


def packable(weight: torch.Tensor) -> bool:
    """A large float32 weight held whole on this CPU (not a sharded DTensor)."""
    return (
        type(weight.data) is torch.Tensor
        and weight.device.type == "cpu"
        and weight.dtype == torch.float32
        and min(weight.shape) >= MIN_SIDE
    )


class PackedLinears:
    """The large Linear layers of ``model`` over packed copies of their weights, inside
    ``active()``. ``rows``: how many rows the decode steps multiply (oneDNN picks the packed
    layout for it; any number of rows gives the same products)."""

    def __init__(self, model: torch.nn.Module, *, rows: int):
        usable = torch.backends.mkldnn.is_available() and model.device.type == "cpu"
        self.layers = [m for m in model.modules() if packs(m)] if usable else []
        self.rows = rows
        self._packed: dict[torch.nn.Module, tuple[torch.Tensor, int, torch.Tensor]] = {}
        self._depth = 0

    @contextlib.contextmanager
    def active(self) -> Iterator[None]:
        """The layers multiply by packed weights inside the block (re-entrant)."""
        self._depth += 1
        if self._depth == 1:
            for layer in self.layers:
                layer.forward = self._forward_of(layer)
        try:
            yield
        finally:
            self._depth -= 1
            if self._depth == 0:
                for layer in self.layers:
                    del layer.forward  # the class's forward again

    def release(self) -> None:
        """Free the packed copies (a later ``active()`` packs again)."""
        self._packed.clear()

    def _forward_of(self, layer: torch.nn.Linear):
        def forward(x: torch.Tensor) -> torch.Tensor:
            if torch.is_grad_enabled() or torch.is_autocast_enabled("cpu") or x.dtype != torch.float32:
                return F.linear(x, layer.weight, layer.bias)
            return product(x, self._weight(layer), layer.bias)

        return forward

    def _weight(self, layer: torch.nn.Linear) -> torch.Tensor:
        weight = layer.weight
        held = self._packed.get(layer)
        if held is None or held[0] is not weight or held[1] != weight._version:
            held = (weight, weight._version, pack(weight, self.rows))
            self._packed[layer] = held
        return held[2]
