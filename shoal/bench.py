"""CartPole steps per second: shoal vs gymnasium vs EnvPool vs a plain C loop.

Every contender runs in the same process and the same run, so the ratios
hold even on a shared, noisy machine (absolute numbers do not travel).

Contenders (each one function below):

  C loop             shoal's CartPole vector loop in one nogil C call
                     (`Block.run_steps`): the single-core limit. "C loop x
                     cores" is that rate times the available cores, the
                     reference for the whole machine (computed, not measured).
  shoal Serial       shoal.make(..., backend="serial"); pool.step in a Python loop.
  shoal processes sync / async
                     shoal.make(..., num_workers=w); step, or async_reset then
                     recv()/send() with batch_size = num_envs // 2.
  gymnasium Sync/AsyncVectorEnv
                     over gymnasium.make("CartPole-v1"); slow, so only small
                     num_envs and short runs (AsyncVectorEnv: one process per env).
  EnvPool sync / async
                     envpool.make("CartPole-v1", env_type="gymnasium", ...),
                     num_threads = workers; skipped with a note if not installed.

The Python-env section (contender group "python", its own table) measures
gymnasium's own CartPole-v1, a Python env, under three vectorizers at the same
num_envs (--python-num-envs, default 16 and 64): shoal.pool.AsyncVectorEnv
(one block of envs per worker process, at each --workers count and at the
available cores, its default), gymnasium SyncVectorEnv and gymnasium
AsyncVectorEnv (one process per env). For reference it also times one env in
a plain Python loop: the env's own step cost, one core. Targets, at >= 16 envs:
shoal (default workers) >= 8x gymnasium AsyncVectorEnv and >= 1.3x
SyncVectorEnv.

Method, identical for all contenders:

  - actions are sampled before the timer: a table of K random action arrays,
    cycled (no RNG work and no allocation inside the timed loop);
  - each config is built and reset, then warmed up for --warmup seconds;
  - a measurement runs the step loop for a fixed duration (--seconds) and
    counts real env steps: num_envs per step, batch_size per async recv;
    rate = steps / elapsed wall time;
  - --repeats measurements per config; the table reports the median (and the
    spread, (max - min) / median);
  - ratios are to the single-core C loop at the same num_envs.

The Python-env section differs in one way, for fairness on a noisy machine:
all its vector envs at one num_envs are built together and measured in
interleaved rounds (A, B, C, A, B, C, ...; each round starts one contender
later), --python-rounds rounds of --python-seconds each, so that drift in the
machine's load hits every contender alike. It reports each contender's median
round and the ratio of medians.

Usage:
    python scripts/bench_pool.py                # full sweep (a few minutes)
    python -m shoal bench --quick               # smoke run, a few seconds
    python -m shoal bench --num-envs 4096 --workers 2 --contenders shoal,envpool
    python -m shoal bench --contenders python      # the Python-env section only
    python -m shoal bench --contenders envs        # agent-steps/s of every first-party env

The "envs" section (shoal.bench_envs) measures agent-steps/s of every
first-party env: its C loop and Serial pool on one core, and processes on
all cores, against the per-core targets of the envs issue.
"""
from __future__ import annotations

import argparse
import contextlib
import datetime
import itertools
import os
import platform
import statistics
import sys
import time
import warnings
from dataclasses import dataclass, field
from functools import partial
from typing import Callable

import numpy as np

ENV = "CartPole"
GYM_ENV_ID = "CartPole-v1"
ACTION_TABLE_ROWS = 16          # K: pre-sampled action arrays, cycled
C_LOOP_CALL_SECONDS = 0.01      # the C loop runs in chunks of about this long

