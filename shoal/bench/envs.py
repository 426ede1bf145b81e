"""Agent-steps per second of every first-party env: the bench's "envs" section.

For each env (one row per agent; multi-agent envs count every agent row):

  C loop, 1 core     the env's vector loop in nogil C calls (`Block.run_steps`),
                     NEXT_STEP autoreset on: the env's own cost per agent-step.
  Serial, 1 core     shoal's Serial pool, pool.step in a Python loop.
  Serial, live       the same runs counted in live agent-steps (rows with mask
                     true after the step), the measure the targets are checked
                     on; never above "Serial, 1 core", as it is the same time.
  processes          shoal's Multiprocessing pool on all available cores; the
                     table also gives its rate per core.

Actions are random, pre-sampled (a cycled table), drawn uniformly from each
env's action space; every pool is reset with seed 0 and warmed up. The pool
size is picked per env so that a step covers about ROWS_PER_STEP agent rows
(the Python call per step is then a small share). Targets (issue: envs),
agent-steps/s per core: Snake >= 10 M, Drive >= 1 M, Explorer >= 1 M;
TARGETS_PER_CORE is keyed by the env's name, lower-case (spec.name.lower()).
One env alone: `run(seconds, warmup, repeats, cores, envs=["corridor"])`.
"""
from __future__ import annotations

import os
import statistics

import numpy as np

from shoal.bench.timing import action_table, cycling, format_rate, measure, run_c_loop, run_for

ROWS_PER_STEP = 8192
TABLE_ROWS = 8
TARGETS_PER_CORE = {"snake": 10e6, "drive": 1e6, "explorer": 1e6, "explorerpointgoal": 1e6}


def _actions(spec, rows: int) -> np.ndarray:
    """TABLE_ROWS random action arrays for `rows` agent rows, in the pool's layout."""
    return action_table(rows, spec, table_rows=TABLE_ROWS, dtype=spec.load_binding().ACT_DTYPE)


def bench_c_loop(spec, num_envs: int, seconds: float, warmup: float, repeats: int) -> list[float]:
    rows = num_envs * spec.agents
    return run_c_loop(spec, num_envs, _actions(spec, rows), seconds, warmup, repeats)


def bench_pool(spec, num_envs: int, backend: str, seconds: float, warmup: float,
               repeats: int, live: bool = False) -> list[float] | tuple[list[float], list[float]]:
    """Agent-steps/s of pool.step, one rate per run. live: also count, in the
    same runs, only the rows whose agent is present (mask true) after the
    step (e.g. Drive's agents that have not crashed or arrived yet), and
    return (all rows, live rows): both rates of a run share its time, so the
    live rate never exceeds the other."""
    import shoal

    pool = shoal.make(spec.name, num_envs, backend=backend, seed=0)
    try:
        pool.reset(seed=0)
        next_actions = cycling(_actions(spec, pool.num_rows))
        counted = [0, 0]   # rows, live rows stepped in the current run

        def step():
            pool.step(next_actions())
            if live:
                counted[0] += pool.num_rows
                counted[1] += int(np.count_nonzero(pool.masks))
            return pool.num_rows

        if not live:
            return measure(step, seconds, warmup, repeats)
        if warmup > 0:
            run_for(step, warmup)
        rates, live_rates = [], []
        for _ in range(repeats):
            counted[:] = [0, 0]
            rate = run_for(step, seconds)
            rates.append(rate)
            live_rates.append(rate * counted[1] / counted[0])
        return rates, live_rates
    finally:
        pool.close()


def run(seconds: float, warmup: float, repeats: int, cores: int, envs: list[str] | None = None,
        progress=None) -> tuple[list[str], list[str]]:
    """Measure every env; returns (markdown lines, errors); progress: a
    shoal.progress.Progress (default: none)."""
    import shoal.envs
    from shoal.progress import Progress

    progress = progress or Progress("none")
    names = envs or [n.lower() for n in shoal.envs.names("header")]  # MuJoCo: its own section
    lines = ["## First-party envs: agent-steps/s", "",
             f"- one row per agent; random pre-sampled actions; pools reset with seed 0; "
             f"~{ROWS_PER_STEP} agent rows per step; median of {repeats} runs of {seconds} s",
             "",
             "| env | agents/env | num_envs | C loop, 1 core | Serial, 1 core | Serial, live agents | "
             f"processes, {cores} cores | processes / core | target / core | met |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    errors = []
    progress.task("envs", len(names))
    for name in names:
        spec = shoal.envs.spec(name)
        num_envs = max(1, ROWS_PER_STEP // spec.agents)
        progress.start(f"{spec.name}: {num_envs} envs x {spec.agents} agents")
        try:
            c_loop = statistics.median(bench_c_loop(spec, num_envs, seconds, warmup, repeats))
            serial, live = map(statistics.median, bench_pool(spec, num_envs, "serial", seconds, warmup,
                                                             repeats, live=True))
            procs = statistics.median(bench_pool(spec, num_envs, "multiprocessing", seconds, warmup, repeats))
        except Exception as e:  # one env failing must not hide the others
            errors.append(f"{spec.name}: {type(e).__name__}: {e}")
            progress.done(f"FAILED: {e}")
            continue
        progress.done(f"C loop {format_rate(c_loop)}, Serial {format_rate(serial)}, "
                      f"processes {format_rate(procs)} agent-steps/s")
        target = TARGETS_PER_CORE.get(spec.name.lower())
        per_core = procs / cores
        met = "-" if target is None else ("yes" if live >= target else "no")
        fmt = format_rate
        lines.append(f"| {spec.name} | {spec.agents} | {num_envs} | {fmt(c_loop)} | {fmt(serial)} | {fmt(live)} | "
                     f"{fmt(procs)} | {fmt(per_core)} | {fmt(target) if target else '-'} | {met} |")
    lines += ["", "Agent-steps count every agent row; \"live agents\" counts only rows whose agent is "
              "present after the step (Drive's cars leave when they crash or arrive, and random "
              "actions crash most of them early), counted in the same timed runs as \"Serial, 1 core\". "
              "\"met\": Serial, one process on one core, reaches the per-core target in live "
              "agent-steps."]
    lines.insert(3, f"- load average (1, 5, 15 min) at the end: "
                    f"{', '.join(f'{a:.1f}' for a in os.getloadavg())} (configs run one after another: "
                    f"ratios between columns move with the load)")
    return lines, errors
