"""training/models.py: loading a model in the dtype a recipe names."""

import torch

from rlrun.training.models import load_causal_lm


def test_the_embedded_model_loads_in_the_asked_dtype():
    assert load_causal_lm("rlrun:tiny-base", dtype="bfloat16", trainable=False).dtype == torch.bfloat16
