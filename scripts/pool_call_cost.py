"""Microseconds per call of a small pool (CartPole, 16 envs), where the
pool's per-call Python dominates: best of 5 windows of 10,000 calls.

    python -P scripts/pool_call_cost.py [serial|multiprocessing] [--async]

Default: step() of the whole pool. --async: recv() + send() of two batches
of 8, once without and once after an episode_stats() call (from then on
send() keeps the in-flight envs' episode counts: its cost shows here).
Run it alternately against two versions of the pool (swap pool/native.py)
to see what a change costs a call.
"""
import sys
import time

import numpy as np

import shoal


def best_us(call) -> float:
    for _ in range(2000):
        call()
    best = float("inf")
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(10000):
            call()
        best = min(best, (time.perf_counter() - start) / 10000)
    return best * 1e6


if any(arg in ("-h", "--help") for arg in sys.argv[1:]):
    print(__doc__)
    sys.exit(0)
args = [a for a in sys.argv[1:] if a != "--async"]
backend = args[0] if args else "serial"
workers = 1 if backend != "serial" else None
if "--async" not in sys.argv:
    pool = shoal.make("CartPole", 16, backend=backend, num_workers=workers, seed=0)
    pool.reset()
    actions = np.zeros(16, np.int32)
    print(f"{best_us(lambda: pool.step(actions)):.3f}")
    pool.close()
else:
    for stats in (False, True):
        pool = shoal.make("CartPole", 16, backend=backend, num_workers=None if workers is None else 2,
                          batch_size=8, seed=0)
        pool.async_reset()
        actions = np.zeros(8, np.int32)
        if stats:
            pool.episode_stats()

        def recv_send():
            pool.recv()
            pool.send(actions)
        print(f"recv + send, episode_stats {'used' if stats else 'unused'}: {best_us(recv_send):.3f} us")
        pool.close()
