"""Seed statistics: mean, std, t-interval and Welch's interval, by hand and against scipy.stats."""

from __future__ import annotations

import math

import pytest
from scipy import special, stats

from rlrun.compare.intervals import Summary, regularized_beta, summarize, t_cdf, t_quantile, welch


def test_summary_of_three_seeds_by_hand():
    # 0.70, 0.74, 0.78: mean 0.74; deviations -0.04, 0, 0.04 -> variance 0.0032 / 2 = 0.0016, std 0.04;
    # t(0.975, 2) = 4.302653 -> half width 4.302653 * 0.04 / sqrt(3) = 0.0993655
    summary = summarize([0.70, 0.74, 0.78])
    assert summary.n == 3
    assert summary.mean == pytest.approx(0.74)
    assert summary.std == pytest.approx(0.04)
    assert summary.low == pytest.approx(0.74 - 0.0993655, abs=1e-6)
    assert summary.high == pytest.approx(0.74 + 0.0993655, abs=1e-6)


def test_summary_matches_scipy():
    values = [0.698, 0.740, 0.764, 0.712, 0.801]
    summary = summarize(values)
    low, high = stats.t.interval(0.95, len(values) - 1, loc=stats.tmean(values), scale=stats.sem(values))
    assert summary.std == pytest.approx(stats.tstd(values), rel=1e-12)
    assert (summary.low, summary.high) == (pytest.approx(low, rel=1e-12), pytest.approx(high, rel=1e-12))


def test_one_value_has_no_spread_and_none_has_no_summary():
    assert summarize([0.5]) == Summary(1, 0.5, None, None, None)
    assert summarize([]) is None


def test_welch_by_hand():
    # a = 0.80, 0.84, 0.88 (mean 0.84, var 0.0016); b = 0.70, 0.74, 0.78 (mean 0.74, var 0.0016)
    # se = sqrt(0.0016/3 * 2) = 0.0326599; df = (2v)^2 / (2 v^2 / 2) = 4 with v = 0.0016/3
    # t(0.975, 4) = 2.776445 -> half width 0.0906778
    difference = welch(summarize([0.80, 0.84, 0.88]), summarize([0.70, 0.74, 0.78]))
    assert difference.delta == pytest.approx(0.10)
    assert difference.df == pytest.approx(4.0)
    assert difference.low == pytest.approx(0.10 - 0.0906778, abs=1e-6)
    assert difference.high == pytest.approx(0.10 + 0.0906778, abs=1e-6)
    assert difference.excludes_zero


def test_welch_matches_scipy_with_unequal_sizes_and_spreads():
    a, b = [0.81, 0.86, 0.79, 0.90], [0.70, 0.76, 0.69]
    difference = welch(summarize(a), summarize(b))
    result = stats.ttest_ind(a, b, equal_var=False)
    low, high = result.confidence_interval(0.95)
    assert difference.df == pytest.approx(result.df, rel=1e-12)
    assert (difference.low, difference.high) == (
        pytest.approx(low, rel=1e-10),
        pytest.approx(high, rel=1e-10),
    )


def test_welch_without_spread():
    assert welch(summarize([0.5]), summarize([0.4, 0.6])).low is None  # one run: no interval
    exact = welch(summarize([0.6, 0.6]), summarize([0.5, 0.5]))
    assert (exact.low, exact.high, exact.df) == (pytest.approx(0.1), pytest.approx(0.1), math.inf)


@pytest.mark.parametrize("df", [1, 2, 3, 4.37, 10, 57.5, 1e4])
@pytest.mark.parametrize("p", [0.5, 0.8, 0.975, 0.995, 0.9995, 0.025])
def test_t_quantile_and_cdf_match_scipy(df, p):
    assert t_quantile(p, df) == pytest.approx(stats.t.ppf(p, df), rel=1e-10, abs=1e-12)
    assert t_cdf(t_quantile(p, df), df) == pytest.approx(p, rel=1e-12)


@pytest.mark.parametrize("x", [1e-6, 0.2, 0.5, 0.77, 0.999])
@pytest.mark.parametrize(("a", "b"), [(0.5, 0.5), (1.0, 3.0), (2.35, 0.5), (50.0, 0.5)])
def test_regularized_beta_matches_scipy(x, a, b):
    assert regularized_beta(x, a, b) == pytest.approx(special.betainc(a, b, x), rel=1e-12, abs=1e-15)


def test_t_quantile_rejects_impossible_arguments():
    with pytest.raises(ValueError):
        t_quantile(1.0, 3)
    with pytest.raises(ValueError):
        t_quantile(0.5, 0)
