"""PPO in the style of CleanRL's ppo.py, on shoal through gymnasium's own API.

Nothing shoal-specific beyond `import shoal` (which registers the ids): the
vector env is `gymnasium.make_vec(..., vectorization_mode="vector_entry_point")`,
so this is the path any gymnasium-based script takes. Discrete actions get a
categorical head, Box actions a Gaussian one (state-independent log-std,
actions clipped to the bounds only where they enter the env).

    python scripts/cleanrl_ppo.py --env-id shoal/CartPole-v0 --total-timesteps 100000
    python scripts/cleanrl_ppo.py --env-id shoal/HalfCheetah-v5 --num-envs 16 --num-steps 128
"""
from __future__ import annotations

import argparse
import time

import gymnasium
import numpy as np
import torch
from torch import nn
from torch.distributions import Categorical, Normal

import shoal  # noqa: F401  (registers the shoal/... ids)


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--env-id", default="shoal/CartPole-v0")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--total-timesteps", type=int, default=100_000)
    p.add_argument("--num-envs", type=int, default=8)
    p.add_argument("--num-steps", type=int, default=128)
    p.add_argument("--learning-rate", type=float, default=2.5e-4)
    p.add_argument("--gamma", type=float, default=0.99)
    p.add_argument("--gae-lambda", type=float, default=0.95)
    p.add_argument("--num-minibatches", type=int, default=4)
    p.add_argument("--update-epochs", type=int, default=4)
    p.add_argument("--clip-coef", type=float, default=0.2)
    p.add_argument("--ent-coef", type=float, default=0.01)
    p.add_argument("--vf-coef", type=float, default=0.5)
    p.add_argument("--max-grad-norm", type=float, default=0.5)
    return p.parse_args(argv)


def layer_init(layer, std=np.sqrt(2), bias_const=0.0):
    nn.init.orthogonal_(layer.weight, std)
    nn.init.constant_(layer.bias, bias_const)
    return layer


class Agent(nn.Module):
    def __init__(self, envs):
        super().__init__()
        obs_dim = int(np.prod(envs.single_observation_space.shape))
        self.continuous = isinstance(envs.single_action_space, gymnasium.spaces.Box)
        act_dim = (int(np.prod(envs.single_action_space.shape)) if self.continuous
                   else int(envs.single_action_space.n))
        self.critic = nn.Sequential(layer_init(nn.Linear(obs_dim, 64)), nn.Tanh(),
                                    layer_init(nn.Linear(64, 64)), nn.Tanh(),
                                    layer_init(nn.Linear(64, 1), std=1.0))
        self.actor = nn.Sequential(layer_init(nn.Linear(obs_dim, 64)), nn.Tanh(),
                                   layer_init(nn.Linear(64, 64)), nn.Tanh(),
                                   layer_init(nn.Linear(64, act_dim), std=0.01))
        if self.continuous:
            self.actor_logstd = nn.Parameter(torch.zeros(1, act_dim))

    def get_value(self, x):
        return self.critic(x)

    def get_action_and_value(self, x, action=None):
        out = self.actor(x)
        if self.continuous:
            dist = Normal(out, self.actor_logstd.expand_as(out).exp())
            if action is None:
                action = dist.sample()
            return action, dist.log_prob(action).sum(1), dist.entropy().sum(1), self.critic(x)
        dist = Categorical(logits=out)
        if action is None:
            action = dist.sample()
        return action, dist.log_prob(action), dist.entropy(), self.critic(x)


