"""The CartPole table: shoal vs gymnasium vs EnvPool vs a plain C loop.

Every contender runs in the same process and the same run, one config
after another (not in interleaved rounds, as the MuJoCo, Atari and Python
sections are): on a shared machine a ratio between two rows moves with the
load from run to run (absolute numbers do not travel at all); compare the
same rows over repeated runs before trusting a ratio to better than ~2x.
The contenders and the method are described in shoal.bench's docstring;
each contender is an opener of shoal.bench.steppers, timed with
shoal.bench.timing.
"""
from __future__ import annotations

from functools import partial
from typing import Callable

from shoal.bench.steppers import c_loop, c_loop_all_cores, envpool_env, gym_make, gym_vector, native_pool
from shoal.bench.timing import Result, Settings, format_rate, load_average, measure

ENV = "CartPole"
GYM_ENV_ID = "CartPole-v1"

# Contender names, in table order.
C_LOOP = "C loop"
C_LOOP_CORES = "C loop x cores (computed)"
C_LOOP_ALL = "C loop x cores (measured)"
SERIAL = "shoal Serial"
PROC_SYNC = "shoal processes sync"
PROC_ASYNC = "shoal processes async"
GYM_SYNC = "gymnasium SyncVectorEnv"
GYM_ASYNC = "gymnasium AsyncVectorEnv"
ENVPOOL_SYNC = "EnvPool sync"
ENVPOOL_ASYNC = "EnvPool async"
ORDER = [C_LOOP, C_LOOP_CORES, C_LOOP_ALL, SERIAL, PROC_SYNC, PROC_ASYNC, GYM_SYNC, GYM_ASYNC,
         ENVPOOL_SYNC, ENVPOOL_ASYNC]
SHOAL = (SERIAL, PROC_SYNC, PROC_ASYNC)
ENVPOOL = (ENVPOOL_SYNC, ENVPOOL_ASYNC)


# ---- measuring: each contender is an opener of shoal.bench.steppers -----------------------
def timed(opener: Callable, seconds: float, warmup: float, repeats: int) -> list[float]:
    """Open a contender (a context manager yielding a step function) and
    `measure` it; closed after."""
    with opener() as step:
        return measure(step, seconds, warmup, repeats)


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


