"""Turning a recipe's reward name into a callable: ``rlrun:<builtin>`` or ``pkg.module:function``."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from types import ModuleType

from rlrun.registry import UnknownComponentError
from rlrun.rewards.reward_registry import REWARDS


class RewardSpecError(ValueError):
    """A recipe named a reward function that cannot be found."""


class UserModuleError(ImportError):
    """A module a recipe names (a reward's, a plugin) failed while being imported."""


def import_user_module(name: str) -> ModuleType:
    """Import a module a recipe names. Whatever its top-level code raises, `sys.exit()`
    included, becomes a UserModuleError (Ctrl-C still stops): the recipe named broken code,
    and a module that exits must not end `rlrun validate` as if all were well."""
    try:
        return importlib.import_module(name)
    except KeyboardInterrupt:
        raise
    except ImportError:
        raise
    except BaseException as err:  # noqa: BLE001 (see the docstring)
        raise UserModuleError(f"the module {name!r} raised {err!r} while being imported") from None


def resolve_reward_fn(spec: str) -> Callable[..., object]:
    """The reward function a recipe's ``fn`` names, or a ``RewardSpecError`` saying why not."""
    if spec.startswith("rlrun:"):
        try:
            return REWARDS.get(spec)
        except UnknownComponentError as err:
            raise RewardSpecError(str(err)) from None
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise RewardSpecError(
            f"reward {spec!r} is neither a built-in ({', '.join(REWARDS.names())}) "
            "nor an import path of the form 'pkg.module:function'"
        )
    try:
        module = import_user_module(module_name)
    except UserModuleError as err:
        raise RewardSpecError(f"reward {spec!r}: {err}") from None
    except ImportError as err:
        raise RewardSpecError(f"reward {spec!r}: cannot import module {module_name!r} ({err})") from err
    fn = module
    for part in attr.split("."):
        if not hasattr(fn, part):
            raise RewardSpecError(f"reward {spec!r}: module {module_name!r} has no attribute {attr!r}")
        fn = getattr(fn, part)
    if not callable(fn):
        raise RewardSpecError(f"reward {spec!r}: {attr!r} is a {type(fn).__name__}, not a function")
    return fn


def reward_name(spec: str) -> str:
    """The name a reward is logged under: ``rlrun:exact_match`` -> ``exact_match``, ``a.b:f`` -> ``f``."""
    return spec.rpartition(":")[2].rpartition(".")[2]
