"""Property-based fuzzing of what users hand the pools: actions and arguments.

hypothesis earns its place here: the space of dtypes x shapes x values x
envs is too big to enumerate by hand, and it shrinks a failure to the
smallest input that shows it. The properties:

- actions: any array either steps exactly as the same actions cast to
  int32 would (checked against a twin pool) or raises ValueError, and after
  a ValueError nothing was stepped: the pool still equals its twin;
- constructor arguments: anything that is not a valid size, seed or mode is
  a ValueError or TypeError with a message, never another exception.
"""
import numpy as np
import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings, strategies as st  # noqa: E402
from hypothesis.extra import numpy as hnp  # noqa: E402

import shoal  # noqa: E402
from shoal.pool import Serial  # noqa: E402

NUM_ENVS = 3
ENVS = ["CartPole", "Explorer"]          # Discrete (1-D actions) and MultiDiscrete (2-D)
SETTINGS = settings(max_examples=60, deadline=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
DTYPES = st.sampled_from([np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32,
                          np.uint64, np.float32, np.float64, np.bool_, np.complex64])


@st.composite
def action_arrays(draw, pool):
    shape = pool.action_space.shape
    if draw(st.booleans()):   # a wrong shape, sometimes
        shape = draw(hnp.array_shapes(min_dims=0, max_dims=3, max_side=4))
    dtype = draw(DTYPES)
    if np.dtype(dtype).kind in "iu":
        info = np.iinfo(dtype)
        nvec_max = max(pool.spec.action_nvec)
        small = st.integers(max(info.min, -2), min(info.max, nvec_max + 1))
        values = st.one_of(small, st.integers(info.min, info.max))
        return draw(hnp.arrays(dtype, shape, elements=values))
    return draw(hnp.arrays(dtype, shape))


def same_state(a, b) -> bool:
    return (np.array_equal(a._buffers.env_states, b._buffers.env_states)
            and np.array_equal(a._buffers.obs, b._buffers.obs))


@pytest.mark.parametrize("name", ENVS)
def test_any_action_array_steps_exactly_or_is_rejected_without_stepping(name):
    pool = Serial(name, NUM_ENVS, seed=1)
    twin = Serial(name, NUM_ENVS, seed=1)
    nvec = np.asarray(pool.spec.action_nvec)

    @SETTINGS
    @given(data=st.data())
    def check(data):
        actions = data.draw(action_arrays(pool))
        valid = (actions.shape == pool.action_space.shape and actions.dtype.kind in "iu"
                 and bool(np.all(actions >= 0))
                 and bool(np.all(actions.reshape(pool.num_rows, -1) < nvec)))
        try:
            pool.step(actions)
        except ValueError as e:
            assert not valid, f"valid actions rejected: {e}"
            assert str(e)
            assert same_state(pool, twin), "a rejected step changed the envs"
            return
        assert valid, f"invalid actions accepted: {actions!r}"
        twin.step(actions.astype(np.int32))
        assert same_state(pool, twin)

    try:
        check()
    finally:
        pool.close()
        twin.close()


BAD_SIZES = st.one_of(st.integers(-5, 0), st.floats(allow_nan=True), st.booleans(), st.text(max_size=3),
                      st.none(), st.lists(st.integers(1, 3), max_size=2))


@SETTINGS
@given(num_envs=BAD_SIZES)
def test_bad_num_envs_is_a_clear_error(num_envs):
    with pytest.raises((ValueError, TypeError)) as info:
        shoal.make("CartPole", num_envs, backend="serial")
    assert str(info.value)


@SETTINGS
@given(seed=st.one_of(st.floats(), st.booleans(), st.text(max_size=3), st.integers(max_value=-1),
                      st.lists(st.integers(0, 9), min_size=1, max_size=5)))
def test_bad_seeds_are_a_clear_error(seed):
    pool = Serial("CartPole", 2, seed=0)
    try:
        if isinstance(seed, list) and len(seed) == 2:
            pool.reset(seed=seed)   # one seed per env is valid
            return
        with pytest.raises((ValueError, TypeError)) as info:
            pool.reset(seed=seed)
        assert str(info.value)
        pool.step(np.zeros(2, np.int32))   # still usable
    finally:
        pool.close()


def test_zero_dim_array_seeds_are_ints_and_other_objects_are_refused():
    with Serial("CartPole", 2, seed=0) as pool, Serial("CartPole", 2, seed=0) as reference:
        np.testing.assert_array_equal(pool.reset(seed=np.array(5))[0], reference.reset(seed=5)[0])
        for bad in (np.array(5.0), np.array(True), object(), np.array([[1, 2]]).T):
            with pytest.raises(ValueError, match="seed"):
                pool.reset(seed=bad)


def test_multi_agent_ids_name_the_mode_that_makes_them():
    import gymnasium
    for make in (lambda: gymnasium.make("shoal/Snake-v0"),
                 lambda: gymnasium.make_vec("shoal/Snake-v0", 2, vectorization_mode="sync")):
        with pytest.raises(gymnasium.error.Error, match=r"Snake is a multi-agent env.*'sync' / 'async'.*"
                                                        r"vectorization_mode='vector_entry_point'"):
            make()


@SETTINGS
@given(mode=st.one_of(st.text(max_size=12), st.integers(), st.none()))
def test_bad_autoreset_modes_are_a_clear_error(mode):
    if mode in ("next_step", "same_step", "disabled", "NEXT_STEP", "SAME_STEP", "DISABLED"):
        return
    try:
        pool = shoal.make("CartPole", 2, backend="serial", autoreset_mode=mode)
    except (ValueError, TypeError) as e:
        assert str(e)
    else:   # a mode it accepts must be one of the three
        assert pool.autoreset_mode.name.lower() in ("next_step", "same_step", "disabled")
        pool.close()
