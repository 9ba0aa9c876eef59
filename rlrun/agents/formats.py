"""How an episode is written in tokens: the prompt with its tools, the model's calls, the
results and observations appended for its next turn.

Token ids the model sampled are never re-tokenized: a format reads a turn's text to find its
calls, and computes only the ids appended after it (results, observations), as whole pieces.

``plain`` (models without a tool-aware chat template, like the embedded ones): a call is
``<call>NAME(ARGS)</call>`` inside the model's turn, ``NAME(ARGS)`` a Python call with literal
arguments (read with `ast`, never evaluated; positional arguments bind to the tool's parameters
in order, keywords by name). A turn ends at EOS or its token limit. After it each call's result,
in order, is appended as ``<result>TEXT</result>`` (an error as ``<result>error: MESSAGE</result>``),
encoded with ``tokenizer.encode(text, add_special_tokens=False)``, and the next turn follows
directly. An environment's reset text is appended to the prompt after a newline; a step
environment's observation is appended as it is. Tools are described in the prompt only with
``describe_tools`` (one line each, before the prompt).

``chat_template`` (TRL's way): the prompt is the row's chat messages rendered by the tokenizer's
chat template (or the recipe's `agent.chat_template`) with the tools' JSON schemas; calls are
Hermes/Qwen ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>``; results are ``tool``
messages and a step environment's observation a ``user`` message, rendered by the template, of
which the ids after the model's end-of-turn token are appended (TRL's `_get_tool_suffix_ids`).
A template that cannot render tools, calls and results (SmolLM2's own renders none of them) is
refused.
"""

from __future__ import annotations

import ast
import json
import re
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from rlrun.agents.tools import Tool, ToolCall, ToolResult

PLAIN_CALL = re.compile(r"<call>(.*?)(?:</call>|$)", re.DOTALL)
HERMES_CALL = re.compile(r"<tool_call>(.*?)(?:</tool_call>|$)", re.DOTALL)


class FormatError(ValueError):
    """A tokenizer or template that cannot carry this format (the message says why)."""


@dataclass(frozen=True)
class Prompt:
    """A row's prompt as the dataset gave it (its `ids`, and its chat `messages` where there are
    some), and the text its environment's reset returned (None: nothing)."""

    ids: Sequence[int]
    messages: Sequence[dict[str, Any]] | None = None
    reset_text: str | None = None


class Format(ABC):
    """What the episode runner asks of a format (module docstring)."""

    name: str

    def __init__(self, tokenizer: Any):
        self.tokenizer = tokenizer
        self.eos_token_id: int | None = tokenizer.eos_token_id
        pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else self.eos_token_id
        if pad is None:
            raise FormatError("the tokenizer has neither a pad nor an end-of-sequence token")
        self.pad_token_id: int = pad

    def encode(self, text: str) -> list[int]:
        return list(self.tokenizer.encode(text, add_special_tokens=False))

    def decode(self, ids: Sequence[int]) -> str:
        """A model turn's text (special tokens left out)."""
        return self.tokenizer.decode(list(ids), skip_special_tokens=True)

    @abstractmethod
    def prompt_ids(self, prompt: Prompt, tools: Sequence[Tool]) -> list[int]:
        """The episode's prompt: the row's, with its environment's reset text and the tools."""

    @abstractmethod
    def parse_calls(self, ids: Sequence[int]) -> list[ToolCall]:
        """The calls in a model turn, in order (unreadable ones with their `error`)."""

    @abstractmethod
    def results_ids(self, results: Sequence[ToolResult], *, ended: bool) -> list[int]:
        """What is appended after a turn (`ended`: with EOS) for its calls' results."""

    @abstractmethod
    def observation_ids(self, text: str, *, ended: bool) -> list[int]:
        """What is appended after a turn for a step environment's observation."""


