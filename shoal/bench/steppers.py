"""The contenders' step loops, shared by every section of `shoal bench`.

Each opener below is a context manager: it builds a vector env (a shoal
pool, a gymnasium-API vector env, an EnvPool), starts it with seed 0, yields
a step function that steps it with pre-sampled, cycled actions
(shoal.bench.timing.action_table) and returns the env-steps it ran, and
closes it on exit. The CartPole table times one at a time with
timing.measure; the Python-env, MuJoCo and Atari sections open a group
together and time it with timing.interleaved (shoal.bench.sections).

`spec` is a shoal.envs spec, whose action space the actions are drawn from;
None is CartPole (the default of timing.action_table).

This module imports shoal.bench.timing only.
"""
from __future__ import annotations

import contextlib
import gc
import warnings
from functools import partial
from typing import Callable

import numpy as np

import shoal.bench.timing as timing
from shoal.bench.timing import action_table, cycling


def table(spec, rows: int, dtype=None, discrete_dtype=np.int32) -> np.ndarray:
    """Pre-sampled actions for `rows` rows of env `spec`: in `dtype`, or by
    default float32 for Box actions and `discrete_dtype` otherwise (a pool's
    layout: int32; gymnasium's vector envs: int64)."""
    if dtype is None:
        dtype = np.float32 if spec is not None and spec.continuous_action else discrete_dtype
    return action_table(rows, spec, dtype=dtype)


# ---- step functions ----------------------------------------------------------------------
def step_all(env, n: int, actions: np.ndarray) -> Callable[[], int]:
    """env.step of all n envs, the table's rows in turn."""
    next_actions = cycling(actions)

    def step():
        env.step(next_actions())
        return n

    return step


def step_batches(env, batch: int, actions: np.ndarray, env_ids: bool = False) -> Callable[[], int]:
    """recv() a batch of envs, then send its actions: to the envs that recv
    named (env_ids: EnvPool's info["env_id"]), or to the last batch received
    (shoal's pools)."""
    next_actions = cycling(actions)
    if env_ids:
        def step():
            info = env.recv()[4]
            env.send(next_actions(), info["env_id"])
            return batch
    else:
        def step():
            env.recv()
            env.send(next_actions())
            return batch
    return step


@contextlib.contextmanager
def stepping(env, step: Callable[[], int], start: Callable[[], object] | None = None):
    """Call `start` (a reset), yield `step`; close `env` on exit, also when
    starting it failed."""
    try:
        if start is not None:
            start()
        yield step
    finally:
        env.close()


# ---- openers -----------------------------------------------------------------------------
def c_loop(spec, n: int):
    """The env's vector loop over n envs in nogil C calls, one core
    (timing.c_loop: counts agent-steps)."""
    return timing.c_loop(spec, n, table(spec, n * (spec.agents if spec is not None else 1)))


def c_loop_all_cores(spec, n: int, cores: int, seconds: float, warmup: float, repeats: int) -> list[float]:
    """The C loop on `cores` cores at once, each process over its share of
    the n envs (timing.run_c_loop_all_cores): its agent-steps/s, one per repeat."""
    return timing.run_c_loop_all_cores(spec, n, table(spec, n * (spec.agents if spec is not None else 1)),
                                       cores, seconds, warmup, repeats)


def pool_workers(workers: int | None) -> int | None:
    """The num_workers to build a Multiprocessing pool with for `workers`:
    None (the default pool, as users get it: sync pools then have the parent
    step a share, Multiprocessing's parent_share) when it is all the cores."""
    from shoal.pool import available_cores

    return None if workers == available_cores() else workers


def native_pool(spec, n: int, workers: int | None = None, batch: int | None = None):
    """shoal's native pool of n envs `spec` (seed 0): Serial (workers None)
    or Multiprocessing over `workers` workers (the default pool when that is
    the available cores). Without batch: reset, then
    pool.step of all n; with batch (< n): async_reset, then recv() one batch
    while the others step and send its actions."""
    from shoal.pool import Multiprocessing, Serial

    actions = table(spec, batch or n)
    given = pool_workers(workers)
    if workers is None:
        pool = Serial(spec, n, seed=0)
    elif batch is None:
        pool = Multiprocessing(spec, n, num_workers=given, seed=0)
    else:
        pool = Multiprocessing(spec, n, num_workers=given, batch_size=batch, seed=0)
    if batch is None:
        return stepping(pool, step_all(pool, n, actions), partial(pool.reset, seed=0))
    return stepping(pool, step_batches(pool, batch, actions), partial(pool.async_reset, seed=0))


def gym_make(env_id: str, **kwargs):
    """gymnasium.make (module level: picklable for the vectorizers' workers)."""
    import gymnasium

    return gymnasium.make(env_id, **kwargs)


def vector_env(fns: list, kind: str, workers: int | None = None):
    """gymnasium's SyncVectorEnv ("sync") or AsyncVectorEnv ("async", one
    process per env), or shoal.pool.AsyncVectorEnv ("shoal", `workers`
    processes) over the env functions `fns`."""
    import gymnasium

    if kind == "sync":
        return gymnasium.vector.SyncVectorEnv(fns)
    if kind == "async":
        return gymnasium.vector.AsyncVectorEnv(fns)
    from shoal.pool import AsyncVectorEnv

    return AsyncVectorEnv(fns, num_workers=workers)


def gym_vector(make_env: Callable[[], object], spec, n: int, kind: str, workers: int | None = None):
    """A `vector_env` of n `make_env()` envs, reset with seed 0, stepped all
    at once (discrete actions as int64, gymnasium's type)."""
    actions = table(spec, n, discrete_dtype=np.int64)
    envs = vector_env([make_env] * n, kind, workers)
    return stepping(envs, step_all(envs, n, actions), partial(envs.reset, seed=0))


@contextlib.contextmanager
def envpool_env(task_id: str, spec, n: int, batch: int, threads: int, **kwargs):
    """EnvPool's `task_id` (gymnasium API; kwargs: its env options) over n
    envs on `threads` threads, seed 0: with batch == n reset, then env.step;
    else async_reset, then recv() a batch and send its actions. Closed on
    exit, and collected: EnvPool's threads end with the object, and none may
    outlive it into a fork."""
    import envpool

    # EnvPool builds gymnasium Boxes from float64 bounds on make, reset and
    # space access, and gymnasium warns each time: its spaces, not ours, so
    # hushed for as long as the env is open.
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*Box (low|high)'s precision lowered")
        env = envpool.make(task_id, env_type="gymnasium", num_envs=n, batch_size=batch, num_threads=threads,
                           seed=0, **kwargs)
        try:
            actions = table(spec, batch, dtype=env.action_space.dtype)
            if batch == n:
                env.reset()
                yield step_all(env, n, actions)
            else:
                env.async_reset()
                yield step_batches(env, batch, actions, env_ids=True)
        finally:
            env.close()
            del env
            gc.collect()
