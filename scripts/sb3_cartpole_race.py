#!/usr/bin/env python
"""Stable-Baselines3 PPO to a mean return of 475 on CartPole: wall time on
shoal's VecEnv vs SB3's own DummyVecEnv and SubprocVecEnv, one run.

    python scripts/sb3_cartpole_race.py --seeds 0 1 2
    python scripts/sb3_cartpole_race.py --kinds shoal-serial subproc --seeds 0

Every run uses rl-baselines3-zoo's CartPole-v1 PPO entry (hyperparams/ppo.yml:
8 envs, 1e5 steps, MlpPolicy, n_steps 32, batch 256, gae_lambda 0.8,
gamma 0.98, 20 epochs, ent_coef 0, learning rate linear from 1e-3, clip
range linear from 0.2), the same seed for the model and the envs, and a
callback that every --eval-every steps evaluates the deterministic policy
on --eval-episodes episodes (SB3's evaluate_policy) on a separate eval env
of the same kind, stopping once the mean is >= --target.

Kinds:
  shoal-serial  shoal.sb3.ShoalVecEnv("CartPole", 8, backend="serial")
  shoal-mp      shoal.sb3.ShoalVecEnv("CartPole", 8) over worker processes
  dummy         DummyVecEnv over 8 gymnasium.make("CartPole-v1")
  subproc       SubprocVecEnv over 8 gymnasium.make("CartPole-v1") (8 processes)

Times are wall-clock from the start of learn() (the model and envs are built,
and every env has answered a reset, before; that is the "setup" column): "train" excludes the time
spent in evaluations, "with evals" includes it. Runs are interleaved: for
each seed, every kind in a rotated order.
"""
from __future__ import annotations

import argparse
import os
import statistics
import time

import gymnasium
import numpy as np
import torch
from stable_baselines3 import PPO
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.evaluation import evaluate_policy
from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv, VecMonitor

from shoal.sb3 import ShoalVecEnv

KINDS = ("shoal-serial", "shoal-mp", "dummy", "subproc")


def linear(initial: float):
    """rl-zoo's lin_<x>: the value falls linearly from `initial` to 0 over learn()."""
    def schedule(progress_remaining: float) -> float:
        return progress_remaining * initial
    return schedule


def zoo_cartpole_ppo() -> dict:
    """rl-baselines3-zoo hyperparams/ppo.yml, CartPole-v1 (n_envs 8, n_timesteps 1e5)."""
    return dict(n_steps=32, batch_size=256, gae_lambda=0.8, gamma=0.98, n_epochs=20,
                ent_coef=0.0, learning_rate=linear(1e-3), clip_range=linear(0.2))


ZOO_N_ENVS = 8
ZOO_N_TIMESTEPS = 100_000


def make_vec_env(kind: str, n: int):
    if kind == "shoal-serial":
        return ShoalVecEnv("CartPole", n, backend="serial")
    if kind == "shoal-mp":
        return ShoalVecEnv("CartPole", n, num_workers=min(2, n))
    fns = [lambda: gymnasium.make("CartPole-v1")] * n
    if kind == "dummy":
        return DummyVecEnv(fns)
    if kind == "subproc":
        return SubprocVecEnv(fns)
    raise ValueError(f"unknown kind {kind!r}; expected one of {KINDS}")


class SolveCallback(BaseCallback):
    """Every `every` steps: evaluate; stop once the mean return >= target.
    Keeps the time spent evaluating, so that it can be subtracted."""

    def __init__(self, eval_env, every: int, episodes: int, target: float):
        super().__init__()
        self.eval_env, self.every, self.episodes, self.target = eval_env, every, episodes, target
        self.next_eval = every
        self.eval_s = 0.0
        self.evals = 0
        self.last_mean = float("nan")
        self.solved_at = None   # (steps, wall time since learn() started, eval time by then)
        self.start = None

    def _on_training_start(self) -> None:
        self.start = time.perf_counter()

    def _on_step(self) -> bool:
        if self.num_timesteps < self.next_eval:
            return True
        self.next_eval += self.every
        t0 = time.perf_counter()
        mean, _ = evaluate_policy(self.model, self.eval_env, n_eval_episodes=self.episodes,
                                  deterministic=True, warn=False)
        t1 = time.perf_counter()
        self.eval_s += t1 - t0
        self.evals += 1
        self.last_mean = float(mean)
        if mean >= self.target:
            # the eval's own time counts as eval time: stop the clock at t1
            self.solved_at = (self.num_timesteps, t1 - self.start, self.eval_s)
            return False
        return True


