"""shoal.pool.AsyncVectorEnv against gymnasium's SyncVectorEnv (exact
outputs, step by step, in every autoreset mode) and gymnasium's
AsyncVectorEnv API (errors, async calls, attributes, timeouts, closing).

Faults (env exceptions, killed workers, Ctrl-C) live in tests/test_faults.py.
"""
import functools
import os
import subprocess
import sys
import textwrap
import multiprocessing as mp
import time

import gymnasium
import numpy as np
import pytest
from gymnasium import spaces
from gymnasium.error import AlreadyPendingCallError, ClosedEnvironmentError, NoAsyncCallError
from gymnasium.vector import AutoresetMode, SyncVectorEnv

from shoal.pool import AsyncVectorEnv

from helpers import alive, assert_same

MODES = [AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP, AutoresetMode.DISABLED]


# ---------------------------------------------------------------------------
# Test envs
# ---------------------------------------------------------------------------

class RichEnv(gymnasium.Env):
    """Nested Dict/Tuple observations of every shareable leaf type and
    several dtypes, a Dict action, terminations and truncations drawn from
    its own np_random, and infos that vary in keys and types across steps
    and envs."""

    metadata = {"render_modes": ["rgb_array"], "render_fps": 30}

    def __init__(self, env_id=0, render_mode=None, high=1.0, delay=0.0):
        self.env_id, self.render_mode, self.high, self.delay = env_id, render_mode, high, delay
        self.observation_space = spaces.Dict({
            "pos": spaces.Box(-high, high, (3,), np.float32),
            "grid": spaces.Box(0, 255, (2, 2), np.uint8),
            "count": spaces.Box(-1000, 1000, (), np.int64),
            "nested": spaces.Tuple((
                spaces.Discrete(5, start=-2),
                spaces.MultiDiscrete([3, 4]),
                spaces.MultiBinary(4),
                spaces.Dict({"f64": spaces.Box(-np.inf, np.inf, (2,), np.float64),
                             "i32": spaces.Box(-5, 5, (1,), np.int32)}),
            )),
        })
        self.action_space = spaces.Dict({
            "move": spaces.Box(-1, 1, (2,), np.float32),
            "pick": spaces.Discrete(3, start=1),
            "flags": spaces.MultiBinary(2),
        })
        self.t, self.total, self.limit = 0, 0.0, 0

    def _obs(self):
        r = self.np_random
        return {
            "pos": (r.uniform(-1, 1, 3) * self.high).astype(np.float32),
            "grid": r.integers(0, 256, (2, 2), dtype=np.uint8),
            "count": np.int64(self.t),
            "nested": (
                int(r.integers(-2, 3)),
                r.integers(0, [3, 4]).astype(np.int64),
                r.integers(0, 2, 4).astype(np.int8),
                {"f64": np.array([self.total, r.normal()]), "i32": r.integers(-5, 6, 1, dtype=np.int32)},
            ),
        }

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t, self.total = 0, 0.0
        self.previous_move = np.zeros(2, np.float32)
        self.limit = int(self.np_random.integers(5, 40))
        info = {"limit": self.limit}
        if self.env_id % 2 == 0:
            info["seeded"] = seed is not None
        if options:
            info["options"] = dict(options)
        return self._obs(), info

    def step(self, action):
        if self.delay:
            time.sleep(self.delay)
        r = self.np_random
        self.t += 1
        self.total += float(np.sum(action["move"], dtype=np.float64)) * int(action["pick"]) \
            + int(action["flags"].sum())
        # keeps the action array: SyncVectorEnv hands each env its own row,
        # which later actions must not overwrite
        previous, self.previous_move = self.previous_move, action["move"]
        reward = self.total * 0.1 + r.normal() + float(np.sum(previous - action["move"]))
        terminated = bool(r.random() < 0.04)
        truncated = self.t >= self.limit
        info = {}
        if self.t % 3 == 0:
            info["every3"] = self.t
        if r.random() < 0.3:
            info["arr"] = r.normal(size=2).astype(np.float32)
        if self.env_id % 2 == 0:
            info["even"] = {"total": self.total, "deep": {"done": terminated or truncated}}
        if r.random() < 0.2:
            info["np_scalar"] = np.int16(self.t)
        if r.random() < 0.1:
            info["text"] = f"env{self.env_id}-{self.t}"
        return self._obs(), reward, terminated, truncated, info

    def render(self):
        if self.render_mode == "rgb_array":
            return np.full((4, 6, 3), (self.t * 7 + self.env_id) % 256, np.uint8)
        return None

    def scaled(self, x, k=1):
        return self.env_id * x + k, self.t

    def pause(self, seconds):
        time.sleep(seconds)
        return self.env_id


class TextEnv(gymnasium.Env):
    """An observation space with no shared-memory layout."""

    def __init__(self):
        self.observation_space = spaces.Dict({"text": spaces.Text(6, charset="abc"),
                                              "x": spaces.Box(-1, 1, (2,), np.float32)})
        self.action_space = spaces.Discrete(3)
        self.t = 0

    def _obs(self):
        r = self.np_random
        text = "".join("abc"[k] for k in r.integers(0, 3, int(r.integers(1, 7))))
        return {"text": text, "x": r.uniform(-1, 1, 2).astype(np.float32)}

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return self._obs(), {}

    def step(self, action):
        self.t += 1
        obs = self._obs()
        obs["text"] = obs["text"][:5] + "abc"[action]
        info = {"t": self.t} if self.t % 2 else {}
        return obs, float(action), bool(self.np_random.random() < 0.1), self.t >= 15, info


class OtherActionEnv(RichEnv):
    """RichEnv's observations, another action space."""

    def __init__(self):
        super().__init__()
        self.action_space = spaces.Discrete(2)


def rich_fns(n, **kwargs):
    return [functools.partial(RichEnv, i, **kwargs) for i in range(n)]


def gym_fns(env_id, n):
    return [functools.partial(gymnasium.make, env_id) for _ in range(n)]


# ---------------------------------------------------------------------------
# Exact comparison
# ---------------------------------------------------------------------------

def assert_step_same(ours, ref, where):
    assert len(ours) == len(ref) == 5
    assert ref[1].dtype == np.float64
    for name, a, b in zip(("obs", "rewards", "terminations", "truncations", "infos"), ours, ref):
        assert_same(a, b, f"{where} {name}")


