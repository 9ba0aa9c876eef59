"""Named component registries: the recipe names a component, the registry finds it.

Every kind of pluggable part (advantage estimator, policy loss, KL estimator, distillation
loss, rollout engine, built-in reward) has one `Registry`. Components register themselves
with a decorator at import time, declaring what they need from the trainer
(`@register_advantage("grpo", needs_groups=True)`); users add their own by naming a module in
the recipe (`algorithm.plugins: [my_pkg.algos]`), which is imported before names are checked,
and get the same validation as the built-ins.
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True)
class ComponentNeeds:
    """What a component needs from the trainer, declared where it registers.

    The validation (`recipes/rules.py`) and the trainer (`Session.needs`) read these instead of
    lists of names, so a plugin component is checked and served like a built-in one.
    """

    needs_groups: bool = False  # compares each response with the others of its prompt: rollout.n >= 2
    needs_critic: bool = False  # value estimates (`values`) from a critic
    needs_greedy_baseline: bool = False  # the reward of one greedy response per prompt (`reward_baselines`)
    needs_old_log_probs: bool = False  # the sampling policy's log-probs (`old_log_probs`)
    needs_sum_pi_squared: bool = False  # Σ_v π(v)² at each response position (`sum_pi_squared`)
    draws_random: bool = False  # draws random numbers: takes a seeded `generator` (torch.Generator)
    # a distillation loss whose gradient, back-propagated directly, does not depend on the teacher
    # (k1: log p_student - log p_teacher), so it teaches only as a policy-gradient reward
    needs_policy_gradient: bool = False
    # a distillation loss over the teacher's top-k tokens: the teacher's top-k log-probs and ids
    # (`teacher_topk_log_probs`, `teacher_topk_ids`) and the student's logits (`student_logits`)
    needs_teacher_topk: bool = False
    # a rollout engine whose log-probs are the training model's own forward (same module, same
    # kernels): in float32 without autocast they are the old policy's until the policy moves
    trainer_log_probs: bool = False
    # an estimator whose statistics run over response positions (column t of every row the same
    # step): it cannot score an agent's episodes, whose sampled tokens have holes between turns
    needs_contiguous_response: bool = False
    # Advice, not needs: validation gives a notice when a recipe departs from it.
    loss_agg_mode: str | None = None  # a policy loss defined with this aggregation (GSPO: one per sequence)
    # an estimator that, without std-normalisation (Dr.GRPO), is meant with this aggregation
    unnormalised_agg_mode: str | None = None


class UnknownComponentError(KeyError):
    """A recipe named a component that no registry holds."""

    def __init__(self, kind: str, name: str, valid: list[str]):
        self.kind, self.name, self.valid = kind, name, valid
        super().__init__(f"unknown {kind} {name!r}; valid: {', '.join(valid)}")

    def __str__(self) -> str:  # KeyError would quote the whole message
        return self.args[0]


class Registry:
    """A name -> callable table for one kind of component, each with its declared needs."""

    def __init__(self, kind: str):
        self.kind = kind
        self._entries: dict[str, Callable[..., Any]] = {}
        self._needs: dict[str, ComponentNeeds] = {}

    def register(self, name: str, *aliases: str, **needs: Any) -> Callable[[F], F]:
        """Decorator: register `fn` under `name` (and any aliases) with its `ComponentNeeds`
        given as keywords (`needs_groups=True`); an unknown keyword is a TypeError at import."""
        declared = ComponentNeeds(**needs)

        def decorate(fn: F) -> F:
            for key in (name, *aliases):
                if key in self._entries and self._entries[key] is not fn:
                    raise ValueError(f"{self.kind} {key!r} is already registered")
                self._entries[key] = fn
                self._needs[key] = declared
            return fn

        return decorate

    def get(self, name: str) -> Callable[..., Any]:
        try:
            return self._entries[name]
        except KeyError:
            raise UnknownComponentError(self.kind, name, self.names()) from None

    def needs(self, name: str) -> ComponentNeeds:
        """What `name` declared it needs; nothing for a name no one registered (the name check
        reports those)."""
        return self._needs.get(name, ComponentNeeds())

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def names(self) -> list[str]:
        return sorted(self._entries)

    def names_where(self, test: Callable[[ComponentNeeds], bool]) -> list[str]:
        """The names whose needs pass `test` (`lambda n: n.needs_groups`)."""
        return [name for name in self.names() if test(self._needs[name])]

    def describe(self) -> dict[str, str]:
        """Each name with the first line of its component's docstring."""
        return {name: _first_line(fn.__doc__) for name, fn in sorted(self._entries.items())}

    def keywords(self, name: str) -> list[str]:
        """The parameters of `name` that can be passed by keyword (its `**_` catch-all aside)."""
        kinds = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
        return [p.name for p in inspect.signature(self.get(name)).parameters.values() if p.kind in kinds]

    def keyword_types(self, name: str) -> dict[str, Any]:
        """The type hint of each annotated parameter of `name` (its interface: recipe values of
        `*_kwargs` are checked against them)."""
        try:
            return typing.get_type_hints(self.get(name))
        except Exception:  # noqa: BLE001 (a plugin's hint that does not resolve: its values go unchecked)
            return {}


def _first_line(doc: str | None) -> str:
    return (doc or "").strip().splitlines()[0] if (doc or "").strip() else ""
