#!/usr/bin/env python
"""Pools on a busy machine: env-steps/s with K busy processes beside them.

    python -P scripts/contention_bench.py --burners 0 1 --rounds 5

A burner is a process spinning in Python (another job on a shared machine,
or a learner's threads). For each burner count, every case steps zero
actions in interleaved rounds of --seconds each (the order rotates from
round to round); the table gives the median env-steps/s and the spread.
EnvPool's thread pool runs beside shoal's pools where it is installed.
"""
from __future__ import annotations

import argparse
import importlib.util
import statistics
import subprocess
import sys
import time

import numpy as np

import shoal

CASES = [  # (env, num_envs, shoal.make keywords or "envpool:<threads>")
    ("CartPole", 8, {"num_workers": 1}),
    ("CartPole", 8, {}),
    ("CartPole", 64, {}),
    ("CartPole", 64, {"backend": "serial"}),
    ("CartPole", 64, "envpool:1"),
    ("Hopper", 8, {}),
    ("Hopper", 8, "envpool:1"),
]


def make_case(env: str, num_envs: int, how):
    """(step, close) for one case."""
    if isinstance(how, str):
        import envpool
        task = "CartPole-v1" if env == "CartPole" else f"{env}-v5"
        pool = envpool.make(task, env_type="gymnasium", num_envs=num_envs, batch_size=num_envs,
                            num_threads=int(how.split(":")[1]))
        pool.reset()
        actions = np.zeros((num_envs, *pool.action_space.shape), pool.action_space.dtype)
        return (lambda: pool.step(actions)), pool.close
    pool = shoal.make(env, num_envs, seed=0, **how)
    pool.reset()
    actions = np.zeros(pool.action_space.shape, pool.action_space.dtype)
    return (lambda: pool.step(actions)), pool.close


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--burners", type=int, nargs="+", default=[0, 1])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=0.5)
    args = parser.parse_args()
    with_envpool = importlib.util.find_spec("envpool") is not None
    cases = [case for case in CASES if with_envpool or not isinstance(case[2], str)]
    print("| burners | env | num_envs | pool | env-steps/s (median) | spread |")
    print("|---:|---|---:|---|---:|---|")
    for burners in args.burners:
        procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(burners)]
        made = [make_case(*case) for case in cases]
        rates: list[list[float]] = [[] for _ in cases]
        try:
            for r in range(args.rounds):
                for k in np.roll(np.arange(len(cases)), r):
                    step, _ = made[k]
                    step()
                    calls, start = 0, time.perf_counter()
                    while (elapsed := time.perf_counter() - start) < args.seconds:
                        step()
                        calls += 1
                    rates[k].append(calls * cases[k][1] / elapsed)
        finally:
            for _, close in made:
                close()
            for p in procs:
                p.kill()
                p.wait()
        for (env, n, how), values in zip(cases, rates):
            name = how if isinstance(how, str) else ("shoal " + (", ".join(f"{k}={v}" for k, v in how.items())
                                                                 or "default"))
            print(f"| {burners} | {env} | {n} | {name} | {statistics.median(values):,.0f} | "
                  f"{min(values):,.0f} .. {max(values):,.0f} |", flush=True)


if __name__ == "__main__":
    main()
