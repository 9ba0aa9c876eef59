"""The agent recipes: rlrun:tiny-agent with the calculator tool, and with the guess-a-number
environment scored by its own reward (their learning: tests/training/test_learning.py)."""

from __future__ import annotations

from rlrun.recipes import load_recipe


def test_the_calculator_recipe_calls_rlrun_calculator_on_products_scored_by_exact_match():
    loaded = load_recipe("agent_calculator", strict=True)
    assert loaded.notices == []
    recipe = loaded.recipe
    assert recipe.model.path == "rlrun:tiny-agent" and recipe.algorithm.advantage == "grpo"
    assert (recipe.data.source, recipe.data.arithmetic.digits, recipe.data.arithmetic.operators) == (
        "rlrun:arithmetic",
        3,
        ["*"],
    )
    agent = recipe.agent
    assert (agent.enabled, agent.format, agent.tools, agent.environment) == (
        True,
        "plain",
        ["rlrun:calculator"],
        None,
    )
    assert [f.fn for f in recipe.reward.functions] == ["rlrun:exact_match"]


def test_the_guess_recipe_plays_the_game_scored_by_its_reward():
    loaded = load_recipe("agent_guess", strict=True)
    assert loaded.notices == []
    recipe = loaded.recipe
    assert recipe.model.path == "rlrun:tiny-agent" and recipe.data.source == "rlrun:guess_number"
    agent = recipe.agent
    assert (agent.enabled, agent.tools, agent.environment) == (
        True,
        [],
        "rlrun.tasks.guess_number:GuessNumber",
    )
    assert agent.max_turns == 7  # the 6 guesses bisection needs for 1 to 63, and the answer
    assert [f.fn for f in recipe.reward.functions] == ["rlrun:environment_reward"]
