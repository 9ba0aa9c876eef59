"""Agents' parts that do not touch the training loop: tools (`tools`, the built-ins `calculator` and
`sandbox`'s `python`), environments (`environments`), how calls and results are written
(`formats`), guarded calls with time limits (`guard`), and the recipe's `agent` section resolved
(`spec`). The episode runner that uses them is `rlrun.rollout.episodes`; docs/agents.md is the
manual."""

from rlrun.agents.environments import EnvironmentClass, derive_seed, load_environment
from rlrun.agents.formats import ChatTemplateFormat, Format, FormatError, PlainFormat
from rlrun.agents.spec import AgentSpec, AgentSpecError, build_agent, load_parts
from rlrun.agents.tools import TOOLS, Tool, ToolCall, ToolResult, as_tool, call_tool, resolve_tool

__all__ = [
    "TOOLS",
    "AgentSpec",
    "AgentSpecError",
    "ChatTemplateFormat",
    "EnvironmentClass",
    "Format",
    "FormatError",
    "PlainFormat",
    "Tool",
    "ToolCall",
    "ToolResult",
    "as_tool",
    "build_agent",
    "call_tool",
    "derive_seed",
    "load_environment",
    "load_parts",
    "resolve_tool",
]
