import pytest

from rlrun.tasks.arithmetic import ArithmeticTask


def _solve(prompt: str) -> int:
    return eval(prompt.rstrip("="))  # the prompts are plain Python integer expressions


@pytest.mark.parametrize("operators", [("+",), ("+", "-", "*")])
def test_answers_are_correct(operators):
    task = ArithmeticTask(digits=2, operators=operators, seed=3)
    for record in task.train(300) + task.validation(100):
        assert str(_solve(record["prompt"])) == record["answer"]
        assert record["data_source"] == "rlrun:arithmetic"


@pytest.mark.parametrize("digits", [1, 2, 3, 6])
def test_splits_never_overlap_whatever_the_seed(digits):
    train = {r["prompt"] for seed in (0, 1) for r in ArithmeticTask(digits=digits, seed=seed).train(5000)}
    val = {r["prompt"] for seed in (0, 1) for r in ArithmeticTask(digits=digits, seed=seed).validation(500)}
    assert train and val and not train & val


def test_seeded_and_sized():
    a, b, c = ArithmeticTask(seed=1), ArithmeticTask(seed=1), ArithmeticTask(seed=2)
    assert a.train(100) == b.train(100) and a.validation(50) == b.validation(50)
    assert a.train(100) != c.train(100)
    assert len(a.train(20000)) == 20000


def test_validation_prompts_are_distinct_and_capped_by_the_split():
    val = ArithmeticTask(digits=2).validation(500)
    assert len({r["prompt"] for r in val}) == 500
    assert 0 < len(ArithmeticTask(digits=1).validation(500)) < 100  # the 1-digit split is small


def test_digits_bound_the_operands():
    for record in ArithmeticTask(digits=3, operators=("*",)).train(500):
        a, b = record["prompt"].rstrip("=").split("*")
        assert 0 <= int(a) < 1000 and 0 <= int(b) < 1000


@pytest.mark.parametrize(
    "kwargs", [{"digits": 0}, {"operators": ("/",)}, {"operators": ()}, {"val_permille": 0}]
)
def test_bad_knobs_are_refused(kwargs):
    with pytest.raises(ValueError):
        ArithmeticTask(**kwargs)