def assert_random_steps_same(pool, sync, steps: int) -> None:
    """Step both with the same random actions (sync's action space, seeded
    0); every step's outputs must be identical."""
    sync.action_space.seed(0)
    for t in range(steps):
        actions = sync.action_space.sample()
        assert_step_same(pool.step(actions), sync.step(actions), f"step {t}")


def run_against_sync(env_fns, mode, steps, *, pool_kwargs=None, sync_kwargs=None, seed=7):
    """Drive a pool and a SyncVectorEnv with the same seeds, actions and
    resets; every output must be identical. In DISABLED mode, done envs are
    reset with options={"reset_mask": done}, as a user would."""
    n = len(env_fns)
    sync = SyncVectorEnv(env_fns, autoreset_mode=mode, **(sync_kwargs or {}))
    pool_kwargs = {"num_workers": 2, **(pool_kwargs or {})}
    pool = AsyncVectorEnv(env_fns, autoreset_mode=mode, **pool_kwargs)
    try:
        assert pool.num_workers == min(pool_kwargs["num_workers"], n)
        assert pool.metadata["autoreset_mode"] is mode is sync.metadata["autoreset_mode"]
        assert pool.metadata == sync.metadata
        assert pool.single_observation_space == sync.single_observation_space
        assert pool.observation_space == sync.observation_space
        assert pool.single_action_space == sync.single_action_space
        assert pool.action_space == sync.action_space

        assert_same(pool.reset(seed=seed), sync.reset(seed=seed), "reset")
        sync.action_space.seed(123)
        partial_reset_done = False
        for t in range(steps):
            actions = sync.action_space.sample()
            result = pool.step(actions)
            expected = sync.step(actions)
            assert_step_same(result, expected, f"step {t}")
            done = expected[2] | expected[3]
            if not partial_reset_done and t >= steps // 2 and done.any():
                # a partial reset right after an episode end (its NEXT_STEP
                # autoreset is then cancelled), of one running env too, with
                # a seed list and options
                mask = done.copy()
                mask[np.flatnonzero(~done)[:1]] = True
                seeds = [1000 + i for i in range(n)]
                assert_same(pool.reset(seed=seeds, options={"reset_mask": mask.copy(), "x": 1}),
                            sync.reset(seed=seeds, options={"reset_mask": mask.copy(), "x": 1}),
                            f"partial reset at {t}")
                partial_reset_done = True
            elif mode == AutoresetMode.DISABLED and done.any():
                assert_same(pool.reset(options={"reset_mask": done.copy()}),
                            sync.reset(options={"reset_mask": done.copy()}), f"reset_mask at {t}")
        assert partial_reset_done, "the run must reach an episode end after half its steps"
        assert_same(pool.np_random_seed, sync.np_random_seed, "np_random_seed")
    finally:
        pool.close()
        sync.close()


GYM_ENVS = [  # env id, steps (Pendulum is truncated at 200)
    ("CartPole-v1", 150),
    ("Pendulum-v1", 210),
    ("FrozenLake-v1", 120),
    ("Blackjack-v1", 60),
]


@pytest.mark.parametrize("mode", MODES, ids=lambda m: m.value)
@pytest.mark.parametrize("env_id,steps", GYM_ENVS, ids=[e for e, _ in GYM_ENVS])
def test_gym_envs_equal_sync(no_leaks, env_id, steps, mode):
    run_against_sync(gym_fns(env_id, 5), mode, steps)


@pytest.mark.parametrize("mode", MODES, ids=lambda m: m.value)
def test_rich_env_equals_sync(no_leaks, mode):
    run_against_sync(rich_fns(5), mode, 200, seed=3)


@pytest.mark.parametrize("mode", MODES, ids=lambda m: m.value)
def test_rich_env_over_pipes_equals_sync(no_leaks, mode):
    run_against_sync(rich_fns(4), mode, 120, pool_kwargs={"shared_memory": False})


@pytest.mark.parametrize("mode", [AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP], ids=lambda m: m.value)
def test_text_observations_without_shared_memory(no_leaks, mode):
    run_against_sync([TextEnv] * 4, mode, 80, pool_kwargs={"shared_memory": False})


@pytest.mark.parametrize("shared_memory", [True, False])
def test_text_observations_travel_pickled_even_with_shared_memory(shared_memory, no_leaks):
    """gymnasium's built-in spaces without a fixed layout travel over the
    pipes whatever shared_memory says (gymnasium raises for some instead)."""
    run_against_sync([TextEnv] * 3, AutoresetMode.NEXT_STEP, 40,
                     pool_kwargs={"shared_memory": shared_memory})


def test_only_the_entries_without_a_layout_travel_pickled(no_leaks):
    """In a Dict mixing a Text with a Box, the Box rows stay in shared memory
    (what step returns with copy=False are views of the pool's region); the
    Text goes by pipe, and a Tuple splits the same way."""
    pool = AsyncVectorEnv([TextEnv] * 3, copy=False, num_workers=2)
    try:
        obs, _ = pool.reset(seed=0)
        obs, *_ = pool.step(np.zeros(3, np.int64))
        region = pool._memory.observations
        assert set(region) == {"x"} and np.shares_memory(obs["x"], region["x"])
        assert isinstance(obs["text"], tuple) and all(isinstance(t, str) for t in obs["text"])
    finally:
        pool.close()
    from shoal.pool.spaces import ObsSplit
    split = ObsSplit.of(spaces.Tuple((spaces.Text(4), spaces.Box(0, 1, (2,)), spaces.Discrete(3))))
    assert split.shared_keys == [1, 2] and split.piped_keys == [0]
    joined = split.join((np.zeros((2, 2)), np.ones(2)), {0: ("ab", "c")})
    assert joined[0] == ("ab", "c") and joined[1].shape == (2, 2) and joined[2][0] == 1
    assert ObsSplit.of(spaces.Dict({"t": spaces.Text(3)})) is None       # nothing to share: all by pipe
    assert ObsSplit.of(spaces.Dict({"b": spaces.Box(0, 1, (1,))})) is None  # all shared


class GraphEnv(gymnasium.Env):
    """Graph observations: a namedtuple (GraphInstance) per env."""

    def __init__(self):
        self.observation_space = spaces.Graph(spaces.Box(-1, 1, (2,), np.float32), spaces.Discrete(3))
        self.action_space = spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.observation_space.seed(int(self.np_random.integers(1 << 30)))
        return self.observation_space.sample(), {}

    def step(self, action):
        return self.observation_space.sample(), 0.0, False, False, {}


