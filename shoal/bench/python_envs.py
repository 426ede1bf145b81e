"""The Python-env section: gymnasium's own CartPole-v1, a Python env, under
three vectorizers at the same num_envs (--python-num-envs, default 16 and 64).

shoal.pool.AsyncVectorEnv (one block of envs per worker process, at each
--workers count and at the available cores, its default), gymnasium
SyncVectorEnv and gymnasium AsyncVectorEnv (one process per env). For
reference it also times one env in a plain Python loop: the env's own step
cost, one core. Targets, at >= 16 envs: shoal (default workers) >= 8x
gymnasium AsyncVectorEnv and >= 1.3x SyncVectorEnv.

For fairness on a noisy machine all vector envs at one num_envs are built
together and measured in interleaved rounds (shoal.bench.timing.interleaved).
"""
from __future__ import annotations

import contextlib
import statistics
from functools import partial

import numpy as np

from shoal.bench.cartpole import GYM_ENV_ID
from shoal.bench.sections import GYM_ASYNC, GYM_SYNC, PY_SHOAL, Row, measure_groups
from shoal.bench.steppers import gym_make, gym_vector
from shoal.bench.timing import Result, Settings, action_table, cycling, format_rate

# The section's contenders (table labels) and targets.
PY_LOOP = "one env, plain Python loop"
PY_SYNC, PY_ASYNC = GYM_SYNC, GYM_ASYNC
PY_TARGETS = ((PY_ASYNC, 8.0), (PY_SYNC, 1.3))  # shoal / contender >= target ...
PY_TARGET_MIN_ENVS = 16                          # ... at this many envs or more


@contextlib.contextmanager
def plain_loop():
    """One gymnasium CartPole-v1 stepped in a plain Python loop (reset when
    done): the env's own cost per step on one core, no vectorizer at all."""
    import gymnasium

    env = gymnasium.make(GYM_ENV_ID)
    try:
        env.reset(seed=0)
        next_action = cycling(action_table(1, dtype=np.int64)[:, 0])

        def step():
            _, _, terminated, truncated, _ = env.step(next_action())
            if terminated or truncated:
                env.reset()
            return 1

        yield step
    finally:
        env.close()


def python_contenders(n: int, s: Settings, cores: int) -> list[tuple]:
    """(label, workers, batch, opener) for the section at `n` envs; each
    opener returns a context manager yielding a step function."""
    make_env = partial(gym_make, GYM_ENV_ID)
    rows = [(PY_LOOP, 1, 1, plain_loop)]
    for w in sorted({w for w in s.workers if w <= n} | {min(cores, n)}):
        rows.append((PY_SHOAL, w, n, partial(gym_vector, make_env, None, n, "shoal", w)))
    rows.append((PY_SYNC, 1, n, partial(gym_vector, make_env, None, n, "sync")))
    rows.append((PY_ASYNC, n, n, partial(gym_vector, make_env, None, n, "async")))
    return rows


def run_python(s: Settings, cores: int, progress) -> tuple[list[Row], list[str]]:
    """The section at every --python-num-envs: all contenders at one num_envs
    open at once, measured in interleaved rounds; errors are recorded."""
    plans = [("", n, partial(python_contenders, n, s, cores)) for n in s.python_num_envs]
    return measure_groups("python", "Python-env section", plans, s.python_rounds, s.python_seconds, s.warmup,
                          progress)


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
    lines = [f"| ratio of medians (shoal with its default workers: the {cores} cores, at most num_envs) "
             f"| num_envs | target | measured | met |", "|---|---:|---:|---:|---|"]
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


def run(s: Settings, cores: int, progress=None) -> tuple[list[str], list[str]]:
    """The whole section: (markdown lines, errors); progress: a
    shoal.progress.Progress (default: plain lines on stderr)."""
    from shoal.progress import Progress

    results, errors = run_python(s, cores, progress or Progress("plain"))
    return python_report(results, cores, s), errors