# Contender names, in table order, and the groups --contenders selects.
C_LOOP = "C loop"
C_LOOP_CORES = "C loop x cores (computed)"
SERIAL = "shoal Serial"
PROC_SYNC = "shoal processes sync"
PROC_ASYNC = "shoal processes async"
GYM_SYNC = "gymnasium SyncVectorEnv"
GYM_ASYNC = "gymnasium AsyncVectorEnv"
ENVPOOL_SYNC = "EnvPool sync"
ENVPOOL_ASYNC = "EnvPool async"
PYTHON_SECTION = "Python-env section"  # a group of its own, reported in its own table
ENVS_SECTION = "first-party envs section"  # agent-steps/s of every env (shoal.bench_envs)
ORDER = [C_LOOP, C_LOOP_CORES, SERIAL, PROC_SYNC, PROC_ASYNC, GYM_SYNC, GYM_ASYNC,
         ENVPOOL_SYNC, ENVPOOL_ASYNC]
SHOAL = (SERIAL, PROC_SYNC, PROC_ASYNC)
ENVPOOL = (ENVPOOL_SYNC, ENVPOOL_ASYNC)
GROUPS = {
    "c_loop": [C_LOOP],
    "serial": [SERIAL],
    "sync": [PROC_SYNC],
    "async": [PROC_ASYNC],
    "shoal": list(SHOAL),
    "gym_sync": [GYM_SYNC],
    "gym_async": [GYM_ASYNC],
    "gymnasium": [GYM_SYNC, GYM_ASYNC],
    "envpool_sync": [ENVPOOL_SYNC],
    "envpool_async": [ENVPOOL_ASYNC],
    "envpool": list(ENVPOOL),
    "python": [PYTHON_SECTION],
    "envs": [ENVS_SECTION],
    "all": [C_LOOP, *SHOAL, GYM_SYNC, GYM_ASYNC, *ENVPOOL, PYTHON_SECTION, ENVS_SECTION],
}

# The Python-env section's contenders (table labels) and targets.
PY_LOOP = "one env, plain Python loop"
PY_SHOAL = "shoal.pool.AsyncVectorEnv"
PY_SYNC = "gymnasium SyncVectorEnv"
PY_ASYNC = "gymnasium AsyncVectorEnv"
PY_TARGETS = ((PY_ASYNC, 8.0), (PY_SYNC, 1.3))  # shoal / contender >= target ...
PY_TARGET_MIN_ENVS = 16                          # ... at this many envs or more


# ---- results ------------------------------------------------------------------------
@dataclass
class Result:
    contender: str
    num_envs: int
    workers: int
    rates: list[float] = field(default_factory=list)  # steps/s, one per repeat

    @property
    def median(self) -> float:
        return statistics.median(self.rates)

    @property
    def spread(self) -> float:
        return (max(self.rates) - min(self.rates)) / self.median if self.median else 0.0


@dataclass
class Settings:
    num_envs: list[int]
    workers: list[int]
    seconds: float
    gym_seconds: float
    warmup: float
    repeats: int
    gym_max_envs: int
    contenders: list[str]
    python_num_envs: list[int] = field(default_factory=lambda: [16, 64])
    python_rounds: int = 7
    python_seconds: float = 0.5

    @property
    def main_sweep(self) -> bool:
        """Whether any contender of the main (native CartPole) table is selected."""
        return any(c not in (PYTHON_SECTION, ENVS_SECTION) for c in self.contenders)

    @property
    def python_section(self) -> bool:
        return PYTHON_SECTION in self.contenders

    @property
    def envs_section(self) -> bool:
        return ENVS_SECTION in self.contenders


# ---- timing -------------------------------------------------------------------------
def run_for(step: Callable[[], int], seconds: float) -> float:
    """Call `step` (which returns the env steps it ran) until `seconds` have
    passed; return env steps per second of wall time."""
    clock = time.perf_counter
    steps = 0
    start = clock()
    deadline = start + seconds
    while True:
        steps += step()
        now = clock()
        if now >= deadline:
            return steps / (now - start)


def measure(step: Callable[[], int], seconds: float, warmup: float, repeats: int) -> list[float]:
    """Warm up, then `repeats` timed runs of `seconds` each; the rates."""
    if warmup > 0:
        run_for(step, warmup)
    return [run_for(step, seconds) for _ in range(repeats)]