@pytest.mark.parametrize("copy", [True, False])
def test_graph_observations_keep_their_type(copy, no_leaks):
    # copy=True used to rebuild each GraphInstance as a plain tuple
    env = AsyncVectorEnv([GraphEnv] * 3, copy=copy, num_workers=2)
    sync = SyncVectorEnv([GraphEnv] * 3, copy=copy)
    outputs = [(env.reset(seed=0)[0], sync.reset(seed=0)[0])]
    for _ in range(5):
        outputs.append((env.step(np.array([0, 1, 0]))[0], sync.step(np.array([0, 1, 0]))[0]))
    for ours, ref in outputs:
        assert ours in env.observation_space
        for a, b in zip(ours, ref, strict=True):
            assert type(a) is type(b) and type(a).__name__ == "GraphInstance"
            for x, y in zip(a, b):
                assert (x is None and y is None) or np.array_equal(x, y)
    env.close()
    sync.close()


class OwnSpace(spaces.Space):
    """A space of the user's own: no layout, not one of gymnasium's."""

    def sample(self, mask=None, probability=None):
        return "x"

    def contains(self, x):
        return x == "x"


class OwnSpaceEnv(gymnasium.Env):
    def __init__(self):
        self.observation_space, self.action_space = OwnSpace(), spaces.Discrete(2)


class OwnSpaceInADictEnv(gymnasium.Env):
    """MiniGrid's layout: an image beside a space of its own."""
    def __init__(self):
        self.observation_space = spaces.Dict({"image": spaces.Box(0, 255, (3, 3), np.uint8),
                                              "mission": OwnSpace()})
        self.action_space = spaces.Discrete(2)


def test_a_space_of_the_users_own_needs_shared_memory_off(no_leaks):
    """gymnasium's error (its suite expects one), naming the entry."""
    with pytest.raises(ValueError, match=r"shared_memory=False.*observation space is a OwnSpace"):
        AsyncVectorEnv([OwnSpaceEnv] * 2)
    with pytest.raises(ValueError, match=r"observation space's entry \['mission'\] is a OwnSpace.*Text, Graph"):
        AsyncVectorEnv([OwnSpaceInADictEnv] * 2)


class StepRaisesEnv(gymnasium.Env):
    observation_space, action_space = spaces.Box(-1, 1, (1,), np.float32), spaces.Discrete(3)

    def reset(self, *, seed=None, options=None):
        return np.zeros(1, np.float32), {}

    def step(self, action):
        if action > 0:
            raise ValueError(f"Error in step with {action}")
        return np.zeros(1, np.float32), 0.0, False, False, {}


def test_env_errors_log_what_gymnasium_logs(no_leaks):
    """Per failing env, gymnasium's two messages naming its index, then its
    last one; then the last exception is raised (and the pool closed)."""
    import warnings
    env = AsyncVectorEnv([StepRaisesEnv] * 3, num_workers=2)
    env.reset(seed=0)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(ValueError, match="Error in step"):
            env.step(np.array([0, 1, 2]))
    messages = [str(w.message) for w in caught]
    assert len(messages) == 5, messages
    named = sorted(m for m in messages if "Received the following error from Worker-" in m)
    assert len(named) == 2 and "Worker-1 " in named[0] and "Worker-2 " in named[1]
    assert "Raising the last exception back to the main process." in messages[-1]
    assert env.closed


class WrongShapeObsEnv(gymnasium.Env):
    """Box(3,) observations, but step returns `bad` (reset a right one)."""
    observation_space, action_space = spaces.Box(-1, 1, (3,), np.float32), spaces.Discrete(2)

    def __init__(self, bad):
        self.bad = bad

    def reset(self, *, seed=None, options=None):
        return np.zeros(3, np.float32), {}

    def step(self, action):
        return self.bad, 0.0, False, False, {}


@pytest.mark.parametrize("bad", [np.ones((1, 3), np.float32), np.float32(1.0), np.ones(1), [1.0, 2.0]])
def test_an_observation_of_the_wrong_shape_is_an_error_as_in_sync(no_leaks, bad):
    """numpy would broadcast a (1, 3), scalar or (1,) value into a (3,) row
    (gymnasium's AsyncVectorEnv does, with shared memory), hiding the env's
    bug; SyncVectorEnv raises, and so does shoal's pool."""
    fns = [functools.partial(WrongShapeObsEnv, bad)] * 2
    sync = SyncVectorEnv(fns)
    sync.reset(seed=0)
    with pytest.raises(ValueError):
        sync.step(np.zeros(2, np.int64))
    sync.close()
    env = AsyncVectorEnv(fns, num_workers=2)
    env.reset(seed=0)
    with pytest.warns(UserWarning), pytest.raises(ValueError, match=r"shape .* where the space's shape is \(3,\)"):
        env.step(np.zeros(2, np.int64))
    assert env.closed


class NoInfoEnv(gymnasium.Env):
    """Returns info None from `where` ("reset", "step", or "end": the step
    that ends an episode, whose info SAME_STEP keeps as final_info)."""
    observation_space, action_space = spaces.Box(-1, 1, (3,), np.float32), spaces.Discrete(2)

    def __init__(self, where):
        self.where = where

    def reset(self, *, seed=None, options=None):
        return np.zeros(3, np.float32), (None if self.where == "reset" else {})

    def step(self, action):
        return np.zeros(3, np.float32), 0.0, self.where == "end", False, (None if self.where != "reset" else {})


@pytest.mark.parametrize("where, mode", [("reset", AutoresetMode.NEXT_STEP), ("step", AutoresetMode.NEXT_STEP),
                                         ("step", AutoresetMode.SAME_STEP)])
def test_an_info_that_is_not_a_dict_is_an_error_as_in_sync(no_leaks, where, mode):
    """gymnasium's vector envs fail on an info of None (an AttributeError
    of their merging); shoal's pool took it silently as no info. (An
    ended step's info in SAME_STEP is kept as final_info, None too, in
    both: the last check.)"""
    fns = [functools.partial(NoInfoEnv, where)] * 2
    sync = SyncVectorEnv(fns, autoreset_mode=mode)
    with pytest.raises(AttributeError):
        sync.reset(seed=0)
        sync.step(np.zeros(2, np.int64))
    sync.close()
    env = AsyncVectorEnv(fns, num_workers=2, autoreset_mode=mode)
    with pytest.warns(UserWarning), pytest.raises(TypeError, match="returned info None .*return a dict"):
        env.reset(seed=0)
        env.step(np.zeros(2, np.int64))
    assert env.closed
    ends = [functools.partial(NoInfoEnv, "end")] * 2
    sync = SyncVectorEnv(ends, autoreset_mode=AutoresetMode.SAME_STEP)
    env = AsyncVectorEnv(ends, num_workers=2, autoreset_mode=AutoresetMode.SAME_STEP)
    sync.reset(seed=0)
    env.reset(seed=0)
    ours, theirs = env.step(np.zeros(2, np.int64)), sync.step(np.zeros(2, np.int64))
    assert list(ours[4]["final_info"]) == list(theirs[4]["final_info"]) == [None, None]
    assert_same(ours, theirs)
    env.close()
    sync.close()


