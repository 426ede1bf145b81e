"""Tianshou over a shoal pool, as over an EnvPool env: PPO and DQN on CartPole.

    pip install tianshou            # not a shoal dependency (checked with 2.0.1)
    python -P scripts/tianshou_race.py [--algos ppo dqn] [--seconds 55] [--seeds 0]

Train and test collectors are built straight over the pool, as Tianshou's
EnvPool examples build them over `envpool.make_gymnasium(...)`: shoal's is
`EnvPoolCompat(shoal.make("CartPole", n))` (one env's spaces, EnvPool's
convention, for the DQN's random warm-up). With EnvPool installed the same
script runs over it beside shoal. Each run stops when the test mean return
reaches 495 or after --seconds; the table gives its best test return, the
training env steps and seconds at that point.
"""
from __future__ import annotations

import argparse
import time
import warnings

import gymnasium as gym
import numpy as np
import torch


def make_envs(backend: str, num_envs: int, seed: int):
    if backend == "shoal":
        import shoal
        from shoal.envpool_compat import EnvPoolCompat
        return EnvPoolCompat(shoal.make("CartPole", num_envs, backend="serial", seed=seed))
    import envpool
    return envpool.make_gymnasium("CartPole-v1", num_envs=num_envs, seed=seed)


def train(algo_name: str, backend: str, seed: int, seconds: float) -> dict:
    from tianshou.algorithm import DQN, PPO
    from tianshou.algorithm.modelfree.dqn import DiscreteQLearningPolicy
    from tianshou.algorithm.modelfree.reinforce import DiscreteActorPolicy
    from tianshou.algorithm.optim import AdamOptimizerFactory
    from tianshou.data import Collector, CollectStats, VectorReplayBuffer
    from tianshou.trainer import OffPolicyTrainerParams, OnPolicyTrainerParams
    from tianshou.utils.net.common import Net
    from tianshou.utils.net.discrete import DiscreteActor, DiscreteCritic
    from tianshou.utils.torch_utils import policy_within_training_step

    torch.manual_seed(seed)
    np.random.seed(seed)
    train_envs, test_envs = make_envs(backend, 8, seed), make_envs(backend, 10, seed + 1000)
    observation_space = gym.spaces.Box(-np.inf, np.inf, (4,), np.float32)
    action_space = gym.spaces.Discrete(2)
    if algo_name == "ppo":
        net = Net(state_shape=(4,), hidden_sizes=[64, 64])
        policy = DiscreteActorPolicy(actor=DiscreteActor(preprocess_net=net, action_shape=2),
                                     dist_fn=torch.distributions.Categorical, action_space=action_space,
                                     deterministic_eval=True)
        algo = PPO(policy=policy, critic=DiscreteCritic(preprocess_net=net), optim=AdamOptimizerFactory(lr=9e-4),
                   gamma=0.99, gae_lambda=0.95, max_grad_norm=0.5, vf_coef=0.25, ent_coef=0.0, eps_clip=0.2,
                   advantage_normalization=True)
    else:
        policy = DiscreteQLearningPolicy(model=Net(state_shape=(4,), action_shape=(2,), hidden_sizes=[128, 128]),
                                         action_space=action_space, observation_space=observation_space,
                                         eps_training=0.1, eps_inference=0.0)
        algo = DQN(policy=policy, optim=AdamOptimizerFactory(lr=1e-3), gamma=0.99, n_step_return_horizon=3,
                   target_update_freq=320)
    train_collector = Collector[CollectStats](algo, train_envs, VectorReplayBuffer(20_000, len(train_envs)),
                                              exploration_noise=True)
    test_collector = Collector[CollectStats](algo, test_envs, exploration_noise=True)
    start = time.time()
    best = {"return": -np.inf, "steps": 0, "seconds": 0.0}

    def stop(mean_return: float) -> bool:
        if mean_return > best["return"]:
            best.update({"return": mean_return, "steps": train_collector.collect_step,
                         "seconds": time.time() - start})
        return mean_return >= 495 or time.time() - start > seconds

    common = dict(training_collector=train_collector, test_collector=test_collector, max_epochs=1000,
                  test_step_num_episodes=10, stop_fn=stop, test_in_training=False, show_progress=False,
                  verbose=False)
    if algo_name == "ppo":
        algo.run_training(OnPolicyTrainerParams(**common, epoch_num_steps=4096, update_step_num_repetitions=10,
                                                batch_size=256, collection_step_num_env_steps=1024))
    else:
        with policy_within_training_step(policy):   # the random warm-up samples action_space per env
            train_collector.reset()
            train_collector.collect(n_step=512, random=True)
        algo.run_training(OffPolicyTrainerParams(**common, epoch_num_steps=2000, collection_step_num_env_steps=16,
                                                 batch_size=64, update_step_num_gradient_steps_per_sample=0.25))
    train_envs.close()
    test_envs.close()
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--algos", nargs="+", default=["ppo", "dqn"], choices=["ppo", "dqn"])
    parser.add_argument("--seconds", type=float, default=55.0, help="time budget of one run (default 55)")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    args = parser.parse_args()
    warnings.filterwarnings("ignore", message=".*precision lowered.*")   # EnvPool's float64 Box bounds
    try:
        import tianshou
    except ImportError:
        raise SystemExit("this script needs tianshou: pip install tianshou")
    backends = ["shoal"]
    try:
        import envpool  # noqa: F401
        backends.append("envpool")
    except ImportError:
        print("(envpool is not installed: shoal only)")
    torch.set_num_threads(1)
    print(f"tianshou {tianshou.__version__}, CartPole, 8 train / 10 test envs, stop at test mean 495 or "
          f"{args.seconds:g} s\n")
    print("| algo | backend | seed | best test return | train env steps | seconds |")
    print("|---|---|---:|---:|---:|---:|")
    for algo_name in args.algos:
        for seed in args.seeds:
            for backend in backends:
                best = train(algo_name, backend, seed, args.seconds)
                print(f"| {algo_name} | {backend} | {seed} | {best['return']:.1f} | {best['steps']:,} | "
                      f"{best['seconds']:.1f} |", flush=True)


if __name__ == "__main__":
    main()
