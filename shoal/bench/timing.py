"""The benchmarks' one measurement module: every section of `shoal bench`
and scripts/compare_cpu_gpu.py time their step loops with these helpers.

  - actions are sampled before the timer (`action_table`): a table of K
    random action arrays, cycled (`cycling`: no RNG work and no allocation
    inside the timed loop);
  - `run_for` runs a step loop for a fixed duration and counts the env steps
    it ran; `measure` warms up, then repeats it; the reports take the median
    (`Result.median`, `median_rate`);
  - `interleaved` measures several step functions in alternating rounds, so
    that drift in the machine's load hits every contender alike;
  - `c_loop` steps an env's vector loop in nogil C calls (`run_c_loop`
    times it): the single-core limit of a first-party env;
    `run_c_loop_all_cores` runs one per core at once: the machine's limit;
  - `format_rate`, `cpu_model` and `cpu_line` write the numbers and name the
    machine.

This module imports no other part of shoal.bench.
"""
from __future__ import annotations

import contextlib
import itertools
import os
import platform
import statistics
import time
from dataclasses import dataclass, field
from functools import partial
from typing import Callable

import numpy as np

ACTION_TABLE_ROWS = 16          # K: pre-sampled action arrays, cycled (the CartPole table's)
C_LOOP_CALL_SECONDS = 0.01      # the C loop runs in chunks of about this long


# ---- results and settings ------------------------------------------------------------
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
    """One `shoal bench` run's sweep and durations (filled by shoal.bench.settings)."""
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


# ---- timing -------------------------------------------------------------------------
def run_for(step: Callable[[], int], seconds: float,
            sync: Callable[[], object] | None = None) -> float:
    """Call `step` (which returns the env steps it ran) until `seconds` have
    passed; return env steps per second of wall time. `sync` (e.g.
    torch.cuda.synchronize) is called before the clock starts and after
    every step, so that queued device work is counted."""
    clock = time.perf_counter
    if sync is not None:
        sync()
    steps = 0
    start = clock()
    deadline = start + seconds
    while True:
        steps += step()
        if sync is not None:
            sync()
        now = clock()
        if now >= deadline:
            return steps / (now - start)


def measure(step: Callable[[], int], seconds: float, warmup: float, repeats: int,
            sync: Callable[[], object] | None = None) -> list[float]:
    """Warm up, then `repeats` timed runs of `seconds` each; the rates."""
    if warmup > 0:
        run_for(step, warmup, sync)
    return [run_for(step, seconds, sync) for _ in range(repeats)]


def median_rate(step: Callable[[], int], seconds: float, warmup: float, repeats: int,
                sync: Callable[[], object] | None = None) -> float:
    """The median of `measure`'s rates."""
    return statistics.median(measure(step, seconds, warmup, repeats, sync))


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


# ---- actions ------------------------------------------------------------------------
def action_table(rows: int, spec=None, *, table_rows: int = ACTION_TABLE_ROWS, dtype=np.int32,
                 seed: int = 0) -> np.ndarray:
    """`table_rows` pre-sampled action arrays for `rows` agent rows, drawn
    uniformly from the action space of env `spec` (a shoal.envs spec; None:
    CartPole's two discrete actions): shape (table_rows, rows) for one
    discrete action, (table_rows, rows, components) otherwise."""
    rng = np.random.default_rng(seed)
    if spec is not None and spec.continuous_action:   # Box: uniform within the bounds
        low, high = np.asarray(spec.action_low, np.float64), np.asarray(spec.action_high, np.float64)
        table = rng.uniform(low, high, (table_rows, rows, len(low))).astype(np.float32)
        return np.ascontiguousarray(table.astype(dtype))   # the same values for every dtype
    nvec = np.asarray(spec.action_nvec if spec is not None else (2,))
    discrete = spec.discrete_action if spec is not None else True
    table = rng.integers(0, nvec, size=(table_rows, rows, len(nvec))).astype(dtype)
    if len(nvec) == 1 and discrete:
        table = table[..., 0]
    return np.ascontiguousarray(table)


def cycling(table) -> Callable[[], object]:
    """A function returning the table's rows in turn, forever."""
    return partial(next, itertools.cycle(list(table)))


