"""The `agent` section's fields: off by default, units in the names, bounds enforced."""

import pytest
from pydantic import ValidationError

from rlrun.schema import Recipe
from rlrun.schema.agent import Agent


def test_off_by_default_with_nothing_to_call():
    agent = Recipe().agent
    assert not agent.enabled and agent.tools == [] and agent.environment is None and agent.environments == {}
    assert (agent.format, agent.environment_column, agent.environment_kind) == (
        "plain",
        "environment",
        "auto",
    )


@pytest.mark.parametrize(
    "data",
    [
        {"max_turns": 0},
        {"max_turn_tokens": 0},
        {"tool_timeout_s": 0.0},
        {"tool_output_chars": 0},
        {"format": "json"},
        {"environment_kind": "gym"},
        {"tools": [""]},
        {"environments": {"a": ""}},
        {"python": {"memory_mb": 0}},
        {"python": {"cpu_time_s": 1.5}},  # whole seconds: RLIMIT_CPU
        {"tool": ["rlrun:calculator"]},  # a typo is an error, not a silent default
        {"max_turns": "4"},
    ],
)
def test_what_the_section_refuses(data):
    with pytest.raises(ValidationError):
        Agent.model_validate(data)


def test_every_field_is_documented_where_it_is_declared():
    for model in (Agent, Agent.model_fields["python"].annotation):
        assert all(field.description for field in model.model_fields.values()), model
