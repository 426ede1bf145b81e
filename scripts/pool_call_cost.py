"""Microseconds per step() call of a small pool (CartPole, 16 envs), where
the pool's per-call Python dominates: best of 5 windows of 10,000 steps.

    python -P scripts/pool_call_cost.py [serial|multiprocessing]

Run it alternately against two versions of the pool (swap pool/native.py)
to see what a change costs a call.
"""
import sys
import time

import numpy as np

import shoal

if any(arg in ("-h", "--help") for arg in sys.argv[1:]):
    print(__doc__)
    sys.exit(0)
backend = sys.argv[1] if len(sys.argv) > 1 else "serial"
pool = shoal.make("CartPole", 16, backend=backend, num_workers=1 if backend != "serial" else None, seed=0)
pool.reset()
actions = np.zeros(16, np.int32)
for _ in range(2000):
    pool.step(actions)
best = float("inf")
for _ in range(5):
    start = time.perf_counter()
    for _ in range(10000):
        pool.step(actions)
    best = min(best, (time.perf_counter() - start) / 10000)
print(f"{best * 1e6:.3f}")
pool.close()
