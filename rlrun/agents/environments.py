"""Environments: one instance per episode, made by a class (or any zero-argument factory) a
recipe names as ``pkg.module:Class``. Two kinds:

- ``tools``: TRL's ``environment_factory``, unchanged. Its public methods (not ``reset``, not
  ``get_reward``, not starting with ``_``) are the episode's tools, called on its instance, in
  addition to ``agent.tools``. ``reset(**row)`` gets the row's dataset columns as keywords and
  may return a string, which joins the prompt (TRL: appended to the last user message). An
  optional ``get_reward()`` scores the finished episode from the instance's state.
- ``step``: a reset/step environment. ``reset(**row)`` as above; after every model turn
  ``step(action)`` gets that turn's text and returns ``(observation, reward, done)``:
  ``observation`` (a string, or None for nothing) is appended for the model's next turn, ``reward``
  (a number) is that turn's reward, ``done`` ends the episode. An optional ``get_reward()`` adds a
  final reward. A step environment has no tools of its own.

``auto`` (the recipe's default) takes ``step`` for a class with a ``step`` method, else
``tools``; a TRL environment with a tool named ``step`` sets ``agent.environment_kind: tools``.

Seeds: a run derives one seed per episode from its seed, step and row (`derive_seed`), so a
resumed run replays the same episodes. ``reset`` receives it as ``seed=`` when it declares a
parameter named ``seed``; then a dataset column named ``seed`` is refused, since both cannot
be passed.
"""

from __future__ import annotations

import hashlib
import inspect
import types
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from rlrun.agents.tools import Tool, ToolSpecError, as_tool
from rlrun.user_code import ImportPathError, is_import_path, resolve_import_path

EnvironmentKind = Literal["tools", "step"]
RESERVED = ("reset", "get_reward")  # never tools (TRL's rule)
STEP = "step"


class EnvironmentSpecError(ValueError):
    """An environment a recipe names cannot be used (the message says which and why)."""


@dataclass(frozen=True)
class EnvironmentClass:
    """An environment a recipe names, checked: how to make one (`factory`), its `kind`, the names
    of its tool methods, and whether its reset takes a `seed` and it has `get_reward`."""

    spec: str
    factory: Callable[[], Any]
    kind: EnvironmentKind
    tool_names: tuple[str, ...]
    takes_seed: bool
    has_reward: bool

    def tools(self, instance: Any) -> list[Tool]:
        """The tools of one instance: its methods, bound to it."""
        return [as_tool(getattr(instance, name), where=f"{self.spec}.{name}") for name in self.tool_names]


def load_environment(spec: str, kind: str = "auto") -> EnvironmentClass:
    """The environment ``pkg.module:Class`` names, its kind decided (`auto`) and its tool methods
    checked (hints and docstrings), without making an instance. Raises EnvironmentSpecError."""
    if not is_import_path(spec):
        raise EnvironmentSpecError(
            f"environment {spec!r} is not an import path of the form 'pkg.module:Class'"
        )
    try:
        factory = resolve_import_path(spec)
    except ImportPathError as err:
        raise EnvironmentSpecError(f"environment {spec!r}: {err}") from None
    if not callable(factory):
        raise EnvironmentSpecError(f"environment {spec!r} is a {type(factory).__name__}, not a class")
    cls = factory if isinstance(factory, type) else None
    if cls is None or not callable(getattr(cls, "reset", None)):
        raise EnvironmentSpecError(
            f"environment {spec!r} must be a class with a `reset` method (TRL's environment_factory contract)"
        )
    chosen = kind if kind != "auto" else STEP if callable(getattr(cls, STEP, None)) else "tools"
    if chosen == STEP and not callable(getattr(cls, STEP, None)):
        raise EnvironmentSpecError(f"environment {spec!r} is a step environment but has no `step` method")
    names = () if chosen == STEP else tool_method_names(cls)
    for name in names:  # checked on the class: bound to a stand-in, as an instance would bind them
        try:
            as_tool(types.MethodType(_function_of(cls, name), object()), where=f"{spec}.{name}")
        except ToolSpecError as err:
            raise EnvironmentSpecError(str(err)) from None
    return EnvironmentClass(
        spec,
        cls,
        chosen,  # type: ignore[arg-type]  # "tools" | "step" by now
        names,
        takes_seed="seed" in _parameters(cls.reset),
        has_reward=callable(getattr(cls, "get_reward", None)),
    )


def tool_method_names(cls: type) -> tuple[str, ...]:
    """TRL's tools of an environment: its public methods (classmethods included, staticmethods
    not: `inspect.ismethod` on an instance), less `reset` and `get_reward`."""
    names = []
    for name, member in inspect.getmembers(cls):
        if name.startswith("_") or name in RESERVED:
            continue
        static = isinstance(inspect.getattr_static(cls, name), staticmethod)
        if (inspect.isfunction(member) and not static) or inspect.ismethod(member):
            names.append(name)
    return tuple(names)


def _function_of(cls: type, name: str) -> Callable[..., Any]:
    member = inspect.getattr_static(cls, name)
    return member.__func__ if isinstance(member, classmethod) else member


def _parameters(fn: Any) -> set[str]:
    try:
        return set(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        return set()


def reset_kwargs(
    environment: EnvironmentClass, columns: Mapping[str, Any], *, seed: int, skip: str | None
) -> dict[str, Any]:
    """What ``reset`` gets: the row's columns (less `skip`, the column choosing the
    environment), and ``seed`` when it declares one (module docstring)."""
    kwargs = {key: value for key, value in columns.items() if key != skip}
    if environment.takes_seed:
        if "seed" in kwargs:
            raise ValueError(
                f"{environment.spec}.reset declares `seed`, which rlrun passes (the episode's seed), and the "
                "dataset has a `seed` column too: rename the column"
            )
        kwargs["seed"] = seed
    return kwargs


def derive_seed(*parts: int) -> int:
    """A 63-bit seed from integers (the run's seed, step, row; a call's seed and turn), the same
    on every machine and Python version: a hash, so nearby inputs give unrelated seeds."""
    digest = hashlib.blake2b(b",".join(str(int(p)).encode() for p in parts), digest_size=8).digest()
    return int.from_bytes(digest, "little") >> 1
