"""verl's multi-turn keys: a run whose rows never reach verl's tool_agent loop converts as the
single-turn run verl 0.9.1 makes of it, with every multi_turn key reported; a run whose rows do is
refused, every reason named by key (tool classes by name). Tool configs are verl's own
(fixtures/verl/tool_config, README there)."""

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from rlrun.convert.verl_agent import AGENT_LOOP, MULTI_TURN
from tests.convert import test_verl_rules
from tests.convert.test_verl_rules import refusal, run

data = test_verl_rules.data  # the fixture: verl-layout files in a working directory

TOOL_CONFIGS = Path(__file__).parent / "fixtures" / "verl" / "tool_config"
GSM8K_TOOL = str(TOOL_CONFIGS / "gsm8k_tool_config.yaml")


def with_agent_name(path: Path, names: list[str]) -> str:
    """verl's gsm8k_tool_agent_loop.py layout: each row names its agent loop."""
    rows = [
        {
            "data_source": "openai/gsm8k",
            "prompt": [{"role": "user", "content": f"{i}+{i}="}],
            "reward_model": {"style": "rule", "ground_truth": str(2 * i)},
            "agent_name": name,
        }
        for i, name in enumerate(names)
    ]
    pq.write_table(pa.Table.from_pylist(rows), path)
    return str(path)


def mt(**keys):
    return {MULTI_TURN + key: value for key, value in keys.items()}


def test_no_tool_agent_rows_convert_single_turn_with_each_key_reported(data):
    conversion = run(
        data,
        **mt(enable=True, max_assistant_turns=5, tool_config_path=GSM8K_TOOL, format="hermes"),
        **{"trainer.total_training_steps": 5},
    )
    assert "agent" not in conversion.recipe
    reported = {row.key: row for row in conversion.rows}
    for key in ("enable", "max_assistant_turns", "tool_config_path", "format"):
        assert reported[MULTI_TURN + key].kind == "no equivalent"
    assert "used by verl's asynchronous modes only" in reported[MULTI_TURN + "enable"].note
    assert (
        "used only with verl's tool_agent loop, which no row runs"
        in reported[MULTI_TURN + "max_assistant_turns"].note
    )
    assert any("no row runs verl's tool_agent loop" in note for note in conversion.notes)
    assert "no row runs verl's tool_agent loop" in conversion.to_yaml()  # the recipe's comments say so


def test_a_single_turn_run_has_no_multi_turn_note(data):
    assert not any("tool_agent" in note for note in run(data, **{"trainer.total_training_steps": 5}).notes)


def test_tool_schemas_in_the_length_filter_are_refused(data):
    message = refusal(
        data,
        **mt(tool_config_path=GSM8K_TOOL),
        **{"data.filter_overlong_prompts": True, "trainer.total_training_steps": 5},
    )
    assert f"{MULTI_TURN}tool_config_path={GSM8K_TOOL} with data.filter_overlong_prompts=True" in message
    assert "measures each prompt with the tools' schemas" in message
    message = refusal(
        data,
        **{"data.function_tool_path": "tools.py", "data.filter_overlong_prompts": True},
        **{"trainer.total_training_steps": 5},
    )
    assert "data.function_tool_path=tools.py with data.filter_overlong_prompts=True" in message


def test_tools_with_data_that_cannot_be_read_are_refused(data):
    message = refusal(
        data,
        **mt(tool_config_path=GSM8K_TOOL),
        **{"data.train_files": str(data / "absent.parquet"), "trainer.total_training_steps": 5},
    )
    assert "agent_name column says tool_agent" in message and "absent.parquet cannot be read here" in message


@pytest.mark.parametrize(
    ("config", "named"),
    [
        ("gsm8k_tool_config.yaml", "verl.tools.gsm8k_tool.Gsm8kTool (the tool `calc_gsm8k_reward`)"),
        (
            "sandbox_fusion_tool_config.yaml",
            "verl.tools.sandbox_fusion_tools.SandboxFusionTool (the tool `code_interpreter`)",
        ),
        ("search_tool_config.yaml", "verl.tools.search_tool.SearchTool (the tool `search`)"),
    ],
)
def test_a_tool_agent_run_refuses_each_tool_class_by_name(data, config, named):
    message = refusal(
        data,
        **mt(tool_config_path=str(TOOL_CONFIGS / config)),
        **{AGENT_LOOP: "tool_agent", "trainer.total_training_steps": 5},
    )
    assert f"{MULTI_TURN}tool_config_path: {named}: a verl BaseTool class" in message
    assert "not verl's tool classes" in message


