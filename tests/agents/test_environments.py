"""Environments: TRL's classes read as TRL reads them, step environments, seeds."""

import pytest

from rlrun.agents.environments import (
    EnvironmentSpecError,
    derive_seed,
    load_environment,
    reset_kwargs,
    tool_method_names,
)


def test_a_trl_environment_exposes_what_trl_exposes():
    from tests.agents.envs_fixture import Counter

    environment = load_environment("tests.agents.envs_fixture:Counter")
    assert (environment.kind, environment.has_reward, environment.takes_seed) == ("tools", True, False)
    # TRL: inspect.getmembers(instance, predicate=inspect.ismethod), less reset, get_reward and _names
    import inspect

    trl = sorted(
        name
        for name, _ in inspect.getmembers(Counter(), predicate=inspect.ismethod)
        if name not in ("reset", "get_reward") and not name.startswith("_")
    )
    assert list(environment.tool_names) == trl == ["add", "unit"]
    instance = Counter()
    tools = {t.name: t for t in environment.tools(instance)}
    assert tools["add"].fn(3) == "3" and instance.total == 3  # bound to the episode's instance


def test_kinds():
    assert load_environment("tests.agents.envs_fixture:Guess").kind == "step"
    assert load_environment("tests.agents.envs_fixture:Guess").tool_names == ()
    with pytest.raises(
        EnvironmentSpecError, match="tests.agents.envs_fixture:Guess.step cannot be described"
    ):
        load_environment(
            "tests.agents.envs_fixture:Guess", "tools"
        )  # as TRL's, `step` would be a tool, and undocumented
    assert load_environment("tests.agents.envs_fixture:Counter", "tools").kind == "tools"
    with pytest.raises(EnvironmentSpecError, match="is a step environment but has no `step` method"):
        load_environment("tests.agents.envs_fixture:Counter", "step")


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("tests.agents.envs_fixture", "not an import path"),
        ("tests.agents.envs_fixture:Missing", "has no attribute 'Missing'"),
        ("tests.agents.envs_fixture:time", "is a module, not a class"),
        ("tests.agents.envs_fixture:NoReset", "must be a class with a `reset` method"),
        (
            "tests.agents.envs_fixture:Undocumented",
            "the tool tests.agents.envs_fixture:Undocumented.move cannot be described",
        ),
    ],
)
def test_what_cannot_be_used_says_why(spec, message):
    with pytest.raises(EnvironmentSpecError, match=message):
        load_environment(spec)


def test_tool_methods_of_a_class_match_trls_rule_on_an_instance():
    from tests.agents.envs_fixture import Seeded

    assert tool_method_names(Seeded) == ("add", "unit")


def test_reset_gets_the_row_and_its_seed_when_it_declares_one():
    plain, seeded = (
        load_environment("tests.agents.envs_fixture:Counter"),
        load_environment("tests.agents.envs_fixture:Seeded"),
    )
    row = {"prompt": "p", "environment": "a", "start": 2}
    assert reset_kwargs(plain, row, seed=5, skip="environment") == {"prompt": "p", "start": 2}
    assert reset_kwargs(plain, row, seed=5, skip=None) == row
    assert reset_kwargs(seeded, row, seed=5, skip=None) == {**row, "seed": 5}
    with pytest.raises(ValueError, match="the dataset has a `seed` column too"):
        reset_kwargs(seeded, {"seed": 1}, seed=5, skip=None)


def test_derived_seeds_are_fixed_distinct_and_63_bit():
    # pinned: a resumed run replays its episodes only while these values never change
    assert derive_seed(0, 0, 0) == derive_seed(0, 0, 0) == 9169699564768075551
    seeds = {derive_seed(seed, step, row) for seed in range(3) for step in range(3) for row in range(3)}
    assert len(seeds) == 27 and all(0 <= s < 2**63 for s in seeds)
    assert derive_seed(1, 2) != derive_seed(2, 1) != derive_seed(12)


def test_the_documented_examples_are_read_as_docs_agents_md_says():
    abacus = load_environment("examples.agents.envs:Abacus")
    assert (abacus.kind, abacus.tool_names, abacus.has_reward) == (
        "tools",
        ("add", "multiply", "submit"),
        True,
    )
    retry = load_environment("examples.agents.envs:Retry")
    assert (retry.kind, retry.tool_names, retry.has_reward) == ("step", (), False)
    from examples.agents.envs import Retry

    env = Retry()
    assert env.reset(prompt="23+58=", answer="81") == "Answer with a number."
    assert env.step("It is 80") == ("Not quite. Try again.", 0.0, False)
    assert env.step("23 + 58 = 81") == (None, 1.0, True)
