"""env-steps/s of a default pool (a worker per core) stepped by a small torch
MLP policy in the same process, with torch's default intra-op threads or one.

After each forward, GNU OpenMP's idle threads spin (its default wait
policy) on the cores the pool's workers step on. Run it three ways:

    python -P scripts/torch_threads_beside_pool.py default
    python -P scripts/torch_threads_beside_pool.py one
    OMP_WAIT_POLICY=passive python -P scripts/torch_threads_beside_pool.py passive
"""
import argparse
import statistics
import time

import numpy as np
import torch

import shoal


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("threads", choices=["default", "one", "passive"],
                        help="torch's default threads, torch.set_num_threads(1), or a label for a run "
                             "under OMP_WAIT_POLICY=passive (default threads)")
    parser.add_argument("--env", default="Hopper")
    parser.add_argument("--num-envs", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    if args.threads == "one":
        torch.set_num_threads(1)
    pool = shoal.make(args.env, args.num_envs)
    obs, _ = pool.reset(seed=0)
    obs_size, act_size = pool.single_observation_space.shape[0], pool.single_action_space.shape[0]
    net = torch.nn.Sequential(torch.nn.Linear(obs_size, 64), torch.nn.Tanh(), torch.nn.Linear(64, act_size))

    def run(seconds: float) -> float:
        nonlocal obs
        steps, began = 0, time.perf_counter()
        while time.perf_counter() - began < seconds:
            with torch.no_grad():
                actions = net(torch.as_tensor(obs, dtype=torch.float32)).numpy()
            obs = pool.step(actions)[0]
            steps += args.num_envs
        return steps / (time.perf_counter() - began)

    run(0.5)
    rate = statistics.median(run(1.0) for _ in range(args.rounds))
    print(f"{args.env}, {args.num_envs} envs, {args.threads} ({torch.get_num_threads()} torch threads): "
          f"{rate / 1e3:.1f} k env-steps/s (median of {args.rounds} rounds of 1 s)")
    pool.close()


if __name__ == "__main__":
    main()