def test_a_tool_agent_run_lists_every_difference_by_key(data):
    message = refusal(
        data,
        **mt(
            function_tool_path="my_tools.py",
            max_parallel_calls=2,
            tool_response_truncate_side="left",
            format="gpt-oss",
        ),
        **{AGENT_LOOP: "tool_agent", "trainer.total_training_steps": 5},
    )
    assert f"{MULTI_TURN}function_tool_path=my_tools.py: rlrun imports tools by import path" in message
    assert "agent.tools: [pkg.module:function]" in message
    assert (
        f"{MULTI_TURN}max_parallel_calls=2: verl runs a turn's first 2 call(s) and drops the others"
        in message
    )
    assert (
        f"{MULTI_TURN}tool_response_truncate_side=left: verl cuts a result over 256 characters at its left"
        in message
    )
    assert f"{MULTI_TURN}format=gpt-oss: rlrun reads Hermes <tool_call> JSON calls only" in message


def test_verl_defaults_of_the_tool_agent_loop_are_refused_too(data):
    # verl's defaults are max_parallel_calls 1 (the rest dropped) and a middle cut, marked
    message = refusal(data, **{AGENT_LOOP: "tool_agent", "trainer.total_training_steps": 5})
    assert f"{AGENT_LOOP}=tool_agent with no tools" in message
    assert f"{MULTI_TURN}max_parallel_calls=1: verl runs a turn's first 1 call(s)" in message
    assert (
        f"{MULTI_TURN}tool_response_truncate_side=middle: verl cuts a result over 256 characters" in message
    )


def test_rows_choose_their_agent_loop_by_the_agent_name_column(data):
    train = with_agent_name(data / "agents.parquet", ["single_turn_agent", "tool_agent", "tool_agent"])
    message = refusal(
        data,
        **mt(tool_config_path=GSM8K_TOOL),
        **{"data.train_files": train, "trainer.total_training_steps": 5},
    )
    assert "verl.tools.gsm8k_tool.Gsm8kTool" in message
    single = with_agent_name(data / "single.parquet", ["single_turn_agent"] * 3)
    conversion = run(
        data,
        **mt(tool_config_path=GSM8K_TOOL),
        **{"data.train_files": single, "trainer.total_training_steps": 1},
    )
    assert "agent" not in conversion.recipe


def test_an_agent_loop_rlrun_does_not_have_is_refused(data):
    message = refusal(data, **{AGENT_LOOP: "my_react_agent", "trainer.total_training_steps": 5})
    assert f"{AGENT_LOOP}=my_react_agent: an agent loop rlrun does not have" in message
    train = with_agent_name(data / "custom.parquet", ["swe_agent"])
    message = refusal(data, **{"data.train_files": train, "trainer.total_training_steps": 5})
    assert f"data.train_files: {train} agent_name=swe_agent: an agent loop rlrun does not have" in message


def test_a_tool_config_that_is_not_one_is_named(data, tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("other: 1\n")
    message = refusal(
        data, **mt(tool_config_path=str(bad)), **{AGENT_LOOP: "tool_agent", "trainer.total_training_steps": 5}
    )
    assert f"{bad}: no `tools:` list" in message
    message = refusal(
        data,
        **mt(tool_config_path="absent.yaml"),
        **{AGENT_LOOP: "tool_agent", "trainer.total_training_steps": 5},
    )
    assert "absent.yaml: cannot read it here" in message


def test_an_interaction_config_is_refused(data):
    message = refusal(
        data, **mt(interaction_config_path="interaction.yaml"), **{"trainer.total_training_steps": 5}
    )
    assert f"{MULTI_TURN}interaction_config_path=interaction.yaml: an interaction" in message
