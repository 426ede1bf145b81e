"""The native pool's parent share, A/B (Multiprocessing(parent_share=...)).

A: W worker processes, pool.step (the parent waits): parent_share=False.
B: W - 1 worker processes plus the parent, which steps the last block
   itself while they step theirs: parent_share=True. W stepping threads in
   B against W + 1 threads in A.

Interleaved rounds (shoal.bench.timing.interleaved); env-steps/s medians and
the per-round ratio B / A.

    python scripts/parent_share_ab.py --envs CartPole:65536 CartPole:4096 Snake:4096 Drive:128
"""
from __future__ import annotations

import argparse
import statistics

import shoal.envs
from shoal.bench import steppers, timing
from shoal.pool import Multiprocessing, available_cores


def compare(name: str, n: int, workers: int, rounds: int, seconds: float) -> str:
    spec = shoal.envs.spec(name)
    next_actions = timing.cycling(steppers.table(spec, n * spec.agents))
    pools = [Multiprocessing(spec, n, num_workers=workers, parent_share=share, seed=0)
             for share in (False, True)]
    try:
        def stepper(pool):
            def step():
                pool.step(next_actions())
                return n
            return step

        a, b = timing.interleaved([stepper(pool) for pool in pools], rounds, seconds, warmup=0.3)
    finally:
        for pool in pools:
            pool.close()
    ratios = [y / x for x, y in zip(a, b)]
    return (f"| {name} | {n} | {workers} | {timing.format_rate(statistics.median(a))} "
            f"| {timing.format_rate(statistics.median(b))} | {statistics.median(ratios):.2f} "
            f"| {min(ratios):.2f}-{max(ratios):.2f} |")


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--envs", nargs="+", default=["CartPole:65536", "CartPole:4096", "Snake:4096", "Drive:128"],
                   metavar="ENV:NUM_ENVS")
    p.add_argument("--workers", type=int, default=available_cores(), help="W (default: the cores)")
    p.add_argument("--rounds", type=int, default=6)
    p.add_argument("--seconds", type=float, default=0.5)
    args = p.parse_args(argv)
    if args.workers < 2:
        p.error("--workers must be at least 2 (B keeps W - 1 worker processes)")
    print(f"- machine: {timing.cpu_line(available_cores())}\n")
    print("| env | num_envs | W | A: W workers | B: W - 1 workers + parent | B / A median | range |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for item in args.envs:
        name, n = item.split(":")
        print(compare(name, int(n), args.workers, args.rounds, args.seconds), flush=True)


if __name__ == "__main__":
    main()
