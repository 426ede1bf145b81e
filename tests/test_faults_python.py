"""Faults of the Python-env pools (AsyncVectorEnv, ParallelEnvPool) that
gymnasium's AsyncVectorEnv reports in a particular way: replies that cannot
be pickled, bad seeds, autoreset modes given as strings; and a standing
fault matrix (env exception, SIGKILLed worker) over every start method.
Every pool test checks that no process and no shared-memory segment is left."""
import os
import signal
import sys
import threading
import time

import cloudpickle
import gymnasium
import numpy as np
import pytest
from gymnasium import spaces
from gymnasium.error import ClosedEnvironmentError
from gymnasium.vector import AutoresetMode

from shoal.pool import AsyncVectorEnv, ParallelEnvPool, WorkerError

# Spawned and forkserver workers cannot import this module (pytest imports it
# by path), so cloudpickle sends its envs by value.
cloudpickle.register_pickle_by_value(sys.modules[__name__])

CONTEXTS = ["fork", "spawn", "forkserver"]


class Simple(gymnasium.Env):
    """Zeros forever; optionally raises in step, or returns an info (or a
    call result) that cannot be pickled."""

    observation_space = spaces.Box(-1, 1, (2,), np.float32)
    action_space = spaces.Discrete(2)

    def __init__(self, fail_in_step=False, lock_info_at_step=None):
        self.fail_in_step, self.lock_info_at_step = fail_in_step, lock_info_at_step
        self.t = 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return np.zeros(2, np.float32), {}

    def step(self, action):
        self.t += 1
        if self.fail_in_step:
            raise ZeroDivisionError("physics blew up")
        info = {"lock": threading.Lock()} if self.t == self.lock_info_at_step else {}
        return np.zeros(2, np.float32), 1.0, False, False, info

    def make_lock(self):
        return threading.Lock()


class TwoAgents:
    """A minimal pettingzoo-style ParallelEnv; optionally raises in step."""

    possible_agents = ["a", "b"]

    def __init__(self, fail_in_step=False):
        self.fail_in_step = fail_in_step
        self.agents = []

    def observation_space(self, agent):
        return spaces.Box(0, 1, (2,), np.float32)

    def action_space(self, agent):
        return spaces.Discrete(2)

    def reset(self, seed=None, options=None):
        self.agents = list(self.possible_agents)
        return {a: np.zeros(2, np.float32) for a in self.agents}, {}

    def step(self, actions):
        if self.fail_in_step:
            raise RuntimeError("agent b fell off the map")
        obs = {a: np.zeros(2, np.float32) for a in self.agents}
        zeros = {a: 0.0 for a in self.agents}
        flags = {a: False for a in self.agents}
        return obs, zeros, flags, dict(flags), {}

    def close(self):
        pass


# ---------------------------------------------------------------------------
# Issue 10, item 7: a reply that cannot be pickled
# ---------------------------------------------------------------------------

def test_unpicklable_info_is_reported_like_an_env_exception(no_leaks):
    """gymnasium raises TypeError("cannot pickle '_thread.lock' object") in
    the parent (its worker closes its env and exits); shoal raises the same,
    with the worker's traceback attached, and closes the pool."""
    envs = AsyncVectorEnv([lambda: Simple(), lambda: Simple(lock_info_at_step=2)], num_workers=2)
    envs.reset(seed=0)
    actions = np.zeros(2, np.int64)
    envs.step(actions)
    with pytest.raises(TypeError, match=r"cannot pickle '_thread\.lock' object") as caught:
        envs.step(actions)
    note = "\n".join(caught.value.__notes__)
    assert "shoal worker 1 (envs 1..1)" in note
    assert "could not be pickled" in note
    assert "Traceback" in note, "the worker's traceback travels with the exception"
    assert envs.closed
    with pytest.raises(ClosedEnvironmentError):
        envs.step(actions)
    envs.close()  # still fine


def test_unpicklable_call_result_is_reported_like_an_env_exception(no_leaks):
    envs = AsyncVectorEnv([Simple] * 2, num_workers=2)
    envs.reset(seed=0)
    with pytest.raises(TypeError, match="cannot pickle"):
        envs.call("make_lock")
    assert envs.closed


def test_unpicklable_info_with_observations_over_pipes(no_leaks):
    envs = AsyncVectorEnv([lambda: Simple(lock_info_at_step=1)] * 2, num_workers=1,
                          shared_memory=False)
    envs.reset(seed=0)
    with pytest.raises(TypeError, match="cannot pickle"):
        envs.step(np.zeros(2, np.int64))
    assert envs.closed


