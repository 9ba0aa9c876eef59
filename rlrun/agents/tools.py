"""Tools: typed Python functions with Google-style docstrings, as TRL's ``GRPOTrainer(tools=[...])``
takes them.

A tool's JSON schema (what a chat template shows the model) comes from its type hints and
docstring through transformers' `get_json_schema`, the function TRL relies on; a tool without
them is refused, naming it. The model calls a tool by its function name. Built-ins are
``rlrun:calculator`` and ``rlrun:python``; a user tool is ``pkg.module:function``.

`call_tool` runs one call and turns everything a tool can do wrong (raise, hang past its limit,
return something that is not text, return megabytes) into a result the model sees and an error
kind the counters record; nothing a tool does stops the run.
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from rlrun.agents.calculator import calculator
from rlrun.agents.guard import RAISED, TIMEOUT, guarded_call
from rlrun.agents.sandbox import make_python_tool
from rlrun.registry import Registry
from rlrun.schema.agent import Agent
from rlrun.user_code import ImportPathError, resolve_named

TOOLS = Registry(
    "tool"
)  # built-in tools by name; each entry builds its tool from the recipe's `agent` section

# Error kinds of a call, besides guard's RAISED and TIMEOUT
NOT_TEXT = "not_text"  # the tool returned something with no text form (bytes, an object)
MALFORMED = "malformed"  # the call could not be read (bad JSON, bad syntax, an unclosed tag)
UNKNOWN_TOOL = "unknown_tool"  # it names no tool of its episode
BAD_ARGUMENTS = "bad_arguments"  # missing, extra or mistyped arguments
TOO_MANY_CALLS = "too_many_calls"  # beyond agent.max_calls_per_turn in one turn
CALL_ERRORS = (RAISED, TIMEOUT, NOT_TEXT, MALFORMED, UNKNOWN_TOOL, BAD_ARGUMENTS, TOO_MANY_CALLS)

# What TRL renders with str(): a tool may return numbers and JSON-like values, not only text.
_TEXT_LIKE = (str, int, float, bool, type(None), list, dict, tuple)


class ToolSpecError(ValueError):
    """A tool a recipe names cannot be used (the message names it and says why)."""


@dataclass(frozen=True)
class Tool:
    """A callable the model may call, by `name`, with the JSON `schema` a chat template renders."""

    name: str
    fn: Callable[..., Any]
    schema: dict[str, Any]
    signature: inspect.Signature
    hints: dict[str, Any] = field(default_factory=dict)

    def describe(self) -> str:
        """One line for a prompt: `calculator(expression: string) - Evaluate ...`."""
        function = self.schema["function"]
        properties = function.get("parameters", {}).get("properties", {})
        params = ", ".join(f"{name}: {spec.get('type', 'any')}" for name, spec in properties.items())
        return f"{self.name}({params}) - {function.get('description', '')}"


@dataclass(frozen=True)
class ToolCall:
    """One call as the model wrote it: `name` with `args`/`kwargs`, or why it cannot be read
    (`error`, of kind MALFORMED) when `name` is None. `text` is the call as written."""

    text: str
    name: str | None = None
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = field(default_factory=dict)
    error: str | None = None


@dataclass(frozen=True)
class ToolResult:
    """What the model sees of one call: `text`, or an `error` message of kind `error_kind`."""

    name: str
    text: str = ""
    error: str | None = None
    error_kind: str | None = None
    seconds: float = 0.0
    truncated: bool = False  # the output was longer than agent.tool_output_chars and was cut


def as_tool(fn: Any, *, name: str | None = None, where: str = "") -> Tool:
    """`fn` as a tool: its schema from its hints and Google-style docstring (transformers'
    `get_json_schema`). Raises ToolSpecError naming the tool (`where`: how the recipe names it)."""
    from transformers.utils import get_json_schema  # transformers loads only for agent recipes

    shown = where or getattr(fn, "__name__", repr(fn))
    if not callable(fn):
        raise ToolSpecError(f"the tool {shown} is a {type(fn).__name__}, not a function")
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):
        raise ToolSpecError(f"the tool {shown} has no signature rlrun can read") from None
    variadic = [p.name for p in signature.parameters.values() if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    if variadic:
        raise ToolSpecError(
            f"the tool {shown} takes *{variadic[0]}: a tool's parameters must be named, typed and documented"
        )
    try:
        schema = get_json_schema(fn)
    except Exception as exc:  # noqa: BLE001 (transformers' DocstringParsingException, TypeHintParsingException, ...)
        raise ToolSpecError(
            f"the tool {shown} cannot be described to the model: {str(exc).rstrip('.!')}. A tool needs a type hint on every "
            "parameter and a Google-style docstring (a description, then `Args:` with one line per parameter)"
        ) from None
    tool_name = name or schema["function"]["name"]
    return Tool(tool_name, fn, schema, signature, _hints(fn))


def _hints(fn: Any) -> dict[str, Any]:
    try:
        return typing.get_type_hints(fn)
    except Exception:  # noqa: BLE001 (get_json_schema read them; a forward reference it resolved differently)
        return {}


def resolve_tool(spec: str, *, settings: Agent) -> Tool:
    """The tool a recipe's `agent.tools` entry names: ``rlrun:<name>`` (built from `settings`,
    the recipe's `agent` section) or ``pkg.module:function``."""
    if spec.startswith("rlrun:"):
        if spec not in TOOLS:
            raise ToolSpecError(f"unknown built-in tool {spec!r}; built-ins: {', '.join(TOOLS.names())}")
        return as_tool(TOOLS.get(spec)(settings), where=spec)
    try:
        fn = resolve_named(spec, what="tool", builtins=TOOLS.names())
    except ImportPathError as err:
        raise ToolSpecError(str(err)) from None
    return as_tool(fn, where=spec)