class WrongDtypeObsEnv(gymnasium.Env):
    """Returns `bad`, of the right shape but a dtype numpy would not cast
    "same_kind" into its space's, after reset."""
    observation_space = spaces.Dict({"pixels": spaces.Box(0, 255, (2,), np.uint8), "cell": spaces.Discrete(4)})
    action_space = spaces.Discrete(2)

    def __init__(self, key, bad):
        self.key, self.bad = key, bad

    def reset(self, *, seed=None, options=None):
        return {"pixels": np.zeros(2, np.uint8), "cell": 0}, {}

    def step(self, action):
        obs = {"pixels": np.zeros(2, np.uint8), "cell": 1}
        obs[self.key] = self.bad
        return obs, 0.0, False, False, {}


@pytest.mark.filterwarnings("ignore:.*Raising the last exception:UserWarning")   # gymnasium's, as Async's
@pytest.mark.parametrize("key, bad", [("pixels", np.array([-1.0, 300.2])), ("pixels", np.array(["a", "b"])),
                                      ("cell", 2.5), ("cell", np.float32(1.0))])
def test_an_observation_of_an_uncastable_dtype_is_an_error_as_in_sync(no_leaks, key, bad):
    """Floats into a uint8 Box (with shared memory numpy wrapped -1.0 and
    300.2 into 255 and 44) or a Discrete row, strings into numbers:
    SyncVectorEnv raises a TypeError, and so does shoal's pool, with or
    without shared memory."""
    fns = [functools.partial(WrongDtypeObsEnv, key, bad)] * 2
    sync = SyncVectorEnv(fns)
    sync.reset(seed=0)
    with pytest.raises(TypeError, match="Cannot cast"):
        sync.step(np.zeros(2, np.int64))
    sync.close()
    for shared_memory in (True, False):
        env = AsyncVectorEnv(fns, num_workers=2, shared_memory=shared_memory)
        env.reset(seed=0)
        with pytest.raises(TypeError, match="Cannot cast"):
            env.step(np.zeros(2, np.int64))
        assert env.closed == shared_memory   # a worker's error closes the pool; over pipes the parent's does not
        env.close()


class ListObsEnv(gymnasium.Env):
    """Observations as lists: ints at reset, floats from step."""
    observation_space = spaces.Box(-1000, 1000, (3,), np.int64)
    action_space = spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        return [0, 0, 0], {}

    def step(self, action):
        return [-1.7, 300.2, 5.9], 0.0, False, False, {}


@pytest.mark.filterwarnings("ignore:.*Raising the last exception:UserWarning")
def test_lists_are_checked_each_time_not_by_their_type(no_leaks):
    """A list of ints passes; a later list of floats into the int64 row is
    SyncVectorEnv's TypeError, not truncated to [-1, 300, 5]."""
    env = AsyncVectorEnv([ListObsEnv] * 2, num_workers=1)
    env.reset(seed=0)
    with pytest.raises(TypeError, match="Cannot cast"):
        env.step(np.zeros(2, np.int64))
    env.close()


class LooseTypesEnv(gymnasium.Env):
    """Observations of the right shapes in the loose types envs return:
    numpy and Python scalars, bools, lists, tuples, torch tensors."""
    observation_space = spaces.Dict({
        "discrete": spaces.Discrete(3), "flag": spaces.Discrete(2), "scalar": spaces.Box(-1, 1, ()),
        "bits": spaces.MultiBinary(3), "pair": spaces.MultiDiscrete([3, 3]), "box": spaces.Box(-1, 1, (2,))})
    action_space = spaces.Discrete(2)

    def _obs(self):
        import torch
        return {"discrete": np.int64(2), "flag": True, "scalar": 0.5, "bits": [1, 0, 1],
                "pair": (2, 1), "box": torch.tensor([0.25, -0.5])}

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return self._obs(), {}

    def step(self, action):
        self.t += 1
        return self._obs(), 0.0, self.t % 3 == 0, False, {}


def test_observations_of_the_right_shape_in_loose_types_equal_sync(no_leaks):
    """The shape check lets every value of the space's shape through,
    whatever its type, as SyncVectorEnv takes them."""
    pytest.importorskip("torch")
    run_against_sync([LooseTypesEnv] * 2, AutoresetMode.NEXT_STEP, 8)


def test_copy_false_equals_sync(no_leaks):
    run_against_sync(rich_fns(3), AutoresetMode.NEXT_STEP, 60,
                     pool_kwargs={"copy": False}, sync_kwargs={"copy": False})


def test_worker_busy_seconds(no_leaks):
    env = AsyncVectorEnv([lambda: gymnasium.make("CartPole-v1")] * 4, num_workers=2)
    try:
        env.reset(seed=0)
        before = env.worker_busy_seconds()
        start = time.perf_counter()
        for _ in range(30):
            env.step(env.action_space.sample())
        wall = time.perf_counter() - start
        busy = env.worker_busy_seconds() - before
        assert busy.shape == (2,) and (busy > 0).all() and (busy <= wall).all(), (busy, wall)
    finally:
        env.close()
    with pytest.raises(ClosedEnvironmentError):
        env.worker_busy_seconds()


def test_observation_mode_different(no_leaks):
    fns = [functools.partial(RichEnv, i, high=1.0 + i) for i in range(4)]
    with pytest.raises(RuntimeError, match="observation_mode='same'"):
        AsyncVectorEnv(fns, num_workers=2)
    run_against_sync(fns, AutoresetMode.SAME_STEP, 60,
                     pool_kwargs={"observation_mode": "different"},
                     sync_kwargs={"observation_mode": "different"})


def test_observation_mode_custom_spaces(no_leaks):
    single = RichEnv().observation_space
    batched = gymnasium.vector.utils.batch_space(single, 3)
    run_against_sync(rich_fns(3), AutoresetMode.NEXT_STEP, 40,
                     pool_kwargs={"observation_mode": (batched, single)},
                     sync_kwargs={"observation_mode": (batched, single)})


