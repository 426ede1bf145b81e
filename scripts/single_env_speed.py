"""One env through gymnasium.make: shoal's SingleEnv CartPole against
gymnasium's own CartPole-v1, us per step, interleaved rounds in one process.

    python scripts/single_env_speed.py [--rounds 7] [--steps 20000]

Each round times `steps` calls of env.step(t & 1) (alternating actions,
reset at each episode end) for each env in turn; the median round is
reported. Both go through gymnasium.make's wrappers (TimeLimit,
OrderEnforcing, PassiveEnvChecker)."""
import argparse
import time

import gymnasium
import numpy as np

import shoal  # noqa: F401  (registers the shoal/ ids)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--steps", type=int, default=20000)
    a = p.parse_args()
    envs = {env_id: gymnasium.make(env_id) for env_id in ("CartPole-v1", "shoal/CartPole-v0")}
    per_step = {env_id: [] for env_id in envs}
    for _ in range(a.rounds):
        for env_id, env in envs.items():
            env.reset(seed=0)
            start = time.perf_counter()
            for t in range(a.steps):
                _, _, terminated, truncated, _ = env.step(t & 1)
                if terminated or truncated:
                    env.reset()
            per_step[env_id].append((time.perf_counter() - start) / a.steps * 1e6)
    for env_id, times in per_step.items():
        print(f"{env_id:20s} median {np.median(times):6.2f} us/step  (rounds: "
              + ", ".join(f"{t:.2f}" for t in times) + ")")


if __name__ == "__main__":
    main()
