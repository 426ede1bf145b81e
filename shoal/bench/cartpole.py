"""The CartPole table: shoal vs gymnasium vs EnvPool vs a plain C loop.

Every contender runs in the same process and the same run, so the ratios
hold even on a shared, noisy machine (absolute numbers do not travel).
The contenders and the method are described in shoal.bench's docstring;
each contender is one function below, timed with shoal.bench.timing.
"""
from __future__ import annotations

import contextlib
import sys
import warnings
from functools import partial
from typing import Callable

import numpy as np

from shoal.bench.timing import Result, Settings, action_table, cycling, format_rate, measure, run_c_loop

ENV = "CartPole"
GYM_ENV_ID = "CartPole-v1"

# Contender names, in table order.
C_LOOP = "C loop"
C_LOOP_CORES = "C loop x cores (computed)"
SERIAL = "shoal Serial"
PROC_SYNC = "shoal processes sync"
PROC_ASYNC = "shoal processes async"
GYM_SYNC = "gymnasium SyncVectorEnv"
GYM_ASYNC = "gymnasium AsyncVectorEnv"
ENVPOOL_SYNC = "EnvPool sync"
ENVPOOL_ASYNC = "EnvPool async"
ORDER = [C_LOOP, C_LOOP_CORES, SERIAL, PROC_SYNC, PROC_ASYNC, GYM_SYNC, GYM_ASYNC,
         ENVPOOL_SYNC, ENVPOOL_ASYNC]
SHOAL = (SERIAL, PROC_SYNC, PROC_ASYNC)
ENVPOOL = (ENVPOOL_SYNC, ENVPOOL_ASYNC)


# ---- contenders: each builds its env(s), measures, and closes them ----------------------
def bench_c_loop(n: int, s: Settings) -> list[float]:
    """shoal's CartPole vector loop, `chunk` steps per nogil C call, one core."""
    from shoal.envs import spec

    return run_c_loop(spec(ENV), n, action_table(n), s.seconds, s.warmup, s.repeats)


def bench_shoal_sync(n: int, workers: int | None, s: Settings, backend: str) -> list[float]:
    """pool.step(actions) in a Python loop (Serial or worker processes)."""
    import shoal

    kwargs = {} if backend == "serial" else {"num_workers": workers}
    pool = shoal.make(ENV, n, backend=backend, seed=0, **kwargs)
    try:
        pool.reset(seed=0)
        next_actions = cycling(action_table(n))

        def step():
            pool.step(next_actions())
            return n

        return measure(step, s.seconds, s.warmup, s.repeats)
    finally:
        pool.close()


def bench_shoal_async(n: int, workers: int, s: Settings) -> list[float]:
    """async_reset, then recv() one half of the envs while the other half steps."""
    import shoal

    batch = n // 2
    pool = shoal.make(ENV, n, num_workers=workers, batch_size=batch, seed=0)
    try:
        pool.async_reset(seed=0)
        next_actions = cycling(action_table(batch))

        def step():
            pool.recv()
            pool.send(next_actions())
            return batch

        return measure(step, s.seconds, s.warmup, s.repeats)
    finally:
        pool.close()


def bench_gym(n: int, s: Settings, asynchronous: bool) -> list[float]:
    """gymnasium's own vector envs over gymnasium.make("CartPole-v1")."""
    import gymnasium

    fns = [partial(gymnasium.make, GYM_ENV_ID)] * n
    cls = gymnasium.vector.AsyncVectorEnv if asynchronous else gymnasium.vector.SyncVectorEnv
    with stepping(cls(fns), n) as step:
        return measure(step, s.gym_seconds, min(s.warmup, s.gym_seconds), s.repeats)


@contextlib.contextmanager
def envpool_env(n: int, batch: int, threads: int):
    """An EnvPool CartPole-v1 (gymnasium API), closed on exit."""
    import envpool

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # gymnasium's Box precision warnings
        env = envpool.make(GYM_ENV_ID, env_type="gymnasium", num_envs=n, batch_size=batch,
                           num_threads=threads, seed=0)
        try:
            yield env
        finally:
            env.close()


