"""Helpers shared by the tests (tests/ is on sys.path: see pyproject's pytest options)."""
import os

import numpy as np


def alive(pid) -> bool:
    """Whether process `pid` exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError):   # gone (the read fails if it goes after the open:
        return False                                  # seen in CI, SIGCHLD ignored reaps it at once)


def children(pid) -> list[int]:
    """Process `pid`'s children (of all its threads), live or not; [] once it is gone."""
    kids = []
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children") as f:
                kids += [int(k) for k in f.read().split()]
    except (FileNotFoundError, ProcessLookupError):
        pass
    return kids


def rollout(pool, actions, seed=7):
    """Everything a pool returns over a reset and len(actions) steps, copied:
    [obs, masks] then [obs, rewards, terminals, truncations, masks] per step."""
    obs, _ = pool.reset(seed=seed)
    out = [obs.copy(), pool.masks.copy()]
    for a in actions:
        obs, rew, term, trunc, _ = pool.step(a)
        out += [obs.copy(), rew.copy(), term.copy(), trunc.copy(), pool.masks.copy()]
    return out


def assert_same_arrays(a, b):
    """Two rollouts (lists of arrays) are equal, array by array."""
    assert len(a) == len(b)
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x, y)


def assert_same(ours, ref, where="result"):
    """Same structure (dict keys in order, tuples), types, dtypes, shapes and
    bit-identical values, recursively through object arrays (final_obs)."""
    if isinstance(ref, dict):
        assert type(ours) is dict, f"{where}: {type(ours)}"
        assert list(ours) == list(ref), f"{where}: keys {list(ours)} != {list(ref)}"
        for key in ref:
            assert_same(ours[key], ref[key], f"{where}[{key!r}]")
    elif isinstance(ref, tuple):
        assert type(ours) is tuple and len(ours) == len(ref), f"{where}: {ours!r} != {ref!r}"
        for k, (a, b) in enumerate(zip(ours, ref)):
            assert_same(a, b, f"{where}[{k}]")
    elif isinstance(ref, np.ndarray):
        assert type(ours) is np.ndarray, f"{where}: {type(ours)}"
        assert (ours.dtype, ours.shape) == (ref.dtype, ref.shape), \
            f"{where}: {ours.dtype}{ours.shape} != {ref.dtype}{ref.shape}"
        if ref.dtype == object:
            for i, (a, b) in enumerate(zip(ours.ravel(), ref.ravel())):
                assert_same(a, b, f"{where}[{i}]")
        else:
            assert ours.tobytes() == ref.tobytes(), f"{where}: {ours} != {ref}"
    else:
        assert type(ours) is type(ref), f"{where}: {type(ours)} != {type(ref)}"
        if isinstance(ref, (float, np.floating)) and np.isnan(ref):
            assert np.isnan(ours), where
        else:
            assert ours == ref, f"{where}: {ours!r} != {ref!r}"