class PlainFormat(Format):
    """``<call>NAME(ARGS)</call>`` / ``<result>TEXT</result>`` (module docstring)."""

    name = "plain"

    def __init__(self, tokenizer: Any, *, describe_tools: bool = False):
        super().__init__(tokenizer)
        self.describe_tools = describe_tools

    def prompt_ids(self, prompt: Prompt, tools: Sequence[Tool]) -> list[int]:
        ids = list(prompt.ids)
        if prompt.reset_text is not None:
            ids += self.encode("\n" + prompt.reset_text)
        if self.describe_tools and tools:
            # before the prompt, after its BOS when it starts with one
            start = 1 if ids[:1] == [self.tokenizer.bos_token_id] else 0
            header = self.encode("".join(tool.describe() + "\n" for tool in tools))
            ids = ids[:start] + header + ids[start:]
        return ids

    def parse_calls(self, ids: Sequence[int]) -> list[ToolCall]:
        return [
            parse_plain_call(match.group(0), match.group(1))
            for match in PLAIN_CALL.finditer(self.decode(ids))
        ]

    def results_ids(self, results: Sequence[ToolResult], *, ended: bool) -> list[int]:
        return self.encode("".join(f"<result>{plain_result(r)}</result>" for r in results))

    def observation_ids(self, text: str, *, ended: bool) -> list[int]:
        return self.encode(text)


PLAIN_PROBE = "<call>f('a', 1)</call><result>error: x</result>"


def plain_format_problem(tokenizer: Any) -> str | None:
    """Why this tokenizer cannot write the plain format's calls and results (None when it can):
    they must read back as written (rlrun:tiny-base's vocabulary has no `<`, `>` or quotes)."""
    back = tokenizer.decode(tokenizer.encode(PLAIN_PROBE, add_special_tokens=False), skip_special_tokens=True)
    if back == PLAIN_PROBE:
        return None
    return f"the tokenizer cannot write the plain format's calls: {PLAIN_PROBE!r} reads back as {back!r}"


def plain_result(result: ToolResult) -> str:
    return f"error: {result.error}" if result.error is not None else result.text


def parse_plain_call(written: str, inner: str) -> ToolCall:
    """``NAME(ARGS)`` with literal arguments, or the reason it is not one."""
    if not written.endswith("</call>"):
        return ToolCall(written, error="the call has no closing </call>")
    try:
        node = ast.parse(inner.strip(), mode="eval").body
    except SyntaxError:
        return ToolCall(written, error=f"not a call NAME(ARGS): {inner.strip()!r}")
    if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name):
        return ToolCall(written, error=f"not a call NAME(ARGS): {inner.strip()!r}")
    try:
        if any(isinstance(a, ast.Starred) for a in node.args) or any(k.arg is None for k in node.keywords):
            raise ValueError
        args = tuple(ast.literal_eval(a) for a in node.args)
        kwargs = {k.arg: ast.literal_eval(k.value) for k in node.keywords if k.arg is not None}
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return ToolCall(
            written, node.func.id, error="arguments must be literals (numbers, strings, lists, ...)"
        )
    return ToolCall(written, node.func.id, args, kwargs)


class ChatTemplateFormat(Format):
    """Hermes/Qwen tool calls through the chat template (module docstring)."""

    name = "chat_template"

    def __init__(
        self,
        tokenizer: Any,
        *,
        chat_template: str | None = None,
        template_kwargs: dict[str, Any] | None = None,
    ):
        super().__init__(tokenizer)
        self.chat_template = chat_template
        self.template_kwargs = dict(template_kwargs or {})
        problem = tool_template_problem(tokenizer, chat_template)
        if problem is not None:
            raise FormatError(problem)

    def _render(self, messages: Sequence[dict[str, Any]], **kwargs: Any) -> list[int]:
        ids = self.tokenizer.apply_chat_template(
            list(messages),
            tokenize=True,
            return_dict=False,
            chat_template=self.chat_template,
            **self.template_kwargs,
            **kwargs,
        )
        return list(ids)

    def prompt_ids(self, prompt: Prompt, tools: Sequence[Tool]) -> list[int]:
        if not prompt.messages:
            raise FormatError(
                "the chat_template format renders each prompt from its chat messages; this row has none"
            )
        messages = [dict(m) for m in prompt.messages]
        if prompt.reset_text is not None:  # TRL: appended to the last message
            messages[-1]["content"] = f"{messages[-1].get('content', '')}{prompt.reset_text}"
        return self._render(messages, tools=[t.schema for t in tools] or None, add_generation_prompt=True)

    def parse_calls(self, ids: Sequence[int]) -> list[ToolCall]:
        turn = [i for i in ids if i != self.eos_token_id]
        text = self.tokenizer.decode(turn, skip_special_tokens=False)
        return [parse_hermes_call(match.group(0), match.group(1)) for match in HERMES_CALL.finditer(text)]

    def results_ids(self, results: Sequence[ToolResult], *, ended: bool) -> list[int]:
        messages = [{"role": "tool", "name": r.name, "content": hermes_result(r)} for r in results]
        return self._suffix(messages, ended=ended, called=results[0].name if results else "tool")

    def observation_ids(self, text: str, *, ended: bool) -> list[int]:
        return self._suffix([{"role": "user", "content": text}], ended=ended, called=None)

    def _suffix(self, messages: list[dict[str, Any]], *, ended: bool, called: str | None) -> list[int]:
        """The ids the template renders for `messages` after an assistant turn (with a call to
        `called`, or plain), from that turn's end-of-turn token on (TRL's `_get_tool_suffix_ids`).
        A turn cut before its EOS gets the EOS first, as context."""
        calls = [{"type": "function", "function": {"name": called, "arguments": {}}}] if called else []
        turn = {"role": "assistant", "content": "", **({"tool_calls": calls} if calls else {})}
        before = self._render([{"role": "user", "content": "x"}, turn], add_generation_prompt=False)
        after = self._render([{"role": "user", "content": "x"}, turn, *messages], add_generation_prompt=True)
        ends = [i for i, token in enumerate(before) if token == self.eos_token_id]
        if ends:
            before = before[: ends[-1] + 1]
        if after[: len(before)] != before:
            raise FormatError(
                "the chat template renders earlier messages differently once results follow them"
            )
        suffix = after[len(before) :]
        return suffix if ended or self.eos_token_id is None else [self.eos_token_id, *suffix]


