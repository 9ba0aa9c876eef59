"""A recipe's `agent` section resolved: its tools and environment classes loaded and checked,
its format built on the tokenizer. `AgentSpec` is what the episode runner
(`rlrun.rollout.episodes`) is given."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rlrun.agents.environments import EnvironmentClass, EnvironmentSpecError, load_environment
from rlrun.agents.formats import ChatTemplateFormat, Format, PlainFormat
from rlrun.agents.tools import Tool, ToolSpecError, resolve_tool
from rlrun.schema.agent import Agent

KeyPath = tuple[str | int, ...]  # a key under `agent`, e.g. ("tools", 0)


IMPORT_FIX = (
    "check the import path, and give each tool (and each public method of a TRL environment) a type hint "
    "on every parameter and a Google-style docstring"
)
NAME_FIX = "rename one of them: the model calls tools by their function's name"


@dataclass(frozen=True)
class Problem:
    """One thing wrong in an `agent` section: where (a key path under `agent`), what, the fix."""

    key: KeyPath
    message: str
    fix: str = IMPORT_FIX


class AgentSpecError(ValueError):
    """What in an `agent` section cannot be used: every Problem found."""

    def __init__(self, problems: list[Problem]):
        self.problems = problems
        super().__init__("; ".join(f"agent.{'.'.join(map(str, p.key))}: {p.message}" for p in problems))


@dataclass(frozen=True)
class AgentSpec:
    """Everything an episode needs but the model: the `format`, the standalone `tools`, the
    environment classes (`{None: one}` for `agent.environment`, `{name: ...}` chosen per row by
    `environment_column` for `agent.environments`, `{}` for none) and the `limits`: the recipe's
    `agent` section, whose max_turns, max_turn_tokens, max_calls_per_turn, tool_timeout_s,
    env_timeout_s, tool_output_chars and env_error_reward the runner reads."""

    format: Format
    tools: tuple[Tool, ...] = ()
    environments: Mapping[str | None, EnvironmentClass] = field(default_factory=dict)
    environment_column: str | None = None
    limits: Agent = field(default_factory=Agent)


def load_parts(agent: Agent) -> tuple[tuple[Tool, ...], dict[str | None, EnvironmentClass]]:
    """The section's tools and environment classes, imported and checked (hints, docstrings,
    `reset`, a tool name used twice). Raises AgentSpecError with every problem."""
    problems: list[Problem] = []
    tools: dict[int, Tool] = {}  # by index in agent.tools
    for index, spec in enumerate(agent.tools):
        try:
            tools[index] = resolve_tool(spec, settings=agent)
        except ToolSpecError as err:
            problems.append(Problem(("tools", index), str(err)))
    environments: dict[str | None, EnvironmentClass] = {}
    for key, name, spec in _environment_entries(agent):
        try:
            environments[name] = load_environment(spec, agent.environment_kind)
        except EnvironmentSpecError as err:
            problems.append(Problem(key, str(err)))
    problems += _name_clashes(tools, environments)
    if problems:
        raise AgentSpecError(problems)
    return tuple(tools.values()), environments


def _environment_entries(agent: Agent) -> Iterator[tuple[KeyPath, str | None, str]]:
    if agent.environment is not None:
        yield ("environment",), None, agent.environment
    for name, spec in agent.environments.items():
        yield ("environments", name), name, spec


def _name_clashes(tools: dict[int, Tool], environments: dict[str | None, EnvironmentClass]) -> list[Problem]:
    """A name the model calls must mean one tool in every episode."""
    problems: list[Problem] = []
    seen: dict[str, int] = {}
    for index, tool in tools.items():
        if tool.name in seen:
            message = f"agent.tools.{seen[tool.name]} is named {tool.name!r} too"
            problems.append(Problem(("tools", index), message, NAME_FIX))
        seen.setdefault(tool.name, index)
    for env_name, environment in environments.items():
        key: KeyPath = ("environment",) if env_name is None else ("environments", env_name)
        problems += [
            Problem(
                key, f"{environment.spec} has a tool method {method!r}, as agent.tools has a tool", NAME_FIX
            )
            for method in environment.tool_names
            if method in seen
        ]
    return problems


def build_agent(
    agent: Agent,
    *,
    tokenizer: Any,
    template_kwargs: dict[str, Any] | None = None,
) -> AgentSpec:
    """The runner's spec of a valid, enabled `agent` section, for this tokenizer;
    `template_kwargs`: data.chat_template_kwargs.
    Raises AgentSpecError (tools, environments) or FormatError (a template without tool support)."""
    tools, environments = load_parts(agent)
    if agent.format == "plain":
        fmt: Format = PlainFormat(tokenizer, describe_tools=agent.describe_tools)
    else:
        template = Path(agent.chat_template).read_text(encoding="utf-8") if agent.chat_template else None
        fmt = ChatTemplateFormat(tokenizer, chat_template=template, template_kwargs=template_kwargs)
    column = agent.environment_column if agent.environments else None
    return AgentSpec(fmt, tools, environments, column, agent)