def main(argv=None) -> dict:
    args = parse_args(argv)
    batch_size = args.num_envs * args.num_steps
    minibatch_size = batch_size // args.num_minibatches
    num_iterations = max(1, args.total_timesteps // batch_size)
    torch.manual_seed(args.seed)

    envs = gymnasium.make_vec(args.env_id, num_envs=args.num_envs, vectorization_mode="vector_entry_point",
                              seed=args.seed)
    envs = gymnasium.wrappers.vector.RecordEpisodeStatistics(envs)
    agent = Agent(envs)
    optimizer = torch.optim.Adam(agent.parameters(), lr=args.learning_rate, eps=1e-5)
    low = torch.as_tensor(getattr(envs.single_action_space, "low", 0.0))
    high = torch.as_tensor(getattr(envs.single_action_space, "high", 0.0))

    obs_shape, act_shape = envs.single_observation_space.shape, envs.single_action_space.shape
    obs = torch.zeros((args.num_steps, args.num_envs) + obs_shape)
    actions = torch.zeros((args.num_steps, args.num_envs) + act_shape)
    logprobs = torch.zeros((args.num_steps, args.num_envs))
    rewards = torch.zeros((args.num_steps, args.num_envs))
    dones = torch.zeros((args.num_steps, args.num_envs))
    values = torch.zeros((args.num_steps, args.num_envs))

    # The vector env autoresets NEXT_STEP (gymnasium's default): the step
    # after a done returns the new episode's first obs with reward 0; that
    # step's transition is masked out of the loss (valid below).
    next_obs, _ = envs.reset(seed=args.seed)
    next_obs = torch.as_tensor(next_obs, dtype=torch.float32)
    next_done = torch.zeros(args.num_envs)
    valid = torch.ones((args.num_steps, args.num_envs))
    episode_returns, start = [], time.time()
    for iteration in range(1, num_iterations + 1):
        optimizer.param_groups[0]["lr"] = (1.0 - (iteration - 1.0) / num_iterations) * args.learning_rate
        for step in range(args.num_steps):
            obs[step], dones[step] = next_obs, next_done
            with torch.no_grad():
                action, logprob, _, value = agent.get_action_and_value(next_obs)
            values[step], actions[step], logprobs[step] = value.flatten(), action, logprob
            env_action = action.clamp(low, high).numpy() if agent.continuous else action.numpy()
            valid[step] = 1.0 - next_done   # a reset step carries no transition
            next_obs, reward, terminations, truncations, infos = envs.step(env_action)
            next_done = torch.as_tensor(np.logical_or(terminations, truncations), dtype=torch.float32)
            rewards[step] = torch.as_tensor(reward, dtype=torch.float32)
            next_obs = torch.as_tensor(next_obs, dtype=torch.float32)
            if "episode" in infos:
                episode_returns += infos["episode"]["r"][infos["_episode"]].tolist()

        with torch.no_grad():   # GAE; truncation treated as termination, as CleanRL's ppo.py
            next_value = agent.get_value(next_obs).reshape(1, -1)
            advantages = torch.zeros_like(rewards)
            lastgaelam = 0
            for t in reversed(range(args.num_steps)):
                nextnonterminal = 1.0 - (next_done if t == args.num_steps - 1 else dones[t + 1])
                nextvalues = next_value if t == args.num_steps - 1 else values[t + 1]
                delta = rewards[t] + args.gamma * nextvalues * nextnonterminal - values[t]
                advantages[t] = lastgaelam = delta + args.gamma * args.gae_lambda * nextnonterminal * lastgaelam
            returns = advantages + values

        b_obs, b_actions = obs.reshape((-1,) + obs_shape), actions.reshape((-1,) + act_shape)
        b_logprobs, b_advantages = logprobs.reshape(-1), advantages.reshape(-1)
        b_returns, b_values, b_valid = returns.reshape(-1), values.reshape(-1), valid.reshape(-1)
        for _ in range(args.update_epochs):
            for mb in torch.randperm(batch_size).split(minibatch_size):
                _, newlogprob, entropy, newvalue = agent.get_action_and_value(b_obs[mb], b_actions[mb])
                ratio = (newlogprob - b_logprobs[mb]).exp()
                w = b_valid[mb] / b_valid[mb].sum().clamp(min=1.0)
                adv = b_advantages[mb]
                adv = (adv - adv.mean()) / (adv.std() + 1e-8)
                pg_loss = (torch.max(-adv * ratio, -adv * ratio.clamp(1 - args.clip_coef, 1 + args.clip_coef)) * w).sum()
                v_loss = 0.5 * (((newvalue.view(-1) - b_returns[mb]) ** 2) * w).sum()
                loss = pg_loss - args.ent_coef * (entropy * w).sum() + v_loss * args.vf_coef
                optimizer.zero_grad()
                loss.backward()
                nn.utils.clip_grad_norm_(agent.parameters(), args.max_grad_norm)
                optimizer.step()
        recent = np.mean(episode_returns[-20:]) if episode_returns else float("nan")
        print(f"iteration {iteration}/{num_iterations} step {iteration * batch_size} "
              f"SPS {int(iteration * batch_size / (time.time() - start))} episodic_return {recent:.1f}",
              flush=True)
    envs.close()
    return {"episode_returns": episode_returns}


if __name__ == "__main__":
    main()