# ---------------------------------------------------------------------------
# Issue 10, item 14: seeds are checked in the parent; the pool stays open
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("seed, error, match", [
    (-1, gymnasium.error.Error, "greater or equal to zero, actual value: -1"),
    (np.int64(-2), gymnasium.error.Error, "greater or equal to zero"),
    ([0, -3], gymnasium.error.Error, "greater or equal to zero, actual value: -3"),
    ([0, 1.5], gymnasium.error.Error, "python integer, actual type: <class 'float'>"),
    ([0, "7"], gymnasium.error.Error, "python integer"),
    ([0], ValueError, "length must match num_envs=2"),
    ([0, 1, 2], ValueError, "length must match num_envs=2"),
    (1.5, TypeError, "has no len"),
])
def test_bad_seeds_raise_as_gymnasium_and_leave_the_pool_open(seed, error, match, no_leaks):
    """gymnasium's AsyncVectorEnv raises these types for these seeds (the
    Error from its env's seeding); here they are raised before anything
    reaches a worker, so the pool stays usable."""
    envs = AsyncVectorEnv([Simple] * 2, num_workers=2)
    try:
        with pytest.raises(error, match=match):
            envs.reset(seed=seed)
        assert not envs.closed
        obs, _ = envs.reset(seed=0)
        assert obs.shape == (2, 2)
        envs.step(np.zeros(2, np.int64))
        envs.reset(seed=[None, 5])
        envs.reset(seed=[True, 0])  # gymnasium's seeding takes bools (ints)
        envs.reset(seed=[np.int64(3), None])  # numpy ints become ints, as an int seed does
    finally:
        envs.close()


def test_bad_seed_leaves_a_parallel_env_pool_open(no_leaks):
    pool = ParallelEnvPool([TwoAgents] * 2, num_workers=1)
    try:
        with pytest.raises(gymnasium.error.Error, match="greater or equal to zero"):
            pool.reset(seed=-1)
        assert not pool.closed
        obs, _ = pool.reset(seed=0)
        assert obs.shape == (4, 2)
    finally:
        pool.close()


# ---------------------------------------------------------------------------
# Issue 10, item 11: ParallelEnvPool takes autoreset modes as strings
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("given, mode", [
    ("next_step", AutoresetMode.NEXT_STEP), ("NextStep", AutoresetMode.NEXT_STEP),
    ("disabled", AutoresetMode.DISABLED), ("DISABLED", AutoresetMode.DISABLED),
    (AutoresetMode.DISABLED, AutoresetMode.DISABLED),
])
def test_parallel_env_pool_parses_autoreset_mode_strings(given, mode, no_leaks):
    pool = ParallelEnvPool([TwoAgents] * 2, num_workers=1, autoreset_mode=given)
    try:
        assert pool.autoreset_mode is mode
        assert pool.vector_env.autoreset_mode is mode
        pool.reset(seed=0)
        pool.step(np.zeros(4, np.int64))
    finally:
        pool.close()


@pytest.mark.parametrize("given", ["same_step", "SameStep", AutoresetMode.SAME_STEP])
def test_parallel_env_pool_rejects_same_step_clearly(given, no_leaks):
    with pytest.raises(ValueError, match="supports NEXT_STEP and DISABLED autoreset; SAME_STEP"):
        ParallelEnvPool([TwoAgents] * 2, num_workers=1, autoreset_mode=given)


def test_parallel_env_pool_rejects_unknown_autoreset_modes(no_leaks):
    with pytest.raises(ValueError, match="autoreset_mode must be"):
        ParallelEnvPool([TwoAgents] * 2, num_workers=1, autoreset_mode="sometimes")


class ExitsOnStep(gymnasium.Wrapper):
    """An env that calls sys.exit() in step, as pygame-style envs do when
    their window is closed."""

    def __init__(self):
        super().__init__(gymnasium.make("CartPole-v1"))

    def step(self, action):
        sys.exit(3)


def test_an_env_calling_sys_exit_is_an_error_not_the_parents_exit(no_leaks):
    """The worker's SystemExit once came back as the parent's own: the
    training script ended silently with the env's exit status (0 reads as
    success). It is a RuntimeError now; gymnasium's pool raises too (an
    EOFError from the dead worker)."""
    envs = AsyncVectorEnv([ExitsOnStep, lambda: gymnasium.make("CartPole-v1")], num_workers=2)
    try:
        envs.reset(seed=0)
        with pytest.warns(UserWarning), pytest.raises(RuntimeError, match=r"an env raised SystemExit\(3\)"):
            envs.step(np.zeros(2, np.int64))
        assert envs.closed
    finally:
        envs.close()


class CodedError(Exception):
    """An exception whose __init__ takes more than its args (a common
    pattern): pickle cannot rebuild it from its args alone."""

    def __init__(self, message, code):
        super().__init__(message)
        self.code = code


