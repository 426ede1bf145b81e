"""Stable-Baselines3 PPO on HalfCheetah-v5 for a fixed wall-clock budget: the
baseline `shoal train halfcheetah` is compared with in docs/results.md.

Hyperparameters are rl-baselines3-zoo's tuned HalfCheetah-v3 entry
(hyperparams/ppo.yml: one env, VecNormalize on obs and reward, n_steps 512,
batch 64, 20 epochs, lr 2.0633e-5, clip 0.1, gamma 0.98, lambda 0.92, ...,
256x256 ReLU nets, log_std_init -2). Training stops after --minutes of wall
time; then the policy (deterministic, VecNormalize statistics frozen) is
evaluated on --eval-episodes full episodes of gymnasium's HalfCheetah-v5.

    python scripts/sb3_halfcheetah.py --minutes 10 --seed 0
"""
from __future__ import annotations

import argparse
import json
import time

import gymnasium
import numpy as np
import torch
from stable_baselines3 import PPO
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.vec_env import DummyVecEnv, VecNormalize

ZOO_HALFCHEETAH = dict(batch_size=64, n_steps=512, gamma=0.98, learning_rate=2.0633e-05,
                       ent_coef=0.000401762, clip_range=0.1, n_epochs=20, gae_lambda=0.92,
                       max_grad_norm=0.8, vf_coef=0.58096,
                       policy_kwargs=dict(log_std_init=-2, ortho_init=False, activation_fn=torch.nn.ReLU,
                                          net_arch=dict(pi=[256, 256], vf=[256, 256])))


class WallClock(BaseCallback):
    """Stops training once `seconds` of wall time have passed."""

    def __init__(self, seconds: float):
        super().__init__()
        self.seconds = seconds
        self.start = time.perf_counter()

    def _on_step(self) -> bool:
        return time.perf_counter() - self.start < self.seconds


def evaluate(model, train_env: VecNormalize, episodes: int, seed: int) -> float:
    env = VecNormalize(DummyVecEnv([lambda: gymnasium.make("HalfCheetah-v5")]), training=False,
                       norm_reward=False)
    env.obs_rms = train_env.obs_rms
    env.seed(seed)
    obs = env.reset()
    returns, total = [], 0.0
    while len(returns) < episodes:
        action, _ = model.predict(obs, deterministic=True)
        obs, reward, done, _ = env.step(action)
        total += float(env.get_original_reward()[0])
        if done[0]:
            returns.append(total)
            total = 0.0
    return float(np.mean(returns))


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--eval-episodes", type=int, default=10)
    args = parser.parse_args(argv)
    env = VecNormalize(DummyVecEnv([lambda: gymnasium.make("HalfCheetah-v5")]))
    model = PPO("MlpPolicy", env, seed=args.seed, verbose=0, **ZOO_HALFCHEETAH)
    start = time.perf_counter()
    model.learn(total_timesteps=10**9, callback=WallClock(args.minutes * 60))
    seconds = time.perf_counter() - start
    result = {"seed": args.seed, "train_seconds": round(seconds, 1), "steps": model.num_timesteps,
              "steps_per_second": round(model.num_timesteps / seconds),
              "eval_return": round(evaluate(model, env, args.eval_episodes, 1000 + args.seed), 1)}
    print(json.dumps(result))
    return result


if __name__ == "__main__":
    main()