def action_table(num_rows: int, dtype=np.int32, seed: int = 0) -> np.ndarray:
    """ACTION_TABLE_ROWS pre-sampled CartPole action arrays of `num_rows` actions."""
    rng = np.random.default_rng(seed)
    return rng.integers(0, 2, size=(ACTION_TABLE_ROWS, num_rows)).astype(dtype)


def cycling(table: np.ndarray) -> Callable[[], np.ndarray]:
    """A function returning the table's rows in turn, forever."""
    return partial(next, itertools.cycle(list(table)))


# ---- contenders: each builds its env(s), measures, and closes them ----------------------
def bench_c_loop(n: int, s: Settings) -> list[float]:
    """shoal's CartPole vector loop, `chunk` steps per nogil C call, one core."""
    from shoal.envs import spec

    return run_c_loop(spec(ENV), n, action_table(n), s.seconds, s.warmup, s.repeats)


def run_c_loop(env_spec, n: int, table: np.ndarray, seconds: float, warmup: float,
                 repeats: int) -> list[float]:
    """Agent-steps/s of an env's vector loop over n envs (NEXT_STEP
    autoreset), stepped in nogil C calls of `chunk` steps; table: rows of
    actions for all n * agents rows, cycled by the loop."""
    from shoal.pool.layout import RESEED, Buffers

    binding = env_spec.load_binding()
    buffers = Buffers(env_spec, n, 1, shared=False)
    try:
        buffers.reset_requests[:] = RESEED
        buffers.seeds[:] = np.arange(n, dtype=np.uint64)
        block = binding.Block(buffers, 0, n, 0)  # mode 0: NEXT_STEP autoreset
        block.reset()
        table = np.ascontiguousarray(table.reshape(len(table), -1))
        rows = n * env_spec.agents
        chunk = _calibrate_chunk(block, table)
        return measure(lambda: block.run_steps(table, chunk) or chunk * rows, seconds, warmup, repeats)
    finally:
        buffers.close()


def _calibrate_chunk(block, table: np.ndarray) -> int:
    """Steps per run_steps call so that one call takes ~C_LOOP_CALL_SECONDS
    (long enough to hide the call, short enough to stop on time)."""
    steps = 1
    while True:
        start = time.perf_counter()
        block.run_steps(table, steps)
        elapsed = time.perf_counter() - start
        if elapsed >= C_LOOP_CALL_SECONDS / 4:
            return max(1, round(steps * C_LOOP_CALL_SECONDS / elapsed))
        steps *= 2


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


# ---- the Python-env section: gymnasium's CartPole-v1 under three vectorizers -----------
@contextlib.contextmanager
def stepping(envs, n: int):
    """Reset a vector env of `n` envs with seed 0; yield a step function that
    steps it with pre-sampled actions and returns n; close the env on exit."""
    try:
        envs.reset(seed=0)
        next_actions = cycling(action_table(n, np.int64))

        def step():
            envs.step(next_actions())
            return n

        yield step
    finally:
        envs.close()


@contextlib.contextmanager
def plain_loop():
    """One gymnasium CartPole-v1 stepped in a plain Python loop (reset when
    done): the env's own cost per step on one core, no vectorizer at all."""
    import gymnasium

    env = gymnasium.make(GYM_ENV_ID)
    try:
        env.reset(seed=0)
        next_action = cycling(action_table(1, np.int64)[:, 0])

        def step():
            _, _, terminated, truncated, _ = env.step(next_action())
            if terminated or truncated:
                env.reset()
            return 1

        yield step
    finally:
        env.close()


def python_contenders(n: int, s: Settings, cores: int) -> list[tuple[str, int, int, Callable]]:
    """(label, num_envs, workers, opener) for the section at `n` envs; each
    opener returns a context manager yielding a step function."""
    import gymnasium

    from shoal.pool import AsyncVectorEnv

    fns = [partial(gymnasium.make, GYM_ENV_ID)] * n
    rows = [(PY_LOOP, 1, 1, plain_loop)]
    for w in sorted({w for w in s.workers if w <= n} | {min(cores, n)}):
        rows.append((PY_SHOAL, n, w, lambda w=w: stepping(AsyncVectorEnv(fns, num_workers=w), n)))
    rows.append((PY_SYNC, n, 1, lambda: stepping(gymnasium.vector.SyncVectorEnv(fns), n)))
    rows.append((PY_ASYNC, n, n, lambda: stepping(gymnasium.vector.AsyncVectorEnv(fns), n)))
    return rows


