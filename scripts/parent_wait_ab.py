"""The native pool's parent wait, A/B: after a long step (MuJoCo, Atari) the
parent sleeps on the futex almost at once (LONG_STEP_YIELD_S), or, as before
that rule, yields its core for up to 2 ms like after a short step.

Interleaved rounds of one Multiprocessing pool per variant, built together;
env-steps/s per round, median and ratio.

    python scripts/parent_wait_ab.py --env HalfCheetah --num-envs 16 64 --rounds 7
"""
from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from shoal.pool import _native, native
from shoal.pool.native import Multiprocessing


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--env", default="HalfCheetah")
    p.add_argument("--num-envs", type=int, nargs="+", default=[16, 64])
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--seconds", type=float, default=1.0)
    args = p.parse_args(argv)
    for n in args.num_envs:
        pools = {"long steps sleep (now)": Multiprocessing(args.env, n, seed=0),
                 "always yield 2 ms (before)": Multiprocessing(args.env, n, seed=0)}
        spec = pools["long steps sleep (now)"].spec
        rng = np.random.default_rng(0)
        if spec.continuous_action:
            table = rng.uniform(spec.action_low, spec.action_high, (64, n, spec.action_size)).astype(np.float32)
        else:
            table = rng.integers(0, spec.action_nvec[0], (64, n)).astype(np.int32)
        rates = {k: [] for k in pools}
        for r in range(args.rounds):
            for name in (list(pools) if r % 2 == 0 else list(pools)[::-1]):
                pool = pools[name]
                before = native.LONG_STEP_YIELD_S
                if name.startswith("always"):
                    native.LONG_STEP_YIELD_S = _native.YIELD_S
                steps, start = 0, time.perf_counter()
                while time.perf_counter() - start < args.seconds:
                    pool.step(table[steps % 64])
                    steps += 1
                rates[name].append(steps * n / (time.perf_counter() - start))
                native.LONG_STEP_YIELD_S = before
        for pool in pools.values():
            pool.close()
        medians = {k: statistics.median(v) for k, v in rates.items()}
        a, b = medians.values()
        print(f"{args.env} num_envs={n}: " + ", ".join(f"{k}: {v:,.0f} env-steps/s" for k, v in medians.items())
              + f"; ratio {a / b:.3f}")


if __name__ == "__main__":
    main()
