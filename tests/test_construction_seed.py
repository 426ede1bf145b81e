"""A pool's constructor seed means what EnvPool's make(seed=s) means: the
first reset without a seed, before any step, is the seeded reset
(pool/contract.py, ConstructionSeed); later resets go on with each env's RNG."""
import numpy as np
import pytest

import shoal
from shoal.pool import NativeVectorEnv


@pytest.mark.parametrize("name, kwargs", [
    ("CartPole", dict(backend="serial")),
    ("CartPole", dict(num_workers=2)),
    ("Snake", dict(num_workers=2, parent_share=False)),
    ("Hopper", dict(backend="serial")),
])
def test_first_reset_without_a_seed_is_the_seeded_one(name, kwargs):
    if name == "Hopper":
        pytest.importorskip("mujoco")
    with shoal.make(name, 4, seed=5, **kwargs) as pool, shoal.make(name, 4, seed=0, **kwargs) as reference:
        seeded = reference.reset(seed=5)[0].copy()
        first = pool.reset()[0].copy()
        np.testing.assert_array_equal(first, seeded)
        second = pool.reset()[0].copy()                  # goes on: a new episode
        again = reference.reset()[0].copy()
        np.testing.assert_array_equal(second, again)
        if name != "Snake":                              # Snake's start may repeat
            assert not np.array_equal(second, first)
        # after a step, a reset without a seed goes on as well
        actions = np.zeros(pool.action_space.shape, pool.action_space.dtype)
        pool.step(actions)
        reference.step(actions)
        np.testing.assert_array_equal(pool.reset()[0], reference.reset()[0])


def test_a_step_first_ends_it_and_partial_resets_use_it_per_env():
    with shoal.make("CartPole", 4, backend="serial", seed=5) as pool, \
            shoal.make("CartPole", 4, backend="serial", seed=0) as reference:
        seeded = reference.reset(seed=5)[0].copy()
        part, info = pool.reset([2, 0])                  # envs 2 and 0: their seeded reset
        np.testing.assert_array_equal(part, seeded[[2, 0]])
        whole = pool.reset()[0].copy()                   # 1 and 3 seeded now, 0 and 2 go on
        np.testing.assert_array_equal(whole[[1, 3]], seeded[[1, 3]])
        assert not np.array_equal(whole[[0, 2]], seeded[[0, 2]])
    with shoal.make("CartPole", 4, backend="serial", seed=5) as pool:
        construction = pool.obs.copy()
        np.testing.assert_array_equal(construction, seeded)
        pool.step(np.zeros(4, np.int32))
        assert not np.array_equal(pool.reset()[0], seeded)


def test_none_entries_of_a_seed_sequence_are_unseeded_resets():
    """A sequence's None entry is no seed for that env, as seed=None is: the
    construction's seeded reset where the env is unstepped."""
    with shoal.make("CartPole", 4, backend="serial", seed=5) as pool, \
            shoal.make("CartPole", 4, backend="serial", seed=0) as reference:
        seeded = reference.reset(seed=5)[0].copy()
        seven = reference.reset(seed=[None, 7, None, None])[0].copy()   # env 1 seeded 7
        got = pool.reset(seed=[None, 7, None, None])[0]
        np.testing.assert_array_equal(got[[0, 2, 3]], seeded[[0, 2, 3]])
        np.testing.assert_array_equal(got[1], seven[1])


@pytest.mark.parametrize("kwargs", [dict(backend="serial"), dict(num_workers=2), dict(backend="cuda")])
def test_a_seed_sequence_at_construction_is_that_reset(kwargs):
    """make(seed=[...]): the first reset() is reset(seed=[...]) (a None entry:
    a seed drawn from OS entropy). It once added each env's index to the
    list's seeds, and a masked first reset of the CUDA backend failed on
    the list's shape."""
    if kwargs.get("backend") == "cuda":
        pytest.importorskip("torch")
        from shoal.cuda import CudaVecEnv
        make = lambda seed: CudaVecEnv("CartPole", 3, device="cpu", seed=seed)   # noqa: E731
    else:
        make = lambda seed: shoal.make("CartPole", 3, seed=seed, **kwargs)   # noqa: E731
    rows = np.asarray   # (the CUDA backend's CPU tensors too)
    pool, reference = make([10, 20, 30]), make(0)
    try:
        seeded = rows(reference.reset(seed=[10, 20, 30])[0]).copy()
        np.testing.assert_array_equal(rows(pool.reset()[0]), seeded)
        generated = make(s for s in (10, 20, 30))   # read once: kept as a list for the first reset()
        np.testing.assert_array_equal(rows(generated.reset()[0]), seeded)
        generated.close()
        masked = make([10, None, 30])
        first = masked.reset(options={"reset_mask": np.array([True, False, True])})[0]
        np.testing.assert_array_equal(rows(first)[[0, 2]], seeded[[0, 2]])
        masked.close()
    finally:
        pool.close()
        reference.close()