def interleaved(steps: list[Callable[[], int]], rounds: int, seconds: float, warmup: float) -> list[list[float]]:
    """Warm up each step function, then `rounds` rounds in which every one
    runs for `seconds`, round r starting with the r-th (so no contender is
    always first or last); the rates of each, one per round."""
    if warmup > 0:
        for step in steps:
            run_for(step, warmup)
    rates: list[list[float]] = [[] for _ in steps]
    k = len(steps)
    for r in range(rounds):
        for j in range(k):
            i = (r + j) % k
            rates[i].append(run_for(steps[i], seconds))
    return rates


def run_python(s: Settings, cores: int, log=sys.stderr) -> tuple[list[Result], list[str]]:
    """The section at every --python-num-envs: all contenders at one num_envs
    open at once, measured in interleaved rounds; errors are recorded."""
    results, errors = [], []
    for n in s.python_num_envs:
        rows = python_contenders(n, s, cores)
        print(f"[python] num_envs={n}: {len(rows)} contenders x {s.python_rounds} rounds "
              f"of {s.python_seconds:g} s ...", end=" ", file=log, flush=True)
        try:
            with contextlib.ExitStack() as stack:
                steps = [stack.enter_context(opener()) for _, _, _, opener in rows]
                rates = interleaved(steps, s.python_rounds, s.python_seconds, s.warmup)
        except Exception as e:
            errors.append(f"Python-env section num_envs={n}: {type(e).__name__}: {e}")
            print(f"FAILED: {e}", file=log, flush=True)
            continue
        rows = [Result(label, m, w, r) for (label, m, w, _), r in zip(rows, rates)]
        results += rows
        print("done; rates per round:", file=log, flush=True)
        for r in rows:
            print(f"    {r.contender}, workers={r.workers}: "
                  f"{', '.join(format_rate(rate) for rate in r.rates)}", file=log, flush=True)
    return results, errors


def python_default(results: list[Result], n: int, cores: int) -> Result | None:
    """shoal.pool.AsyncVectorEnv at `n` envs with its default workers
    (the available cores, at most n): the row the targets judge."""
    return python_row(results, PY_SHOAL, n, min(cores, n))


def python_row(results: list[Result], label: str, n: int, workers: int | None = None) -> Result | None:
    for r in results:
        if r.contender == label and r.num_envs == n and workers in (None, r.workers):
            return r
    return None


# ---- report -----------------------------------------------------------------------------
def format_rate(rate: float) -> str:
    for unit, scale in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if rate >= scale:
            return f"{rate / scale:.2f} {unit}"
    return f"{rate:.0f}"


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


def header(cores: int, envpool_ver: str | None, s: Settings) -> list[str]:
    """Title, date, machine, versions and (for the main table) the method."""
    import gymnasium

    import shoal

    return [
        f"# shoal benchmark: {ENV} steps/s",
        "",
        f"- date: {datetime.datetime.now().astimezone().isoformat(timespec='seconds')}",
        f"- CPU: {cpu_model()}, {cores} available cores (os.cpu_count() = {os.cpu_count()})",
        f"- Python {platform.python_version()}, numpy {np.__version__}, gymnasium "
        f"{gymnasium.__version__}, EnvPool {envpool_ver or 'not installed (skipped)'}, "
        f"shoal {shoal.__version__}",
    ] + ([
        f"- method: {s.seconds:g} s per run ({s.gym_seconds:g} s for gymnasium), "
        f"{s.warmup:g} s warm-up, median of {s.repeats}; actions pre-sampled "
        f"({ACTION_TABLE_ROWS} arrays cycled); ratio = rate / single-core C loop at the same num_envs",
    ] if s.main_sweep else [])


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