def test_actions_of_another_dtype_reach_envs_as_sync_passes_them(no_leaks):
    """float64 actions for Pendulum's float32 Box: SyncVectorEnv hands the
    env float64 rows, so must the pool (Pendulum's dynamics see the difference)."""
    fns = gym_fns("Pendulum-v1", 4)
    sync, pool = SyncVectorEnv(fns), AsyncVectorEnv(fns, num_workers=2)
    try:
        assert_same(pool.reset(seed=1), sync.reset(seed=1), "reset")
        rng = np.random.default_rng(0)
        for t in range(30):
            actions = rng.uniform(-2, 2, (4, 1))  # float64
            assert_step_same(pool.step(actions), sync.step(actions), f"step {t}")
        for t in range(5):  # a plain list of lists
            actions = rng.uniform(-2, 2, (4, 1)).tolist()
            assert_step_same(pool.step(actions), sync.step(actions), f"list step {t}")
    finally:
        pool.close()
        sync.close()


def test_seeds(no_leaks):
    fns = gym_fns("CartPole-v1", 3)
    sync, pool = SyncVectorEnv(fns), AsyncVectorEnv(fns, num_workers=2)
    try:
        assert_same(pool.reset(seed=5), sync.reset(seed=5), "int seed")
        assert pool.np_random_seed == sync.np_random_seed == (5, 6, 7)
        assert_same(pool.reset(seed=[9, 2, 4]), sync.reset(seed=[9, 2, 4]), "list seed")
        assert pool.np_random_seed == (9, 2, 4)
        ours, ref = pool.np_random, sync.np_random
        assert [g.bit_generator.state for g in ours] == [g.bit_generator.state for g in ref]
        # None keeps an env's generator going (a fresh one only on the first reset)
        assert_same(pool.reset(seed=[None, 3, None]), sync.reset(seed=[None, 3, None]), "partial seeds")
        assert pool.np_random_seed == (9, 3, 4)
        for bad in ([1, 2], [1, 2, 3, 4]):
            with pytest.raises(ValueError, match="length must match num_envs=3"):
                pool.reset(seed=bad)
        # unseeded resets still give valid, differing observations
        obs, _ = pool.reset()
        assert pool.single_observation_space.contains(obs[0])
    finally:
        pool.close()
        sync.close()


# ---------------------------------------------------------------------------
# API
# ---------------------------------------------------------------------------

@pytest.fixture
def rich_pool(no_leaks):
    pool = AsyncVectorEnv(rich_fns(3, render_mode="rgb_array"), num_workers=2)
    yield pool
    pool.close()


@pytest.mark.parametrize("given,expected", [
    ("SameStep", AutoresetMode.SAME_STEP), ("NextStep", AutoresetMode.NEXT_STEP),
    ("Disabled", AutoresetMode.DISABLED), (AutoresetMode.SAME_STEP, AutoresetMode.SAME_STEP)])
def test_autoreset_mode_metadata(no_leaks, given, expected):
    pool = AsyncVectorEnv(gym_fns("CartPole-v1", 2), autoreset_mode=given, num_workers=2)
    try:
        assert pool.autoreset_mode is expected
        assert pool.metadata["autoreset_mode"] is expected
        assert pool.metadata["render_fps"] == gymnasium.make("CartPole-v1").metadata["render_fps"]
    finally:
        pool.close()


def test_default_autoreset_mode_and_attributes(rich_pool):
    assert rich_pool.metadata["autoreset_mode"] is AutoresetMode.NEXT_STEP
    assert rich_pool.num_envs == 3 and rich_pool.render_mode == "rgb_array"
    assert rich_pool.shared_memory is True and rich_pool.copy is True
    assert isinstance(rich_pool, gymnasium.vector.VectorEnv)
    assert rich_pool.unwrapped is rich_pool


def test_reset_mask_validation(rich_pool):
    rich_pool.reset(seed=0)
    with pytest.raises(TypeError, match="must be a numpy array"):
        rich_pool.reset(options={"reset_mask": [True, False, True]})
    with pytest.raises(ValueError, match=r"must have shape `\(3,\)`"):
        rich_pool.reset(options={"reset_mask": np.ones(4, np.bool_)})
    with pytest.raises(TypeError, match="must have `dtype=np.bool_`"):
        rich_pool.reset(options={"reset_mask": np.ones(3, np.int64)})
    with pytest.raises(ValueError, match="at least one True value"):
        rich_pool.reset(options={"reset_mask": np.zeros(3, np.bool_)})
    # the pool is fine afterwards, and a masked reset leaves other rows alone
    before, _ = rich_pool.reset(seed=1)
    after, infos = rich_pool.reset(seed=[None, 8, None], options={"reset_mask": np.array([False, True, False])})
    assert np.array_equal(after["pos"][[0, 2]], before["pos"][[0, 2]])
    assert not np.array_equal(after["pos"][1], before["pos"][1])
    assert infos["_limit"].tolist() == [False, True, False]


def test_async_call_state_errors(rich_pool):
    with pytest.raises(NoAsyncCallError):
        rich_pool.step_wait()
    with pytest.raises(NoAsyncCallError):
        rich_pool.reset_wait()
    with pytest.raises(NoAsyncCallError):
        rich_pool.call_wait()
    rich_pool.reset_async(seed=0)
    with pytest.raises(AlreadyPendingCallError):
        rich_pool.reset_async()
    with pytest.raises(NoAsyncCallError):
        rich_pool.step_wait()
    obs, infos = rich_pool.reset_wait()
    assert rich_pool.observation_space.contains(obs) and infos["limit"].shape == (3,)

    actions = rich_pool.action_space.sample()
    rich_pool.step_async(actions)
    with pytest.raises(AlreadyPendingCallError):
        rich_pool.step_async(actions)
    with pytest.raises(AlreadyPendingCallError):
        rich_pool.reset_async()
    with pytest.raises(AlreadyPendingCallError):
        rich_pool.call_async("scaled", 1)
    with pytest.raises(AlreadyPendingCallError):
        rich_pool.set_attr("delay", 0.0)
    with pytest.raises(NoAsyncCallError):
        rich_pool.call_wait()
    assert len(rich_pool.step_wait()) == 5

    rich_pool.call_async("scaled", 2, k=3)
    with pytest.raises(AlreadyPendingCallError):
        rich_pool.step_async(actions)
    assert rich_pool.call_wait() == ((3, 1), (5, 1), (7, 1))


