"""`rlrun:calculator`: exact arithmetic on integers and decimals, by walking the expression's
syntax tree (never `eval`). Numbers are exact fractions throughout, so `0.1 + 0.2` is `0.3`;
limits on the expression's length, on every number's digits and on exponents keep any
expression cheap (a `9**9**9` is refused before it is computed)."""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable
from decimal import Decimal, localcontext
from fractions import Fraction

MAX_EXPRESSION_CHARS = 200
MAX_DIGITS = 100  # of any number, given or computed (numerator and denominator)
MAX_EXPONENT = 100  # |n| in a ** n
QUOTIENT_DIGITS = 12  # significant digits shown of a quotient with no finite decimal form

_BINARY: dict[type[ast.operator], Callable[[Fraction, Fraction], Fraction]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: lambda a, b: Fraction(a // b),
    ast.Mod: operator.mod,
}
_UNARY: dict[type[ast.unaryop], Callable[[Fraction], Fraction]] = {
    ast.UAdd: operator.pos,
    ast.USub: operator.neg,
}


class CalculatorError(ValueError):
    """An expression the calculator does not compute (the message says why)."""


def calculator(expression: str) -> str:
    """Evaluate an arithmetic expression exactly: integers and decimals with + - * / // % ** and parentheses.

    Args:
        expression: The expression, e.g. "(12 + 3.5) * 4".
    """
    if len(expression) > MAX_EXPRESSION_CHARS:
        raise CalculatorError(f"the expression is longer than {MAX_EXPRESSION_CHARS} characters")
    try:
        tree = ast.parse(expression.strip(), mode="eval")
    except SyntaxError:
        raise CalculatorError(f"not an arithmetic expression: {expression!r}") from None
    return render(_value(tree.body, expression.strip()))


def render(value: Fraction) -> str:
    """An integer as itself; a fraction with a finite decimal form exactly; any other to
    QUOTIENT_DIGITS significant digits."""
    if value.denominator == 1:
        return str(value.numerator)
    exact = _finite_decimal(value)
    if exact is not None:
        return exact
    with localcontext() as context:
        context.prec = QUOTIENT_DIGITS
        text = str(Decimal(value.numerator) / Decimal(value.denominator))
    return _plain(Decimal(text))


def _finite_decimal(value: Fraction) -> str | None:
    """The exact decimal form of `value` when its denominator has no prime factor but 2 and 5."""
    denominator, places = value.denominator, 0
    for factor in (2, 5):
        while denominator % factor == 0:
            denominator //= factor
    if denominator != 1:
        return None
    while (value * 10**places).denominator != 1:
        places += 1
    return _plain(Decimal(value.numerator * 10**places // value.denominator).scaleb(-places))


def _plain(number: Decimal) -> str:
    """Fixed-point text without exponent or trailing zeros (`1.50` -> `1.5`, `1E+2` -> `100`)."""
    text = format(number, "f")
    return text.rstrip("0").rstrip(".") if "." in text else text


def _value(node: ast.expr, source: str) -> Fraction:
    if isinstance(node, ast.Constant):
        return _number(node, source)
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _UNARY[type(node.op)](_value(node.operand, source))
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Pow):
        return _power(_value(node.left, source), _value(node.right, source))
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        left, right = _value(node.left, source), _value(node.right, source)
        if isinstance(node.op, (ast.Div, ast.FloorDiv, ast.Mod)) and right == 0:
            raise CalculatorError("division by zero")
        return _checked(_BINARY[type(node.op)](left, right))
    shown = ast.get_source_segment(source, node) or type(node).__name__
    raise CalculatorError(f"unsupported in an arithmetic expression: {shown!r}")


def _number(node: ast.Constant, source: str) -> Fraction:
    value = node.value
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise CalculatorError(f"not a number: {ast.get_source_segment(source, node)!r}")
    # The literal's own text, not the float it parsed to: `0.1` is exactly 1/10.
    text = (ast.get_source_segment(source, node) or repr(value)).replace("_", "")
    if len(text) > MAX_DIGITS:
        raise CalculatorError(f"a number has more than {MAX_DIGITS} digits")
    try:
        return _checked(Fraction(text))
    except ValueError:  # 0x1F, 0o17, 0b101: Fraction reads only decimal text
        return _checked(Fraction(value))


def _power(base: Fraction, exponent: Fraction) -> Fraction:
    if exponent.denominator != 1:
        raise CalculatorError("only whole-number exponents are computed exactly")
    if abs(exponent) > MAX_EXPONENT:
        raise CalculatorError(f"exponents are limited to {MAX_EXPONENT} in size")
    if base == 0 and exponent < 0:
        raise CalculatorError("division by zero")
    digits = max(len(str(abs(base.numerator))), len(str(base.denominator)))
    if (digits - 1) * abs(exponent) > MAX_DIGITS:  # the result's size, known before computing it
        raise CalculatorError(f"the result would have more than {MAX_DIGITS} digits")
    return _checked(base ** int(exponent))


def _checked(value: Fraction) -> Fraction:
    if max(len(str(abs(value.numerator))), len(str(value.denominator))) > MAX_DIGITS:
        raise CalculatorError(f"a result has more than {MAX_DIGITS} digits")
    return value
