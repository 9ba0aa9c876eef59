import inspect
from collections import Counter

import pytest
from transformers.utils import get_json_schema

from rlrun.tasks.guess_number import (
    CORRECT,
    GAME_OVER,
    HIGHER,
    LOWER,
    GuessNumber,
    GuessNumberTask,
    bisection_guesses,
)


def _game(secret=21, low=1, high=63, max_guesses=6):
    game = GuessNumber()
    game.reset(secret=secret, low=low, high=high, max_guesses=max_guesses)
    return game


def test_answers_lead_to_the_secret_and_fewer_guesses_earn_more():
    game = _game(secret=21)
    assert [game.guess(32), game.guess(16), game.guess(21)] == ["lower 1-31", "higher 17-31", CORRECT]
    assert game.get_reward() == pytest.approx(0.9)  # 1 - 0.05 * (3 - 1)
    first = _game(secret=32)
    assert first.guess(32) == CORRECT and first.get_reward() == 1.0


def test_answers_state_the_numbers_the_answers_so_far_leave():
    """A guess the answers already ruled out narrows nothing: the game states the same interval."""
    game = _game(secret=21, max_guesses=7)
    answers = [game.guess(n) for n in (40, 10, 50, 5, 19, 23)]
    assert answers == [
        "lower 1-39",
        "higher 11-39",
        "lower 11-39",
        "higher 11-39",
        "higher 20-39",
        "lower 20-22",
    ]
    assert answers[0].startswith(LOWER) and answers[1].startswith(HIGHER)


def test_the_last_allowed_miss_ends_the_game_unrewarded():
    game = _game(secret=40, max_guesses=2)
    assert game.guess(10) == "higher 11-63"
    assert game.guess(50) == GAME_OVER
    assert game.get_reward() == 0.0
    with pytest.raises(ValueError, match="the game is over"):
        game.guess(40)


def test_no_guess_after_the_secret_is_found():
    game = _game(secret=5)
    game.guess(5)
    with pytest.raises(ValueError, match="the game is over"):
        game.guess(5)
    assert game.get_reward() == 1.0


@pytest.mark.parametrize(
    ("number", "error"), [(0, ValueError), (64, ValueError), ("21", TypeError), (True, TypeError)]
)
def test_a_bad_guess_is_an_error_and_still_counts(number, error):
    game = _game(secret=21, max_guesses=2)
    with pytest.raises(error):
        game.guess(number)
    assert game.guess(22) == GAME_OVER  # the second and last guess


def test_reset_takes_the_row_and_starts_afresh():
    game = _game(secret=3)
    game.guess(3)
    row = {"prompt": "Guess a number from 1 to 63.", "answer": "7", "data_source": "rlrun:guess_number"}
    assert game.reset(secret=7, low=1, high=63, max_guesses=6, **row) is None
    assert game.get_reward() == 0.0 and game.guess(7) == CORRECT
    with pytest.raises(ValueError, match="secret=64"):
        game.reset(secret=64, low=1, high=63, max_guesses=6)


def test_trl_finds_one_tool_with_a_schema():
    """TRL's environment_factory: public methods other than reset and get_reward are tools,
    described by transformers' get_json_schema from their hints and docstrings."""
    methods = [
        name for name, _ in inspect.getmembers(GuessNumber(), inspect.ismethod) if not name.startswith("_")
    ]
    assert sorted(methods) == ["get_reward", "guess", "reset"]
    schema = get_json_schema(GuessNumber().guess)["function"]
    assert schema["name"] == "guess" and schema["description"] == "Guess the secret number."
    assert schema["parameters"]["properties"]["number"]["type"] == "integer"
    assert schema["parameters"]["required"] == ["number"]
    assert schema["return"]["type"] == "string"


@pytest.mark.parametrize(
    ("low", "high", "guesses"), [(1, 63, 6), (1, 64, 7), (1, 100, 7), (0, 1, 2), (1, 5, 3)]
)
def test_bisection_finds_every_secret_within_its_worst_case(low, high, guesses):
    assert bisection_guesses(low, high) == guesses
    needed = []
    for secret in range(low, high + 1):
        game, lo, hi = _game(secret, low, high, guesses), low, high
        while (answer := game.guess(mid := (lo + hi) // 2)) != CORRECT:
            lo, hi = (mid + 1, hi) if answer.startswith(HIGHER) else (lo, mid - 1)
            assert answer.endswith(f" {lo}-{hi}")
        needed.append(game.get_reward())
    assert min(needed) == pytest.approx(1 - 0.05 * (guesses - 1))  # some secret takes them all


def test_rows_carry_the_game():
    [row] = GuessNumberTask().validation(1)
    assert row == {
        "prompt": "Guess a number from 1 to 63.",
        "answer": str(row["secret"]),
        "secret": row["secret"],
        "low": 1,
        "high": 63,
        "max_guesses": 6,
        "data_source": "rlrun:guess_number",
    }
    assert (
        GuessNumberTask(low=10, high=20, max_guesses=9).train(1)[0]["prompt"]
        == "Guess a number from 10 to 20."
    )
    assert GuessNumberTask(low=10, high=20, max_guesses=9).train(1)[0]["max_guesses"] == 9


@pytest.mark.parametrize("high", [63, 100])
def test_both_splits_draw_from_the_whole_range(high):
    """Validation is every number once; training draws them all, about equally often."""
    val = [r["secret"] for r in GuessNumberTask(high=high).validation(500)]
    assert sorted(val) == list(range(1, high + 1))
    counts = Counter(r["secret"] for r in GuessNumberTask(high=high).train(200 * high))
    assert set(counts) == set(range(1, high + 1))
    assert max(counts.values()) < 1.5 * 200 and min(counts.values()) > 0.5 * 200


def test_seeded_and_sized():
    a, b, c = GuessNumberTask(seed=1), GuessNumberTask(seed=1), GuessNumberTask(seed=2)
    assert a.train(100) == b.train(100) and a.validation(10) == b.validation(10)
    assert a.train(100) != c.train(100) and a.validation(10) != c.validation(10)
    assert len(a.train(20000)) == 20000
    val = [r["secret"] for r in a.validation(10)]
    assert len(val) == len(set(val)) == 10


@pytest.mark.parametrize(
    "kwargs",
    [{"low": 5, "high": 5}, {"low": -1}, {"max_guesses": 0}],
)
def test_bad_knobs_are_refused(kwargs):
    with pytest.raises(ValueError):
        GuessNumberTask(**kwargs)
