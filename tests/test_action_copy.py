"""The pool's action copies (pool/_native.pyx copy_actions, copy_float_actions)
against a plain Python reference: every integer width, Discrete and
MultiDiscrete rows, bad values placed anywhere, including either side of the
copies' internal chunk boundary (4,096 rows)."""
import numpy as np
import pytest

from shoal.pool import _native

CHUNK = 4096
INT_TYPES = [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64]


def first_bad_row(actions, nvec) -> int:
    for i, row in enumerate(actions.tolist()):
        if any(v < 0 or v >= n for v, n in zip(row, nvec.tolist())):
            return i
    return -1


def out_of_range_values(dtype, n: int) -> list[int]:
    """Values of `dtype` outside [0, n), the edges first: each must be refused
    before the int32 cast could wrap it into range."""
    info = np.iinfo(dtype)
    wanted = [n, n + 1, -1, info.min, info.max, 2**31 - 1, 2**31, 2**32, 2**32 + n - 1,
              2**63 - 1, 2**63, -2**31, -2**63]
    return [v for v in dict.fromkeys(wanted) if info.min <= v <= info.max and not 0 <= v < n]


@pytest.mark.parametrize("dtype", INT_TYPES)
def test_integer_copy_matches_reference(dtype):
    rng = np.random.default_rng(0)
    for cols in (1, 3):
        for rows in (0, 1, CHUNK - 1, CHUNK, CHUNK + 1, 2 * CHUNK + 5):
            nvec = rng.integers(1, min(np.iinfo(dtype).max, 2**31 - 1), size=cols, endpoint=True)
            nvec = np.minimum(nvec, rng.choice([2, 18, 2**31 - 1], size=cols)).astype(np.int32)
            good = (rng.integers(0, 2**31 - 1, size=(rows, cols)) % nvec).astype(dtype)
            out = np.full((rows, cols), -7, np.int32)
            assert _native.copy_actions(good, out, nvec) == -1
            np.testing.assert_array_equal(out, good.astype(np.int64))
            if rows == 0:
                continue
            for at in {0, rows - 1, min(CHUNK - 1, rows - 1), min(CHUNK, rows - 1), int(rng.integers(rows))}:
                col = int(rng.integers(cols))
                for value in out_of_range_values(dtype, int(nvec[col])):
                    bad = good.copy()
                    bad[at, col] = value
                    out[:] = -7
                    found = _native.copy_actions(bad, out, nvec)
                    assert found == first_bad_row(bad, nvec) == at, (rows, cols, at, value)
                    np.testing.assert_array_equal(out[:at], good[:at].astype(np.int64))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_float_copy_refuses_non_finite(dtype):
    rng = np.random.default_rng(1)
    for cols in (1, 6):
        for rows in (0, 1, CHUNK + 1, 2 * CHUNK + 3):
            good = rng.standard_normal((rows, cols)).astype(dtype)
            good[rows // 2:rows // 2 + 1] = np.finfo(np.float32).max  # finite in float32: accepted
            out = np.zeros((rows, cols), np.float32)
            assert _native.copy_float_actions(good, out) == -1
            np.testing.assert_array_equal(out, good.astype(np.float32))
            bad_values = [np.nan, np.inf, -np.inf] + ([1e39, -1e300] if dtype == np.float64 else [])
            for at in {0, rows - 1, min(CHUNK, rows - 1)} if rows else ():
                for value in bad_values:
                    bad = good.copy()
                    bad[at, int(rng.integers(cols))] = value
                    assert _native.copy_float_actions(bad, out) == at, (rows, cols, at, value)
                    np.testing.assert_array_equal(out[:at], good[:at].astype(np.float32))
