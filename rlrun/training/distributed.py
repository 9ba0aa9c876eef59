"""Statistics over the global batch under data parallelism: each process holds only its share
of the rows, but some numbers (batch-whitened advantages) depend on all of them."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from accelerate import Accelerator


def global_advantages(
    accelerator: Accelerator,
    advantage_fn: Callable[..., tuple[torch.Tensor, torch.Tensor]],
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    index: torch.Tensor,
    *,
    values: torch.Tensor | None,
    reward_baselines: torch.Tensor | None,
    reward_components: dict[str, torch.Tensor],
    token_inputs: dict[str, torch.Tensor] | None = None,
    **options: Any,
) -> tuple[torch.Tensor, torch.Tensor]:
    """`advantage_fn` over every process's rows at once, as one process with the whole batch
    would compute it; returns this process's rows of (advantages, returns).

    Group estimators would be exact per process (a group never straddles processes), but GAE
    and REINFORCE++ whiten over the batch, so every estimator sees the global batch: the inputs
    are a few (N, T) tensors, cheap to gather next to a forward pass. `token_inputs` are more
    (N, T) keyword inputs an estimator declared it needs (`old_log_probs`, `sum_pi_squared`).
    """
    token_inputs = token_inputs or {}
    if accelerator.num_processes == 1:
        return advantage_fn(
            token_level_rewards,
            response_mask,
            index,
            values=values,
            reward_baselines=reward_baselines,
            reward_components=reward_components,
            **token_inputs,
            **options,
        )
    rows, width = response_mask.shape
    # Response widths differ between processes: pad to the widest (padding is masked out).
    per_token = {"rewards": token_level_rewards, "mask": response_mask}
    if values is not None:
        per_token["values"] = values
    per_token |= {f"input:{name}": tensor for name, tensor in token_inputs.items()}
    inputs: dict[str, Any] = {
        **accelerator.pad_across_processes(per_token, dim=1),
        # group ids are per process: (rank, id) pairs are unique across processes
        "groups": torch.stack([torch.full_like(index, accelerator.process_index), index], dim=1),
        "components": reward_components,
    }
    if reward_baselines is not None:
        inputs["baselines"] = reward_baselines
    # Concatenated in rank order, every process holding the same number of rows (an equal share
    # of the prompts, n responses each): this process's rows are the rank-th block.
    everyone = accelerator.gather(inputs)
    advantages, returns = advantage_fn(
        everyone["rewards"],
        everyone["mask"],
        torch.unique(everyone["groups"], dim=0, return_inverse=True)[1],
        values=everyone.get("values"),
        reward_baselines=everyone.get("baselines"),
        reward_components=everyone["components"],
        **{name: everyone[f"input:{name}"] for name in token_inputs},
        **options,
    )
    mine = slice(accelerator.process_index * rows, (accelerator.process_index + 1) * rows)
    return advantages[mine, :width], returns[mine, :width]