def bench_envpool_sync(n: int, threads: int, s: Settings) -> list[float]:
    """env.step(actions) with batch_size = num_envs."""
    with envpool_env(n, n, threads) as env:
        env.reset()
        next_actions = cycling(action_table(n))

        def step():
            env.step(next_actions())
            return n

        return measure(step, s.seconds, s.warmup, s.repeats)


def bench_envpool_async(n: int, threads: int, s: Settings) -> list[float]:
    """async_reset, then recv() a batch of num_envs // 2 and send its actions."""
    batch = n // 2
    with envpool_env(n, batch, threads) as env:
        env.async_reset()
        next_actions = cycling(action_table(batch))

        def step():
            info = env.recv()[4]
            env.send(next_actions(), info["env_id"])
            return batch

        return measure(step, s.seconds, s.warmup, s.repeats)


# ---- the sweep --------------------------------------------------------------------------
def envpool_version() -> str | None:
    """EnvPool's version, or None when it cannot be imported."""
    try:
        import envpool
    except Exception:  # ImportError, or a broken binary wheel
        return None
    return getattr(envpool, "__version__", "unknown")


def gym_sizes(s: Settings) -> list[int]:
    """num_envs for gymnasium: the sweep's values up to --gym-max-envs (the cap
    itself when the sweep has none that small)."""
    return [n for n in s.num_envs if n <= s.gym_max_envs] or [s.gym_max_envs]


def async_workers(s: Settings) -> list[int]:
    """Workers for async shoal: two batches need an even worker count, so
    each requested count is rounded up to a multiple of 2."""
    return sorted({w + w % 2 for w in s.workers})


def plan(s: Settings, have_envpool: bool) -> list[tuple[str, int, int, Callable[[], list[float]]]]:
    """(contender, num_envs, workers, run) for every config to measure, in order.

    Shoal and gymnasium come before EnvPool so that no process is forked
    while EnvPool's threads exist."""
    wanted = set(s.contenders) | {C_LOOP}  # the reference of every ratio
    jobs = []

    def add(name, n, w, fn, *args):
        if name in wanted:
            jobs.append((name, n, w, partial(fn, n, *args)))

    c_sizes = sorted(set(s.num_envs) | (set(gym_sizes(s)) if wanted & {GYM_SYNC, GYM_ASYNC} else set()))
    for n in c_sizes:
        add(C_LOOP, n, 1, bench_c_loop, s)
    for n in s.num_envs:
        add(SERIAL, n, 1, bench_shoal_sync, None, s, "serial")
    for n in s.num_envs:
        for w in s.workers:
            if w <= n:
                add(PROC_SYNC, n, w, bench_shoal_sync, w, s, "multiprocessing")
    for n in s.num_envs:
        for w in async_workers(s):
            if n >= 2 and w <= n:
                add(PROC_ASYNC, n, w, bench_shoal_async, w, s)
    for n in gym_sizes(s):
        add(GYM_SYNC, n, 1, bench_gym, s, False)
    for n in gym_sizes(s):
        add(GYM_ASYNC, n, n, bench_gym, s, True)  # one process per env
    if have_envpool:
        for n in s.num_envs:
            for w in s.workers:
                add(ENVPOOL_SYNC, n, w, bench_envpool_sync, w, s)
        for n in s.num_envs:
            for w in s.workers:
                if n >= 2:
                    add(ENVPOOL_ASYNC, n, w, bench_envpool_async, w, s)
    return jobs


def run_all(s: Settings, have_envpool: bool, log=sys.stderr) -> tuple[list[Result], list[str]]:
    """Measure every planned config; errors are recorded, not fatal."""
    results, errors = [], []
    jobs = plan(s, have_envpool)
    for i, (name, n, w, run) in enumerate(jobs, 1):
        print(f"[{i}/{len(jobs)}] {name}, num_envs={n}, workers={w} ...", end=" ", file=log, flush=True)
        try:
            rates = run()
        except Exception as e:  # keep the rest of a long sweep
            errors.append(f"{name} num_envs={n} workers={w}: {type(e).__name__}: {e}")
            print(f"FAILED: {e}", file=log, flush=True)
            continue
        r = Result(name, n, w, rates)
        results.append(r)
        print(f"{format_rate(r.median)} steps/s", file=log, flush=True)
    return results, errors


