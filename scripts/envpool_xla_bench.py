"""What xla() costs: the EnvPool drop-in stepped from a jitted lax.scan
(envs.xla(), each call an io_callback to the host) against the same pool
stepped from a Python loop, alternating rounds in one process.

    python -P scripts/envpool_xla_bench.py [--task CartPole-v1] [--num-envs 1024]
        [--steps 500] [--rounds 5]

Prints steps/s of each way per round and the median ratio (xla / loop)."""
import argparse
import statistics
import time

import numpy as np

import shoal.envpool_compat as envpool


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--task", default="CartPole-v1")
    parser.add_argument("--num-envs", type=int, default=1024)
    parser.add_argument("--steps", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    envs = envpool.make(args.task, num_envs=args.num_envs, seed=0)   # before JAX: its threads and fork
    import jax
    import jax.numpy as jnp

    handle, recv, send, step = envs.xla()
    n = args.num_envs

    @jax.jit
    def rollout(handle):
        def body(handle, t):
            handle, (obs, rew, term, trunc, info) = step(handle, (jnp.arange(n) + t) % 2)
            return handle, rew.sum()
        return jax.lax.scan(body, handle, jnp.arange(args.steps))

    actions = [(np.arange(n) + t) % 2 for t in range(args.steps)]
    envs.reset()
    jax.block_until_ready(rollout(handle))   # compile
    ratios = []
    for r in range(args.rounds):
        envs.reset()
        start = time.perf_counter()
        for a in actions:
            envs.step(a)
        loop = n * args.steps / (time.perf_counter() - start)
        envs.reset()
        start = time.perf_counter()
        jax.block_until_ready(rollout(handle))
        xla = n * args.steps / (time.perf_counter() - start)
        ratios.append(xla / loop)
        print(f"round {r}: loop {loop:,.0f} steps/s, xla {xla:,.0f} steps/s, xla / loop {xla / loop:.2f}")
    print(f"{args.task}, {n} envs, {args.steps} steps a round: median xla / loop {statistics.median(ratios):.2f}")
    envs.close()


if __name__ == "__main__":
    main()
