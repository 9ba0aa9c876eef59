"""`trainer.strategy: fsdp2` — every process holds only its shard of each model's weights,
gradients and optimizer state (torch's FSDP2, `fully_shard`).

Accelerate shards the trained models itself where its FSDP2 plugin runs (GPUs). On CPU it
sets up plain data parallelism whatever the launch flags say, so there rlrun applies
`fully_shard` itself, over a CPU device mesh (gloo): the same torch API, the same sharded
modules. Models Accelerate is not given (the frozen reference and teacher) are sharded by rlrun
on every device.

A sharded model is used three ways:
- training passes run sharded: each block's weights are gathered for its forward and backward
  and freed after, gradients are reduce-scattered; every process makes the same passes (as DDP
  already requires);
- passes whose number differs between processes (sampling until EOS, chunks by token count,
  evaluation) run inside `gathered`, on the whole weights, with no communication;
- checkpoints hold full (unsharded) state dicts (`torch.distributed.checkpoint.state_dict`) in
  the format a single process writes, so they resume in any number of processes and export as
  any other checkpoint.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator
from typing import Any

import torch
from accelerate import Accelerator
from accelerate.utils import DistributedType

from rlrun.facts.machine import dtensor_class, fsdp_module_class


def strategy_in_effect(accelerator: Accelerator, requested: str) -> str:
    """The data-parallel strategy this process runs (meta.json's `setup.strategy`): `none` for one
    process; Accelerate's own when it set up FSDP or DeepSpeed (an `--accelerate-config` file may
    have); `fsdp2` when rlrun shards the models itself; else `ddp`."""
    if accelerator.num_processes == 1:
        return "none"
    if accelerator.distributed_type == DistributedType.FSDP:
        return f"fsdp{getattr(accelerator.state.fsdp_plugin, 'fsdp_version', 1)}"
    if accelerator.distributed_type == DistributedType.DEEPSPEED:
        return f"deepspeed_zero{accelerator.state.deepspeed_plugin.zero_stage}"
    return "fsdp2" if shards_itself(accelerator, requested) else "ddp"


def shards_itself(accelerator: Accelerator, requested: str) -> bool:
    """Whether rlrun applies FSDP2 to the trained models (Accelerate did not set it up)."""
    accelerate_shards = accelerator.distributed_type in (DistributedType.FSDP, DistributedType.DEEPSPEED)
    return requested == "fsdp2" and accelerator.num_processes > 1 and not accelerate_shards


def shard(model: torch.nn.Module, accelerator: Accelerator) -> torch.nn.Module:
    """`model` sharded over all processes: each transformer block (the classes the model names
    in `_no_split_modules`, as Accelerate's transformer-based wrapping does) is one unit, the
    rest (embeddings, norm, head, a value head) the root's. Returns the same module, changed in
    place: its parameters become sharded `DTensor`s, so build optimizers after this."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    mesh = init_device_mesh(accelerator.device.type, (accelerator.num_processes,))
    blocks = set(_no_split_modules(model))
    for module in model.modules():
        if type(module).__name__ in blocks:
            fully_shard(module, mesh=mesh)
    fully_shard(model, mesh=mesh)
    return model


def _no_split_modules(model: torch.nn.Module) -> list[str]:
    names: list[str] = []
    for module in model.modules():
        names += getattr(module, "_no_split_modules", None) or []
    return names


def is_sharded(model: torch.nn.Module | None) -> bool:
    fsdp_module = fsdp_module_class()
    return fsdp_module is not None and isinstance(model, fsdp_module)


def held_state_bytes(
    models: Iterable[torch.nn.Module | None], optimizers: Iterable[torch.optim.Optimizer | None]
) -> int:
    """The bytes this process keeps between steps for `models` and `optimizers`: the weights
    and the optimizer state (AdamW's two moments and step counts), its shards only where they
    are sharded. What FSDP2 divides among the processes and DDP copies into each; gradients,
    activations and gathered weights come and go within a step and are not counted."""
    tensors: dict[int, torch.Tensor] = {}
    for model in models:
        for param in model.parameters() if model is not None else ():
            tensors[id(param)] = param  # by identity: tied weights are held once
    for optimizer in optimizers:
        for state in optimizer.state.values() if optimizer is not None else ():
            tensors |= {id(v): v for v in state.values() if isinstance(v, torch.Tensor)}
    dtensor = dtensor_class()
    local = [t.to_local() if dtensor and isinstance(t, dtensor) else t for t in tensors.values()]
    return sum(t.numel() * t.element_size() for t in local)


@contextlib.contextmanager
def gathered(*models: torch.nn.Module | None) -> Iterator[None]:
    """Inside the block the sharded ones of `models` hold their whole weights and their forward
    passes communicate nothing, so processes may make different numbers of them (sampling runs
    until EOS). Entering gathers the weights (every process must enter); leaving frees them.
    Without gradients: a backward pass needs the sharded weights. A model may be a wrapper
    (`TrainerForward`) around a sharded one."""
    units = [m for model in models if model is not None for m in model.modules() if is_sharded(m)]
    for unit in units:
        unit.set_reshard_after_forward(False, recurse=False)
        unit.unshard()
    try:
        with torch.no_grad():
            yield
    finally:
        for unit in units:
            unit.reshard()
            unit.set_reshard_after_forward(True, recurse=False)


def _full_options() -> Any:
    from torch.distributed.checkpoint.state_dict import StateDictOptions

    # Gathered into CPU memory on the main process only (the others get {}).
    return StateDictOptions(full_state_dict=True, cpu_offload=True)


def full_weights(model: torch.nn.Module) -> dict[str, torch.Tensor] | None:
    """A sharded model's whole state dict on the main process ({} on the others; every process
    must call it); None for a model that is not sharded (it saves its own)."""
    if not is_sharded(model):
        return None
    from torch.distributed.checkpoint.state_dict import get_model_state_dict

    weights = get_model_state_dict(model, options=_full_options())
    # A tied weight (the LM head on the embeddings) under its second name, as the model's own
    # state dict does not hold it: the checkpoint is then the one a single process writes.
    tied = {n for n, _ in model.named_parameters(remove_duplicate=False)} - dict(
        model.named_parameters()
    ).keys()
    return {name: tensor for name, tensor in weights.items() if name not in tied}


def load_full_weights(model: torch.nn.Module, weights: dict[str, torch.Tensor]) -> None:
    """Load a whole state dict (every process holds it) into `model`, sharded or not."""
    if not is_sharded(model):
        model.load_state_dict(weights)
        return
    from torch.distributed.checkpoint.state_dict import StateDictOptions, set_model_state_dict

    set_model_state_dict(model, weights, options=StateDictOptions(full_state_dict=True))


def _parameter_names(model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> list[str]:
    """The optimizer's parameters by name, in its order (the indices of its state dict)."""
    names = {id(p): name for name, p in model.named_parameters()}
    return [names[id(p)] for group in optimizer.param_groups for p in group["params"]]


def full_optimizer_state(model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> dict[str, Any]:
    """`optimizer.state_dict()` as one process over the whole model would have it: for a sharded
    model gathered from the shards (on the main process, {} on the others; every process must
    call it), its state keyed by parameter index as torch's own state dict is."""
    optimizer = getattr(optimizer, "optimizer", optimizer)  # Accelerate's wrapper
    if not is_sharded(model):
        return optimizer.state_dict()
    from torch.distributed.checkpoint.state_dict import get_optimizer_state_dict

    by_name = get_optimizer_state_dict(model, optimizer, options=_full_options())
    if not by_name:
        return {}
    index = {name: i for i, name in enumerate(_parameter_names(model, optimizer))}
    return {
        "state": {index[name]: value for name, value in by_name["state"].items()},
        "param_groups": [
            {**group, "params": [index[name] for name in group["params"]]}
            for group in by_name["param_groups"]
        ],
    }


def load_full_optimizer_state(
    model: torch.nn.Module, optimizer: torch.optim.Optimizer, saved: dict[str, Any]
) -> None:
    """Load a state dict written by `full_optimizer_state` (or a single process) into `optimizer`."""
    if not is_sharded(model):
        optimizer.load_state_dict(saved)
        return
    from torch.distributed.checkpoint.state_dict import StateDictOptions, set_optimizer_state_dict

    optimizer = getattr(optimizer, "optimizer", optimizer)
    names = _parameter_names(model, optimizer)
    by_name = {
        "state": {names[i]: value for i, value in saved["state"].items()},
        "param_groups": [
            {**group, "params": [names[i] for i in group["params"]]} for group in saved["param_groups"]
        ],
    }
    set_optimizer_state_dict(model, optimizer, by_name, options=StateDictOptions(full_state_dict=True))