def test_async_reset_and_step_equal_sync(no_leaks):
    fns = rich_fns(3)
    sync, pool = SyncVectorEnv(fns), AsyncVectorEnv(fns, num_workers=2)
    try:
        pool.reset_async(seed=4, options={"a": 1})
        assert_same(pool.reset_wait(timeout=10), sync.reset(seed=4, options={"a": 1}), "reset")
        sync.action_space.seed(1)
        for t in range(20):
            actions = sync.action_space.sample()
            pool.step_async(actions)
            assert_step_same(pool.step_wait(timeout=10), sync.step(actions), f"step {t}")
    finally:
        pool.close()
        sync.close()


def test_wrong_actions(rich_pool):
    rich_pool.reset(seed=0)
    with pytest.raises(ValueError):
        rich_pool.step(gymnasium.vector.utils.batch_space(rich_pool.single_action_space, 2).sample())
    rich_pool.step(rich_pool.action_space.sample())  # still usable


def test_call_get_attr_set_attr(no_leaks):
    fns = rich_fns(3)
    sync, pool = SyncVectorEnv(fns), AsyncVectorEnv(fns, num_workers=2)
    try:
        pool.reset(seed=0)
        sync.reset(seed=0)
        assert pool.get_attr("env_id") == sync.get_attr("env_id") == (0, 1, 2)
        assert pool.call("scaled", 10, k=2) == sync.call("scaled", 10, k=2) == ((2, 0), (12, 0), (22, 0))
        assert pool.call("env_id") == (0, 1, 2)  # an attribute, through call
        assert pool.get_attr("metadata") == sync.get_attr("metadata")
        assert pool.get_attr("observation_space") == sync.get_attr("observation_space")

        pool.set_attr("delay", [0.0, 0.001, 0.002])
        assert pool.get_attr("delay") == (0.0, 0.001, 0.002)
        pool.set_attr("delay", (0.0, 0.0, 0.003))
        assert pool.get_attr("delay") == (0.0, 0.0, 0.003)
        pool.set_attr("delay", 0.0)
        assert pool.get_attr("delay") == (0.0, 0.0, 0.0)
        pool.set_attr("new_attribute", {"a": 1})
        assert pool.get_attr("new_attribute") == ({"a": 1},) * 3
        with pytest.raises(ValueError, match="length equal to the number of environments"):
            pool.set_attr("delay", [0.0, 0.0])
        for name in ("reset", "step", "close", "_setattr", "_check_spaces"):
            with pytest.raises(ValueError, match=f"use `{name}` directly"):
                pool.call(name)
        # attributes set through the pool are the envs' own: the dynamics follow
        pool.set_attr("high", [1.0, 2.0, 3.0])
        sync.set_attr("high", [1.0, 2.0, 3.0])
        assert_random_steps_same(pool, sync, 10)
    finally:
        pool.close()
        sync.close()


@pytest.mark.parametrize("command", ["call", "set_attr", "reset"])
def test_an_argument_that_cannot_be_pickled_leaves_the_pool_open(no_leaks, command):
    """A lock (or a lambda) in call's arguments or reset's options is the
    caller's TypeError; the pool goes on, as gymnasium's AsyncVectorEnv does."""
    import threading
    fns = rich_fns(3)
    sync, pool = SyncVectorEnv(fns), AsyncVectorEnv(fns, num_workers=2)
    try:
        assert_same(pool.reset(seed=0), sync.reset(seed=0), "reset")
        with pytest.raises(TypeError, match="pickle"):
            if command == "call":
                pool.call("scaled", threading.Lock())
            elif command == "set_attr":
                pool.set_attr("delay", threading.Lock())
            else:
                pool.reset(seed=1, options={"callback": threading.Lock()})
        assert not pool.closed
        assert_random_steps_same(pool, sync, 5)
    finally:
        pool.close()
        sync.close()


class ReusedInfoEnv(gymnasium.Env):
    """Ends every 2nd step; its info holds the env's own state array (as a
    MuJoCo env's view of data.qpos would) and a dict it reuses, both
    rewritten by reset."""
    observation_space, action_space = spaces.Box(-10, 10, (2,), np.float64), spaces.Discrete(2)

    def __init__(self):
        self.state, self.shared, self.t = np.zeros(2), {}, 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        self.state[:] = -1.0
        self.shared.clear()
        self.shared["phase"] = "reset"
        return self.state.copy(), {"state": self.state}

    def step(self, action):
        self.t += 1
        self.state[:] = self.t
        self.shared["phase"] = f"step {self.t}"
        return self.state.copy(), 1.0, self.t == 2, False, {"state": self.state, "shared": self.shared}


def test_same_step_final_info_is_the_ended_steps_as_in_sync(no_leaks):
    """SAME_STEP: final_info holds what the ended step returned, though the
    reset after it rewrites the array and the dict that info holds."""
    fns = [ReusedInfoEnv] * 3
    mode = AutoresetMode.SAME_STEP
    sync, pool = SyncVectorEnv(fns, autoreset_mode=mode), AsyncVectorEnv(fns, num_workers=2, autoreset_mode=mode)
    try:
        assert_same(pool.reset(seed=0), sync.reset(seed=0), "reset")
        for t in range(4):
            result, expected = pool.step(np.zeros(3, np.int64)), sync.step(np.zeros(3, np.int64))
            assert_step_same(result, expected, f"step {t}")
        final = result[4]["final_info"]
        assert final["state"].tolist() == [[2.0, 2.0]] * 3
        assert final["shared"]["phase"].tolist() == ["step 2"] * 3
    finally:
        pool.close()
        sync.close()


def test_render(no_leaks):
    fns = rich_fns(3, render_mode="rgb_array")
    sync, pool = SyncVectorEnv(fns), AsyncVectorEnv(fns, num_workers=2)
    try:
        pool.reset(seed=0)
        sync.reset(seed=0)
        sync.action_space.seed(0)
        for _ in range(3):
            actions = sync.action_space.sample()
            pool.step(actions)
            sync.step(actions)
        frames = pool.render()
        assert isinstance(frames, tuple) and len(frames) == 3
        assert_same(frames, sync.render(), "render")
    finally:
        pool.close()
        sync.close()


