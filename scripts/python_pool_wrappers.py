"""shoal.pool.AsyncVectorEnv against gymnasium's SyncVectorEnv and
AsyncVectorEnv on a few envs under CleanRL's per-env wrapper chain
(ppo_continuous_action.py's: FlattenObservation, RecordEpisodeStatistics,
ClipAction, NormalizeObservation, a clip, NormalizeReward, a clip).

    python -P scripts/python_pool_wrappers.py --env Hopper-v5 --num-envs 4

The three vectorizers are built once, then timed in interleaved rounds
(--rounds of --seconds each, the order reversed every other round) on
random actions; it prints each one's median env-steps/s, every round's
rate and the load average, which says how shared the machine was.
"""
import argparse
import os
import time

import gymnasium as gym
import numpy as np

import shoal.pool


def cleanrl_env(env_id: str):
    env = gym.make(env_id)
    env = gym.wrappers.FlattenObservation(env)
    env = gym.wrappers.RecordEpisodeStatistics(env)
    env = gym.wrappers.ClipAction(env)
    env = gym.wrappers.NormalizeObservation(env)
    env = gym.wrappers.TransformObservation(env, lambda obs: np.clip(obs, -10, 10), env.observation_space)
    env = gym.wrappers.NormalizeReward(env, gamma=0.99)
    return gym.wrappers.TransformReward(env, lambda reward: float(np.clip(reward, -10, 10)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", default="Hopper-v5")
    parser.add_argument("--num-envs", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=2.0)
    args = parser.parse_args()
    fns = [lambda: cleanrl_env(args.env)] * args.num_envs
    vectorizers = {"gymnasium SyncVectorEnv": gym.vector.SyncVectorEnv(fns),
                   "gymnasium AsyncVectorEnv": gym.vector.AsyncVectorEnv(fns),
                   "shoal.pool.AsyncVectorEnv": shoal.pool.AsyncVectorEnv(fns)}
    print("load before", os.getloadavg())
    rates = {name: [] for name in vectorizers}
    try:
        for envs in vectorizers.values():
            envs.reset(seed=0)
            envs.action_space.seed(0)
        for r in range(args.rounds):
            order = list(vectorizers.items())
            for name, envs in (order if r % 2 == 0 else order[::-1]):
                actions = [envs.action_space.sample() for _ in range(64)]
                steps, start = 0, time.perf_counter()
                while time.perf_counter() - start < args.seconds:
                    envs.step(actions[steps % 64])
                    steps += 1
                rates[name].append(steps * args.num_envs / (time.perf_counter() - start))
    finally:
        for envs in vectorizers.values():
            envs.close()
    print("load after", os.getloadavg())
    for name, values in rates.items():
        print(f"{name:26s} median {np.median(values):9.0f} env-steps/s   rounds {[round(v) for v in values]}")


if __name__ == "__main__":
    main()
