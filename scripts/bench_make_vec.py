#!/usr/bin/env python
"""The gymnasium drop-in path vs shoal's own pool: CartPole steps/s, one run.

    python scripts/bench_make_vec.py                    # 16384 envs, 2 workers
    python scripts/bench_make_vec.py --rounds 60 --seconds 0.2

Paths (same env count, same worker count, same multiprocessing backend):
  - shoal.make("CartPole", n, num_workers=w).step(int32 actions): the reference
  - gymnasium.make_vec("shoal/CartPole-v0", n, vectorization_mode=
    "vector_entry_point").step(int64 actions): the drop-in path (copy=True, as
    gymnasium's default; NEXT_STEP autoreset, make_vec's default)
  - the same with int32 actions, with copy=False, and in SAME_STEP autoreset
    mode (infos["final_obs"]: an object array of the ended envs' last obs),
    for reference

Each round runs every path for --seconds, in a rotated order; the table
gives the median steps/s over the rounds and its ratio to the reference, and
the median of the per-round ratios (the figure to judge: load drifts between
rounds, less within one).
"""
from __future__ import annotations

import argparse
import os
import statistics
import time

import gymnasium
import numpy as np

import shoal


def _paths(n: int, workers: int):
    """name -> (make, step action dtype, copy)."""
    def make_pool():
        return shoal.make("CartPole", n, num_workers=workers, seed=0)

    def make_vec(copy=True, mode="next_step"):
        def build():
            return gymnasium.make_vec("shoal/CartPole-v0", num_envs=n,
                                      vectorization_mode="vector_entry_point",
                                      num_workers=workers, seed=0, copy=copy, autoreset_mode=mode)
        return build

    return {
        "shoal.make, int32": (make_pool, np.int32),
        "make_vec, int64": (make_vec(), np.int64),
        "make_vec, int32": (make_vec(), np.int32),
        "make_vec, int64, copy=False": (make_vec(False), np.int64),
        "make_vec, int64, same_step": (make_vec(mode="same_step"), np.int64),
    }


def _run(env, actions, seconds: float) -> float:
    """Steps/s (env-steps) of env.step(actions) for about `seconds`."""
    for _ in range(20):   # warm: caches, page faults of fresh buffers
        env.step(actions)
    steps = 0
    start = time.perf_counter()
    deadline = start + seconds
    while True:
        for _ in range(20):
            env.step(actions)
        steps += 20
        now = time.perf_counter()
        if now >= deadline:
            break
    return steps * len(actions) / (now - start)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--num-envs", type=int, default=16384)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--rounds", type=int, default=30)
    p.add_argument("--seconds", type=float, default=0.3, help="per path per round")
    args = p.parse_args(argv)

    paths = _paths(args.num_envs, args.workers)
    names = list(paths)
    envs, acts = {}, {}
    rng = np.random.default_rng(0)
    for name, (make, dtype) in paths.items():
        env = make()
        env.reset(seed=0)
        envs[name] = env
        acts[name] = rng.integers(0, 2, args.num_envs).astype(dtype)
    rates = {name: [] for name in names}
    print(f"load before: {os.getloadavg()}", flush=True)
    try:
        for r in range(args.rounds):
            order = names[r % len(names):] + names[:r % len(names)]
            for name in order:
                rates[name].append(_run(envs[name], acts[name], args.seconds))
            print(f"round {r}: " + ", ".join(f"{n}: {rates[n][-1] / 1e6:.1f} M" for n in names),
                  flush=True)
    finally:
        for env in envs.values():
            env.close()
    ref = names[0]
    print(f"load after: {os.getloadavg()}")
    print(f"\nCartPole, {args.num_envs} envs, {args.workers} workers, {args.rounds} rounds x "
          f"{args.seconds} s per path (median)\n")
    print("| path, actions | steps/s | ratio of medians | median of round ratios |")
    print("|---|---:|---:|---:|")
    ref_med = statistics.median(rates[ref])
    for name in names:
        med = statistics.median(rates[name])
        per_round = statistics.median(a / b for a, b in zip(rates[name], rates[ref]))
        print(f"| {name} | {med / 1e6:.1f} M | {med / ref_med:.3f} | {per_round:.3f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
