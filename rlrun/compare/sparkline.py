"""Unicode sparklines: a metric's curve in one line of the terminal."""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

BLOCKS = "▁▂▃▄▅▆▇█"


def sparkline(
    values: Sequence[float], width: int = 24, lo: float | None = None, hi: float | None = None
) -> str:
    """`values` (finite) averaged into at most `width` buckets and drawn between `lo` and `hi`.

    Pass the same `lo`/`hi` for every run of a metric so their lines share one scale.
    """
    if not values:
        return ""
    buckets = _resample(values, width)
    lo = min(buckets) if lo is None else lo
    hi = max(buckets) if hi is None else hi
    span = hi - lo
    if span <= 0 or not math.isfinite(span):
        return BLOCKS[len(BLOCKS) // 2] * len(buckets)
    top = len(BLOCKS) - 1
    return "".join(BLOCKS[min(top, max(0, round((value - lo) / span * top)))] for value in buckets)


def _resample(values: Sequence[float], width: int) -> list[float]:
    """The mean of each of `width` equal runs of values (the values themselves when fewer)."""
    if len(values) <= width:
        return list(values)
    edges = [round(i * len(values) / width) for i in range(width + 1)]
    return [math.fsum(values[a:b]) / (b - a) for a, b in itertools.pairwise(edges)]
