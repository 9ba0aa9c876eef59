"""Which models take a custom 4D attention mask (the packed layout, the preallocated cache)."""

import pytest
import torch

from rlrun.shared_prefix import takes_4d_mask
from rlrun.training.models import ValueModel


def test_models_that_cannot_take_a_custom_4d_mask_are_told_apart(random_lm):
    config = random_lm.config
    assert takes_4d_mask(random_lm) and takes_4d_mask(ValueModel(random_lm.model))
    for change, takes in [
        ({"sliding_window": 4096, "use_sliding_window": False}, True),  # Qwen2's switch: off
        ({"sliding_window": 4096, "use_sliding_window": True}, False),
        ({"layer_types": ["full_attention", "sliding_attention"]}, False),
        ({"_attn_implementation": "flash_attention_2"}, False),
        ({"model_type": "bloom"}, False),  # ALiBi from a 2D mask
    ]:
        saved = {key: getattr(config, key, None) for key in change}
        for key, value in change.items():
            setattr(config, key, value)
        assert takes_4d_mask(random_lm) == takes, change
        for key, value in saved.items():
            setattr(config, key, value)

    class RemoteCode(type(random_lm)):  # a model class from outside transformers
        pass

    assert not takes_4d_mask(RemoteCode(config))


def test_a_model_sharded_by_fsdp2_is_judged_by_its_own_class(random_lm, tmp_path):
    """`fully_shard` swaps the model's class for one made in torch.distributed (FSDP<name>): the
    sharded model takes the mask as the model does (before, it decoded over the DynamicCache)."""
    fsdp = pytest.importorskip("torch.distributed.fsdp")
    if not hasattr(fsdp, "fully_shard"):
        pytest.skip("this torch has no FSDP2")
    from torch.distributed.device_mesh import init_device_mesh

    torch.distributed.init_process_group(
        "gloo", init_method=f"file://{tmp_path / 'store'}", rank=0, world_size=1
    )
    try:
        fsdp.fully_shard(random_lm, mesh=init_device_mesh("cpu", (1,)))
        assert type(random_lm).__module__.startswith("torch.distributed.")
        assert takes_4d_mask(random_lm)
        random_lm.config._attn_implementation = "flash_attention_2"
        assert not takes_4d_mask(random_lm)
    finally:
        torch.distributed.destroy_process_group()
