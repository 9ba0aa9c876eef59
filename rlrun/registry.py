"""Named component registries: the recipe names a component, the registry finds it.

Every kind of pluggable part (advantage estimator, policy loss, KL estimator, distillation
loss, rollout engine, built-in reward) has one `Registry`. Components register themselves
with a decorator at import time; users add their own by naming a module in the recipe
(`algorithm.plugins: [my_pkg.algos]`), which is imported before names are checked.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

F = TypeVar("F", bound=Callable[..., Any])


class UnknownComponentError(KeyError):
    """A recipe named a component that no registry holds."""

    def __init__(self, kind: str, name: str, valid: list[str]):
        self.kind, self.name, self.valid = kind, name, valid
        super().__init__(f"unknown {kind} {name!r}; valid: {', '.join(valid)}")

    def __str__(self) -> str:  # KeyError would quote the whole message
        return self.args[0]


class Registry:
    """A name -> callable table for one kind of component."""

    def __init__(self, kind: str):
        self.kind = kind
        self._entries: dict[str, Callable[..., Any]] = {}

    def register(self, name: str, *aliases: str) -> Callable[[F], F]:
        """Decorator: register `fn` under `name` (and any aliases)."""

        def decorate(fn: F) -> F:
            for key in (name, *aliases):
                if key in self._entries and self._entries[key] is not fn:
                    raise ValueError(f"{self.kind} {key!r} is already registered")
                self._entries[key] = fn
            return fn

        return decorate

    def get(self, name: str) -> Callable[..., Any]:
        try:
            return self._entries[name]
        except KeyError:
            raise UnknownComponentError(self.kind, name, self.names()) from None

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def names(self) -> list[str]:
        return sorted(self._entries)

    def describe(self) -> dict[str, str]:
        """Each name with the first line of its component's docstring."""
        return {name: _first_line(fn.__doc__) for name, fn in sorted(self._entries.items())}


def _first_line(doc: str | None) -> str:
    return (doc or "").strip().splitlines()[0] if (doc or "").strip() else ""


def load_plugins(modules: Iterable[str]) -> None:
    """Import user modules named in a recipe so their components register themselves."""
    for module in modules:
        importlib.import_module(module)
