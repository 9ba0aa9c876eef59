"""rlrun: declarative RL post-training of language models.

From Python (docs/python-api.md): `rlrun.load_recipe`, `rlrun.train`, `rlrun.resume`, the
`rlrun.Callback` events and the errors they raise. Each loads on first use from the module that
owns it, so importing the package (as the command line does first) loads no training code."""

import importlib

__version__ = "0.1.0"

_OWNERS = {  # public name -> the module that defines it
    "Callback": "rlrun.training.callbacks",
    "CallbackError": "rlrun.training.callbacks",
    "ConfigIssue": "rlrun.errors",
    "LoadedRecipe": "rlrun.recipes",
    "RecipeError": "rlrun.errors",
    "Rollout": "rlrun.training.callbacks",
    "RunFinished": "rlrun.training.run",
    "RunState": "rlrun.training.callbacks",
    "TrainResult": "rlrun.api.training",
    "load_recipe": "rlrun.api.recipes",
    "resume": "rlrun.api.training",
    "train": "rlrun.api.training",
}
__all__ = [  # the keys of _OWNERS, written out for the tools that read __all__ without running it
    "Callback",
    "CallbackError",
    "ConfigIssue",
    "LoadedRecipe",
    "RecipeError",
    "Rollout",
    "RunFinished",
    "RunState",
    "TrainResult",
    "load_recipe",
    "resume",
    "train",
]


def __getattr__(name: str) -> object:
    if name not in _OWNERS:
        raise AttributeError(f"module 'rlrun' has no attribute {name!r}")
    return getattr(importlib.import_module(_OWNERS[name]), name)
