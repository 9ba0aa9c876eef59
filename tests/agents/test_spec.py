"""An `agent` section resolved into what the episode runner is given."""

import pytest

from rlrun.agents.formats import ChatTemplateFormat, FormatError, PlainFormat
from rlrun.agents.spec import NAME_FIX, AgentSpecError, build_agent, load_parts
from rlrun.schema.agent import Agent
from tests.agents.byte_tokenizer import FIXTURES, TOOLS_TEMPLATE, byte_tokenizer


def test_a_plain_agent_with_tools_and_a_trl_environment():
    agent = Agent(
        enabled=True, tools=["rlrun:calculator"], environment="tests.agents.envs_fixture:Counter", max_turns=3
    )
    spec = build_agent(agent, tokenizer=byte_tokenizer())
    assert isinstance(spec.format, PlainFormat) and [t.name for t in spec.tools] == ["calculator"]
    assert list(spec.environments) == [None] and spec.environments[None].tool_names == ("add", "unit")
    assert spec.environment_column is None
    assert spec.limits is agent


def test_environments_by_column_and_a_template_file(tmp_path):
    template = tmp_path / "tools.jinja"
    template.write_text(TOOLS_TEMPLATE.read_text())
    agent = Agent(
        enabled=True,
        format="chat_template",
        chat_template=str(template),
        environments={
            "count": "tests.agents.envs_fixture:Counter",
            "guess": "tests.agents.envs_fixture:Guess",
        },
        environment_column="task",
    )
    tokenizer = byte_tokenizer(
        eos="<|im_end|>", chat_template=(FIXTURES / "smollm2_135m_instruct.jinja").read_text()
    )
    spec = build_agent(agent, tokenizer=tokenizer, template_kwargs={"enable_thinking": False})
    assert isinstance(spec.format, ChatTemplateFormat) and spec.format.template_kwargs == {
        "enable_thinking": False
    }
    assert {k: v.kind for k, v in spec.environments.items()} == {"count": "tools", "guess": "step"}
    assert spec.environment_column == "task"
    with pytest.raises(FormatError, match="no tool support"):  # SmolLM2's own template, no file given
        build_agent(agent.model_copy(update={"chat_template": None}), tokenizer=tokenizer)


def test_every_problem_is_reported_with_its_key():
    agent = Agent(
        enabled=True,
        tools=[
            "rlrun:calculator",
            "rlrun:nothing",
            "tests.agents.envs_fixture:Counter.add",
            "rlrun:calculator",
        ],
        environments={"a": "tests.agents.envs_fixture:NoReset", "b": "tests.agents.envs_fixture:Counter"},
    )
    with pytest.raises(AgentSpecError) as info:
        load_parts(agent)
    problems = {p.key: (p.message, p.fix) for p in info.value.problems}
    if ("tools", 2) in problems:  # transformers 4.x cannot describe a method taken from its class (`self`)
        assert set(problems) == {("tools", 1), ("tools", 2), ("tools", 3), ("environments", "a")}
        return
    assert set(problems) == {("tools", 1), ("tools", 3), ("environments", "a"), ("environments", "b")}
    assert (
        problems[("tools", 1)][0]
        == "unknown built-in tool 'rlrun:nothing'; built-ins: rlrun:calculator, rlrun:python"
    )
    assert problems[("tools", 3)] == ("agent.tools.0 is named 'calculator' too", NAME_FIX)
    shadowed = "tests.agents.envs_fixture:Counter has a tool method 'add', as agent.tools has a tool"  # tools.2 is named add
    assert problems[("environments", "b")] == (shadowed, NAME_FIX)
    assert "must be a class with a `reset` method" in problems[("environments", "a")][0]