def test_async_reset_and_the_vector_env_views():
    with shoal.make("CartPole", 4, batch_size=2, num_workers=2, seed=5) as pool, \
            shoal.make("CartPole", 4, backend="serial", seed=0) as reference:
        seeded = reference.reset(seed=5)[0].copy()
        pool.async_reset()
        for _ in range(2):
            obs, *_, info = pool.recv()
            np.testing.assert_array_equal(obs, seeded[info["env_id"]])
            pool.send(np.zeros(2, np.int32))
    env = NativeVectorEnv("CartPole", 4, backend="serial", seed=5)
    try:
        np.testing.assert_array_equal(env.reset()[0], seeded)
    finally:
        env.close()
    torch = pytest.importorskip("torch")
    from shoal.cuda import CudaVecEnv
    cuda_face = CudaVecEnv("CartPole", 4, device="cpu", seed=5)
    try:
        np.testing.assert_array_equal(cuda_face.reset()[0].numpy(), seeded)
        cuda_face.step(torch.zeros(4, dtype=torch.int32))
        assert not np.array_equal(cuda_face.reset()[0].numpy(), seeded)
    finally:
        cuda_face.close()


@pytest.mark.parametrize("kwargs", [dict(backend="serial"), dict(num_workers=2), dict(backend="cuda")])
def test_none_entries_at_construction_are_random_envs(kwargs):
    """make(seed=[5, None, None]): the None envs were never seeded, and once
    all started from one fixed RNG state: clones of each other, the same on
    every run. Each now gets a seed drawn from OS entropy (as seed=None does)."""
    if kwargs.get("backend") == "cuda":
        pytest.importorskip("torch")
        from shoal.cuda import CudaVecEnv
        make = lambda seed: CudaVecEnv("CartPole", 3, device="cpu", seed=seed)   # noqa: E731
    else:
        make = lambda seed: shoal.make("CartPole", 3, seed=seed, **kwargs)   # noqa: E731
    runs = []
    for _ in range(2):
        pool, reference = make([5, None, None]), make(5)
        try:
            first = np.array(pool.reset()[0])
            np.testing.assert_array_equal(first[0], np.asarray(reference.reset()[0])[0])
            np.testing.assert_array_equal(np.asarray(pool.reset(seed=[None, None, None])[0]) != first,
                                          np.ones_like(first, dtype=bool))   # unstepped: goes on
            runs.append(first)
        finally:
            pool.close()
            reference.close()
    assert not np.array_equal(runs[0][1], runs[0][2])        # not clones of each other
    assert not np.array_equal(runs[0][1:], runs[1][1:])      # nor the same run to run


def test_make_vec_takes_a_seed_list():
    """gymnasium.make_vec(..., seed=[...]) once failed after building the
    pool (it added an index to the list); it is the list's seeded reset,
    and np_random_seed reports each env's seed."""
    import gymnasium
    native = gymnasium.make_vec("shoal/CartPole-v0", 3, vectorization_mode="vector_entry_point",
                                seed=[4, None, 9])
    sync = gymnasium.make_vec("shoal/CartPole-v0", 3, vectorization_mode="sync")
    try:
        assert native.np_random_seed[0::2] == (4, 9) and isinstance(native.np_random_seed[1], int)
        np.testing.assert_array_equal(native.reset()[0][0::2], sync.reset(seed=[4, 0, 9])[0][0::2])
    finally:
        native.close()
        sync.close()
    with pytest.raises(ValueError, match="sequence of 3"):
        gymnasium.make_vec("shoal/CartPole-v0", 3, seed=[1, 2])