def plan(s: Settings, have_envpool: bool,
         cores: int = 1) -> list[tuple[str, int, int, Callable[[], list[float]]]]:
    """(contender, num_envs, workers, run) for every config to measure, in order.

    Shoal and gymnasium come before EnvPool so that no process is forked
    while EnvPool's threads exist. With cores > 1, the C loop also runs on
    every core at once (C_LOOP_ALL): the limit the multi-core rows are held to."""
    import shoal.envs

    spec = shoal.envs.spec(ENV)
    gym_env = partial(gym_make, GYM_ENV_ID)
    wanted = set(s.contenders) | {C_LOOP} | ({C_LOOP_ALL} if cores > 1 else set())  # the references
    jobs = []

    def add(name, n, w, opener, gym=False):
        if name in wanted:
            seconds, warmup = (s.gym_seconds, min(s.warmup, s.gym_seconds)) if gym else (s.seconds, s.warmup)
            jobs.append((name, n, w, partial(timed, opener, seconds, warmup, s.repeats)))

    c_sizes = sorted(set(s.num_envs) | (set(gym_sizes(s)) if wanted & {GYM_SYNC, GYM_ASYNC} else set()))
    for n in c_sizes:
        add(C_LOOP, n, 1, partial(c_loop, spec, n))
    if C_LOOP_ALL in wanted:
        for n in s.num_envs:
            if n >= cores:
                jobs.append((C_LOOP_ALL, n, cores,
                             partial(c_loop_all_cores, spec, n, cores, s.seconds, s.warmup, s.repeats)))
    for n in s.num_envs:
        add(SERIAL, n, 1, partial(native_pool, spec, n))
    for n in s.num_envs:
        for w in s.workers:
            if w <= n:
                add(PROC_SYNC, n, w, partial(native_pool, spec, n, w))
    for n in s.num_envs:
        for w in async_workers(s):
            if n >= 2 and w <= n:
                add(PROC_ASYNC, n, w, partial(native_pool, spec, n, w, n // 2))
    for n in gym_sizes(s):
        add(GYM_SYNC, n, 1, partial(gym_vector, gym_env, None, n, "sync"), gym=True)
    for n in gym_sizes(s):
        add(GYM_ASYNC, n, n, partial(gym_vector, gym_env, None, n, "async"), gym=True)  # one process per env
    if have_envpool:
        for n in s.num_envs:
            for w in s.workers:
                add(ENVPOOL_SYNC, n, w, partial(envpool_env, GYM_ENV_ID, None, n, n, w))
        for n in s.num_envs:
            for w in s.workers:
                if n >= 2:
                    add(ENVPOOL_ASYNC, n, w, partial(envpool_env, GYM_ENV_ID, None, n, n // 2, w))
    return jobs


def run_all(s: Settings, have_envpool: bool, progress, cores: int = 1) -> tuple[list[Result], list[str]]:
    """Measure every planned config; errors are recorded, not fatal."""
    results, errors = [], []
    jobs = plan(s, have_envpool, cores)
    progress.task("cartpole", len(jobs))
    for name, n, w, run in jobs:
        progress.start(f"{name}, num_envs={n}, workers={w}")
        try:
            rates = run()
        except Exception as e:  # keep the rest of a long sweep
            errors.append(f"{name} num_envs={n} workers={w}: {type(e).__name__}: {e}")
            progress.done(f"FAILED: {e}")
            continue
        r = Result(name, n, w, rates)
        results.append(r)
        progress.done(f"{format_rate(r.median)} steps/s")
    return results, errors


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
        lines.append(f"- shoal best / EnvPool best (each at its best workers): "
                     f"{shoal_best.median / envpool_best.median:.2f}")
        equal = equal_workers_ratios(results)
        if equal:
            lines.append("- shoal best / EnvPool best at equal workers (processes vs threads): "
                         + "; ".join(f"workers={w}: {ratio:.2f}" for w, ratio in equal))
        lines.append("- the API work differs: shoal's step returns views of its shared buffers, "
                     "EnvPool's step new arrays and an info dict (the EnvPool drop-in, which copies: "
                     "scripts/envpool_dropin_speed.py)")
    if c_best:
        limit = c_best.median * cores
        lines.append(f"- C loop x cores (limit): {format_rate(limit)} steps/s "
                     f"({format_rate(c_best.median)} x {cores}, num_envs={c_best.num_envs})")
        if shoal_best:
            lines.append(f"- shoal best / (C loop x cores): {shoal_best.median / limit:.2f}")
    measured = best([C_LOOP_ALL])
    if measured:
        of_computed = f"; {measured.median / (c_best.median * cores):.2f} of the computed limit" if c_best else ""
        lines.append(f"- C loop x cores, measured (a C loop per core, all at once): "
                     f"{format_rate(measured.median)} steps/s (num_envs={measured.num_envs}){of_computed}")
        if shoal_best:
            lines.append(f"- shoal best / (C loop x cores, measured): {shoal_best.median / measured.median:.2f}")
    sync, async_ = best([PROC_SYNC]), best([PROC_ASYNC])
    if sync and async_:
        lines.append(f"- shoal processes async best / sync best: {async_.median / sync.median:.2f}")
    limit = c_loop_rates(results)
    serial = [f"{r.median / limit[r.num_envs]:.2f} at {r.num_envs}" for r in results
              if r.contender == SERIAL and r.num_envs >= 4096 and r.num_envs in limit]
    if serial:
        lines.append(f"- shoal Serial / C loop 1 core, num_envs >= 4096: {', '.join(serial)}")
    return lines


def equal_workers_ratios(results: list[Result]) -> list[tuple[int, float]]:
    """(workers, shoal's best rate / EnvPool's best rate) for each worker
    count both measured (async shoal rounds odd counts up: those have none)."""
    def best_at(names, w):
        rates = [r.median for r in results if r.contender in names and r.workers == w]
        return max(rates) if rates else None

    pairs = []
    for w in sorted({r.workers for r in results if r.contender in ENVPOOL}):
        ours, theirs = best_at(SHOAL, w), best_at(ENVPOOL, w)
        if ours and theirs:
            pairs.append((w, ours / theirs))
    return pairs


def run(s: Settings, cores: int, envpool_ver: str | None, progress=None) -> tuple[list[str], list[str]]:
    """The whole section: measure the sweep; returns (markdown lines: the
    table and the headline, errors); progress: a shoal.progress.Progress
    (default: plain lines on stderr)."""
    from shoal.progress import Progress

    (results, errors), load = load_average(lambda: run_all(s, envpool_ver is not None,
                                                           progress or Progress("plain"), cores))
    results = with_computed_limit(results, cores)
    return [load, ""] + table(results) + [""] + headline(results, cores, envpool_ver), errors