def test_render_cartpole_rgb_array(no_leaks):
    pytest.importorskip("pygame", reason="CartPole's rgb_array rendering needs pygame")
    fns = [functools.partial(gymnasium.make, "CartPole-v1", render_mode="rgb_array")] * 2
    sync, pool = SyncVectorEnv(fns), AsyncVectorEnv(fns, num_workers=2)
    try:
        pool.reset(seed=0)
        sync.reset(seed=0)
        assert_same(pool.render(), sync.render(), "render")
    finally:
        pool.close()
        sync.close()


def test_copy_false_returns_views(no_leaks):
    fns = gym_fns("CartPole-v1", 3)
    for copy in (False, True):
        pool = AsyncVectorEnv(fns, copy=copy, num_workers=2)
        try:
            first, _ = pool.reset(seed=0)
            snapshot = first.copy()
            rewards = pool.step(np.ones(3, np.int64))[1]
            second = pool.step(np.zeros(3, np.int64))[0]
            if copy:
                assert np.array_equal(first, snapshot) and first is not second
            else:
                assert np.array_equal(first, second) and not np.array_equal(first, snapshot)
            assert np.array_equal(rewards, np.ones(3))  # rewards are always copies
        finally:
            pool.close()


def test_step_wait_timeout_then_usable(no_leaks):
    fns = rich_fns(3)
    sync, pool = SyncVectorEnv(fns), AsyncVectorEnv(fns, num_workers=2)
    try:
        assert_same(pool.reset(seed=2), sync.reset(seed=2), "reset")
        sync.action_space.seed(5)
        pool.set_attr("delay", [0.0, 0.0, 1.0])
        actions = sync.action_space.sample()
        pool.step_async(actions)
        start = time.monotonic()
        with pytest.raises(mp.TimeoutError, match="step_wait"):
            pool.step_wait(timeout=0.05)
        assert time.monotonic() - start < 0.8  # the step itself takes 1 s
        sync.step(actions)  # the timed-out step still happened in the envs
        actions = sync.action_space.sample()  # the next step waits for it, then is exact
        assert_step_same(pool.step(actions), sync.step(actions), "step after the timeout")
        actions = sync.action_space.sample()
        pool.step_async(actions)
        with pytest.raises(mp.TimeoutError):
            pool.step_wait(timeout=0.01)
        sync.step(actions)
        pool.set_attr("delay", 0.0)  # so does any other command: still exact
        for t in range(20):
            actions = sync.action_space.sample()
            assert_step_same(pool.step(actions), sync.step(actions), f"step {t} after the timeout")

        # a timed-out call, then a reset: still exact
        pool.call_async("pause", 0.5)
        with pytest.raises(mp.TimeoutError, match="call_wait"):
            pool.call_wait(timeout=0.05)
        assert_same(pool.reset(seed=9), sync.reset(seed=9), "reset after a timed-out call")
        pool.reset_async(seed=1)
        assert_same(pool.reset_wait(timeout=5), sync.reset(seed=1), "reset_wait")
    finally:
        pool.close()
        sync.close()


def test_timeout_then_close(no_leaks):
    pool = AsyncVectorEnv(rich_fns(3, delay=0.3), num_workers=2)
    pool.reset(seed=0)
    pool.step_async(pool.action_space.sample())
    with pytest.raises(mp.TimeoutError):
        pool.step_wait(timeout=0.01)
    pool.close()
    assert pool.closed


def test_close_with_a_timeout_after_a_timed_out_step_waits_that_long_only(no_leaks):
    """close(timeout=t) after a step_wait that timed out waits t for the
    stuck step, then kills the workers (it waited for the step whole)."""
    pool = AsyncVectorEnv(rich_fns(2, delay=0.0), num_workers=2)
    pool.reset(seed=0)
    pool.set_attr("delay", [0.0, 30.0])
    pool.step_async(pool.action_space.sample())
    with pytest.raises(mp.TimeoutError):
        pool.step_wait(timeout=0.05)
    start = time.monotonic()
    pool.close(timeout=0.5)
    assert pool.closed and time.monotonic() - start < 10   # not the step's 30 s


class HangingCloseEnv(gymnasium.Env):
    observation_space, action_space = spaces.Box(-1, 1, (1,), np.float32), spaces.Discrete(2)

    def close(self):
        if mp.parent_process() is not None:   # in a worker (the pool's own check of the spaces closes one here)
            time.sleep(30)


def test_close_timeout_bounds_the_whole_close_not_each_worker(no_leaks):
    """close(timeout=t) with every env's close() hanging: the workers are
    waited for t in all (then killed), not t each, one after another."""
    pool = AsyncVectorEnv([HangingCloseEnv] * 6, num_workers=6)
    start = time.monotonic()
    pool.close(timeout=0.5)
    assert pool.closed and time.monotonic() - start < 2.0   # 6 x 0.5 s, one after another, was 3 s


def test_processes_are_the_workers(no_leaks):
    """gymnasium's AsyncVectorEnv.processes (pids, liveness): here one per
    worker, none once closed."""
    pool = AsyncVectorEnv(gym_fns("CartPole-v1", 4), num_workers=2)
    processes = pool.processes
    assert len(processes) == 2 and all(p.is_alive() and p.pid != os.getpid() for p in processes)
    pids = [p.pid for p in processes]
    pool.close()
    assert pool.processes == [] and not any(alive(pid) for pid in pids)


def test_close_twice_and_use_after_close(no_leaks):
    pool = AsyncVectorEnv(gym_fns("CartPole-v1", 3), num_workers=2)
    pool.reset(seed=0)
    pool.close()
    pool.close()
    assert pool.closed
    for use in (lambda: pool.reset(), lambda: pool.step(np.zeros(3, np.int64)),
                lambda: pool.step_async(np.zeros(3, np.int64)), lambda: pool.step_wait(),
                lambda: pool.reset_async(), lambda: pool.reset_wait(), lambda: pool.call("render"),
                lambda: pool.call_wait(), lambda: pool.get_attr("np_random"),
                lambda: pool.set_attr("x", 1), lambda: pool.render()):
        with pytest.raises(ClosedEnvironmentError):
            use()


def test_close_waits_for_a_pending_step(no_leaks):
    pool = AsyncVectorEnv(rich_fns(2, delay=0.2), num_workers=2)
    pool.reset(seed=0)
    pool.step_async(pool.action_space.sample())
    with pytest.warns(UserWarning, match="pending call to `step`"):
        pool.close()
    assert pool.closed


