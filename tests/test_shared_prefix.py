"""Which models take a custom 4D attention mask (the packed layout, the preallocated cache)."""

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
