"""rlrun:calculator: exact arithmetic by an AST walk, its limits and its refusals."""

import re
from fractions import Fraction

import pytest

from rlrun.agents.calculator import MAX_DIGITS, MAX_EXPRESSION_CHARS, CalculatorError, calculator, render


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("0.1 + 0.2", "0.3"),  # exact: a float would give 0.30000000000000004
        ("12*(3+4)", "84"),
        ("7 // 2", "3"),
        ("-7 % 3", "2"),  # Python's modulo: the sign of the divisor
        ("2 ** -2", "0.25"),
        ("1.50 * 2", "3"),
        ("2.5e-3 * 4", "0.01"),
        ("1 / 3 * 3", "1"),  # fractions throughout, so no rounding in between
        ("1 / 8", "0.125"),
        ("2 / 3", "0.666666666667"),  # no finite decimal: 12 significant digits
        ("0x10 + 1", "17"),
        ("  3  ", "3"),
        ("10 ** 99", "1" + "0" * 99),
    ],
)
def test_exact_results(expression, expected):
    assert calculator(expression) == expected


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("9 ** 9 ** 9", "exponents are limited to 100"),  # refused before computing
        ("10 ** 100", f"more than {MAX_DIGITS} digits"),  # 101 digits
        ("12345 ** 30", f"the result would have more than {MAX_DIGITS} digits"),  # (5 - 1) * 30 > 100
        ("1" * 101, f"a number has more than {MAX_DIGITS} digits"),
        ("1 / 0", "division by zero"),
        ("5 % 0", "division by zero"),
        ("0 ** -1", "division by zero"),
        ("2 ** 0.5", "whole-number exponents"),
        ("x + 1", "unsupported in an arithmetic expression: 'x'"),
        ("__import__('os').system('true')", "unsupported"),
        ("'a' * 3", "not a number: \"'a'\""),
        ("True + 1", "not a number: 'True'"),
        ("1j", "not a number"),
        ("[1, 2]", "unsupported"),
        ("2 ^ 3", "unsupported"),
        ("1 +", "not an arithmetic expression"),
        ("1" + "+1" * MAX_EXPRESSION_CHARS, f"longer than {MAX_EXPRESSION_CHARS} characters"),
    ],
)
def test_refusals_say_why(expression, message):
    with pytest.raises(CalculatorError, match=re.escape(message)):
        calculator(expression)


def test_99_to_the_60_is_refused_after_computing_and_100_digits_pass():
    # 99**60 has 120 digits: the size estimate (1 digit * 60) lets it through, the result check stops it
    with pytest.raises(CalculatorError, match="a result has more than"):
        calculator("99 ** 60")
    assert len(calculator("9" * 100)) == 100


def test_rendering_of_fractions():
    assert render(Fraction(-3, 4)) == "-0.75"
    assert render(Fraction(1, 7)) == "0.142857142857"
    assert render(Fraction(200, 1)) == "200"
    assert render(Fraction(1, 3000000)) == "0.000000333333333333"