def test_close_terminate_with_a_pending_step(no_leaks):
    pool = AsyncVectorEnv(rich_fns(3, delay=5.0), num_workers=2)
    pool.reset(seed=0)
    pool.step_async(pool.action_space.sample())
    start = time.monotonic()
    with pytest.warns(UserWarning, match="pending call to `step`"):
        pool.close(terminate=True)
    assert time.monotonic() - start < 3.0
    assert pool.closed
    with pytest.raises(ClosedEnvironmentError):
        pool.step_wait()


@pytest.mark.parametrize("context", ["spawn", "forkserver"])
def test_start_methods(no_leaks, context):
    run_against_sync(gym_fns("CartPole-v1", 3), AutoresetMode.NEXT_STEP, 40,
                     pool_kwargs={"context": context})


def test_mismatched_spaces(no_leaks):
    with pytest.raises(RuntimeError, match="action space"):
        AsyncVectorEnv(rich_fns(2) + [OtherActionEnv], num_workers=2)
    with pytest.raises(RuntimeError, match="observation_mode='same'"):
        AsyncVectorEnv(gym_fns("CartPole-v1", 2) + gym_fns("MountainCar-v0", 1), num_workers=2)
    with pytest.raises(ValueError, match="shape to be equal"):  # gymnasium's batch_differing_spaces
        AsyncVectorEnv(gym_fns("CartPole-v1", 2) + gym_fns("MountainCar-v0", 1),
                       observation_mode="different", num_workers=2)
    single = gymnasium.make("CartPole-v1").observation_space
    with pytest.raises(RuntimeError, match="common shape and dtype"):
        AsyncVectorEnv(gym_fns("CartPole-v1", 2) + gym_fns("MountainCar-v0", 1),
                       observation_mode=(gymnasium.vector.utils.batch_space(single, 3), single),
                       num_workers=2)


def test_worker_counts(no_leaks):
    fns = gym_fns("CartPole-v1", 4)
    for kwargs, workers in (({"max_concurrency": 1, "num_workers": 2}, 1),
                            ({"max_concurrency": 3, "num_workers": 4}, 3),
                            ({"num_workers": 10}, 4)):
        pool = AsyncVectorEnv(fns, **kwargs)
        try:
            assert pool.num_workers == workers
            obs, _ = pool.reset(seed=0)
            assert obs.shape == (4, 4)
            pool.step(np.zeros(4, np.int64))
        finally:
            pool.close()
    for bad in (0, -1):
        with pytest.raises(ValueError, match="positive"):
            AsyncVectorEnv(fns, max_concurrency=bad)
    with pytest.raises(ValueError, match="integer"):
        AsyncVectorEnv(fns, max_concurrency=1.5)


def test_custom_worker_rejected(no_leaks):
    with pytest.raises(ValueError, match="worker"):
        AsyncVectorEnv(gym_fns("CartPole-v1", 2), worker=lambda *args: None)


def test_block_splits(no_leaks):
    for n, workers in ((1, 2), (2, 2), (5, 2), (7, 3)):
        run_against_sync(gym_fns("CartPole-v1", n), AutoresetMode.SAME_STEP, 100,
                         pool_kwargs={"num_workers": workers})


def test_dropped_pool_leaves_nothing(no_leaks):
    pool = AsyncVectorEnv(gym_fns("CartPole-v1", 3), num_workers=2)
    pool.reset(seed=0)
    pool.step_async(np.zeros(3, np.int64))
    with pytest.warns(UserWarning, match="pending call to `step`"):
        del pool  # no close(): __del__ cleans up


def test_non_daemon_workers(no_leaks):
    run_against_sync(gym_fns("CartPole-v1", 3), AutoresetMode.NEXT_STEP, 20, pool_kwargs={"daemon": False})


@pytest.mark.parametrize("mode", [AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP], ids=lambda m: m.value)
def test_under_gymnasium_vector_wrappers(no_leaks, mode):
    """Wrappers read metadata["autoreset_mode"] and the infos: a drop-in must
    give them what SyncVectorEnv gives."""
    from gymnasium.wrappers.vector import RecordEpisodeStatistics
    fns = gym_fns("CartPole-v1", 4)
    sync = RecordEpisodeStatistics(SyncVectorEnv(fns, autoreset_mode=mode))
    pool = RecordEpisodeStatistics(AsyncVectorEnv(fns, autoreset_mode=mode, num_workers=2))
    try:
        assert_same(pool.reset(seed=0), sync.reset(seed=0), "reset")
        sync.action_space.seed(0)
        episodes = 0
        for t in range(100):
            actions = sync.action_space.sample()
            result, expected = pool.step(actions), sync.step(actions)
            for name, a, b in zip(("obs", "rewards", "terminations", "truncations"), result, expected):
                assert_same(a, b, f"step {t} {name}")
            # the wrapper's episode times come from clocks: compare all but those
            ours, ref = dict(result[4]), dict(expected[4])
            for infos in (ours, ref):
                if "episode" in infos:
                    infos["episode"] = {k: v for k, v in infos["episode"].items() if k not in ("t", "_t")}
            assert_same(ours, ref, f"step {t} infos")
            episodes += int("episode" in ref)
        assert episodes > 0
    finally:
        pool.close()
        sync.close()


def test_the_programs_start_method_is_followed(tmp_path):
    """multiprocessing.set_start_method("spawn") in a script: the native
    pool and AsyncVectorEnv start their workers with it (gymnasium's
    AsyncVectorEnv follows it; shoal forked regardless). Without it, fork,
    even after multiprocessing fixed its platform default by being used."""
    script = tmp_path / "script.py"
    script.write_text(textwrap.dedent("""
        import multiprocessing as mp, sys
        import gymnasium, numpy as np
        if __name__ == "__main__":
            if sys.argv[1] != "none":
                mp.set_start_method(sys.argv[1])
            mp.get_start_method()   # any use fixes the default: not a choice
            import shoal
            from shoal.pool import AsyncVectorEnv
            with shoal.make("CartPole", 4, num_workers=2, seed=0) as pool:
                pool.step(np.zeros(4, np.int32))
                native = pool._context
            envs = AsyncVectorEnv([lambda: gymnasium.make("CartPole-v1")] * 2, num_workers=2)
            envs.reset(seed=0)
            envs.close()
            from shoal.pool.workers import start_method
            print(native, start_method(envs.context))
    """))
    for chosen, expected in (("spawn", "spawn"), ("none", "fork")):
        out = subprocess.run([sys.executable, str(script), chosen], capture_output=True, text=True,
                             timeout=120, cwd=tmp_path)
        assert out.returncode == 0, out.stderr
        assert out.stdout.split() == [expected, expected], out.stdout
