"""Tools: described from hints and docstrings as TRL needs them, resolved by name, and called so
that nothing a tool does escapes as an exception."""

import sys
import time

import pytest

from rlrun.agents.tools import (
    BAD_ARGUMENTS,
    MALFORMED,
    NOT_TEXT,
    TOOLS,
    UNKNOWN_TOOL,
    ToolCall,
    ToolSpecError,
    argument_problem,
    as_tool,
    call_tool,
    resolve_tool,
)
from rlrun.schema.agent import Agent

SETTINGS = Agent()


def multiply(a: int, b: float = 1.0) -> float:
    """Multiply two numbers.

    Args:
        a: The first.
        b: The second.
    """
    return a * b


def no_docstring(a: int) -> int:
    return a


def no_hint(a) -> int:  # no type hint: the point of the test
    """Echo.

    Args:
        a: Anything.
    """
    return a


def variadic(*values: int) -> int:
    """Sum.

    Args:
        values: Numbers.
    """
    return sum(values)


def test_the_schema_is_transformers_get_json_schema():
    from transformers.utils import get_json_schema

    tool = as_tool(multiply)
    assert tool.name == "multiply"
    assert tool.schema == get_json_schema(multiply)
    assert tool.schema["function"]["parameters"]["required"] == ["a"]
    assert tool.describe() == "multiply(a: integer, b: number) - Multiply two numbers."


@pytest.mark.parametrize(
    ("fn", "message"),
    [
        (
            no_docstring,
            (
                "the tool no_docstring cannot be described to the model: Cannot generate JSON schema for "
                "no_docstring because it has no docstring. A tool needs a type hint"
            ),
        ),
        (no_hint, "Argument a is missing a type hint in function no_hint"),
        (variadic, "the tool variadic takes *values"),
        (3, "the tool 3 is a int, not a function"),
    ],
)
def test_a_tool_without_hints_or_docstring_is_refused_by_name(fn, message):
    with pytest.raises(ToolSpecError, match=message.replace("*", r"\*")):
        as_tool(fn)


@pytest.fixture
def user_tools(tmp_path, monkeypatch):
    (tmp_path / "user_tools_mod.py").write_text(
        "def shout(text: str) -> str:\n"
        '    """Upper-case a text.\n\n    Args:\n        text: The text.\n    """\n'
        "    return text.upper()\n"
        "NOT_CALLABLE = 1\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    yield
    sys.modules.pop("user_tools_mod", None)


def test_resolve_builtins_and_import_paths(user_tools):
    assert set(TOOLS.names()) == {"rlrun:calculator", "rlrun:python"}
    assert resolve_tool("rlrun:calculator", settings=SETTINGS).name == "calculator"
    assert resolve_tool("rlrun:python", settings=SETTINGS).name == "python"
    assert resolve_tool("user_tools_mod:shout", settings=SETTINGS).fn("hi") == "HI"


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("rlrun:calc", "unknown built-in tool 'rlrun:calc'; built-ins: rlrun:calculator, rlrun:python"),
        ("shout", "neither a built-in"),
        ("user_tools_mod:missing", "module 'user_tools_mod' has no attribute 'missing'"),
        ("user_tools_mod:NOT_CALLABLE", "the tool user_tools_mod:NOT_CALLABLE is a int, not a function"),
        ("no_such_module_x:f", "cannot import module 'no_such_module_x'"),
    ],
)
def test_what_cannot_be_resolved_says_why(user_tools, spec, message):
    with pytest.raises(ToolSpecError, match=message):
        resolve_tool(spec, settings=SETTINGS)


TOOLSET = {"multiply": as_tool(multiply)}


def call(name, *args, output_chars=100, timeout_s=1.0, **kwargs):
    return call_tool(
        TOOLSET, ToolCall("as written", name, args, kwargs), timeout_s=timeout_s, output_chars=output_chars
    )


def test_a_call_binds_positions_in_order_and_keywords_by_name():
    assert call("multiply", 3, 2.5).text == "7.5"
    assert call("multiply", 3, b=2).text == "6"  # an int where a float is declared is accepted, passed as is
    assert call("multiply", a=4).text == "4.0"


@pytest.mark.parametrize(
    ("args", "kwargs", "message"),
    [
        ((), {}, "multiply: missing a required argument: 'a'"),
        ((1, 2, 3), {}, "multiply: too many positional arguments"),
        ((1,), {"c": 2}, "multiply: got an unexpected keyword argument 'c'"),
        (("3",), {}, "multiply: argument 'a' should be a valid integer"),  # never converted
    ],
)
def test_wrong_arguments_are_an_error_the_model_sees(args, kwargs, message):
    result = call("multiply", *args, **kwargs)
    assert (result.error, result.error_kind) == (message, BAD_ARGUMENTS)
    assert argument_problem(TOOLSET["multiply"], args, kwargs) == message


def test_unknown_and_malformed_calls():
    unknown = call("divide", 1)
    assert (unknown.error, unknown.error_kind) == ("unknown tool 'divide' (tools: multiply)", UNKNOWN_TOOL)
    malformed = call_tool(TOOLSET, ToolCall("<call>(", error="not a call"), timeout_s=1, output_chars=10)
    assert (malformed.name, malformed.error, malformed.error_kind) == ("?", "not a call", MALFORMED)


def returns(value):
    def tool() -> str:
        """Return a fixed value."""
        return value

    return {"tool": as_tool(tool)}


@pytest.mark.parametrize(
    ("value", "text"),
    [(7, "7"), (None, "None"), ({"a": [1, 2]}, "{'a': [1, 2]}"), (True, "True")],  # TRL's str()
)
def test_json_like_results_are_rendered_as_trl_renders_them(value, text):
    result = call_tool(returns(value), ToolCall("", "tool"), timeout_s=1, output_chars=100)
    assert (result.text, result.error) == (text, None)


@pytest.mark.parametrize("value", [b"bytes", object(), {1, 2}])
def test_a_result_with_no_text_form_is_an_error(value):
    result = call_tool(returns(value), ToolCall("", "tool"), timeout_s=1, output_chars=100)
    assert result.error_kind == NOT_TEXT and result.error.startswith("the tool returned a ")


def test_megabytes_are_cut_to_the_output_limit():
    result = call_tool(returns("x" * 5_000_000), ToolCall("", "tool"), timeout_s=1, output_chars=10)
    assert (result.text, result.truncated) == ("x" * 10, True)


def test_a_hanging_or_raising_tool_is_an_error_not_an_exception():
    def hangs() -> str:
        """Never returns."""
        time.sleep(60)
        return ""

    def raises() -> str:
        """Always fails."""
        raise RuntimeError("broken")

    tools = {"hangs": as_tool(hangs), "raises": as_tool(raises)}
    hung = call_tool(tools, ToolCall("", "hangs"), timeout_s=0.2, output_chars=10)
    assert (hung.error_kind, hung.error) == ("timeout", "no result within 0.2 s") and hung.seconds < 2
    failed = call_tool(tools, ToolCall("", "raises"), timeout_s=1, output_chars=10)
    assert (failed.error_kind, failed.error) == ("raised", "RuntimeError: broken")
