"""verl's multi-turn rollout, read for `rlrun convert verl`.

In verl 0.9.1 a row runs tools only when its agent loop is `tool_agent`: the row's `agent_name`
column, else `actor_rollout_ref.rollout.agent.default_agent_loop` (`single_turn_agent`);
`multi_turn.enable` is read by no part of main_ppo's rollout. So:

- no row runs `tool_agent`: verl samples one response per prompt, as rlrun does, and the
  `multi_turn.*` keys change nothing, except that the tools' schemas count in each prompt's length
  when `data.filter_overlong_prompts` drops prompts (refused: rlrun measures the prompt alone);
- rows run `tool_agent`: refused, every reason listed. verl's tools are BaseTool classes
  (`tool_config_path`) or a file of `@function_tool` functions (`function_tool_path`), and its
  loop drops the calls beyond `max_parallel_calls` and those it cannot parse, and marks a cut
  tool result; rlrun's episodes (docs/agents.md) run functions named by import path, answer
  every call and cut a result unmarked.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from rlrun.facts.verl_keys import column_values, columns, files
from rlrun.recipes.yaml_io import RecipeLoader

ROLLOUT = "actor_rollout_ref.rollout."
MULTI_TURN = ROLLOUT + "multi_turn."
AGENT_LOOP = ROLLOUT + "agent.default_agent_loop"
LOOPS = ("single_turn_agent", "tool_agent")  # verl's built-in agent loops (others are user code)
TOOL_PATHS = ("tool_config_path", "function_tool_path")
# verl's example tools (verl/tools/ up to 0.8; 0.9.1 ships none) and why rlrun has no equal.
KNOWN_TOOLS = {
    "Gsm8kTool": "it scores the model's answer against the row's ground truth and tells the model its reward",
    "SandboxFusionTool": "it runs code on a Sandbox Fusion server; rlrun:python runs it in a local sandbox "
    "with its own limits and output",
    "SearchTool": "it queries a retrieval server",
    "MCPSearchTool": "it calls an MCP server",
    "Geo3kTool": "it scores a geometry answer and tells the model its reward",
    "ImageZoomInTool": "it returns images; rlrun trains on text",
}


def agent_refusals(settings: dict[str, Any]) -> list[str]:
    """Why rlrun cannot run the multi-turn part of verl `settings` as verl would (module docstring);
    empty when no row runs tools, or when it can."""
    loops, unread = _row_loops(settings)
    reasons = [
        f"{where}={loop}: an agent loop rlrun does not have (verl's are {' and '.join(LOOPS)})"
        for where, loop in loops
        if loop not in LOOPS
    ]
    tools = {name: settings.get(MULTI_TURN + name) for name in TOOL_PATHS if settings.get(MULTI_TURN + name)}
    if any(loop == "tool_agent" for _, loop in loops):
        where = next(where for where, loop in loops if loop == "tool_agent")
        return reasons + _tool_agent_refusals(settings, where, tools)
    if tools and unread:
        reasons.append(
            f"{MULTI_TURN}{next(iter(tools))}: verl runs tools in the rows whose agent_name column says "
            f"tool_agent, and {unread} cannot be read here to tell whether any does"
        )
    measured = {key: settings.get(key) for name in TOOL_PATHS for key in (MULTI_TURN + name, f"data.{name}")}
    measured = {key: value for key, value in measured.items() if value}
    if measured and settings.get("data.filter_overlong_prompts"):
        key = next(iter(measured))
        reasons.append(
            f"{key}={measured[key]} with data.filter_overlong_prompts=True: verl measures each prompt with the "
            "tools' schemas rendered into it, so it drops other prompts than rlrun, which measures the prompt alone"
        )
    return reasons


def single_turn_note(settings: dict[str, Any]) -> str | None:
    """What the report says when multi-turn keys are set and no row runs tools (None otherwise)."""
    if not any(key.startswith(MULTI_TURN) for key in settings):
        return None
    return (
        "no row runs verl's tool_agent loop (no agent_name column says so and "
        f"{AGENT_LOOP} is single_turn_agent), so verl 0.9.1 samples one response per prompt and "
        f"{MULTI_TURN}* change nothing; this recipe samples one response per prompt too (agent.enabled: false)"
    )


def _row_loops(settings: dict[str, Any]) -> tuple[list[tuple[str, str]], str | None]:
    """(where, agent loop) for the default and each data file's agent_name values, and the first
    data file that cannot be read here (None when all can)."""
    loops = [(AGENT_LOOP, str(settings.get(AGENT_LOOP) or "single_turn_agent"))]
    unread = None
    for key in ("data.train_files", "data.val_files"):
        value = settings.get(key)
        if value is None or getattr(value, "names", ()):
            unread = unread or (f"{key} (unknown here)" if value is not None else None)
            continue
        try:
            paths = files(value)
        except ValueError:
            continue  # refused with the key
        for path in paths:
            found = columns(path)
            if not found:
                unread = unread or path
            elif "agent_name" in found:
                values = sorted(column_values(path, "agent_name") or ())
                loops += [(f"{key}: {path} agent_name", value) for value in values]
    return loops, unread


def _tool_agent_refusals(settings: dict[str, Any], where: str, tools: dict[str, Any]) -> list[str]:
    reasons = [
        f"{MULTI_TURN}tool_config_path: {reason}" for reason in _tool_classes(tools.get("tool_config_path"))
    ]
    if tools.get("function_tool_path"):
        reasons.append(
            f"{MULTI_TURN}function_tool_path={tools['function_tool_path']}: rlrun imports tools by import path, "
            "not from a file: list the functions as agent.tools: [pkg.module:function] (the same typed, documented "
            "functions, without verl's @function_tool)"
        )
    if not tools:
        reasons.append(
            f"{where}=tool_agent with no tools: rlrun's episodes need agent.tools or an environment"
        )
    parallel = settings.get(MULTI_TURN + "max_parallel_calls", 1)
    reasons.append(
        f"{MULTI_TURN}max_parallel_calls={parallel}: verl runs a turn's first {parallel} call(s) and drops the "
        "others, as it drops a call it cannot parse; rlrun answers each with an error the model reads"
    )
    length = settings.get(MULTI_TURN + "max_tool_response_length", 256)
    side = settings.get(MULTI_TURN + "tool_response_truncate_side", "middle")
    reasons.append(
        f"{MULTI_TURN}tool_response_truncate_side={side}: verl cuts a result over {length} characters at its "
        f"{side} and marks the cut (...(truncated)...); rlrun keeps the first agent.tool_output_chars, unmarked"
    )
    if settings.get(MULTI_TURN + "format", "hermes") != "hermes":
        reasons.append(
            f"{MULTI_TURN}format={settings[MULTI_TURN + 'format']}: rlrun reads Hermes <tool_call> JSON calls only "
            "(agent.format: chat_template)"
        )
    return reasons


def _tool_classes(path: Any) -> list[str]:
    """Why rlrun cannot run each tool class a verl tool config names (every class: verl's tools
    are BaseTool classes, rlrun's typed functions)."""
    if not path:
        return []
    try:
        text = Path(str(path)).expanduser().read_text(encoding="utf-8")
        config = yaml.load(text, Loader=RecipeLoader)
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as err:
        return [f"{path}: cannot read it here ({getattr(err, 'strerror', None) or err}) to see its tools"]
    entries = config.get("tools") if isinstance(config, dict) else None
    if not isinstance(entries, list) or not entries:
        return [f"{path}: no `tools:` list, as verl's tool config has"]
    reasons = []
    for entry in entries:
        name = str(entry.get("class_name", "?")) if isinstance(entry, dict) else "?"
        schema = entry.get("tool_schema") if isinstance(entry, dict) else None
        function = (schema or {}).get("function", {}) if isinstance(schema, dict) else {}
        called = (
            f" (the tool `{function['name']}`)" if isinstance(function, dict) and "name" in function else ""
        )
        why = KNOWN_TOOLS.get(name.rpartition(".")[2], "")
        reasons.append(
            f"{name}{called}: a verl BaseTool class{f' ({why})' if why else ''}; rlrun runs typed functions "
            "(agent.tools) and environments (agent.environment), not verl's tool classes"
        )
    return reasons