def python_report(results: list[Result], cores: int, s: Settings) -> list[str]:
    """The section's heading, method, table and target checks."""
    loop_rates = [rate for r in results if r.contender == PY_LOOP for rate in r.rates]
    lines = ["## Python env: gymnasium CartPole-v1 under three vectorizers", "",
             f"- method: per num_envs, all vector envs built together, reset with seed 0, "
             f"{s.warmup:g} s warm-up each, then {s.python_rounds} interleaved rounds of "
             f"{s.python_seconds:g} s (each round starts one contender later); median round "
             f"per contender; ratios are ratios of medians; actions pre-sampled"]
    bound = None
    if loop_rates:
        loop = statistics.median(loop_rates)
        bound = loop * cores
        lines.append(f"- reference: {PY_LOOP} (`gymnasium.make(\"{GYM_ENV_ID}\")`): "
                     f"{format_rate(loop)} steps/s = {1e6 / loop:.1f} us per step on one core; "
                     f"x {cores} cores = {format_rate(bound)} steps/s, the bound for any vectorizer")
    lines += ["", "| num_envs | vectorizer | workers | env-steps/s (median) | spread | vs loop x cores |",
              "|---:|---|---:|---:|---:|---:|"]
    for r in results:
        if r.contender != PY_LOOP:
            share = f"{r.median / bound:.2f}" if bound else "-"
            lines.append(f"| {r.num_envs} | {r.contender} | {r.workers} | {format_rate(r.median)} "
                         f"| {r.spread:.0%} | {share} |")
    return lines + [""] + python_targets(results, cores, s)


def python_targets(results: list[Result], cores: int, s: Settings) -> list[str]:
    """shoal (default workers) / each other vectorizer, against the targets;
    a target applies from PY_TARGET_MIN_ENVS envs up."""
    lines = [f"| ratio of medians (shoal with {cores} workers, its default) | num_envs | target "
             f"| measured | met |", "|---|---:|---:|---:|---|"]
    for n in s.python_num_envs:
        shoal = python_default(results, n, cores)
        for label, target in PY_TARGETS:
            other = python_row(results, label, n)
            if shoal is None or other is None or not other.median:
                continue
            ratio = shoal.median / other.median
            met = ("yes" if ratio >= target else "**no**") if n >= PY_TARGET_MIN_ENVS \
                else f"n/a (< {PY_TARGET_MIN_ENVS} envs)"
            lines.append(f"| shoal / {label} | {n} | >= {target:g}x | {ratio:.2f}x | {met} |")
    return lines


# ---- command line -------------------------------------------------------------------------
def int_list(text: str) -> list[int]:
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated ints, got {text!r}") from None
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"expected positive ints, got {text!r}")
    return values