# ---- a gymnasium-API vector env, stepped with pre-sampled actions ---------------------
@contextlib.contextmanager
def stepping(envs, n: int):
    """Reset a vector env of `n` envs with seed 0; yield a step function that
    steps it with pre-sampled actions and returns n; close the env on exit."""
    try:
        envs.reset(seed=0)
        next_actions = cycling(action_table(n, dtype=np.int64))

        def step():
            envs.step(next_actions())
            return n

        yield step
    finally:
        envs.close()


# ---- report -----------------------------------------------------------------------------
def with_computed_limit(results: list[Result], cores: int) -> list[Result]:
    """Add the "C loop x cores" rows (single-core C loop rate times cores)."""
    extra = [Result(C_LOOP_CORES, r.num_envs, cores, [rate * cores for rate in r.rates])
             for r in results if r.contender == C_LOOP]
    rows = results + extra
    return sorted(rows, key=lambda r: (ORDER.index(r.contender), r.num_envs, r.workers))


def c_loop_rates(results: list[Result]) -> dict[int, float]:
    return {r.num_envs: r.median for r in results if r.contender == C_LOOP}


def table(results: list[Result]) -> list[str]:
    limit = c_loop_rates(results)
    lines = ["| contender | num_envs | workers | steps/s (median) | spread | vs C loop 1 core |",
             "|---|---:|---:|---:|---:|---:|"]
    for r in results:
        ratio = f"{r.median / limit[r.num_envs]:.3f}" if limit.get(r.num_envs) else "-"
        lines.append(f"| {r.contender} | {r.num_envs} | {r.workers} | {format_rate(r.median)} "
                     f"| {r.spread:.0%} | {ratio} |")
    return lines


def _describe(r: Result) -> str:
    return f"{format_rate(r.median)} steps/s ({r.contender}, num_envs={r.num_envs}, workers={r.workers})"


def headline(results: list[Result], cores: int, envpool_ver: str | None) -> list[str]:
    def best(names):
        rows = [r for r in results if r.contender in names]
        return max(rows, key=lambda r: r.median) if rows else None

    shoal_best, envpool_best = best(SHOAL), best(ENVPOOL)
    c_best = best([C_LOOP])
    lines = ["## Headline", ""]
    lines.append(f"- shoal best: {_describe(shoal_best)}" if shoal_best else "- shoal best: not measured")
    if envpool_best:
        lines.append(f"- EnvPool best: {_describe(envpool_best)}")
    else:
        lines.append("- EnvPool best: " + ("not measured" if envpool_ver else "EnvPool not installed"))
    if shoal_best and envpool_best:
        lines.append(f"- shoal best / EnvPool best: {shoal_best.median / envpool_best.median:.2f}")
    if c_best:
        limit = c_best.median * cores
        lines.append(f"- C loop x cores (limit): {format_rate(limit)} steps/s "
                     f"({format_rate(c_best.median)} x {cores}, num_envs={c_best.num_envs})")
        if shoal_best:
            lines.append(f"- shoal best / (C loop x cores): {shoal_best.median / limit:.2f}")
    sync, async_ = best([PROC_SYNC]), best([PROC_ASYNC])
    if sync and async_:
        lines.append(f"- shoal processes async best / sync best: {async_.median / sync.median:.2f}")
    limit = c_loop_rates(results)
    serial = [f"{r.median / limit[r.num_envs]:.2f} at {r.num_envs}" for r in results
              if r.contender == SERIAL and r.num_envs >= 4096 and r.num_envs in limit]
    if serial:
        lines.append(f"- shoal Serial / C loop 1 core, num_envs >= 4096: {', '.join(serial)}")
    return lines


def run(s: Settings, cores: int, envpool_ver: str | None, log=sys.stderr) -> tuple[list[str], list[str]]:
    """The whole section: measure the sweep; returns (markdown lines: the
    table and the headline, errors)."""
    results, errors = run_all(s, envpool_ver is not None, log=log)
    results = with_computed_limit(results, cores)
    return table(results) + [""] + headline(results, cores, envpool_ver), errors
