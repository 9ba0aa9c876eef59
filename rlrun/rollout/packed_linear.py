"""The hf engine's linear layers while it samples: on CPU in float32, each large weight is packed
once into oneDNN's blocked layout and every decode step multiplies by that copy.

torch's CPU ``linear`` repacks the weight into its GEMM's layout on every call. A decode step
multiplies few rows (the decode batch) by each weight once, so that repacking costs about as much
as the product: every linear weight of SmolLM2-135M once, in its order, took 1/2.0 of the time
packed at 8-32 rows and 1/1.5 at 1 and 128 rows (2 threads; `benchmarks/packed_linear.py`,
benchmarks/README.md, "Decode products over packed weights"). Small weights lose (the tiny
models' 128-wide layers: 0.4-0.9x), hence ``MIN_SIDE``. In the families rlrun documents, the
projections a layer calls on one input (queries, keys and values; the MLP's gate and up) are
stacked into one packed weight and multiplied once (``SIBLINGS``); each later one is handed its
part of that product if it is called on the same input, unchanged, with the same weight, and
multiplies for itself otherwise.

Packed copies are made at a layer's first call inside ``PackedLinears.active()`` and kept until
``release()`` (a ``generate`` call, or a conversation's whole life across its turns). A copy is
used only while its weights (and a stack's biases) are the same tensors at the same versions
(``Tensor._version`` counts in-place writes: an optimizer step, ``load_state_dict``), so a
changed weight is packed again, never read stale. Calls with autograd on or under autocast go to
``linear`` unchanged. The products equal ``linear``'s up to float rounding (another order of
summation), tested.
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


# Projections that these families' layers call on one input, the first called first (attention's
# queries, keys and values; the MLP's gate and up): multiplied as one packed weight, their rows
# stacked, and the later ones handed their part. Keys and values (SmolLM2: 192x576) are too
# narrow to gain packed alone; stacked, SmolLM2's generation at 32 and 128 tokens was 1.03-1.13x
# faster, against 0.96-1.07x with keys and values packed alone (benchmarks/README.md, "Sibling
# projections as one product").
SIBLINGS = {
    family: (("q_proj", "k_proj", "v_proj"), ("gate_proj", "up_proj"))
    for family in ("llama", "qwen2", "qwen3")
}


def exact(module: torch.nn.Module) -> bool:
    """Whether ``module`` computes exactly ``linear(x, weight, bias)`` (torch's own Linear, its
    forward not replaced by anyone) over a ``whole_float32`` weight."""
    if type(module).forward is not torch.nn.Linear.forward or "forward" in vars(module):
        return False
    return whole_float32(module.weight)


def whole_float32(weight: torch.Tensor) -> bool:
    """A float32 weight held whole on this CPU (not a sharded DTensor)."""
    return type(weight.data) is torch.Tensor and weight.device.type == "cpu" and weight.dtype == torch.float32


def packable(weight: torch.Tensor) -> bool:
    """A ``whole_float32`` weight large enough to gain from packing alone."""
    return whole_float32(weight) and min(weight.shape) >= MIN_SIDE


def packs(module: torch.nn.Module) -> bool:
    """Whether ``module`` is ``exact`` over a ``packable`` weight."""
    return exact(module) and packable(module.weight)


def sibling_groups(model: torch.nn.Module) -> list[tuple[torch.nn.Linear, ...]]:
    """The ``SIBLINGS`` of ``model``'s family that can be stacked: all ``exact``, one input width,
    all with a bias or none, large enough stacked to gain from packing."""
    config = getattr(model, "config", None)
    groups = []
    for module in model.modules():
        for names in SIBLINGS.get(getattr(config, "model_type", None), ()):
            members = tuple(getattr(module, name, None) for name in names)
            if not all(isinstance(m, torch.nn.Linear) and exact(m) for m in members):
                continue
            if len({m.in_features for m in members}) > 1 or len({m.bias is None for m in members}) > 1:
                continue
            if min(members[0].in_features, sum(m.out_features for m in members)) >= MIN_SIDE:
                groups.append(members)
    return groups


class PackedLinears:
    """The large Linear layers of ``model`` over packed copies of their weights, inside
    ``active()``, sibling projections (``SIBLINGS``) as one product. ``rows``: how many rows the
    decode steps multiply (oneDNN picks the packed layout for it; any number of rows gives the same
    products)."""

    def __init__(self, model: torch.nn.Module, *, rows: int):
        usable = torch.backends.mkldnn.is_available() and model.device.type == "cpu"
        groups = sibling_groups(model) if usable else []
        self.groups = {group[0]: group for group in groups}  # by the member called first
        stacked = {m for group in groups for m in group}
        self.layers = [m for m in model.modules() if packs(m) or m in stacked] if usable else []
        self.rows = rows
        # per layer or group: the parameters a copy was packed from, their versions, the copy, its bias
        self._packed: dict[
            tuple[torch.nn.Linear, ...],
            tuple[list[torch.Tensor], list[int], torch.Tensor, torch.Tensor | None],
        ] = {}
        # a later sibling's part of a stacked product: (input, its version, weight, its version, part)
        self._handed: dict[torch.nn.Module, tuple[torch.Tensor, int, torch.Tensor, int, torch.Tensor]] = {}
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
                self._handed.clear()
                for layer in self.layers:
                    del layer.forward  # the class's forward again

    def release(self) -> None:
        """Free the packed copies (a later ``active()`` packs again)."""
        self._packed.clear()

    def _forward_of(self, layer: torch.nn.Linear):
        group = self.groups.get(layer)

        def forward(x: torch.Tensor) -> torch.Tensor:
            if torch.is_grad_enabled() or torch.is_autocast_enabled("cpu") or x.dtype != torch.float32:
                return F.linear(x, layer.weight, layer.bias)
            handed = self._handed.pop(layer, None)
            if handed is not None:
                # Its part of a stacked product over this very input and weight, unchanged since.
                given, given_version, weight, weight_version, part = handed
                if (
                    given is x
                    and x._version == given_version
                    and layer.weight is weight
                    and weight._version == weight_version
                ):
                    return part
            if group is not None and not x.is_inference():  # (inference tensors keep no version)
                packed, bias = self._copy(group)
                parts = product(x, packed, bias).split([m.out_features for m in group], -1)
                for sibling, part in zip(group[1:], parts[1:]):
                    self._handed[sibling] = (x, x._version, sibling.weight, sibling.weight._version, part)
                return parts[0]
            if not packable(layer.weight):  # a narrow sibling called on its own
                return F.linear(x, layer.weight, layer.bias)
            return product(x, self._copy((layer,))[0], layer.bias)

        return forward

    def _copy(self, layers: tuple[torch.nn.Linear, ...]) -> tuple[torch.Tensor, torch.Tensor | None]:
        """The packed copy of ``layers``' weights stacked (one layer: its own), and their biases
        stacked; packed again whenever one of them was replaced or written since."""
        params = [p for m in layers for p in (m.weight, m.bias) if p is not None]
        versions = [p._version for p in params]
        held = self._packed.get(layers)
        if held is None or held[1] != versions or any(a is not b for a, b in zip(held[0], params)):
            weight = _stacked([m.weight.detach() for m in layers])
            bias = _stacked([m.bias.detach() for m in layers]) if layers[0].bias is not None else None
            held = (params, versions, pack(weight, self.rows), bias)
            self._packed[layers] = held
        return held[2], held[3]


def _stacked(tensors: list[torch.Tensor]) -> torch.Tensor:
    """The tensors' rows one after another (one tensor: itself, not a copy)."""
    return tensors[0] if len(tensors) == 1 else torch.cat(tensors)