def contender_list(text: str) -> list[str]:
    names = []
    for key in (k.strip().lower() for k in text.split(",") if k.strip()):
        if key not in GROUPS:
            raise argparse.ArgumentTypeError(f"unknown contender {key!r}; choose from {', '.join(GROUPS)}")
        names += GROUPS[key]
    return names


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="shoal bench",
        description=f"{ENV} steps/s of shoal vs gymnasium vs EnvPool vs a plain C loop, in one run.")
    p.add_argument("--num-envs", type=int_list, default=None,
                   help="comma-separated num_envs sweep (default 64,1024,4096,16384,65536; quick: 64,1024)")
    p.add_argument("--workers", type=int_list, default=None,
                   help="comma-separated worker / thread counts (default: 1 and the available cores)")
    p.add_argument("--seconds", type=float, default=None, help="duration of one run (default 1.0; quick: 0.2)")
    p.add_argument("--gym-seconds", type=float, default=None,
                   help="duration of one gymnasium run (default: min(seconds, 0.5))")
    p.add_argument("--warmup", type=float, default=None, help="warm-up per config (default 0.2; quick: 0.05)")
    p.add_argument("--repeats", type=int, default=None, help="runs per config, median reported (default 3; quick: 1)")
    p.add_argument("--gym-max-envs", type=int, default=None,
                   help="largest num_envs for gymnasium's slow vector envs (default 64; quick: 8)")
    p.add_argument("--contenders", type=contender_list, default=GROUPS["all"],
                   help=f"comma-separated subset of: {', '.join(GROUPS)} (default all; the C loop, "
                        f"the reference of every ratio, always runs with the main table; "
                        f"\"python\" is the Python-env section and \"envs\" the first-party envs section, "
                        f"each with a table of its own)")
    p.add_argument("--python-num-envs", type=int_list, default=None,
                   help="num_envs of the Python-env section (default 16,64; quick: 16)")
    p.add_argument("--python-rounds", type=int, default=None,
                   help="interleaved rounds per contender in the Python-env section (default 7; quick: 2)")
    p.add_argument("--python-seconds", type=float, default=None,
                   help="duration of one round in the Python-env section (default 0.5; quick: 0.1)")
    p.add_argument("--quick", action="store_true", help="smoke mode: tiny sweep, short runs, one repeat")
    p.add_argument("--out", help="also write the markdown report to this file")
    return p


def settings(args: argparse.Namespace, cores: int) -> Settings:
    """Fill unset arguments from the quick or full defaults."""
    quick = args.quick

    def pick(value, full, small):
        return value if value is not None else (small if quick else full)

    seconds = pick(args.seconds, 1.0, 0.2)
    s = Settings(
        num_envs=pick(args.num_envs, [64, 1024, 4096, 16384, 65536], [64, 1024]),
        workers=args.workers or sorted({1, cores}),
        seconds=seconds,
        gym_seconds=args.gym_seconds if args.gym_seconds is not None else min(seconds, 0.5),
        warmup=pick(args.warmup, 0.2, 0.05),
        repeats=pick(args.repeats, 3, 1),
        gym_max_envs=pick(args.gym_max_envs, 64, 8),
        contenders=args.contenders,
        python_num_envs=pick(args.python_num_envs, [16, 64], [16]),
        python_rounds=pick(args.python_rounds, 7, 2),
        python_seconds=pick(args.python_seconds, 0.5, 0.1),
    )
    if (s.seconds <= 0 or s.gym_seconds <= 0 or s.python_seconds <= 0 or s.warmup < 0
            or s.repeats < 1 or s.gym_max_envs < 1 or s.python_rounds < 1):
        raise SystemExit("shoal bench: --seconds/--gym-seconds/--python-seconds must be > 0, "
                         "--warmup >= 0, --repeats, --gym-max-envs and --python-rounds >= 1")
    return s


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    from shoal.pool import available_cores

    cores = available_cores()
    s = settings(args, cores)
    envpool_ver = envpool_version()
    notes = []
    if envpool_ver is None and set(s.contenders) & set(ENVPOOL):
        notes.append("EnvPool is not installed (`pip install envpool`): its rows are skipped.")

    report, errors = header(cores, envpool_ver, s), []
    if s.python_section:  # first: it forks, and must not while EnvPool's threads exist
        py_results, errors = run_python(s, cores)
        python_lines = python_report(py_results, cores, s)
    if s.envs_section:  # also forks: before EnvPool too
        from shoal import bench_envs
        envs_lines, envs_errors = bench_envs.run(s.seconds, s.warmup, s.repeats, cores, log=sys.stderr)
        errors += envs_errors
    if s.main_sweep:
        results, main_errors = run_all(s, envpool_ver is not None)
        errors += main_errors
        results = with_computed_limit(results, cores)
        report += [""] + table(results) + [""] + headline(results, cores, envpool_ver)
    if s.python_section:
        report += [""] + python_lines
    if s.envs_section:
        report += [""] + envs_lines
    if notes or errors:
        report += ["", "## Notes", ""] + [f"- {line}" for line in notes + errors]
    text = "\n".join(report) + "\n"
    print(text, end="")
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