class RaisesCoded(Simple):
    def step(self, action):
        raise CodedError("bad state", 7)


class NotFound(OSError):
    def __init__(self, path):
        super().__init__(2, "no such thing", path)


class RaisesNotFound(Simple):
    def step(self, action):
        raise NotFound("/data/level.bin")


def test_an_exception_whose_fields_would_be_lost_keeps_its_message(no_leaks):
    """An OSError subclass keeps errno and filename in C slots that a rebuild
    by parts loses: it comes back as a RuntimeError with the original text,
    not as its class with a garbled message and errno None."""
    envs = AsyncVectorEnv([RaisesNotFound, Simple], num_workers=2)
    try:
        envs.reset(seed=0)
        with pytest.warns(UserWarning), pytest.raises(RuntimeError,
                                                      match=r"NotFound: \[Errno 2\] no such thing: '/data/level.bin'"):
            envs.step(np.zeros(2, np.int64))
    finally:
        envs.close()


def test_an_env_exception_pickle_cannot_rebuild_keeps_its_type(no_leaks):
    """SyncVectorEnv's caller catches the env's own exception class; so does
    shoal's: the worker sends it by parts (class, args, attributes) when
    pickle cannot rebuild it, where it used to arrive as a RuntimeError."""
    envs = AsyncVectorEnv([RaisesCoded, Simple], num_workers=2)
    try:
        envs.reset(seed=0)
        with pytest.warns(UserWarning), pytest.raises(CodedError, match="bad state") as caught:
            envs.step(np.zeros(2, np.int64))
        assert caught.value.code == 7 and caught.value.args == ("bad state",) and envs.closed
    finally:
        envs.close()


# ---------------------------------------------------------------------------
# Standing fault matrix: {AsyncVectorEnv, ParallelEnvPool} x start methods x
# {env raises in step, worker SIGKILLed}
# ---------------------------------------------------------------------------

def make_pool(kind, context, fail_in_step=False):
    """Two envs, two workers (env 1 in worker 1); (pool, step, its vector env)."""
    if kind == "vector":
        fns = [lambda: Simple(), lambda: Simple(fail_in_step=fail_in_step)]
        pool = AsyncVectorEnv(fns, num_workers=2, context=context)
        actions = np.zeros(2, np.int64)
        return pool, lambda: pool.step(actions), pool
    fns = [lambda: TwoAgents(), lambda: TwoAgents(fail_in_step=fail_in_step)]
    pool = ParallelEnvPool(fns, num_workers=2, context=context)
    actions = np.zeros(4, np.int64)
    return pool, lambda: pool.step(actions), pool.vector_env


@pytest.mark.parametrize("context", CONTEXTS)
@pytest.mark.parametrize("kind", ["vector", "parallel"])
def test_matrix_env_exception_in_step(kind, context, no_leaks):
    pool, step, vector_env = make_pool(kind, context, fail_in_step=True)
    try:
        pool.reset(seed=0)
        error = ZeroDivisionError if kind == "vector" else RuntimeError
        with pytest.raises(error, match="physics blew up|fell off the map") as caught:
            step()
        assert "shoal worker 1 (envs 1..1)" in "\n".join(caught.value.__notes__)
        assert pool.closed
        assert vector_env._workers is None, "the workers are gone"
    finally:
        pool.close()


@pytest.mark.parametrize("context", CONTEXTS)
@pytest.mark.parametrize("kind", ["vector", "parallel"])
def test_matrix_killed_worker(kind, context, no_leaks):
    pool, step, vector_env = make_pool(kind, context)
    try:
        pool.reset(seed=0)
        step()
        victim = vector_env._workers.processes[1]
        os.kill(victim.pid, signal.SIGKILL)
        start = time.monotonic()
        with pytest.raises(WorkerError) as caught:
            step()
        assert time.monotonic() - start < 2.0
        message = str(caught.value)
        assert "worker 1" in message and "envs 1..1" in message and "signal 9" in message
        assert pool.closed
    finally:
        pool.close()


def test_a_constructor_given_a_bad_keyword_leaves_nothing_to_finalize(monkeypatch):
    """AsyncVectorEnv(..., backend="serial") is a TypeError before __init__
    runs; its __del__ took the class's `closed = False` for an open pool and
    printed "Exception ignored in AsyncVectorEnv.__del__"."""
    import gc
    unraisable = []
    monkeypatch.setattr(sys, "unraisablehook", unraisable.append)
    with pytest.raises(TypeError, match="backend"):
        AsyncVectorEnv([lambda: gymnasium.make("CartPole-v1")], backend="serial")
    gc.collect()
    assert unraisable == []
