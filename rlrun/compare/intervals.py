"""Statistics over seeds: mean, standard deviation and Student-t interval of one setting, and the
Welch interval of the difference between two settings.

Pure Python (the t quantile from the regularized incomplete beta function), so compare needs no
SciPy; the tests check every number against scipy.stats.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

CONFIDENCE = 0.95
_TINY = 1e-300


@dataclass(frozen=True)
class Summary:
    """A setting's values over its runs (one per seed). `std` is the sample standard deviation
    (n - 1); `low`/`high` the t-interval of the mean; both None with fewer than two values."""

    n: int
    mean: float
    std: float | None
    low: float | None
    high: float | None


@dataclass(frozen=True)
class Difference:
    """`mean - reference mean` with its Welch interval (None when either side has fewer than two
    values); `df` is the Welch-Satterthwaite degrees of freedom (inf when both sides have no spread)."""

    delta: float
    low: float | None
    high: float | None
    df: float | None

    @property
    def excludes_zero(self) -> bool:
        return self.low is not None and self.high is not None and (self.low > 0 or self.high < 0)


def summarize(values: Sequence[float], confidence: float = CONFIDENCE) -> Summary | None:
    """Mean, sample standard deviation and t-interval; None for no values."""
    n = len(values)
    if n == 0:
        return None
    mean = math.fsum(values) / n
    if n < 2:
        return Summary(n, mean, None, None, None)
    std = math.sqrt(math.fsum((value - mean) ** 2 for value in values) / (n - 1))
    half = t_quantile((1 + confidence) / 2, n - 1) * std / math.sqrt(n)
    return Summary(n, mean, std, mean - half, mean + half)


def welch(summary: Summary, reference: Summary, confidence: float = CONFIDENCE) -> Difference:
    """The difference of two means with Welch's interval (unequal variances)."""
    delta = summary.mean - reference.mean
    if summary.std is None or reference.std is None:
        return Difference(delta, None, None, None)
    var_a, var_b = summary.std**2 / summary.n, reference.std**2 / reference.n
    se = math.sqrt(var_a + var_b)
    if se == 0:  # both settings gave the same value at every seed: the difference is exact
        return Difference(delta, delta, delta, math.inf)
    df = (var_a + var_b) ** 2 / (var_a**2 / (summary.n - 1) + var_b**2 / (reference.n - 1))
    half = t_quantile((1 + confidence) / 2, df) * se
    return Difference(delta, delta - half, delta + half, df)


def t_cdf(t: float, df: float) -> float:
    """P(T <= t) for Student's t with `df` degrees of freedom (df may be fractional)."""
    if math.isinf(df):
        return 0.5 * math.erfc(-t / math.sqrt(2))
    tail = 0.5 * regularized_beta(df / (df + t * t), df / 2, 0.5)
    return 1 - tail if t >= 0 else tail


def t_quantile(p: float, df: float) -> float:
    """The t with P(T <= t) = p, by bisection on `t_cdf` (to double precision)."""
    if not 0 < p < 1 or not df > 0:
        raise ValueError(f"t_quantile needs 0 < p < 1 and df > 0, got p={p}, df={df}")
    if p < 0.5:
        return -t_quantile(1 - p, df)
    low, high = 0.0, 1.0
    while t_cdf(high, df) < p:
        low, high = high, high * 2
    for _ in range(200):
        middle = (low + high) / 2
        if middle in (low, high):
            break
        low, high = (middle, high) if t_cdf(middle, df) < p else (low, middle)
    return (low + high) / 2


def regularized_beta(x: float, a: float, b: float) -> float:
    """I_x(a, b), the regularized incomplete beta function, by its continued fraction (evaluated
    with the modified Lentz method on the side of x where it converges fast)."""
    if x <= 0:
        return 0.0
    if x >= 1:
        return 1.0
    log_front = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    if x < (a + 1) / (a + b + 2):
        return math.exp(log_front) * _beta_fraction(x, a, b) / a
    return 1 - math.exp(log_front) * _beta_fraction(1 - x, b, a) / b


def _beta_fraction(x: float, a: float, b: float) -> float:
    def nonzero(value: float) -> float:
        return value if abs(value) > _TINY else _TINY

    c, d = 1.0, 1 / nonzero(1 - (a + b) * x / (a + 1))
    result = d
    for m in range(1, 1000):
        for numerator in (
            m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
            -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1)),
        ):
            d = 1 / nonzero(1 + numerator * d)
            c = nonzero(1 + numerator / c)
            result *= c * d
        if abs(c * d - 1) < 1e-16:
            break
    return result
