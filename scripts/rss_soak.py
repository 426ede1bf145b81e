"""Memory over a long run: each env's pool stepped with random actions for
SECONDS (default 60), the resident memory of this process and its workers
summed after a 3 s warm-up and at the end. A pool that leaks per step (C
allocations, Python objects kept per call, info dicts) grows here.

    python -P scripts/rss_soak.py [SECONDS] [ENV ...]

Default envs: CartPole, Snake, Drive, Explorer, and HalfCheetah, Pong and
Breakout (async batches, episodic_life) where mujoco / ale-py are installed.
"""
from __future__ import annotations

import os
import sys
import time

import shoal

DEFAULT_ENVS = ["CartPole", "Snake", "Drive", "Explorer", "HalfCheetah", "Pong", "Breakout"]
OPTIONS = {"Breakout": {"episodic_life": True, "batch_size": 8}}
NUM_ENVS = 16


def rss_kib(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS"):
                    return int(line.split()[1])
    except FileNotFoundError:
        pass
    return 0


def children(pid: int) -> list[int]:
    kids = []
    for task in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{task}/children") as f:
            kids += [int(k) for k in f.read().split()]
    return kids


def total_rss_mib() -> float:
    me = os.getpid()
    return (rss_kib(me) + sum(rss_kib(k) for k in children(me))) / 1024


def soak(name: str, seconds: float) -> None:
    try:
        pool = shoal.make(name, NUM_ENVS, seed=0, **OPTIONS.get(name, {}))
    except ImportError as e:   # mujoco / ale-py not installed
        print(f"{name:12s} skipped: {e}")
        return
    space = pool.action_space
    batched = pool.batch_size < pool.num_envs
    if batched:
        pool.async_reset()
    else:
        pool.reset(seed=0)

    def one_step() -> None:
        if batched:
            obs, *_, info = pool.recv()
            pool.send(space.sample()[:len(obs)], info["env_id"])
        else:
            pool.step(space.sample())

    steps = 0
    for phase_seconds in (3.0, seconds):
        start = time.time()
        while time.time() - start < phase_seconds:
            one_step()
            steps += 1
        if phase_seconds == 3.0:
            before = total_rss_mib()
    after = total_rss_mib()
    print(f"{name:12s} {steps:9d} calls  RSS {before:.1f} -> {after:.1f} MiB ({after - before:+.1f})",
          flush=True)
    pool.close()


def main() -> None:
    if any(arg in ("-h", "--help") for arg in sys.argv[1:]):
        print(__doc__)
        sys.exit(0)
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 60.0
    for name in sys.argv[2:] or DEFAULT_ENVS:
        soak(name, seconds)


if __name__ == "__main__":
    main()