def hermes_result(result: ToolResult) -> str:
    """A result's content as TRL writes it: the text, or ``{'error': MESSAGE}`` for an error."""
    return str({"error": result.error}) if result.error is not None else result.text


def parse_hermes_call(written: str, inner: str) -> ToolCall:
    """``{"name": NAME, "arguments": {...}}`` (arguments may be a JSON string, or absent)."""
    if not written.endswith("</tool_call>"):
        return ToolCall(written, error="the call has no closing </tool_call>")
    try:
        call = json.loads(inner)
    except json.JSONDecodeError as exc:
        return ToolCall(written, error=f"the call is not JSON ({exc.msg})")
    if not isinstance(call, dict) or not isinstance(call.get("name"), str):
        return ToolCall(written, error='a call is {"name": ..., "arguments": {...}}')
    arguments = call.get("arguments") or {}
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except json.JSONDecodeError as exc:
            return ToolCall(written, call["name"], error=f"the arguments are not JSON ({exc.msg})")
    if not isinstance(arguments, dict):
        return ToolCall(written, call["name"], error="the arguments must be a JSON object")
    return ToolCall(written, call["name"], (), arguments)


_SENTINELS = (
    "tool_name_4f2a",
    "tool_description_9c1e",
    "arg_key_7b3d",
    "arg_value_2e8f",
    "tool_content_5a6c",
)


def tool_template_problem(tokenizer: Any, chat_template: str | None) -> str | None:
    """Why this template cannot carry tool calls (None when it can): it must render the tools'
    descriptions, an assistant's calls and the tool results. SmolLM2's own template renders none
    of the first two and so is refused, where `apply_chat_template(..., tools=[f])` would
    silently leave the tools out."""
    name, description, key, value, content = _SENTINELS
    if chat_template is None and getattr(tokenizer, "chat_template", None) is None:
        return "the tokenizer has no chat template; name one with tool support in `agent.chat_template`"
    schema = {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {"type": "object", "properties": {key: {"type": "string", "description": key}}},
        },
    }
    messages = [
        {"role": "user", "content": "hi"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"type": "function", "function": {"name": name, "arguments": {key: value}}}],
        },
        {"role": "tool", "name": name, "content": content},
    ]
    try:
        text = tokenizer.apply_chat_template(
            messages, tools=[schema], tokenize=False, chat_template=chat_template
        )
    except Exception as exc:  # noqa: BLE001 (a template error of any kind: it cannot carry tools)
        return f"the chat template fails on a tool conversation ({type(exc).__name__}: {exc})"
    missing = [
        what
        for what, mark in (
            ("the tools' descriptions", description),
            ("the model's calls", value),
            ("the tool results", content),
        )
        if mark not in text
    ]
    if missing:
        return f"the chat template has no tool support: it does not render {' or '.join(missing)}"
    return None