# ---- the C loop: an env's vector loop in nogil C calls ---------------------------------
@contextlib.contextmanager
def c_loop(env_spec, n: int, table: np.ndarray):
    """Yield a step function running env `env_spec`'s vector loop over n
    envs (NEXT_STEP autoreset) in one nogil `Block.run_steps` call of about
    C_LOOP_CALL_SECONDS; it returns the agent-steps it ran. table: rows of
    actions for all n * agents rows, cycled: each call goes on from the table
    row where the last one stopped (step t uses row t % K, as the pools'
    `cycling` does; a slow env's call is a step or two)."""
    from shoal.pool.layout import RESEED, Buffers

    binding = env_spec.load_binding()
    buffers = Buffers(env_spec, n, 1, shared=False)
    block = None
    try:
        buffers.reset_requests[:] = RESEED
        buffers.seeds[:] = np.arange(n, dtype=np.uint64)
        block = binding.Block(buffers, 0, n, 0)  # mode 0: NEXT_STEP autoreset
        block.reset()
        table = np.ascontiguousarray(table.reshape(len(table), -1))
        rows = n * env_spec.agents
        chunk = _calibrate_chunk(block, table)
        next_row = 0

        def step():
            nonlocal next_row
            block.run_steps(table, chunk, next_row)
            next_row = (next_row + chunk) % len(table)
            return chunk * rows

        yield step
    finally:
        del block
        buffers.close()


def run_c_loop(env_spec, n: int, table: np.ndarray, seconds: float, warmup: float,
               repeats: int) -> list[float]:
    """Agent-steps/s of `c_loop` over n envs: `measure`'s rates."""
    with c_loop(env_spec, n, table) as step:
        return measure(step, seconds, warmup, repeats)


def run_c_loop_all_cores(env_spec, n: int, table: np.ndarray, procs: int, seconds: float,
                         warmup: float, repeats: int) -> list[float]:
    """Agent-steps/s of `procs` C loops running at once, one forked process
    each over its share of the n envs (shares as even as a pool's blocks),
    with no hand-off between them: the rate the machine gives on `procs`
    cores, with shared caches, memory bandwidth, SMT siblings and all-core
    clocks, where "C loop x cores" multiplies the one-core rate. Each of the
    `repeats` windows starts on a barrier; its rate is the sum of the
    processes' rates over it. table: as c_loop's, for all n envs' rows."""
    import multiprocessing as mp

    if not 1 <= procs <= n:
        raise ValueError(f"procs must be in [1, num_envs={n}], got {procs}")
    ctx = mp.get_context("fork")   # the share of the table is inherited, not pickled
    barrier = ctx.Barrier(procs)
    bounds = [n * k // procs for k in range(procs + 1)]
    children = []
    try:
        for k in range(procs):
            ours, theirs = ctx.Pipe(duplex=False)
            p = ctx.Process(target=_c_loop_share, daemon=True,
                            args=(env_spec, bounds[k], bounds[k + 1], table, seconds, warmup, repeats,
                                  barrier, theirs))
            p.start()
            theirs.close()
            children.append((p, ours))
        limit = warmup + repeats * (seconds + 5 * C_LOOP_CALL_SECONDS) + 60
        shares = []
        for p, conn in children:
            if not conn.poll(limit):
                raise RuntimeError(f"a C loop process sent nothing within {limit:.0f} s")
            status, value = conn.recv()
            if status != "ok":
                raise RuntimeError(f"a C loop process failed: {value}")
            shares.append(value)
        return [sum(rates) for rates in zip(*shares)]
    finally:
        for p, conn in children:
            p.join(timeout=5)
            if p.is_alive():
                p.kill()
                p.join()
            conn.close()


def _c_loop_share(env_spec, start: int, stop: int, table: np.ndarray, seconds: float, warmup: float,
                  repeats: int, barrier, conn) -> None:
    """One process of run_c_loop_all_cores: envs [start, stop)."""
    try:
        agents = env_spec.agents
        with c_loop(env_spec, stop - start, table[:, start * agents:stop * agents]) as step:
            if warmup > 0:
                run_for(step, warmup)
            rates = []
            for _ in range(repeats):
                barrier.wait(timeout=60)
                rates.append(run_for(step, seconds))
        conn.send(("ok", rates))
    except BaseException as e:  # reported to the parent, which raises it
        barrier.abort()
        conn.send(("error", f"{type(e).__name__}: {e}"))
    finally:
        conn.close()


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


# ---- report helpers -----------------------------------------------------------------
def format_rate(rate: float) -> str:
    """A rate with a G / M / k unit and two decimals ("12.35 M")."""
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


def cpu_line(cores: int) -> str:
    """The machine line's CPU part: "CPU: <model>, <cores> available cores"."""
    return f"CPU: {cpu_model()}, {cores} available cores"


def load_average(run: Callable[[], object]) -> tuple[object, str]:
    """run()'s result and a report line with the load average before and after."""
    before = os.getloadavg()
    result = run()
    after = os.getloadavg()
    load = [", ".join(f"{a:.1f}" for a in avg) for avg in (before, after)]
    return result, f"- load average (1, 5, 15 min) at the start: {load[0]}; at the end: {load[1]}"