def race(kind: str, seed: int, args) -> dict:
    t0 = time.perf_counter()
    env = VecMonitor(make_vec_env(kind, ZOO_N_ENVS))
    eval_env = VecMonitor(make_vec_env(kind, args.eval_envs))
    model = PPO("MlpPolicy", env, seed=seed, device="cpu", **zoo_cartpole_ppo())
    # Every env answers before the clock starts (SubprocVecEnv's constructor
    # waits for its first process only); then the seeds again, so that
    # learn()'s first reset and the first evaluation's apply them.
    env.reset()
    eval_env.reset()
    env.seed(seed)
    eval_env.seed(seed + 1000)
    setup_s = time.perf_counter() - t0
    callback = SolveCallback(eval_env, args.eval_every, args.eval_episodes, args.target)
    t1 = time.perf_counter()
    try:
        model.learn(ZOO_N_TIMESTEPS, callback=callback)
    finally:
        total = time.perf_counter() - t1
        env.close()
        eval_env.close()
    row = dict(kind=kind, seed=seed, setup_s=setup_s, evals=callback.evals,
               final_eval=callback.last_mean, solved=callback.solved_at is not None)
    if callback.solved_at is not None:
        steps, wall, ev = callback.solved_at
        row.update(steps=steps, with_evals_s=wall, train_s=wall - ev)
    else:
        row.update(steps=model.num_timesteps, with_evals_s=total, train_s=total - callback.eval_s)
    return row


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--kinds", nargs="+", default=list(KINDS), choices=KINDS)
    p.add_argument("--seeds", nargs="+", type=int, default=[0, 1])
    p.add_argument("--eval-every", type=int, default=4096, help="env steps between evaluations")
    p.add_argument("--eval-episodes", type=int, default=10)
    p.add_argument("--eval-envs", type=int, default=5)
    p.add_argument("--target", type=float, default=475.0)
    p.add_argument("--torch-threads", type=int, default=1)
    args = p.parse_args(argv)
    torch.set_num_threads(args.torch_threads)

    print(f"load before: {os.getloadavg()}", flush=True)
    rows = []
    for r, seed in enumerate(args.seeds):
        kinds = args.kinds[r % len(args.kinds):] + args.kinds[:r % len(args.kinds)]
        for kind in kinds:
            row = race(kind, seed, args)
            rows.append(row)
            print(f"{kind:13s} seed {seed}: solved={row['solved']} steps={row['steps']} "
                  f"train={row['train_s']:.1f}s with_evals={row['with_evals_s']:.1f}s "
                  f"setup={row['setup_s']:.1f}s evals={row['evals']} final={row['final_eval']:.1f} "
                  f"load={os.getloadavg()[0]:.2f}", flush=True)
    print(f"load after: {os.getloadavg()}")

    print(f"\nSB3 PPO (rl-zoo CartPole-v1), time to mean eval return >= {args.target:g} "
          f"({args.eval_episodes} deterministic episodes every {args.eval_every} steps), "
          f"torch threads {args.torch_threads}\n")
    print("| vec env | seed | solved | steps | train s | with evals s | setup s | final eval |")
    print("|---|---:|:---:|---:|---:|---:|---:|---:|")
    for row in sorted(rows, key=lambda x: (args.kinds.index(x["kind"]), x["seed"])):
        print(f"| {row['kind']} | {row['seed']} | {'yes' if row['solved'] else 'no'} | {row['steps']} | "
              f"{row['train_s']:.1f} | {row['with_evals_s']:.1f} | {row['setup_s']:.1f} | "
              f"{row['final_eval']:.1f} |")
    print("\n| vec env | solved | median train s | median with evals s | median steps | "
          "median s per 1k steps |")
    print("|---|---:|---:|---:|---:|---:|")
    for kind in args.kinds:
        mine = [x for x in rows if x["kind"] == kind]
        solved = [x for x in mine if x["solved"]]
        med = (lambda k: statistics.median(x[k] for x in solved)) if solved else (lambda k: float("nan"))
        per_k = statistics.median(x["train_s"] / x["steps"] * 1000 for x in mine)
        print(f"| {kind} | {len(solved)}/{len(mine)} | {med('train_s'):.1f} | {med('with_evals_s'):.1f} | "
              f"{med('steps'):.0f} | {per_k:.3f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
