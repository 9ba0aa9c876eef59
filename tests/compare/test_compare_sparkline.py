"""Unicode sparklines."""

from __future__ import annotations

from rlrun.compare.sparkline import sparkline


def test_one_block_per_value_from_lowest_to_highest():
    assert sparkline([1, 2, 3, 4, 5, 6, 7, 8]) == "▁▂▃▄▅▆▇█"
    assert sparkline([]) == ""
    assert sparkline([3.0, 3.0]) == "▅▅"  # flat: mid-height


def test_long_series_are_averaged_into_the_width():
    line = sparkline([float(i) for i in range(100)], width=10)
    assert len(line) == 10 and line[0] == "▁" and line[-1] == "█"


def test_a_shared_scale_keeps_runs_comparable():
    assert sparkline([1.0, 2.0], lo=0.0, hi=4.0) == "▃▅"
    assert sparkline([0.0, 4.0], lo=0.0, hi=4.0) == "▁█"
