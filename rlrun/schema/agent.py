"""`agent`: multi-turn episodes. The model acts, a tool or an environment answers, the model acts
again; the episode is scored. Tools are TRL's (typed, documented Python functions) and
environments TRL's `environment_factory` classes, unchanged, or reset/step environments
(docs/agents.md)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from rlrun.schema.base import PositiveFloat, PositiveInt, Section

ImportPath = Annotated[str, Field(min_length=1)]


class PythonSandbox(Section):
    """The limits of one run of the built-in `rlrun:python` tool (its wall clock is
    agent.tool_timeout_s, what it may print agent.tool_output_chars)."""

    cpu_time_s: PositiveInt = 2
    """CPU seconds the code may use (whole seconds: RLIMIT_CPU)."""
    memory_mb: PositiveInt = 256
    """Address space of the code's process in MiB (RLIMIT_AS)."""
    max_processes: PositiveInt = 8
    """Processes the code may start, itself included (RLIMIT_NPROC above what its user already runs)."""
    disk_mb: PositiveInt = 16
    """MiB the code may write: its whole folder (a tmpfs) where a private root is possible, else per file."""


class Agent(Section):
    enabled: bool = False
    """Run multi-turn episodes: each response is the model's turns and what tools or an environment answered."""
    format: Literal["plain", "chat_template"] = "plain"
    """How calls and results are written: plain (<call>NAME(ARGS)</call> / <result>TEXT</result>) | chat_template (the template's tool messages, Hermes <tool_call> JSON)"""
    tools: list[ImportPath] = Field(default_factory=list)
    """Tools the model may call: rlrun:calculator, rlrun:python or "pkg.module:function" (type hints and a Google-style docstring)."""
    environment: ImportPath | None = None
    """"pkg.module:Class": one instance per episode (TRL's environment_factory, or a reset/step environment); null = none."""
    environments: dict[str, ImportPath] = Field(default_factory=dict)
    """Several environments by name, chosen per row by the data column agent.environment_column (TRL's dict environment_factory)."""
    environment_column: str = Field("environment", min_length=1)
    """The data column naming each row's environment (with agent.environments)."""
    environment_kind: Literal["auto", "tools", "step"] = "auto"
    """tools = TRL's environment (public methods are tools) | step = reset/step | auto = step when the class has a step method"""
    chat_template: str | None = None
    """A Jinja chat template file with tool support (format chat_template), for a model whose own has none; null = the tokenizer's."""
    describe_tools: bool = False
    """plain format: write one line per tool (its signature and description) before each prompt."""
    max_turns: PositiveInt = 4
    """Model turns per episode (TRL's max_tool_calling_iterations + 1)."""
    max_turn_tokens: PositiveInt = 32
    """Tokens the model samples in one turn. An episode's tokens after the prompt, turns and results together, are its response: rollout.max_response_tokens bounds them."""
    max_calls_per_turn: PositiveInt = 4
    """Tool calls run per turn; the model gets an error for each one beyond."""
    tool_timeout_s: PositiveFloat = 5.0
    """Wall-clock seconds a tool call may take before it is stopped (an error the model sees)."""
    env_timeout_s: PositiveFloat = 30.0
    """Wall-clock seconds an environment's reset, step or get_reward may take."""
    tool_output_chars: PositiveInt = 1000
    """Characters of a tool's output kept (the rest is cut)."""
    env_error_reward: float = 0.0
    """The final reward of an episode whose environment failed (reset, step or get_reward raised or timed out)."""
    python: PythonSandbox = PythonSandbox()
    """Limits of the built-in rlrun:python tool's sandbox."""
