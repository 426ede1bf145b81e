"""Where a synchronous pool step's time goes: the workers' stepping, the
parent's action copy, and the rest (hand-off, waiting on the slowest worker,
Python), for a sweep of num_envs and worker counts.

    python scripts/pool_overhead.py                                  # CartPole, this machine's cores
    python scripts/pool_overhead.py --num-envs 65536 262144 --workers 1 4 8 15 16 --out OUT/overhead.md
    python scripts/pool_overhead.py --parent-share      # also W - 1 workers + the parent stepping a share

For each (num_envs, workers): pool.step with pre-sampled int32 actions for
--seconds, after a warm-up. From the same run:
- wall: wall time per step;
- busy mean / max: per step, the workers' own time running the step
  (Multiprocessing.worker_busy_seconds: each worker's clock around its
  block's step), averaged over workers / the busiest worker;
- copy: the parent's action copy alone (_native.copy_actions of the same
  arrays, timed separately);
- rest = wall - busy max - copy: hand-off both ways, waiting for
  stragglers beyond the busiest worker's mean, the pool's Python;
- ratio: steps/s over (the 1-core C loop x workers), the C loop measured at
  the same num_envs in this run (shoal.bench.timing.c_loop);
- worker speed: a worker's own stepping rate (its envs / its busy time) over
  the 1-core C loop's: below 1 when workers step slower side by side than
  one core alone (clock boost spread over more cores, shared caches and
  memory, SMT siblings).
A row where "busy max" is near "wall" is bound by the stepping (see worker
speed); one where "rest" dominates is bound by the hand-off.
"""
from __future__ import annotations

import argparse
import time

import numpy as np

import shoal.envs
from shoal.bench import steppers, timing
from shoal.pool import Multiprocessing, _native
from shoal.pool.native import available_cores


def step_rate_and_busy(env: str, num_envs: int, workers: int, seconds: float, warmup: float,
                       parent_share: bool = False):
    """(steps/s, per-step busy seconds of each worker process) of a
    Multiprocessing pool (parent_share: `workers` blocks, the last stepped
    by this process, whose time is not in the busy columns)."""
    spec = shoal.envs.spec(env)
    actions = steppers.table(spec, num_envs * spec.agents)
    with Multiprocessing(spec, num_envs, num_workers=workers, parent_share=parent_share, seed=0) as pool:
        pool.reset(seed=0)
        step = steppers.step_all(pool, num_envs, actions)
        timing.run_for(step, warmup)
        busy0, start, steps = pool.worker_busy_seconds(), time.perf_counter(), 0
        while time.perf_counter() - start < seconds:
            steps += step() // num_envs
        wall = time.perf_counter() - start
        busy = (pool.worker_busy_seconds() - busy0) / steps
    return steps * num_envs / wall, busy


def copy_seconds(env: str, num_envs: int, repeats: int = 200) -> float:
    """The parent's action check-and-copy for num_envs envs, alone (warm:
    the same few arrays over and over)."""
    spec = shoal.envs.spec(env)
    actions = steppers.table(spec, num_envs * spec.agents)
    rows = actions.reshape(len(actions), num_envs * spec.agents, -1)
    out = np.empty(rows.shape[1:], np.int32)
    nvec = np.asarray(spec.action_nvec, np.int32)
    start = time.perf_counter()
    for k in range(repeats):
        _native.copy_actions(rows[k % len(rows)], out, nvec)
    return (time.perf_counter() - start) / repeats


def c_loop_rate(env: str, num_envs: int, seconds: float, warmup: float) -> float:
    """The 1-core C loop in env-steps/s (it counts agent-steps)."""
    spec = shoal.envs.spec(env)
    with steppers.c_loop(spec, num_envs) as step:
        return timing.median_rate(step, seconds, warmup, 3) / spec.agents


def main() -> None:
    cores = available_cores()
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--env", default="CartPole")
    p.add_argument("--num-envs", type=int, nargs="+", default=[4096, 65536, 262144])
    p.add_argument("--workers", type=int, nargs="+",
                   default=sorted({1, max(1, cores // 2), max(1, cores - 1), cores}))
    p.add_argument("--seconds", type=float, default=1.0)
    p.add_argument("--warmup", type=float, default=0.3)
    p.add_argument("--parent-share", action="store_true",
                   help="also a row per worker count >= 2 with the parent stepping a share "
                        "(Multiprocessing(parent_share=True); workers counts the parent)")
    p.add_argument("--out", help="also write the table to this markdown file")
    args = p.parse_args()

    us = 1e6
    lines = [f"# Pool step overhead: {args.env}", "",
             f"- machine: {timing.cpu_line(cores)}",
             f"- date: {time.strftime('%Y-%m-%dT%H:%M:%S%z')}",
             f"- command: `python scripts/pool_overhead.py --env {args.env} --num-envs "
             f"{' '.join(map(str, args.num_envs))} --workers {' '.join(map(str, args.workers))} "
             f"--seconds {args.seconds} --warmup {args.warmup}"
             f"{' --parent-share' if args.parent_share else ''}`", "",
             "| num_envs | workers | steps/s | vs C loop x workers | wall us/step | busy mean | busy max "
             "| copy | rest | busy share | worker speed |",
             "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    print("\n".join(lines), flush=True)
    for n in args.num_envs:
        limit = c_loop_rate(args.env, n, args.seconds, args.warmup)
        copy = copy_seconds(args.env, n)
        shares = [False, True] if args.parent_share else [False]
        for w, share in [(w, share) for w in args.workers for share in shares if w <= n and w >= 1 + share]:
            rate, busy = step_rate_and_busy(args.env, n, w, args.seconds, args.warmup, share)
            wall = n / rate
            rest = wall - busy.max() - copy
            label = f"{w - 1} + parent" if share else f"{w}"
            row = (f"| {n} | {label} | {timing.format_rate(rate)} | {rate / (limit * w):.2f} | {wall * us:.0f} "
                   f"| {busy.mean() * us:.0f} | {busy.max() * us:.0f} | {copy * us:.0f} | {rest * us:.0f} "
                   f"| {busy.mean() / wall:.2f} | {n / w / busy.mean() / limit:.2f} |")
            lines.append(row)
            print(row, flush=True)
    lines += ["", "C loop, 1 core: measured per num_envs in the same run; busy share = busy mean / wall; "
                  "worker speed = (num_envs / workers) / busy mean / C loop."]
    if args.out:
        with open(args.out, "w") as f:
            f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
