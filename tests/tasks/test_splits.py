import numpy as np
import pytest

from rlrun.tasks.splits import in_validation, mix64

MASK = (1 << 64) - 1


def _splitmix64_finaliser(x: int) -> int:
    """The same hash in Python integers (Steele, Lea and Flood's splitmix64 finaliser)."""
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & MASK
    return x ^ (x >> 31)


def test_the_hash_is_splitmix64s_finaliser():
    keys = [0, 1, 2, 63, 10**6, 2**40 + 7]
    assert mix64(np.array(keys, dtype=np.uint64)).tolist() == [_splitmix64_finaliser(k) for k in keys]
    assert mix64(np.array([0], dtype=np.uint64)).tolist() == [0]


@pytest.mark.parametrize("permille", [100, 250, 900])
def test_the_validation_share_is_the_permille(permille):
    share = in_validation(np.arange(200_000), permille).mean()
    assert share == pytest.approx(permille / 1000, abs=0.005)  # 3.5 binomial sd at 200k keys


def test_a_key_keeps_its_split():
    keys = np.arange(1000)
    assert (in_validation(keys, 250) == in_validation(keys[::-1], 250)[::-1]).all()
    assert not (in_validation(keys, 100) & ~in_validation(keys, 250)).any()  # a smaller share is nested
