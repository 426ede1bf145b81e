#!/usr/bin/env python
"""CartPole steps/s: shoal vs gymnasium vs EnvPool vs a plain C loop, in one run.

All logic lives in shoal.bench (also `shoal bench` / `python -m shoal bench`):
    python scripts/bench_pool.py --quick
    python scripts/bench_pool.py --out results.md
    python scripts/bench_pool.py --contenders python   # gymnasium's CartPole-v1 under
                                                       # shoal / gymnasium vectorizers
"""
import sys

from shoal.bench import main

if __name__ == "__main__":
    sys.exit(main())