def call_tool(
    tools: Mapping[str, Tool], call: ToolCall, *, timeout_s: float, output_chars: int
) -> ToolResult:
    """Run one call; whatever goes wrong is the result's `error` (module docstring)."""
    name = call.name or "?"
    if call.error is not None or call.name is None:
        return ToolResult(name, error=call.error or "the call cannot be read", error_kind=MALFORMED)
    tool = tools.get(call.name)
    if tool is None:
        known = ", ".join(sorted(tools)) or "none"
        return ToolResult(name, error=f"unknown tool {call.name!r} (tools: {known})", error_kind=UNKNOWN_TOOL)
    problem = argument_problem(tool, call.args, call.kwargs)
    if problem is not None:
        return ToolResult(name, error=problem, error_kind=BAD_ARGUMENTS)
    outcome = guarded_call(tool.fn, call.args, call.kwargs, timeout_s=timeout_s)
    if outcome.error is not None:
        return ToolResult(name, error=outcome.message, error_kind=outcome.error, seconds=outcome.seconds)
    value = outcome.value
    if not isinstance(value, _TEXT_LIKE):
        return ToolResult(
            name,
            error=f"the tool returned a {type(value).__name__}, not text",
            error_kind=NOT_TEXT,
            seconds=outcome.seconds,
        )
    text = value if isinstance(value, str) else str(value)  # TRL's rendering of a non-text result
    return ToolResult(name, text[:output_chars], seconds=outcome.seconds, truncated=len(text) > output_chars)


def argument_problem(tool: Tool, args: Sequence[Any], kwargs: Mapping[str, Any]) -> str | None:
    """Why `tool` cannot be called with these arguments (missing, extra, of a type its hints
    refuse), or None. Values are checked, never converted: the tool gets what the model wrote."""
    try:
        bound = tool.signature.bind(*args, **kwargs)
    except TypeError as exc:
        return f"{tool.name}: {exc}"
    for param, value in bound.arguments.items():
        hint = tool.hints.get(param)
        if hint is not None and (problem := _type_problem(hint, value)):
            return f"{tool.name}: argument {param!r} {problem}"
    return None


def _type_problem(hint: Any, value: Any) -> str | None:
    from pydantic import TypeAdapter, ValidationError

    try:
        TypeAdapter(hint).validate_python(value, strict=True)
    except ValidationError as exc:
        return exc.errors()[0]["msg"].lower().replace("input ", "", 1)
    except Exception:  # noqa: BLE001 (a hint pydantic cannot check, e.g. an arbitrary class: not checked)
        return None
    return None


@TOOLS.register("rlrun:calculator")
def _calculator_tool(settings: Agent) -> Callable[..., str]:
    """calculator(expression): exact integer and decimal arithmetic (+ - * / // % ** and parentheses)."""
    return calculator


@TOOLS.register("rlrun:python")
def _python_tool(settings: Agent) -> Callable[..., str]:
    """python(code): runs Python in a sandboxed process and returns what it prints (limits: agent.python)."""
    return make_python_tool(
        settings.python, wall_s=settings.tool_timeout_s, output_chars=settings.tool_output_chars
    )
