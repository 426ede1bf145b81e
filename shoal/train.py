"""PPO for shoal's envs, in one file (CleanRL-style: the algorithm in plain sight).

    shoal train cartpole                       # configs/default.ini + configs/cartpole.ini
    shoal train snake --train.learning-rate 1e-3 --vec.num-envs 256
    shoal eval cartpole --checkpoint runs/.../checkpoint.pt --gif cartpole.gif

The file reads top to bottom:

1. the policy: an MLP, or for image observations (uint8 frames, e.g.
   Atari's) the Nature CNN, optionally followed by an LSTM, with one
   categorical head per action component (Discrete and MultiDiscrete actions), or a
   Gaussian head for Box actions (MuJoCo): the mean from the actor, a
   state-independent log-std; optionally a running observation normaliser
   (its statistics are buffers of the policy: saved with the weights, used
   wherever the policy acts) and a critic MLP of its own;
2. the rollout from the CPU pool: env batches received into one rollout
   buffer (pinned host memory copied non_blocking when the learner is on a
   GPU), with async double buffering so that half the envs step while the
   policy runs on the other half. Box actions are stored as sampled (what
   the log-prob scores) and clipped to the action bounds on their way to
   the env; rewards are optionally scaled by the running std of the
   discounted return;
3. GAE and the PPO update: clipped policy and value losses, entropy bonus,
   advantage normalisation, gradient clipping, learning-rate annealing; then
   the observation statistics take in the rollout's obs.
   Rows whose agent is absent (pool.masks false) weigh nothing anywhere;
4. evaluation, checkpoints (atomic, Ctrl-C-proof), logs (CSV, TensorBoard, dashboard);
5. train(): the run folder (never shared), the loop tying them together;
   under torchrun, one data-parallel rank of several (shoal/distributed.py:
   each rank its own pool, gradients averaged, rank 0 alone writes).

Autoreset is SAME_STEP: the step that ends an episode returns the next
episode's first obs, with the last obs in info["final_obs"]; truncated
episodes are bootstrapped from V(final obs). torch is imported here only:
`import shoal` never needs it.
"""
from __future__ import annotations

import contextlib
import csv
import glob
import hashlib
import io
import itertools
import json
import math
import os
import shutil
import signal
import sys
import threading
import time
import zipfile
from collections import defaultdict

import numpy as np
import torch
from torch import nn

import shoal
from shoal import config as shoal_config
from shoal import distributed
from shoal.distributed import Dist
from shoal.pool.contract import GAME_INFO_KEYS, GameScores
from shoal.progress import live_terminal, print_out, stdout_console

BACKENDS = ("serial", "multiprocessing", "cuda")


class RunError(ValueError):
    """A run that cannot start: its folder holds another run, or its
    checkpoint is missing, unreadable or for another env."""


# ============================================================================
# 1. The policy
# ============================================================================
def layer_init(layer: nn.Linear, std: float = math.sqrt(2), bias: float = 0.0) -> nn.Linear:
    nn.init.orthogonal_(layer.weight, std)
    nn.init.constant_(layer.bias, bias)
    return layer


def nature_cnn(channels: int, height: int, width: int, features: int = 512) -> nn.Sequential:
    """Mnih et al. 2015's encoder (CleanRL's ppo_atari.py): conv 32 8x8 stride 4,
    conv 64 4x4 stride 2, conv 64 3x3 stride 1, each with a ReLU, flattened,
    then a linear layer to `features` and a ReLU. Input: float (N, C, H, W)."""
    h, w = height, width
    for k, st in ((8, 4), (4, 2), (3, 1)):
        h, w = (h - k) // st + 1, (w - k) // st + 1
    return nn.Sequential(
        layer_init(nn.Conv2d(channels, 32, 8, stride=4)), nn.ReLU(),
        layer_init(nn.Conv2d(32, 64, 4, stride=2)), nn.ReLU(),
        layer_init(nn.Conv2d(64, 64, 3, stride=1)), nn.ReLU(),
        nn.Flatten(),
        layer_init(nn.Linear(64 * h * w, features)), nn.ReLU())


CNN_FEATURES = 512  # the Nature CNN's output features (the heads' and the LSTM's input)


def mlp(in_size: int, hidden_size: int, num_layers: int, activation: str) -> nn.Sequential:
    act = {"tanh": nn.Tanh, "relu": nn.ReLU}[activation]
    layers, size = [], in_size
    for _ in range(num_layers):
        layers += [layer_init(nn.Linear(size, hidden_size)), act()]
        size = hidden_size
    return nn.Sequential(*layers)


def merge_moments(mean, var, count, batch_mean, batch_var, n):
    """(mean, var, count) of two sets of rows, from each's (Chan et al.'s
    parallel update): tensors or plain floats."""
    delta, total = batch_mean - mean, count + n
    m2 = var * count + batch_var * n + delta**2 * count * n / total  # summed squared deviations
    return mean + delta * n / total, m2 / total, total


class RunningMeanStd(nn.Module):
    """The mean and (population) variance of every row seen so far, per
    component, merged one batch at a time (Chan et al.'s parallel update).
    float64 buffers: saved in a state_dict, moved by .to(). Before any
    update: mean 0, var 1 (normalising is then the identity)."""

    def __init__(self, shape: tuple = ()):
        super().__init__()
        self.register_buffer("mean", torch.zeros(shape, dtype=torch.float64))
        self.register_buffer("var", torch.ones(shape, dtype=torch.float64))
        self.register_buffer("count", torch.zeros((), dtype=torch.float64))

    @torch.no_grad()
    def update(self, x: torch.Tensor, sum_over_ranks=None) -> None:
        """Take in the rows of x, shape (N, *shape). sum_over_ranks (a
        distributed run's Dist.all_reduce_sum): x is this rank's share of
        the rows, and every rank takes in all ranks' rows (two passes:
        the count and sum, then the squared deviations from their mean)."""
        x = x.to(torch.float64).reshape(-1, *self.mean.shape)
        if sum_over_ranks is None:
            n = x.shape[0]
            if n == 0:
                return
            batch_mean, batch_var = x.mean(0), x.var(0, correction=0)
        else:
            totals = sum_over_ranks(torch.cat([x.new_tensor([x.shape[0]]), x.sum(0).flatten()]))
            n = float(totals[0])
            if n == 0:
                return
            batch_mean = (totals[1:] / n).reshape(self.mean.shape)
            batch_var = sum_over_ranks(((x - batch_mean) ** 2).sum(0)) / n
        mean, var, count = merge_moments(self.mean, self.var, self.count, batch_mean, batch_var, n)
        self.mean.copy_(mean)
        self.var.copy_(var)
        self.count.fill_(count)

    def normalize(self, x: torch.Tensor, clip: float) -> torch.Tensor:
        """x standardised by the running statistics and clipped to [-clip, clip], as float32."""
        return ((x - self.mean.float()) / (self.var.float() + 1e-8).sqrt()).clamp(-clip, clip)


# [env] and [policy] keys a checkpoint may predate, and what they were without them.
ENV_PREDATED = {"kwargs": ""}
POLICY_PREDATED = {"separate_critic": False, "normalize_obs": False, "obs_clip": 10.0, "init_log_std": 0.0,
                   "encoder": "mlp"}


class Policy(nn.Module):
    """obs -> [normaliser] -> MLP or CNN [-> LSTM] -> (action head, value).

    encoder (shoal.config.resolve_encoder): "cnn" for image observations
    (uint8 (C, H, W), or (S, H, W, 3) RGB stacks taken as 3 S channels):
    the Nature CNN (nature_cnn, 512 features; hidden_size, num_layers and
    activation are the MLP's), its uint8 input divided by 255 in the
    network (float input is taken as scaled already). "auto" picks it for
    such observations, "mlp" otherwise (whose parameters keep their names).
    MLP inputs: small-integer observations (uint8 cell codes, e.g. Snake's) are one-hot
    encoded; float observations go in as they are, or with normalize_obs
    standardised by running statistics (self.obs_rms, updated by
    ppo_update) and clipped to +-obs_clip. Discrete and MultiDiscrete
    actions: one categorical head per component (nvec), the head is their
    logits. Box actions (spec.continuous_action): the head is a Gaussian's
    mean, its log-std a parameter of its own (state-independent, starting
    at init_log_std).
    separate_critic: the value comes from an encoder of its own (CleanRL's
    continuous PPO) instead of the actor's; not with an LSTM.
    """

    def __init__(self, spec, hidden_size: int = 64, num_layers: int = 2,
                 activation: str = "tanh", lstm: bool = False, separate_critic: bool = False,
                 normalize_obs: bool = False, obs_clip: float = 10.0, init_log_std: float = 0.0,
                 encoder: str = "auto"):
        super().__init__()
        if separate_critic and lstm:
            raise ValueError("[policy] separate_critic does not go with lstm")
        self.cnn = shoal_config.resolve_encoder(spec, encoder) == "cnn"
        if self.cnn and normalize_obs:
            raise ValueError("[policy] normalize_obs does not go with the cnn encoder (it scales "
                             "its uint8 frames by 1/255)")
        self.continuous = spec.continuous_action
        self.nvec = [] if self.continuous else [int(n) for n in spec.action_nvec]
        self.action_size = spec.action_size  # components per action row
        self.action_dtype = torch.float32 if self.continuous else torch.long
        self.obs_shape = tuple(spec.obs_shape)   # one row's (act() checks its batches against it)
        high = np.max(spec.obs_high)
        self.classes = int(high) + 1 if np.dtype(spec.obs_dtype) == np.uint8 and high < 32 else 0
        if self.cnn:
            self.classes = 0
            image = shoal_config.image_shape(spec)
            self.channels_last = len(spec.obs_shape) == 4  # (S, H, W, 3) RGB stacks
            make_encoder = lambda: nature_cnn(*image, CNN_FEATURES)  # noqa: E731
            size = CNN_FEATURES
        else:
            in_size = int(np.prod(spec.obs_shape)) * max(self.classes, 1)
            make_encoder = lambda: mlp(in_size, hidden_size, num_layers, activation)  # noqa: E731
            size = hidden_size
        use_rms = normalize_obs and not self.classes and not self.cnn
        self.obs_rms = RunningMeanStd((in_size,)) if use_rms else None
        self.obs_clip = obs_clip
        self.encoder = make_encoder()
        self.lstm = nn.LSTM(size, size) if lstm else None
        if self.lstm is not None:
            for name, param in self.lstm.named_parameters():
                if "bias" in name:
                    nn.init.constant_(param, 0)
                else:
                    nn.init.orthogonal_(param, 1.0)
        self.critic_encoder = make_encoder() if separate_critic else None
        if self.continuous:
            self.actor = layer_init(nn.Linear(size, self.action_size), std=0.01)
            self.actor_logstd = nn.Parameter(torch.full((self.action_size,), float(init_log_std)))
            # The env's action bounds, which env_actions clips to: not saved (the spec has them).
            self.register_buffer("action_low", torch.as_tensor(spec.action_low, dtype=torch.float32),
                                 persistent=False)
            self.register_buffer("action_high", torch.as_tensor(spec.action_high, dtype=torch.float32),
                                 persistent=False)
        else:
            self.actor = layer_init(nn.Linear(size, sum(self.nvec)), std=0.01)
        self.critic = layer_init(nn.Linear(size, 1), std=1.0)

    def initial_state(self, rows: int, device) -> tuple | None:
        if self.lstm is None:
            return None
        h = self.lstm.hidden_size
        return (torch.zeros(1, rows, h, device=device), torch.zeros(1, rows, h, device=device))

    def inputs(self, obs: torch.Tensor) -> torch.Tensor:
        """The encoder's input rows, float32: for the MLP flat, one-hot or
        normalised; for the CNN (N, C, H, W) in [0, 1] (uint8 / 255)."""
        if self.cnn:
            x = obs.permute(0, 1, 4, 2, 3).flatten(1, 2) if self.channels_last else obs
            return x.float() / 255.0 if x.dtype == torch.uint8 else x.float()
        x = obs.flatten(1)
        if self.classes:
            return nn.functional.one_hot(x.long(), self.classes).flatten(1).float()
        if self.obs_rms is not None:
            return self.obs_rms.normalize(x.float(), self.obs_clip)
        return x.float()

    def recurrent(self, x: torch.Tensor, state: tuple, done: torch.Tensor) -> tuple:
        """x: (T * N, H) in time-major order; state: (h, c) of the N rows
        before the first step; done: (T * N,), 1 where the obs is an
        episode's first (the state is zeroed before that step)."""
        n = state[0].shape[1]
        x, done = x.reshape(-1, n, x.shape[-1]), done.reshape(-1, n)
        out = []
        for x_t, d_t in zip(x, done):
            keep = (1.0 - d_t).view(1, -1, 1)
            y, state = self.lstm(x_t.unsqueeze(0), (keep * state[0], keep * state[1]))
            out.append(y)
        return torch.cat(out).flatten(0, 1), state

    def forward(self, obs, state=None, done=None):
        """(head, value, state) for a batch of obs rows: the head is the
        action logits, or the Gaussian's mean for Box actions."""
        inputs = self.inputs(obs)
        x = self.encoder(inputs)
        if self.lstm is not None:
            x, state = self.recurrent(x, state, done)
        critic_x = x if self.critic_encoder is None else self.critic_encoder(inputs)
        return self.actor(x), self.critic(critic_x).squeeze(-1), state

    def sample(self, head: torch.Tensor, action=None, deterministic: bool = False, noise=None):
        """(action, log-prob, entropy) per row, from the head forward() gave.
        noise: the random draws for these rows, as sampling_noise() makes
        them (drawn here when None)."""
        if noise is not None and not isinstance(noise, (list, tuple)):
            raise TypeError(f"noise: a list of tensors, as sampling_noise() returns, got {type(noise).__name__}")
        if self.continuous:
            return gaussian(head, self.actor_logstd, action, deterministic, None if noise is None else noise[0])
        return sample(head, self.nvec, action, deterministic, noise)

    def sampling_noise(self, rows: int, device: torch.device) -> list[torch.Tensor]:
        """The draws sample() makes for `rows` rows, in its order: Box
        actions' standard normals, or one block of Exp(1) per categorical
        component (Gumbel-max)."""
        if self.continuous:
            return [torch.randn((rows, self.action_size), device=device)]
        return [torch.empty((rows, n), device=device).exponential_() for n in self.nvec]

    @torch.no_grad()
    def act(self, obs, state=None, done=None, deterministic: bool = True):
        """For a trained policy in your own loop: (actions, next state) for a
        batch of obs rows (numpy or tensor, shape (rows, *obs shape)), the
        actions as a numpy array the envs take (rows for Discrete, (rows, n)
        for MultiDiscrete and Box), argmax / the Gaussian's mean unless
        deterministic=False. With an LSTM, pass the state it returned and
        `done` (the rows whose episode just ended) back each step."""
        device = next(self.parameters()).device
        obs = torch.as_tensor(np.asarray(obs), device=device)
        if tuple(obs.shape[1:]) != self.obs_shape:
            one = " (one row: obs[None])" if tuple(obs.shape) == self.obs_shape else ""
            rows = ", ".join(["rows", *map(str, self.obs_shape)])
            raise ValueError(f"act() takes a batch of obs rows, shape ({rows}), got {tuple(obs.shape)}{one}")
        if done is not None:
            done = torch.as_tensor(np.asarray(done), dtype=torch.float32, device=device)
        elif self.lstm is not None:
            done = torch.zeros(obs.shape[0], device=device)
        if self.lstm is not None and state is None:
            state = self.initial_state(obs.shape[0], device)
        head, _, state = self(obs, state, done)
        action = self.env_actions(self.sample(head, deterministic=deterministic)[0]).cpu().numpy()
        return (action[:, 0] if len(self.nvec) == 1 else action), state

    def env_actions(self, action: torch.Tensor) -> torch.Tensor:
        """The actions the env gets: Box actions clipped to its bounds (the
        unclipped sample is what the log-prob scores); others as they are."""
        if not self.continuous:
            return action
        return action.clamp(self.action_low, self.action_high)


def policy_from_config(spec, p: dict) -> Policy:
    """The policy a [policy] section describes (keys it predates: off)."""
    p = {**POLICY_PREDATED, **p}
    return Policy(spec, p["hidden_size"], p["num_layers"], p["activation"], p["lstm"],
                  separate_critic=p["separate_critic"], normalize_obs=p["normalize_obs"],
                  obs_clip=p["obs_clip"], init_log_std=p["init_log_std"], encoder=p["encoder"])


def sample(logits: torch.Tensor, nvec: list[int], action=None, deterministic: bool = False, noise=None):
    """Per row: (action (N, K) int64, its log-prob, the entropy), summed over
    the K independent categorical components. `action` given: score it.
    `noise`: the Exp(1) draws to sample with, one (N, n_j) block per
    component (default: drawn here, in that order)."""
    actions, logprob, entropy = [], 0.0, 0.0
    for j, lg in enumerate(logits.split(nvec, dim=-1)):
        logp = lg.log_softmax(-1)
        if action is not None:
            a = action[:, j]
        elif deterministic:
            a = lg.argmax(-1)
        else:  # Gumbel-max: a categorical sample, cheaper than torch.distributions
            exp = torch.empty_like(lg).exponential_() if noise is None else noise[j]
            a = (lg - exp.log()).argmax(-1)
        actions.append(a)
        logprob = logprob + logp.gather(-1, a.unsqueeze(-1)).squeeze(-1)
        entropy = entropy - (logp.exp() * logp).sum(-1)
    return torch.stack(actions, -1), logprob, entropy


LOG_SQRT_2PI = 0.5 * math.log(2 * math.pi)


def gaussian(mean: torch.Tensor, log_std: torch.Tensor, action=None, deterministic: bool = False, noise=None):
    """Per row: (action (N, A) float32, its log-prob, the entropy) of a
    diagonal Gaussian, summed over the A components. deterministic: the
    mean. `action` given: score it. `noise`: standard-normal draws shaped
    like mean to sample with (default: drawn here)."""
    if action is None and deterministic:
        action = mean
    elif action is None:
        action = mean + log_std.exp() * (torch.randn_like(mean) if noise is None else noise)
    z = (action - mean) * (-log_std).exp()
    logprob = (-0.5 * z * z - log_std - LOG_SQRT_2PI).sum(-1)
    entropy = (0.5 + LOG_SQRT_2PI + log_std).sum(-1).expand(mean.shape[0])
    return action, logprob, entropy


# ============================================================================
# 2. Rollouts from the CPU pool
# ============================================================================
class Timers:
    """Seconds spent per phase (env, copy, forward, learn, eval)."""

    def __init__(self):
        self.total = defaultdict(float)

    def time(self, name: str) -> "_Span":
        return _Span(self.total, name)


class _Span:
    """with timers.time(name): the block's seconds are added to timers.total[name]."""

    def __init__(self, total: dict, name: str):
        self.total, self.name = total, name

    def __enter__(self):
        self.t0 = time.perf_counter()

    def __exit__(self, *exc):
        self.total[self.name] += time.perf_counter() - self.t0


class RewardScaler:
    """Rewards divided by the running std of the discounted return, which
    is kept per row and restarts at episode ends (gymnasium's
    NormalizeReward), then clipped to +-clip: the critic learns returns of
    the scaled rewards, whatever the env's reward scale. Works on numpy
    arrays (the CPU pool's rewards) or tensors (the CUDA backend's); the
    statistics are plain floats, updated once per step, over every row (the
    rollouts call it once a step's batches are all in). state_dict()
    (the statistics) goes in the checkpoint; the per-row returns do not (a
    resumed run gets fresh envs)."""

    def __init__(self, rows: int, gamma: float, clip: float):
        self.rows, self.gamma, self.clip = rows, gamma, clip
        self.mean, self.var, self.count = 0.0, 1.0, 0.0
        self.returns = None  # made on the first call, of the rewards' kind

    def __call__(self, rows: slice, rewards, dones, present=None):
        """The scaled rewards of `rows`, whose step ended episodes where dones
        is 1; only the rows where `present` (the pool's masks; None: all)
        count in the statistics: an absent agent's zeros are no rewards."""
        if self.returns is None:
            self.returns = (np.zeros(self.rows) if isinstance(rewards, np.ndarray) else
                            torch.zeros(self.rows, dtype=torch.float64, device=rewards.device))
        returns = self.returns[rows] * self.gamma + rewards
        counted = returns if present is None else returns[present != 0]
        if len(counted):
            mean = float(counted.mean())
            self.mean, self.var, self.count = merge_moments(self.mean, self.var, self.count, mean,
                                                            float(((counted - mean) ** 2).mean()), len(counted))
        self.returns[rows] = returns * (1 - dones)
        return (rewards / math.sqrt(self.var + 1e-8)).clip(-self.clip, self.clip)

    def state_dict(self) -> dict:
        return {k: torch.tensor(getattr(self, k), dtype=torch.float64) for k in ("mean", "var", "count")}

    def load_state_dict(self, state: dict) -> None:
        self.mean, self.var, self.count = (float(state[k]) for k in ("mean", "var", "count"))


def check_backend(backend: str) -> None:
    if backend not in BACKENDS:
        raise ValueError(f"[vec] backend = {backend!r}: expected one of {', '.join(BACKENDS)}")


def make_pool(cfg: dict, env: str, seed: int, device: torch.device = torch.device("cpu"),
              num_envs: int | None = None, num_workers: int | None = None):
    """The training envs: SAME_STEP autoreset, configured by [env] kwargs.
    CPU pools keep [vec] num_batches batches in flight; backend cuda is the
    CUDA backend on the learner's device (its tensors are the rollout's
    source: no host copies). num_envs / num_workers: this rank's share in a
    distributed run (default: [vec]'s)."""
    vec = dict(cfg["vec"])
    if num_envs is not None:
        vec["num_envs"] = num_envs
    if num_workers is not None:
        vec["num_workers"] = num_workers
    check_backend(vec["backend"])
    env_kwargs = shoal_config.env_kwargs(cfg["env"])
    if vec["backend"] == "cuda":
        from shoal.cuda import CudaVecEnv
        # check_actions=False: the policy's actions are in range by construction,
        # and the check would sync the GPU every step.
        return CudaVecEnv(env, vec["num_envs"], device=device, autoreset_mode="same_step",
                          seed=seed, check_actions=False, env_kwargs=env_kwargs)
    num_envs = vec["num_envs"]
    batches = vec["num_batches"]
    if batches < 1 or num_envs % batches:
        raise ValueError(f"[vec] num_batches = {batches} must divide [vec] num_envs = {num_envs}")
    workers = vec["num_workers"] if vec["backend"] == "multiprocessing" else 0   # serial: its own blocks
    if vec["backend"] == "serial" and vec["num_workers"] and distributed.planned_main_rank():
        print(f"note: [vec] num_workers = {vec['num_workers']} has no effect with backend serial (it "
              f"steps every env in this process); use --vec.backend multiprocessing for workers",
              file=sys.stderr)
    return shoal.make(env, num_envs, backend=vec["backend"], num_workers=workers or None,
                      batch_size=num_envs // batches, autoreset_mode="same_step", seed=seed,
                      env_kwargs=env_kwargs)


class Rollout:
    """num_steps steps of every row of the pool, stored time-major.

    obs, dones and masks have num_steps + 1 entries: entry T is the obs the
    next rollout starts from (and that bootstraps this one). dones[t] = 1:
    obs[t] is an episode's first. masks[t] = 0: the row's agent is absent
    at t (its action is ignored and it counts nowhere).
    """

    def __init__(self, pool, policy: Policy, cfg: dict, device: torch.device, timers: Timers,
                 reward_scaler: RewardScaler | None = None):
        self.pool, self.policy, self.device, self.timers = pool, policy, device, timers
        self.T, self.R, self.B = cfg["train"]["num_steps"], pool.num_rows, pool.num_batches
        # One step's draws for every row, and its truncated rows kept for one
        # value forward: both taken per step, not per batch, so that
        # num_batches does not change the numbers (see _act, _finish_rewards)
        self.step_noise = None
        self.truncated = []   # (rows, final obs, LSTM state) per batch
        self.gamma = cfg["train"]["gamma"]
        self.scale_rewards = reward_scaler
        self.bootstrap = cfg["train"]["bootstrap_truncation"]
        self.discrete = len(pool.action_space.shape) == 1
        T, R = self.T, self.R
        obs_dtype = torch.from_numpy(np.zeros(0, pool.spec.obs_dtype)).dtype
        pin = device.type == "cuda"
        # Host side: where the pool's rows are copied (once); pinned for a GPU learner.
        self.obs_host = torch.zeros((T + 1, R, *pool.spec.obs_shape), dtype=obs_dtype, pin_memory=pin)
        self.rewards = torch.zeros((T, R), pin_memory=pin)
        self.dones = torch.zeros((T + 1, R), pin_memory=pin)
        self.masks = torch.ones((T + 1, R), pin_memory=pin)
        # numpy views of the host buffers: the pool's arrays are written straight in
        self.obs_np, self.rewards_np = self.obs_host.numpy(), self.rewards.numpy()
        self.dones_np, self.masks_np = self.dones.numpy(), self.masks.numpy()
        # Device side (the same tensors on a CPU learner)
        self.obs = self.obs_host if not pin else torch.zeros_like(self.obs_host, device=device)
        self.actions = torch.zeros((T, R, policy.action_size), dtype=policy.action_dtype, device=device)
        self.logprobs = torch.zeros((T, R), device=device)
        self.values = torch.zeros((T + 1, R), device=device)
        self.state = policy.initial_state(R, device)     # LSTM state of every row, now
        self.initial_state = None                        # ... at the rollout's start
        self.rb = pool.batch_size * pool.agents          # rows per batch
        # Whole games (Atari: the pool's info has EnvPool's unclipped "reward"
        # and game-over "terminated"), and those ended since take_game_stats()
        # [count, score sum]. Training episodes are lives with clipped
        # rewards; these are the game's real scores.
        self.game_scores = GameScores(pool.num_envs)
        self.games = [0, 0.0]
        pool.async_reset()
        for b in range(self.B):  # into entry T: collect() starts from there
            self._receive(T, b, first=True)

    def _rows(self, b: int) -> slice:
        return slice(b * self.rb, (b + 1) * self.rb)

    def _receive(self, t: int, b: int, first: bool = False) -> None:
        """Receive batch b's result of step t - 1: obs[t], dones[t], masks[t], rewards[t - 1]."""
        with self.timers.time("env"):
            obs, rew, term, trunc, info = self.pool.recv()
        rows = self._rows(b)
        with self.timers.time("copy"):
            self.obs_np[t, rows] = obs
            np.logical_or(term, trunc, out=self.dones_np[t, rows], casting="unsafe")
            self.masks_np[t, rows] = self.pool.masks[rows]
            if self.obs is not self.obs_host:
                self.obs[t, rows].copy_(self.obs_host[t, rows], non_blocking=True)
            if first:
                return
            if info.keys() >= set(GAME_INFO_KEYS):
                self._count_games(info, trunc)
            self.rewards_np[t - 1, rows] = rew
        if self.bootstrap and trunc.any():
            # A truncated episode did not end: its last reward also earns
            # gamma * V(last obs), computed once the step's batches are all in.
            idx = np.flatnonzero(trunc & ~term)
            if len(idx):
                state = None
                if self.state is not None:   # (indexing copies: the rows' state now, before _act moves it)
                    sel = torch.as_tensor(idx + rows.start, device=self.device)
                    state = (self.state[0][:, sel], self.state[1][:, sel])
                self.truncated.append((idx + rows.start, info["final_obs"][idx], state))
        if b == self.B - 1:
            self._finish_rewards(t)

    def _finish_rewards(self, t: int) -> None:
        """Step t - 1's rewards, once every batch of it is in: scaled (the
        statistics take all rows at once), then the truncation bootstrap
        added (one value forward over all the step's truncated rows: a
        forward over fewer rows may round otherwise)."""
        with self.timers.time("copy"):
            if self.scale_rewards is not None:
                self.rewards_np[t - 1] = self.scale_rewards(slice(None), self.rewards_np[t - 1],
                                                            self.dones_np[t], self.masks_np[t])
        if not self.truncated:
            return
        rows, finals, states = zip(*self.truncated)
        self.truncated = []
        rows = np.concatenate(rows)
        final = torch.as_tensor(np.concatenate(finals)).to(self.device)
        state = None if self.state is None else (torch.cat([s[0] for s in states], 1),
                                                 torch.cat([s[1] for s in states], 1))
        with torch.no_grad(), self.timers.time("forward"):
            _, v, _ = self.policy(final, state, torch.zeros(len(rows), device=self.device))
        self.rewards_np[t - 1, rows] += self.gamma * v.cpu().numpy()

    def _count_games(self, info: dict, trunc: np.ndarray) -> None:
        _, scores, _, _ = self.game_scores.add(info, trunc)
        self.games[0] += len(scores)
        self.games[1] += float(scores.sum())

    def take_game_stats(self) -> list:
        """[games ended, their real scores summed] since the last call; [0, 0.0]
        for envs without game info (all but Atari)."""
        games, self.games = self.games, [0, 0.0]
        return games

    def _act(self, t: int, b: int) -> None:
        """Run the policy on batch b's obs[t] and send its actions."""
        rows = self._rows(b)
        with torch.no_grad(), self.timers.time("forward"):
            state = None
            if self.state is not None:
                state = (self.state[0][:, rows], self.state[1][:, rows])
                done = self.dones[t, rows].to(self.device, non_blocking=True)
            else:
                done = None
            head, value, state = self.policy(self.obs[t, rows], state, done)
            # The step's random draws are made once for every row, then cut
            # per batch: torch's generator gives other numbers for two draws
            # than for one, and the run would change with num_batches.
            if b == 0:
                self.step_noise = self.policy.sampling_noise(self.R, self.device)
            action, logprob, _ = self.policy.sample(head, noise=[n[rows] for n in self.step_noise])
            if state is not None:
                self.state[0][:, rows], self.state[1][:, rows] = state
            self.actions[t, rows], self.logprobs[t, rows], self.values[t, rows] = action, logprob, value
            a = self.policy.env_actions(action).cpu().numpy()
        with self.timers.time("env"):
            self.pool.send(a[:, 0] if self.discrete else a)

    def collect(self) -> None:
        """Fill the rollout. Batch b's step t is sent before batch b + 1's
        obs are waited for, so the workers step b while the policy runs on b + 1."""
        T = self.T
        # Entry T of the last rollout is entry 0 of this one.
        self.obs_host[0] = self.obs_host[T]
        self.dones[0], self.masks[0] = self.dones[T], self.masks[T]
        if self.obs is not self.obs_host:
            self.obs[0] = self.obs[T]
        if self.state is not None:
            self.initial_state = (self.state[0].clone(), self.state[1].clone())
        for t in range(T):
            for b in range(self.B):
                if t > 0:
                    self._receive(t, b)
                self._act(t, b)
        for b in range(self.B):
            self._receive(T, b)
        with torch.no_grad(), self.timers.time("forward"):  # V(obs[T]) bootstraps the rollout
            done = self.dones[T].to(self.device)
            _, self.values[T], _ = self.policy(self.obs[T], self.state, done)


class DeviceRollout(Rollout):
    """The rollout of the CUDA backend: the env's obs, rewards, flags and
    masks are tensors on the learner's device already, so each step is one
    device-side copy into the rollout and no host round trip. (With [train]
    device = cpu, the backend runs its Cython loop on CPU tensors: the same
    code path, testable anywhere.) Same buffers and semantics as Rollout."""

    def __init__(self, env, policy: Policy, cfg: dict, device: torch.device, timers: Timers,
                 reward_scaler: RewardScaler | None = None):
        self.pool, self.policy, self.device, self.timers = env, policy, device, timers
        self.T, self.R, self.B = cfg["train"]["num_steps"], env.num_rows, 1
        self.gamma = cfg["train"]["gamma"]
        self.scale_rewards = reward_scaler
        self.bootstrap = cfg["train"]["bootstrap_truncation"]
        self.discrete = len(env.action_space.shape) == 1
        T, R = self.T, self.R
        self.obs = torch.zeros((T + 1, R, *env.spec.obs_shape), dtype=env.obs.dtype, device=device)
        self.obs_host = self.obs
        self.rewards = torch.zeros((T, R), device=device)
        self.dones = torch.zeros((T + 1, R), device=device)
        self.masks = torch.ones((T + 1, R), device=device)
        self.actions = torch.zeros((T, R, policy.action_size), dtype=policy.action_dtype, device=device)
        self.logprobs = torch.zeros((T, R), device=device)
        self.values = torch.zeros((T + 1, R), device=device)
        self.state = policy.initial_state(R, device)
        self.initial_state = None
        self.games = [0, 0.0]   # header envs report no games (see Rollout)
        env.reset()  # seeded at construction
        self._store(T, first=True)

    def _store(self, t: int, first: bool = False) -> None:
        """The env's current tensors into entry t (rewards into t - 1)."""
        env = self.pool
        with self.timers.time("copy"):
            self.obs[t].copy_(env.obs)
            self.dones[t].copy_(env.terminals | env.truncations)
            self.masks[t].copy_(env.masks)
            if first:
                return
            self.rewards[t - 1].copy_(env.rewards)
            if self.scale_rewards is not None:
                self.rewards[t - 1] = self.scale_rewards(slice(None), self.rewards[t - 1], self.dones[t],
                                                         self.masks[t])
        if self.bootstrap:
            # A truncated episode did not end: its last reward also earns gamma * V(last obs).
            idx = torch.nonzero(env.truncations & ~env.terminals).flatten()
            if len(idx):
                with torch.no_grad(), self.timers.time("forward"):
                    state = None if self.state is None else (self.state[0][:, idx], self.state[1][:, idx])
                    _, v, _ = self.policy(env.final_obs[idx], state, torch.zeros(len(idx), device=self.device))
                self.rewards[t - 1, idx] += self.gamma * v

    def collect(self) -> None:
        T = self.T
        self.obs[0] = self.obs[T]
        self.dones[0], self.masks[0] = self.dones[T], self.masks[T]
        if self.state is not None:
            self.initial_state = (self.state[0].clone(), self.state[1].clone())
        for t in range(T):
            with torch.no_grad(), self.timers.time("forward"):
                head, value, state = self.policy(self.obs[t], self.state,
                                                 self.dones[t] if self.state is not None else None)
                action, logprob, _ = self.policy.sample(head)
                if state is not None:
                    self.state = state
                self.actions[t], self.logprobs[t], self.values[t] = action, logprob, value
            with self.timers.time("env"):
                a = self.policy.env_actions(action) if self.policy.continuous else action.to(torch.int32)
                self.pool.step(a[:, 0] if self.discrete else a)
            self._store(t + 1)
        with torch.no_grad(), self.timers.time("forward"):
            _, self.values[T], _ = self.policy(self.obs[T], self.state, self.dones[T])


# ============================================================================
# 3. GAE and the PPO update
# ============================================================================
def gae(rewards, values, dones, masks, gamma: float, lam: float):
    """Advantages and returns (T, R). A row's bootstrap stops where the next
    obs starts an episode (done) or the row's agent is absent (mask 0)."""
    T = rewards.shape[0]
    advantages = torch.zeros_like(rewards)
    last = torch.zeros_like(rewards[0])
    for t in reversed(range(T)):
        nonterminal = (1.0 - dones[t + 1]) * masks[t + 1]
        delta = rewards[t] + gamma * values[t + 1] * nonterminal - values[t]
        last = delta + gamma * lam * nonterminal * last
        advantages[t] = last
    return advantages, advantages + values[:T]


def masked_mean(x, w, n):
    return (x * w).sum() / n


def ppo_update(policy: Policy, optimizer, ro: Rollout, cfg: dict, dist: Dist = Dist.single()) -> dict:
    """update_epochs passes over the rollout in num_minibatches minibatches;
    then the policy's obs statistics (normalize_obs) take in the rollout's
    obs. In that order: the update sees the obs normalised as they were
    when the rollout's actions were chosen, so its first ratios are 1.

    In a distributed run `ro` is this rank's share of the batch: each
    minibatch's gradients are averaged over the ranks before the optimizer
    step (the same step on every rank), and the obs statistics take in
    every rank's obs."""
    tc = cfg["train"]
    dev = ro.device
    T, R = ro.T, ro.R
    rewards, dones, masks = ro.rewards.to(dev), ro.dones.to(dev), ro.masks.to(dev)
    with torch.no_grad():
        advantages, returns = gae(rewards, ro.values, dones, masks, tc["gamma"], tc["gae_lambda"])

    # Flatten time-major: row index i = t * R + r.
    obs = ro.obs[:T].flatten(0, 1)
    actions, logprobs = ro.actions.flatten(0, 1), ro.logprobs.flatten(0, 1)
    advantages, returns, values = advantages.flatten(), returns.flatten(), ro.values[:T].flatten()
    weights, first = masks[:T].flatten(), dones[:T].flatten()

    recurrent = policy.lstm is not None
    # Exactly num_minibatches minibatches of rows (LSTM: of whole rows, their
    # time order intact), their sizes differing by at most one (torch.chunk
    # would make fewer where the batch does not split evenly).
    units = R if recurrent else T * R
    num_mb = min(tc["num_minibatches"], units)
    stats = defaultdict(float)
    count = 0
    for _ in range(tc["update_epochs"]):
        for chunk in torch.randperm(units, device=dev).tensor_split(num_mb):
            if recurrent:
                idx = (torch.arange(T, device=dev).unsqueeze(1) * R + chunk.unsqueeze(0)).flatten()
                state = (ro.initial_state[0][:, chunk], ro.initial_state[1][:, chunk])
                head, new_value, _ = policy(obs[idx], state, first[idx])
            else:
                idx = chunk
                head, new_value, _ = policy(obs[idx])
            _, new_logprob, entropy = policy.sample(head, action=actions[idx])
            w = weights[idx]
            n = w.sum().clamp(min=1.0)
            log_ratio = new_logprob - logprobs[idx]
            ratio = log_ratio.exp()

            adv = advantages[idx]
            if tc["norm_adv"]:
                mean = masked_mean(adv, w, n)
                std = (masked_mean((adv - mean) ** 2, w, n)).sqrt()
                adv = (adv - mean) / (std + 1e-8)

            # Clipped policy loss
            pg_loss = masked_mean(torch.max(-adv * ratio,
                                            -adv * ratio.clamp(1 - tc["clip_coef"], 1 + tc["clip_coef"])), w, n)
            # Value loss, clipped round the rollout's values
            ret = returns[idx]
            if tc["clip_vloss"]:
                v_clipped = values[idx] + (new_value - values[idx]).clamp(-tc["clip_coef"], tc["clip_coef"])
                v_loss = 0.5 * masked_mean(torch.max((new_value - ret) ** 2, (v_clipped - ret) ** 2), w, n)
            else:
                v_loss = 0.5 * masked_mean((new_value - ret) ** 2, w, n)
            entropy_loss = masked_mean(entropy, w, n)
            loss = pg_loss - tc["ent_coef"] * entropy_loss + tc["vf_coef"] * v_loss

            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            dist.average_gradients(policy.parameters())
            nn.utils.clip_grad_norm_(policy.parameters(), tc["max_grad_norm"])
            optimizer.step()

            with torch.no_grad():  # summed on the device: one host sync per update, not per minibatch
                stats["pg_loss"] += pg_loss.detach()
                stats["v_loss"] += v_loss.detach()
                stats["entropy"] += entropy_loss.detach()
                stats["approx_kl"] += masked_mean((ratio - 1) - log_ratio, w, n)
                stats["clipfrac"] += masked_mean(((ratio - 1).abs() > tc["clip_coef"]).float(), w, n)
            count += 1
    if policy.obs_rms is not None:  # each obs once: entry T is the next rollout's entry 0
        policy.obs_rms.update(obs[weights > 0], dist.all_reduce_sum if dist.enabled else None)
    return {k: float(v) / max(count, 1) for k, v in stats.items()}


# ============================================================================
# 4. Evaluation, checkpoints, logs
# ============================================================================
def eval_seeds(train_cfg: dict) -> tuple[int, int]:
    """The seeds of a run's evaluations, from its [train] config:
    (during training, final). Each evaluation plays the same episodes every
    time, so `shoal eval --seed S --episodes <eval_episodes>` replays them
    with a saved checkpoint. Evaluation env i is seeded S + i, so the final
    one starts eval_episodes seeds on: its episodes are held out from the
    stopping rule, none the same (one seed on, it once replayed all but one
    of them), and no run seed's range meets another's."""
    episodes = train_cfg["eval_episodes"]
    during = 10**9 + 2 * train_cfg["seed"] * episodes
    return during, during + episodes


@contextlib.contextmanager
def eval_rng(seed: int, device):
    """Where an evaluation samples its actions (deterministic=False): from
    torch's RNG seeded with the evaluation's seed, so each evaluation plays
    the same episodes (`shoal eval --seed S --sample` replays them), inside
    a fork of the caller's RNG state, which is left as it was (a training
    run samples the same actions whether and when it evaluates)."""
    device = torch.device(device)
    cuda = [device.index if device.index is not None else torch.cuda.current_device()] \
        if device.type == "cuda" else []
    with torch.random.fork_rng(devices=cuda):
        torch.default_generator.manual_seed(seed)   # (torch.manual_seed would reseed every GPU)
        if cuda:
            with torch.cuda.device(cuda[0]):
                torch.cuda.manual_seed(seed)
        yield


def default_eval_steps(spec) -> int:
    """How long an evaluation waits for its episodes: 4 x the env's step
    limit + 10. An Atari game's limit is in frames (max_num_frames_per_episode,
    108000: 27000 steps at frameskip 4), where it truncates itself; an env
    with no limit at all is given 1000 steps."""
    limit = spec.max_episode_steps
    frames = spec.env_kwargs.get("max_num_frames_per_episode")
    if not limit and frames:
        return -(-int(frames) // int(spec.env_kwargs.get("frameskip", 1))) + 10   # it ends them itself
    return 4 * (limit or 1000) + 10


@torch.no_grad()
def evaluate(policy: Policy, env: str, episodes: int, seed: int, deterministic: bool = True,
             device="cpu", max_steps: int | None = None, env_kwargs: dict | None = None) -> dict:
    """One episode in each of `episodes` envs (a serial pool seeded `seed`,
    made with `env_kwargs`: training passes shoal.config.env_kwargs(cfg["env"],
    evaluation=True), without the training-only ones such as reward_clip):
    {"mean_return", "mean_length", "returns", "cut_off", "max_steps"}. An
    episode's return sums the rewards of all its env's rows. Episodes still
    running after max_steps (default_eval_steps: 4 x the env's step limit
    + 10) count the return they have so far, and their number is "cut_off"
    (mean_length is over the finished ones). Sampled actions come from
    eval_rng(seed)."""
    device = torch.device(device)
    with eval_rng(seed, device):
        pool = shoal.make(env, episodes, backend="serial", seed=seed, env_kwargs=env_kwargs or {})
        try:
            max_steps = max_steps or default_eval_steps(pool.spec)
            discrete = len(pool.action_space.shape) == 1
            obs, _ = pool.reset(seed=seed)
            state = policy.initial_state(pool.num_rows, device)
            done = torch.zeros(pool.num_rows, device=device)
            eps = pool.episodes
            returns = np.full(episodes, np.nan)
            lengths = np.full(episodes, np.nan)
            for _ in range(max_steps):
                head, _, state = policy(torch.as_tensor(obs).to(device), state, done)
                action, _, _ = policy.sample(head, deterministic=deterministic)
                a = policy.env_actions(action).cpu().numpy()
                obs, _, term, trunc, _ = pool.step(a[:, 0] if discrete else a)
                done = torch.as_tensor(term | trunc, dtype=torch.float32, device=device)
                new = (eps["finished"] >= 1) & np.isnan(returns)
                returns[new] = eps["return_sum"][new]
                lengths[new] = eps["length_sum"][new]
                if not np.isnan(returns).any():
                    break
            unfinished = np.isnan(returns)  # count what they have so far
            returns[unfinished] = eps["episode_return"][unfinished]
        finally:
            pool.close()
        return {"mean_return": float(np.mean(returns)), "mean_length": float(np.nanmean(lengths))
                if not np.isnan(lengths).all() else float("nan"), "returns": returns,
                "cut_off": int(unfinished.sum()), "max_steps": max_steps}


@torch.no_grad()
def rollout_frames(policy: Policy, env: str, steps: int, seed: int, deterministic: bool = True,
                   env_kwargs: dict | None = None):
    """RGB frames of env 0 of a 1-env pool (made with env_kwargs) played by the policy
    (sampled actions: from eval_rng(seed))."""
    from shoal import render

    with eval_rng(seed, "cpu"):
        pool = shoal.make(env, 1, backend="serial", seed=seed, env_kwargs=env_kwargs or {})
        try:
            if not render.supports_render(pool.spec):
                raise ValueError(f"{pool.spec.name} does not render")
            discrete = len(pool.action_space.shape) == 1
            obs, _ = pool.reset(seed=seed)
            state, done = policy.initial_state(pool.num_rows, "cpu"), torch.zeros(pool.num_rows)
            frames = [render.frame(pool)]
            for _ in range(steps):
                head, _, state = policy(torch.as_tensor(obs), state, done)
                a = policy.env_actions(policy.sample(head, deterministic=deterministic)[0]).numpy()
                obs, _, term, trunc, _ = pool.step(a[:, 0] if discrete else a)
                done = torch.as_tensor(term | trunc, dtype=torch.float32)
                frames.append(render.frame(pool))
        finally:
            pool.close()
        return frames


class Terminated(KeyboardInterrupt):
    """SIGTERM during training (kill, `timeout`, a scheduler's preemption):
    handled as Ctrl-C is, with a final checkpoint; `shoal train` then exits
    with 143 (128 + SIGTERM), not 130."""


def _raise_terminated(signum, frame):
    raise Terminated


@contextlib.contextmanager
def sigterm_as_interrupt():
    """SIGTERM raises Terminated while the block runs, where it would kill
    the process outright (its default action): a handler the caller set is
    left alone. Only the main thread receives signals."""
    if threading.current_thread() is not threading.main_thread() \
            or signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        yield
        return
    signal.signal(signal.SIGTERM, _raise_terminated)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


@contextlib.contextmanager
def sigint_deferred():
    """Hold Ctrl-C (and a SIGTERM turned into Terminated) back while the
    block runs (a save must not stop half way): yields a list that is
    non-empty afterwards if one came meanwhile (stop_if_signalled raises it).
    Only the main thread receives signals; where SIGINT is ignored, it stays so."""
    caught: list = []
    if threading.current_thread() is not threading.main_thread():
        yield caught
        return
    held = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    held = {sig: handler for sig, handler in held.items()
            if handler not in (signal.SIG_IGN, signal.SIG_DFL, None)
            and (sig == signal.SIGINT or handler is _raise_terminated)}
    for sig in held:
        signal.signal(sig, lambda signum, frame: caught.append(signum))
    try:
        yield caught
    finally:
        for sig, handler in held.items():
            signal.signal(sig, handler)


def stop_if_signalled(caught: list) -> None:
    """After sigint_deferred: stop as the held-back signal would have."""
    if signal.SIGTERM in caught:
        raise Terminated
    if caught:
        raise KeyboardInterrupt


def save_checkpoint(path: str, policy, optimizer, cfg: dict, progress: dict,
                    reward_scaler: RewardScaler | None = None) -> None:
    """Write atomically: a temp file in the same folder, on disk, then renamed
    over the old checkpoint. On any failure (disk full, Ctrl-C) the temp file
    goes and the old checkpoint stays as it was. The policy's state holds
    its obs statistics; the reward scaler's statistics go in "reward_rms"."""
    tmp = f"{path}.tmp{os.getpid()}"
    ckpt = {"policy": policy.state_dict(), "optimizer": optimizer.state_dict(),
            "config": cfg, "progress": dict(progress), "torch_rng": torch.get_rng_state()}
    if reward_scaler is not None:
        ckpt["reward_rms"] = reward_scaler.state_dict()
    # Serialized in memory first: torch.save writing to the file itself turns
    # a full disk into a RuntimeError of its own; a plain write raises the OSError.
    buffer = io.BytesIO()
    torch.save(ckpt, buffer)
    try:
        with open(tmp, "wb") as f:
            f.write(buffer.getbuffer())
            f.flush()
            os.fsync(f.fileno())  # the rename must not reach the disk before the data
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.remove(tmp)
        raise


class CheckpointError(OSError):
    """The final checkpoint could not be written: its strerror is the whole
    message (which checkpoint is left)."""


def save_final_checkpoint(path: str, policy, optimizer, cfg: dict, progress: dict,
                          reward_scaler: RewardScaler | None = None) -> None:
    """save_checkpoint at the end of a run: a failure (disk full) is an
    OSError saying which checkpoint is left, not a chain of tracebacks."""
    try:
        save_checkpoint(path, policy, optimizer, cfg, progress, reward_scaler)
    except OSError as e:
        left = f"the last one saved is still at {path}" if os.path.exists(path) else "none was saved"
        raise CheckpointError(e.errno, f"could not write the final checkpoint {path} ({e.strerror or e}); "
                                       f"{left}") from None


def load_checkpoint(path: str) -> dict:
    """A checkpoint written by save_checkpoint, or a RunError naming the file
    and what is wrong with it."""
    if not os.path.isfile(path):
        raise RunError(f"checkpoint {path} does not exist" if not os.path.exists(path)
                       else f"checkpoint {path} is not a file")
    size = os.path.getsize(path)
    if size == 0:
        raise RunError(f"checkpoint {path} is empty (0 bytes): the save that wrote it did not finish")
    with open(path, "rb") as f:
        zip_format = f.read(4) == b"PK\x03\x04"
    if zip_format:   # torch.save's format: its CRCs catch damage torch.load reads past
        try:
            with zipfile.ZipFile(path) as archive:
                damaged = archive.testzip()
        except (zipfile.BadZipFile, OSError, EOFError):
            damaged = None   # no readable archive (truncated, say): torch.load below says so
        except Exception as e:   # a damaged header: a name not UTF-8, odd flags or offsets
            raise RunError(f"checkpoint {path} is truncated or corrupt ({size} bytes; its zip "
                           f"directory does not read: {type(e).__name__}: {e})") from None
        if damaged is not None:
            raise RunError(f"checkpoint {path} is truncated or corrupt ({size} bytes; {damaged} fails "
                           f"its CRC check)")
    try:  # weights_only: a checkpoint holds tensors and plain values, and must not run code
        ckpt = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:  # zip, pickle and I/O errors, depending on where the damage is
        why = (str(e).strip() or type(e).__name__).splitlines()[0].split(". ")[0]  # torch's is long
        raise RunError(f"checkpoint {path} is truncated or corrupt ({size} bytes; "
                       f"torch.load: {why})") from None
    missing = [k for k in ("policy", "optimizer", "config", "progress")
               if not isinstance(ckpt, dict) or k not in ckpt]
    if missing:
        raise RunError(f"{path} is not a shoal checkpoint (it has no {', '.join(missing)})")
    cfg = ckpt["config"]
    if not (isinstance(cfg, dict) and isinstance(cfg.get("env"), dict) and "name" in cfg["env"]
            and isinstance(cfg.get("policy"), dict) and isinstance(ckpt["progress"], dict)):
        raise RunError(f"{path} is not a shoal checkpoint (its config has no [env] name or [policy], "
                       f"or its progress is not a dict)")
    return ckpt


def load_policy_state(policy: Policy, state: dict, path: str) -> None:
    try:
        policy.load_state_dict(state)
    except (RuntimeError, KeyError, TypeError) as e:
        first = str(e).strip().splitlines()[0]
        raise RunError(f"checkpoint {path}: its policy weights do not fit its [policy] config ({first})") from None


def load_policy(path: str) -> tuple[Policy, dict]:
    """The trained policy of checkpoint `path` (in eval mode, on the CPU; its
    obs normalisation inside it) and the run's config: policy.act(obs) gives
    actions for your own loop. A missing or damaged file is a RunError."""
    return policy_from_checkpoint(load_checkpoint(path), path)


def policy_from_checkpoint(ckpt: dict, path: str = "checkpoint") -> tuple[Policy, dict]:
    """The checkpoint's policy (with its obs statistics) in eval mode, and its config."""
    cfg = ckpt["config"]
    try:
        spec = shoal.env_spec(cfg["env"]["name"], **shoal_config.env_kwargs(cfg["env"]))
        policy = policy_from_config(spec, cfg["policy"])
    except (KeyError, TypeError, ValueError, shoal_config.ConfigError) as e:
        raise RunError(f"checkpoint {path}: its config is not usable ({type(e).__name__}: {e})") from None
    load_policy_state(policy, ckpt["policy"], path)
    policy.eval()
    return policy, cfg


LOG_FIELDS = ["train_seconds", "global_step", "sps", "episodes", "mean_return", "mean_length",
              "games", "game_return", "eval_return", "pg_loss", "v_loss", "entropy", "approx_kl", "clipfrac", "learning_rate",
              "t_env", "t_copy", "t_forward", "t_learn", "t_eval", "world_size"]


def write_final_eval(run_dir: str, final: dict, seed: int, progress: dict) -> None:
    """The run's final, held-out evaluation (after log.csv's last row) as
    run_dir/final_eval.json: its mean return and length, each episode's
    return, the seed that replays it (`shoal eval --seed`), and the steps."""
    record = {"mean_return": final["mean_return"], "mean_length": final["mean_length"],
              "returns": [float(r) for r in final["returns"]], "cut_off": final.get("cut_off", 0), "seed": seed,
              "global_step": progress["global_step"], "train_seconds": progress["train_seconds"]}
    with open(os.path.join(run_dir, "final_eval.json"), "w") as f:
        json.dump(record, f, indent=1)
        f.write("\n")


def drop_rows_after(path: str, step: int) -> None:
    """Resuming: log.csv rows written after the checkpoint (global_step >
    `step`: the run went on past its last save, then was killed) are
    dropped, as their steps are trained again; the file is replaced whole."""
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    if not rows or "global_step" not in rows[0]:
        return
    column = rows[0].index("global_step")

    def after(row):
        try:
            return int(float(row[column])) > step
        except (IndexError, ValueError):
            return False
    kept = [row for row in rows[1:] if not after(row)]
    if len(kept) == len(rows) - 1:
        return
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w", newline="") as f:
        csv.writer(f).writerows([rows[0], *kept])
    os.replace(tmp, path)


class Logger:
    """A CSV row per log interval (always), TensorBoard scalars (when
    installed), W&B (when [train] wandb) and a live dashboard: rich when
    installed and on a terminal, else a printed line per row."""

    def __init__(self, run_dir: str, cfg: dict, resume: bool, world_size: int = 1,
                 resume_step: int | None = None):
        tc = cfg["train"]
        self.env = cfg["env"]["name"]
        self.world_size = world_size
        path = os.path.join(run_dir, "log.csv")
        # (an empty log.csv: a run killed before its header reached the disk)
        append = resume and os.path.exists(path) and os.path.getsize(path) > 0
        fields = LOG_FIELDS
        if append:  # keep the columns the file has (a log written by an older shoal may lack some)
            with open(path, newline="") as f:
                fields = next(csv.reader(f), None) or LOG_FIELDS
            if resume_step is not None:
                drop_rows_after(path, resume_step)
        self.csv_file = open(path, "a" if append else "w", newline="")
        self.csv = csv.DictWriter(self.csv_file, fields, extrasaction="ignore")
        if not append:
            self.csv.writeheader()
            self.csv_file.flush()   # a run killed before its first row leaves a log with its header
        self.tb = None
        if tc["tensorboard"]:
            try:
                from torch.utils.tensorboard import SummaryWriter
                # Resuming in place: TensorBoard hides the earlier event
                # files' steps after the checkpoint, as log.csv drops them
                purge = resume_step + 1 if append and resume_step is not None else None
                self.tb = SummaryWriter(run_dir, purge_step=purge)
                self._quiet_tensorboard_writer_errors()
            except ImportError:  # tensorboard not installed
                self.tb = None
        self.wandb = None
        if tc["wandb"]:
            self.wandb = start_wandb(run_dir, cfg, resume)
        mode = tc["dashboard"]
        self.live = None
        if mode in ("auto", "rich"):
            try:
                import rich.live  # noqa: F401
                use_rich = mode == "rich" or live_terminal(sys.stdout)   # (not a Jupyter `!` cell's pty)
            except ImportError:
                use_rich = False
            if use_rich:
                from rich.live import Live
                self.live = Live(console=stdout_console(), auto_refresh=False, transient=False)
                self.live.start()
        self.quiet = mode == "none"
        self.plain = self.live is None and not self.quiet
        if self.plain:
            if world_size > 1:
                self._print(f"data-parallel over {world_size} ranks: steps, sps and episodes are summed "
                            f"over all ranks; eval is rank 0's")
            self._print(f"{'time':>6} {'steps':>10} {'sps':>9} {'eps':>6} {'return':>9} {'length':>8} "
                        f"{'eval':>8} {'v_loss':>8} {'entropy':>7}  env/copy/fwd/learn s")

    def log(self, row: dict) -> None:
        row.setdefault("world_size", self.world_size)
        if self.csv_file is not None:
            try:
                self.csv.writerow({k: row.get(k, "") for k in LOG_FIELDS})
                self.csv_file.flush()
            except OSError as e:
                self._stop_writing("csv_file", "log.csv", e)
        scalars = {k: v for k, v in row.items()
                   if isinstance(v, (int, float)) and not (isinstance(v, float) and math.isnan(v))}
        for k, v in scalars.items():
            self.scalar(k, v, row["global_step"])
        if self.wandb is not None:
            self.wandb.log(scalars, step=row["global_step"])
        if self.live is not None:
            self.live.update(self._table(row), refresh=True)
        elif self.plain:
            self._print_row(row)

    @staticmethod
    def _quiet_tensorboard_writer_errors() -> None:
        """TensorBoard's writer thread prints the traceback of a failed write
        (a full disk) and raises it again at the next add_scalar, where
        scalar() makes it one warning: its own traceback is left unprinted."""
        previous = threading.excepthook
        if getattr(previous, "shoal_quiet_tensorboard", False):
            return

        def hook(args):
            if type(args.thread).__name__ == "_AsyncWriterThread" and issubclass(args.exc_type, OSError):
                return
            previous(args)

        hook.shoal_quiet_tensorboard = True
        threading.excepthook = hook

    def scalar(self, name: str, value: float, step: int) -> None:
        """One TensorBoard scalar, where TensorBoard writes."""
        if self.tb is not None:
            try:
                self.tb.add_scalar(name, value, step)
            except OSError as e:   # its writer thread's failed write (a full disk), raised here
                self._stop_writing("tb", "the TensorBoard events", e)

    def _stop_writing(self, sink: str, what: str, error: OSError) -> None:
        """A log that cannot be written (a full disk, say): a warning, and no
        more writes to it, as a failed periodic checkpoint; training goes on."""
        print(f"warning: could not write {what} ({error.strerror or error}); not writing it from "
              f"here on, training goes on", file=sys.stderr)
        with contextlib.suppress(OSError):
            getattr(self, sink).close()
        setattr(self, sink, None)

    def _print_row(self, row: dict) -> None:
        f = lambda k, w, p: f"{row.get(k, float('nan')):>{w}.{p}f}"  # noqa: E731
        self._print(f"{row['train_seconds']:>6.1f} {row['global_step']:>10d} {row['sps']:>9.0f} "
                    f"{row['episodes']:>6d} {f('mean_return', 9, 2)} {f('mean_length', 8, 1)} "
                    f"{f('eval_return', 8, 1)} {f('v_loss', 8, 4)} {f('entropy', 7, 3)}  "
                    f"{row['t_env']:.1f}/{row['t_copy']:.1f}/{row['t_forward']:.1f}/{row['t_learn']:.1f}")

    def _print(self, line: str) -> None:
        if not self.plain:
            return
        if not print_out(line):   # stdout's reader left (`shoal train ... | head`): train on, quietly
            self.plain = False

    def _table(self, row: dict):
        from rich.table import Table

        ranks = f" ({self.world_size} ranks)" if self.world_size > 1 else ""
        t = Table(title=f"shoal train {self.env}{ranks}", show_header=False, min_width=60)
        t.add_column(style="bold cyan")
        t.add_column(justify="right")
        t.add_column(style="bold cyan")
        t.add_column(justify="right")
        fmt = lambda v, p=2: "-" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:,.{p}f}"  # noqa: E731
        total = sum(row[k] for k in ("t_env", "t_copy", "t_forward", "t_learn")) or 1.0
        split = lambda k: f"{row[k]:.1f}s {100 * row[k] / total:3.0f}%"  # noqa: E731
        t.add_row("steps", f"{row['global_step']:,}", "env", split("t_env"))
        t.add_row("steps/s", fmt(row["sps"], 0), "copy", split("t_copy"))
        t.add_row("episodes", f"{row['episodes']:,}", "forward", split("t_forward"))
        t.add_row("mean return", fmt(row.get("mean_return")), "learn", split("t_learn"))
        t.add_row("mean length", fmt(row.get("mean_length"), 1), "train time", f"{row['train_seconds']:.1f}s")
        if "game_return" in row:   # Atari: whole games, real scores (the episodes above are lives)
            t.add_row("games", f"{row['games']:,}", "game return", fmt(row["game_return"]))
        t.add_row("eval return", fmt(row.get("eval_return")), "learning rate", f"{row['learning_rate']:.2e}")
        t.add_row("policy loss", fmt(row.get("pg_loss"), 4), "value loss", fmt(row.get("v_loss"), 4))
        t.add_row("entropy", fmt(row.get("entropy"), 3), "approx kl", fmt(row.get("approx_kl"), 4))
        return t

    def close(self) -> None:
        if self.live is not None:
            self.live.stop()
            if not self.live.console.is_terminal:
                self.live.console.line()   # rich leaves a file's or pipe's last line open
        for sink, what in (("tb", "the TensorBoard events"), ("csv_file", "log.csv")):
            if getattr(self, sink) is not None:
                try:
                    getattr(self, sink).close()
                except OSError as e:   # its last write (a full disk): the run's end is no error
                    self._stop_writing(sink, what, e)
        if self.wandb is not None:
            self.wandb.finish()


def start_wandb(run_dir: str, cfg: dict, resume: bool):
    """A W&B run for this run folder: named after it, its files under
    run_dir/wandb, the whole config attached. Resuming in the same folder
    continues the same W&B run (its id is kept in run_dir/wandb_id.txt).
    WANDB_MODE=offline (or disabled) is honoured as W&B documents."""
    import wandb

    id_file = os.path.join(run_dir, "wandb_id.txt")
    run_id = None
    if resume and os.path.exists(id_file):
        with open(id_file) as f:
            run_id = f.read().strip() or None
    run = wandb.init(project=cfg["train"]["wandb_project"], name=os.path.basename(os.path.abspath(run_dir)),
                     dir=run_dir, config=cfg, id=run_id, resume="allow" if run_id else None)
    with open(id_file, "w") as f:
        f.write(run.id)
    return run


def check_loggers(cfg: dict) -> None:
    """[train] wandb = true needs wandb installed and, unless W&B runs
    offline (WANDB_MODE offline / disabled), an API key: said before any
    run folder is made (wandb.init would fail after it)."""
    import importlib.util

    if not cfg["train"]["wandb"]:
        return
    if importlib.util.find_spec("wandb") is None:
        raise shoal_config.ConfigError("[train] wandb = true: wandb is not installed "
                                       "(pip install \"shoal[wandb]\"), or set it to false")
    if os.environ.get("WANDB_MODE", "").strip().lower() in ("offline", "disabled", "dryrun"):
        return
    import wandb
    if not wandb.login(prompt=False):   # a key from WANDB_API_KEY, ~/.netrc or wandb's settings; no network
        raise shoal_config.ConfigError("[train] wandb = true: W&B has no API key here; run `wandb login` "
                                       "(or set WANDB_API_KEY), or WANDB_MODE=offline to log to the run "
                                       "folder only")


# ============================================================================
# 5. The training loop
# ============================================================================
def resolve_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise ValueError(f"[train] device = {name}: CUDA is not available on this machine (use cpu)")
    device = torch.device(name)
    if device.type == "cuda" and device.index is not None and device.index >= torch.cuda.device_count():
        raise ValueError(f"[train] device = {name}: this machine has {torch.cuda.device_count()} GPU(s), "
                         f"cuda:0 to cuda:{torch.cuda.device_count() - 1}")
    return device


RUN_FILES = ("checkpoint.pt", "log.csv", "config.ini")  # a folder with any of these holds a run


def make_run_dir(cfg: dict, run_dir: str | None, resume: str | None) -> str:
    """The run's folder, made or claimed atomically, so that no two runs share one.

    run_dir None: a new <[train] run_dir>/<env>-s<seed>-<time>/, with -2, -3...
    appended when runs of the same env and seed start in the same second.
    An explicit run_dir may be new or hold no run (none of RUN_FILES); or it
    is the folder of the checkpoint being resumed, and the run goes on there
    (log.csv appended, checkpoint.pt replaced). Any other folder holding a
    run is refused: a RunError naming it."""
    if run_dir is None:
        tc = cfg["train"]
        name = f"{shoal.env_spec(cfg['env']['name']).name.lower()}-s{tc['seed']}-{time.strftime('%Y%m%d-%H%M%S')}"
        try:
            os.makedirs(tc["run_dir"], exist_ok=True)
            for n in itertools.count(1):
                path = os.path.join(tc["run_dir"], name if n == 1 else f"{name}-{n}")
                try:
                    os.mkdir(path)  # atomic: of two runs making the same name, one gets FileExistsError
                    return path
                except FileExistsError:
                    continue
        except OSError as e:   # a read-only file system, no permission
            raise RunError(f"cannot make a run folder in [train] run_dir = {tc['run_dir']}: "
                           f"{e.strerror or e}") from None
    try:
        os.makedirs(run_dir, exist_ok=True)
    except FileExistsError:
        raise RunError(f"--run-dir {run_dir} exists and is not a folder") from None
    except OSError as e:   # a read-only file system, no permission
        raise RunError(f"cannot make the run folder {run_dir}: {e.strerror or e}") from None
    if resume and os.path.samefile(os.path.dirname(os.path.abspath(resume)), run_dir):
        return run_dir  # resuming in place: this run's own folder
    held = [f for f in RUN_FILES if os.path.exists(os.path.join(run_dir, f))]
    if not held:
        try:  # claim the folder: of two runs starting here at once, one finds config.ini there
            open(os.path.join(run_dir, "config.ini"), "x").close()
            return run_dir
        except FileExistsError:
            held = ["config.ini"]
        except OSError as e:   # an existing folder that cannot be written: read-only, no permission
            raise RunError(f"cannot write in the run folder {run_dir}: {e.strerror or e}") from None
    # A run killed in its first save left only that save's temp file: no
    # checkpoint to resume, so no later run gets past this refusal to clean it up.
    remove_stale_temp_files_if_unheld(run_dir)
    ckpt = os.path.join(run_dir, "checkpoint.pt")
    hint = f", or continue that run with --resume {ckpt} --run-dir {run_dir}" if os.path.exists(ckpt) else ""
    raise RunError(f"run folder {run_dir} already holds a run ({', '.join(held)}); "
                   f"not overwriting it: choose another --run-dir{hint}")


RUN_LOCK = ".lock"   # in a run folder: held (flock) by the run writing there


def discard_unstarted_run(run_dir: str, fresh_folder: bool) -> None:
    """Give back the folder of a run that stopped in its setup (an error, a
    Ctrl-C) before any checkpoint: the whole folder when this run made it,
    else the files it wrote (config.ini, log.csv, TensorBoard's events), so
    that the next run may use it. Called with the run's lock still held."""
    if fresh_folder:
        shutil.rmtree(run_dir, ignore_errors=True)
        return
    events = glob.glob(os.path.join(glob.escape(run_dir), f"events.out.tfevents.*.{os.getpid()}.*"))
    mine = [*RUN_FILES, *map(os.path.basename, events)]
    for name in mine:
        with contextlib.suppress(OSError):
            os.unlink(os.path.join(run_dir, name))


def lock_run_dir(run_dir: str):
    """Hold the run folder for this run's life (an open file with an
    exclusive flock, released when closed or when the process dies), so
    that a second run cannot write there meanwhile (a --resume in place of
    a run still going, say): a RunError if another run holds it."""
    import fcntl

    lock = open(os.path.join(run_dir, RUN_LOCK), "a+")
    # A run that make_run_dir turns away holds the lock a moment to remove
    # stale temp files (remove_stale_temp_files_if_unheld): wait that out.
    deadline = time.monotonic() + 1.0
    while True:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if time.monotonic() < deadline:
                time.sleep(0.05)
                continue
            lock.seek(0)
            holder = lock.read().strip()
            lock.close()
            raise RunError(f"run folder {run_dir} is in use: another process holds its lock (the last "
                           f"run there wrote pid {holder or '?'}); stop that run first, or choose "
                           f"another --run-dir") from None
        except OSError as e:   # a file system without locks (some network mounts): run unguarded
            print(f"warning: cannot lock run folder {run_dir} ({e.strerror or e}); make sure no other "
                  f"run writes there", file=sys.stderr)
        break
    lock.seek(0)
    lock.truncate()
    lock.write(str(os.getpid()))
    lock.flush()
    return lock


def remove_stale_temp_files(ckpt_path: str) -> None:
    """Temp files of saves killed half way (save_checkpoint's .tmp<pid>,
    whose process is gone): the checkpoint itself was never touched. Called
    with the run folder's lock held (where the file system has locks), so no
    other run is saving there. A pid alive again (reused by another
    process) keeps its file: liveness cannot tell a reused pid from a save
    in progress."""
    folder, name = os.path.split(ckpt_path)
    for entry in os.listdir(folder or "."):
        pid = entry[len(name) + 4:] if entry.startswith(f"{name}.tmp") else ""
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            os.kill(int(pid), 0)
            continue   # its process lives (another run's save in progress)
        except ProcessLookupError:
            pass
        except PermissionError:
            continue
        with contextlib.suppress(OSError):
            os.remove(os.path.join(folder, entry))


def remove_stale_temp_files_if_unheld(run_dir: str) -> None:
    """remove_stale_temp_files in a run folder this process does not hold
    (one it refuses), while no run holds it: its lock taken for that time,
    then released. Nothing is removed when the lock is held (a run still
    going there, perhaps on another machine or in another container, where
    its pid means nothing here) or cannot be had (no .lock file: no run of
    this shoal made the folder; a file system without locks)."""
    import fcntl

    try:
        lock = os.open(os.path.join(run_dir, RUN_LOCK), os.O_RDONLY)   # not created: not ours to make
    except OSError:
        return
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        remove_stale_temp_files(os.path.join(run_dir, "checkpoint.pt"))
    except OSError:   # held (BlockingIOError), or no locks here
        pass
    finally:
        os.close(lock)   # releases the lock


def check_world_split(cfg: dict, world: int) -> tuple[int, int | None]:
    """(envs per rank, pool workers per rank) when [vec] num_envs is split
    over `world` data-parallel ranks; a ConfigError unless it splits evenly
    into whole batches. Workers: [vec] num_workers, or (0, multiprocessing,
    several ranks) this node's cores shared among its ranks."""
    vc = cfg["vec"]
    if world == 1:
        return vc["num_envs"], None
    batches = 1 if vc["backend"] == "cuda" else vc["num_batches"]
    if vc["num_envs"] % (world * batches):
        raise shoal_config.ConfigError(
            f"[vec] num_envs = {vc['num_envs']} (the total over all ranks): expected a multiple of "
            f"{world * batches} ({world} ranks x [vec] num_batches = {batches}), so that every rank steps whole "
            f"batches")
    local = vc["num_envs"] // world
    if vc["backend"] == "multiprocessing" and vc["num_workers"] > local:  # [vec] num_workers is per rank
        raise shoal_config.ConfigError(shoal_config.workers_exceed_envs(vc["num_workers"], vc["num_envs"], world))
    # each rank's minibatches cut its own rows
    agents = shoal.env_spec(cfg["env"]["name"], **shoal_config.env_kwargs(cfg["env"])).agents
    shoal_config.check_minibatches(cfg, local, agents, world)
    workers = None
    if vc["backend"] == "multiprocessing" and vc["num_workers"] == 0:
        # as the pool's own default, over this rank's share of the cores: a
        # multiple of the batches (each batch has workers of its own)
        workers = min(distributed.planned_cores_per_rank(), local)
        workers = max(batches, workers // batches * batches)
    return local, workers


def train(cfg: dict, resume: str | None = None, run_dir: str | None = None) -> dict:
    """Train with PPO as `cfg` (shoal.config.load) says. Returns a summary:
    global_step, train_seconds, final eval, solve time (first evaluation
    with mean return >= target_return, in training seconds), run_dir,
    checkpoint. Ctrl-C stops training and still writes the checkpoint, and
    so does SIGTERM (as Terminated, a KeyboardInterrupt; where no handler
    of the caller's is set); so does an error (a pool worker dying: shoal.pool.WorkerError), which is
    then raised again. Resuming takes [env] and [policy] from the checkpoint
    (the policy's shape must match its weights; its obs statistics come with
    them), [vec] and [train] from cfg; the reward scaler's statistics and
    the seconds per phase (log.csv's t_* columns) carry on from the checkpoint's.
    Everything that can be checked is checked before the run folder is made:
    a ConfigError (a bad value) or a RunError (a bad checkpoint, a used folder).

    Started by torchrun (WORLD_SIZE > 1), this process is one data-parallel
    rank: [vec] num_envs and [train] total_timesteps are totals over the
    ranks, each rank steps its share of the envs (seeds disjoint across
    ranks), gradients and obs statistics are averaged over the ranks, and
    rank 0 alone writes the run folder and evaluates; the other ranks
    return a summary without run_dir, checkpoint or eval_return."""
    with sigterm_as_interrupt():
        return _train(cfg, resume, run_dir)


def check_checkpoint_env(ckpt: dict, cfg: dict, path: str) -> None:
    """RunError unless checkpoint `ckpt` (from `path`) trained cfg's env."""
    saved = ckpt["config"]["env"]["name"]
    if shoal.env_spec(saved).name != shoal.env_spec(cfg["env"]["name"]).name:
        raise RunError(f"checkpoint {path} is for {saved}, not {cfg['env']['name']}")


def _train(cfg: dict, resume: str | None, run_dir: str | None) -> dict:
    run_dir_arg = run_dir
    cfg = {section: dict(keys) for section, keys in cfg.items()}  # ours to amend, not the caller's
    ckpt = None
    if resume:
        ckpt = load_checkpoint(resume)
        saved = ckpt["config"]
        check_checkpoint_env(ckpt, cfg, resume)
        saved_policy = {**POLICY_PREDATED, **saved["policy"]}
        saved_env = {**cfg["env"], **ENV_PREDATED, **saved["env"]}
        notes = distributed.planned_main_rank()   # rank 0 alone says what the resume replaces
        if notes and saved_env["kwargs"] != cfg["env"].get("kwargs", ""):
            print(f"resuming {resume}: its [env] kwargs = {saved_env['kwargs']!r} replaces the command "
                  f"line's {cfg['env'].get('kwargs', '')!r}", file=sys.stderr)
        differ = {k: v for k, v in saved_policy.items() if cfg["policy"].get(k) != v}
        if "encoder" in differ:  # auto vs what it picks for this env: no difference to report
            saved_spec = shoal.env_spec(saved_env["name"], **shoal_config.env_kwargs(saved_env))
            with contextlib.suppress(ValueError):
                if shoal_config.resolve_encoder(saved_spec, differ["encoder"]) == \
                        shoal_config.resolve_encoder(saved_spec, cfg["policy"].get("encoder", "mlp")):
                    del differ["encoder"]
        if notes and differ:
            print(f"resuming {resume}: its [policy] " + ", ".join(f"{k} = {v}" for k, v in differ.items())
                  + " replaces the command line's " + ", ".join(f"{k} = {cfg['policy'].get(k)}" for k in differ),
                  file=sys.stderr)
        cfg["env"], cfg["policy"] = saved_env, {**cfg["policy"], **saved_policy}
    shoal_config.validate(cfg)
    tc, vc, pc = cfg["train"], cfg["vec"], cfg["policy"]
    env = cfg["env"]["name"]
    spec = shoal.env_spec(env, **shoal_config.env_kwargs(cfg["env"]))
    eval_kwargs = shoal_config.env_kwargs(cfg["env"], evaluation=True)  # real scores: no reward clipping
    check_backend(vc["backend"])
    device = resolve_device(tc["device"])
    check_loggers(cfg)
    local_envs, num_workers = check_world_split(cfg, distributed.planned_world_size())
    resumed_digest = None   # every rank must resume the same bytes (the ranks compare it at setup)
    if resume:
        with open(resume, "rb") as f:
            resumed_digest = hashlib.file_digest(f, "sha256").hexdigest()
    dist, device = distributed.setup(cfg, device, resumed_digest)  # Dist.single() unless started by torchrun
    if tc["torch_threads"] > 0:
        torch.set_num_threads(tc["torch_threads"])
    elif dist.enabled:  # torch's default is every core: ranks would fight over them
        torch.set_num_threads(distributed.planned_cores_per_rank())
    seed = tc["seed"]
    np.random.seed(seed)
    torch.manual_seed(seed)

    policy = policy_from_config(spec, pc).to(device)
    optimizer = torch.optim.Adam(policy.parameters(), lr=tc["learning_rate"], eps=1e-5)
    # timers: the cumulative seconds per phase (log.csv's t_* columns), carried over resumes
    progress = {"global_step": 0, "update": 0, "train_seconds": 0.0, "solved_seconds": None,
                "solved_step": None, "timers": {}}
    if ckpt is not None:
        load_policy_state(policy, ckpt["policy"], resume)
        optimizer.load_state_dict(ckpt["optimizer"])
        # The saved state holds the lr of the last update; this run's [train]
        # learning_rate rules (annealing, if on, resets it before each update).
        optimizer.param_groups[0]["lr"] = tc["learning_rate"]
        progress.update(ckpt["progress"])
        if ckpt["config"].get("train", {}).get("target_return") != tc["target_return"]:
            # another target: when the last one was reached says nothing of this one
            progress["solved_seconds"] = progress["solved_step"] = None
        if "torch_rng" in ckpt:
            torch.set_rng_state(ckpt["torch_rng"])
    dist.broadcast_module(policy)  # one starting point on every rank
    if dist.rank > 0:  # rank 0 samples as a single process would; the others differently
        torch.manual_seed(seed * 1_000_003 + 7919 * dist.rank + progress["update"])

    # Env seeds: rank r's envs continue where rank r-1's stop, so the ranks
    # together use the seeds a single process with all the envs would. Each
    # resume gets fresh env seeds (the pool's state is not checkpointed).
    env_seed = seed * vc["num_envs"] + dist.rank * local_envs + 7919 * progress["update"]
    pool = make_pool(cfg, env, seed=env_seed, device=device, num_envs=local_envs, num_workers=num_workers)
    if dist.enabled:
        workers = getattr(pool, "num_workers", None)
        sys.stderr.write(  # one write: the ranks' lines do not interleave
            f"shoal train: {dist.describe()}: {local_envs} envs (seeds {env_seed}..{env_seed + local_envs - 1}), "
            + (f"{workers} pool workers ({shoal.pool.available_cores()} cores / {dist.local_world_size} "
               f"ranks on this node, at least one per batch), " if vc["backend"] == "multiprocessing"
               else f"{vc['backend']} pool, ")
            + f"{torch.get_num_threads()} torch threads, learner on {device}\n")
        sys.stderr.flush()

    # The run folder last: a pool argument the pool refuses (above) leaves no folder behind.
    run_dir = ckpt_path = run_lock = logger = None
    fresh_folder = False
    # Setup can fail or be interrupted (Ctrl-C) after the folder is made, before
    # any checkpoint: the folder is then given back, so it does not hold a run
    # that cannot be resumed (later runs would be refused there).
    try:
        if dist.is_main:  # rank 0 alone writes: one run folder, one log, one checkpoint
            fresh_folder = run_dir_arg is None or not os.path.isdir(run_dir_arg)
            run_dir = make_run_dir(cfg, run_dir_arg, resume)
            try:
                run_lock = lock_run_dir(run_dir)
                with open(os.path.join(run_dir, "config.ini"), "w") as f:
                    f.write(shoal_config.to_ini(cfg))
            except OSError as e:   # a full disk, a read-only folder given as --run-dir
                raise RunError(f"cannot write in the run folder {run_dir}: {e.strerror or e}") from None
            ckpt_path = os.path.join(run_dir, "checkpoint.pt")
            remove_stale_temp_files(ckpt_path)
        reward_scaler = None
        if tc["normalize_reward"]:
            reward_scaler = RewardScaler(pool.num_rows, tc["gamma"], tc["reward_clip"])
            if ckpt is not None and "reward_rms" in ckpt:
                reward_scaler.load_state_dict(ckpt["reward_rms"])
        timers = Timers()
        timers.total.update(progress["timers"])   # none in a checkpoint older than them: from 0
        eval_seconds_before = timers.total["eval"]   # earlier runs' evaluations: not this run's clock
        try:
            logger = Logger(run_dir, cfg, resume=bool(resume), world_size=dist.world_size,
                            resume_step=progress["global_step"] if ckpt is not None else None) \
                if dist.is_main else None
        except OSError as e:   # log.csv's header on a full disk, say
            raise RunError(f"cannot write in the run folder {run_dir}: {e.strerror or e}") from None
    except BaseException:
        pool.close()
        if logger is not None:
            logger.close()
        in_place = resume is not None and run_dir is not None and \
            os.path.samefile(os.path.dirname(os.path.abspath(resume)), run_dir)
        if run_dir is not None and not in_place:   # (resumed in place: the folder keeps its run)
            discard_unstarted_run(run_dir, fresh_folder)
        if run_lock is not None:
            run_lock.close()
        raise

    batch = tc["num_steps"] * pool.num_rows * dist.world_size  # rows stepped per update, all ranks
    # Counted in steps, so that a run resumed with another batch (other
    # num_envs or num_steps) still stops at total_timesteps.
    steps_left = max(0, tc["total_timesteps"] - progress["global_step"])
    num_updates = progress["update"] + math.ceil(steps_left / batch)
    if progress["update"] == 0:
        num_updates = max(1, num_updates)
    if ckpt is not None and 0 < tc["max_train_seconds"] <= progress["train_seconds"]:
        num_updates = progress["update"]   # the time is spent: no further update
        if dist.is_main:
            print(f"resuming {resume}: [train] max_train_seconds = {tc['max_train_seconds']:g} counts "
                  f"the whole run, which has trained {progress['train_seconds']:.1f} s: raise it to "
                  f"train on", file=sys.stderr)
    end_step = progress["global_step"] + (num_updates - progress["update"]) * batch
    eval_seed, final_eval_seed = eval_seeds(tc)
    summary = {"run_dir": run_dir, "checkpoint": ckpt_path, "interrupted": False}
    finished = False   # the loop ran to its end (no signal, no error)
    stopped_by = None  # the KeyboardInterrupt (Ctrl-C, SIGTERM) that ended the loop

    def unstarted() -> bool:
        """A fresh run stopped before its first update: nothing to keep."""
        return not finished and ckpt is None and progress["update"] == 0

    # An error inside an update (a rank that left mid-sum, say) leaves the
    # weights and Adam state part-way through it: no final save then, so the
    # checkpoint on disk (the last periodic one) holds whole updates only.
    mid_update = keep_last_checkpoint = False
    last_eval = float("nan")
    # since the last log row: [episodes ended, their returns summed, their
    # lengths summed, whole games ended (Atari), their real scores summed]
    nothing_since = (0, 0.0, 0.0, 0, 0.0)
    since_log = list(nothing_since)
    last_log = log_steps = None   # the last row's train_seconds and global_step
    losses: dict = {}
    clock, base_seconds = None, progress["train_seconds"]

    def train_seconds() -> float:  # wall time, minus evaluations
        return base_seconds + time.perf_counter() - clock - (timers.total["eval"] - eval_seconds_before)

    def episodes_ended() -> list:
        """Since the last call, as since_log counts them (this process's)."""
        s = pool.episode_stats()
        ended = [s["episodes"], s["mean_return"] * s["episodes"], s["mean_length"] * s["episodes"]] \
            if s["episodes"] else [0, 0.0, 0.0]
        return ended + ro.take_game_stats()

    def count_for_the_log(ended: list) -> None:
        nonlocal since_log
        since_log = [a + type(a)(b) for a, b in zip(since_log, ended)]

    def log_row(now: float) -> None:
        """The row of the whole updates since the last one (rank 0 only)."""
        nonlocal last_log, log_steps, since_log
        episodes, ret_sum, len_sum, games, game_sum = since_log
        # the episodes ended since the last row (none: NaN, not the last row's again)
        ep_mean_return, ep_mean_length = (ret_sum / episodes, len_sum / episodes) if episodes \
            else (float("nan"), float("nan"))
        row = {"train_seconds": now, "global_step": progress["global_step"],
               "sps": (progress["global_step"] - log_steps) / max(now - last_log, 1e-9), "episodes": episodes,
               "mean_return": ep_mean_return, "mean_length": ep_mean_length,
               "eval_return": last_eval if tc["eval_interval"] > 0 else float("nan"),
               "learning_rate": optimizer.param_groups[0]["lr"], "world_size": dist.world_size, **losses,
               **{f"t_{k}": timers.total[k] for k in ("env", "copy", "forward", "learn", "eval")}}
        if games:
            row.update(games=games, game_return=game_sum / games)
        # counted as written first: a stop inside log() must not write the row twice
        last_log, log_steps = now, progress["global_step"]
        since_log = list(nothing_since)
        logger.log(row)

    def log_last_row() -> None:
        """A run stopped between rows (a signal, an error): the whole
        updates since the last row get theirs, with the episodes that ended
        since the last count (one process; under torchrun the ranks' last
        counts are not summed after a stop). More Ctrl-Cs meanwhile are the
        same stop, and an error here leaves the one that stopped the run."""
        if not (dist.is_main and log_steps is not None and progress["global_step"] > log_steps):
            return
        with sigint_deferred():
            try:
                if not dist.enabled:
                    count_for_the_log(episodes_ended())
                log_row(train_seconds())
            except Exception as e:   # (the pool may be what failed)
                print(f"\nwarning: could not log the last row ({type(e).__name__}: {e})", file=sys.stderr)

    def run_eval() -> float:
        with timers.time("eval"):
            policy.eval()
            r = evaluate(policy, env, tc["eval_episodes"], eval_seed, tc["eval_deterministic"], device,
                         env_kwargs=eval_kwargs)
            policy.train()
        return r["mean_return"]

    # Under torchrun the ranks stop together: a Ctrl-C or SIGTERM is held
    # until the update's collective, which tells every rank. (A rank that
    # stopped alone, in its rollout, left another waiting for it in the
    # update's sums, until torchrun's 30 s grace killed that one before any
    # checkpoint.) Alone, a run stops at once, as before.
    signals_for_the_ranks = contextlib.ExitStack()
    held_for_the_ranks = signals_for_the_ranks.enter_context(sigint_deferred()) if dist.enabled else None

    def stop_or_hold(signalled: list) -> None:
        """After a deferred block: stop now (one process) or leave the
        signal to the next collective (torchrun)."""
        if held_for_the_ranks is None:
            stop_if_signalled(signalled)
        else:
            held_for_the_ranks.extend(signalled)

    try:
        ro = (DeviceRollout if vc["backend"] == "cuda" else Rollout)(pool, policy, cfg, device, timers,
                                                                     reward_scaler)
        clock = time.perf_counter()
        last_log = last_ckpt = last_eval_time = base_seconds   # train_seconds() counts from there
        log_steps = progress["global_step"]

        if tc["eval_interval"] > 0 and progress["update"] == 0 and dist.is_main:  # the curve's starting point
            last_eval = run_eval()
            logger.log({"train_seconds": 0.0, "global_step": 0, "sps": 0.0, "episodes": 0,
                        "eval_return": last_eval, "learning_rate": optimizer.param_groups[0]["lr"],
                        **{f"t_{k}": 0.0 for k in ("env", "copy", "forward", "learn", "eval")}})

        while progress["update"] < num_updates:
            if tc["anneal_lr"]:   # linear to 0 at the last update (in steps: see end_step)
                frac = 1.0 - progress["global_step"] / end_step
                optimizer.param_groups[0]["lr"] = frac * tc["learning_rate"]
            ro.collect()
            # A Ctrl-C during the update waits for its end: the checkpoint then
            # holds whole updates only (weights, Adam state and counters agree).
            with timers.time("learn"), sigint_deferred() as signalled:
                mid_update = True
                losses = ppo_update(policy, optimizer, ro, cfg, dist)
                # both counters move at once, and only after the update
                progress.update(global_step=progress["global_step"] + batch, update=progress["update"] + 1)
                mid_update = False
            stop_or_hold(signalled)

            ended = episodes_ended()
            if not dist.enabled:   # counted at once: a Ctrl-C in the evaluation below keeps them
                count_for_the_log(ended)
            now = train_seconds()
            done = progress["update"] >= num_updates or (
                tc["max_train_seconds"] > 0 and now >= tc["max_train_seconds"])
            if dist.is_main and tc["eval_interval"] > 0 and (now - last_eval_time >= tc["eval_interval"] or done):
                last_eval, last_eval_time = run_eval(), now
                if (tc["target_return"] and last_eval >= tc["target_return"]
                        and progress["solved_seconds"] is None):
                    progress["solved_seconds"], progress["solved_step"] = now, progress["global_step"]
                    done = True
            if dist.enabled:  # one collective per update: episodes summed over ranks, rank 0 decides the
                # end, and a signal any rank holds stops them all here (each then as SIGTERM if any had it)
                terms = float(signal.SIGTERM in held_for_the_ranks)
                *ended, stop, terms, signalled_ranks = dist.sum_floats(
                    [*ended, float(done and dist.is_main), terms, float(bool(held_for_the_ranks))])
                done = stop > 0
                if signalled_ranks:
                    held_for_the_ranks.clear()
                    raise Terminated if terms else KeyboardInterrupt
                count_for_the_log(ended)   # (all ranks' episodes)
            if not dist.is_main:
                if done:
                    break
                continue
            if now - last_log >= tc["log_interval"] or done:
                log_row(now)
            if tc["checkpoint_interval"] > 0 and now - last_ckpt >= tc["checkpoint_interval"]:
                progress["train_seconds"], progress["timers"] = train_seconds(), dict(timers.total)
                with sigint_deferred() as signalled:
                    try:
                        save_checkpoint(ckpt_path, policy, optimizer, cfg, progress, reward_scaler)
                    except OSError as e:   # disk full, say: the last checkpoint stays; train on
                        print(f"\nwarning: could not write the checkpoint {ckpt_path} ({e}); the one "
                              f"before stays, training goes on", file=sys.stderr)
                stop_or_hold(signalled)   # held back during the save: stop now (or at the next collective)
                last_ckpt = now
            if done:
                break
        signals_for_the_ranks.close()   # past the last collective: a signal stops this rank at once
        stop_if_signalled(held_for_the_ranks or [])
        finished = True
    except KeyboardInterrupt as e:   # Ctrl-C, or SIGTERM (Terminated)
        summary["interrupted"] = True
        summary["signal"] = signal.SIGTERM if isinstance(e, Terminated) else signal.SIGINT
        stopped_by = e
        log_last_row()
        if dist.is_main and not unstarted():
            print(f"\n{'terminated' if isinstance(e, Terminated) else 'interrupted'}: writing a final "
                  f"checkpoint", file=sys.stderr)
    except Exception as e:  # e.g. a pool worker died: save what was learnt, then re-raise
        keep_last_checkpoint = mid_update
        log_last_row()   # (an update the error cut short is not counted: nothing of it logged)
        if dist.is_main and unstarted():
            e.add_note(f"no update had run: the run folder {run_dir} is given back")
        elif dist.is_main and mid_update:
            kept = f"the last checkpoint saved stays: {ckpt_path}" if os.path.exists(ckpt_path) \
                else "no checkpoint was saved before it"
            print(f"\ntraining stopped by an error inside an update: {kept}", file=sys.stderr)
            e.add_note(f"the error came inside an update, so no checkpoint of part of one is written; {kept}")
        elif dist.is_main:
            print("\ntraining stopped by an error: writing a final checkpoint", file=sys.stderr)
            e.add_note(f"the checkpoint holds the training up to the error: {ckpt_path}")
        else:
            e.add_note(f"in data-parallel rank {dist.rank} of {dist.world_size} (rank 0 writes the checkpoint)")
        if dist.backend == "gloo":  # gloo's teardown waits on no peer (nccl's may: left to the exit)
            dist.close()
        raise
    finally:
        signals_for_the_ranks.close()   # (the handlers back before the save's own deferral)
        # The save first (a broken pool may fail to close), and whole: a second
        # Ctrl-C waits until it is done, then ends the run (no final evaluation).
        # The pool's close is held too: more Ctrl-Cs (a user pressing it
        # again and again) are the same stop, and train() still returns its
        # summary (one landing in pool.close() raised out of train()). The
        # logger's close is not: W&B's finish may wait on the network.
        saved = False
        try:
            with sigint_deferred() as signalled:
                try:
                    if clock is not None:  # the training time so far, however the loop ended
                        progress["train_seconds"], progress["timers"] = train_seconds(), dict(timers.total)
                    if dist.is_main and not keep_last_checkpoint and not unstarted():
                        save_final_checkpoint(ckpt_path, policy, optimizer, cfg, progress, reward_scaler)
                    saved = True
                    if signalled and not summary["interrupted"]:
                        summary["interrupted"] = True
                        summary["signal"] = signal.SIGTERM if signal.SIGTERM in signalled else signal.SIGINT
                finally:   # however the save went
                    pool.close()
        finally:
            if not (finished and saved and not summary["interrupted"]):   # else: after the final eval
                if logger is not None:
                    logger.close()
                if dist.is_main and unstarted():   # (lock still held)
                    discard_unstarted_run(run_dir, fresh_folder)
                if run_lock is not None:
                    run_lock.close()   # (also releases the folder's lock)
    if stopped_by is not None and unstarted():
        # stopped before its first update: as a stop in the setup, the
        # folder is given back (nothing learnt to keep) and the stop goes on
        raise stopped_by

    summary.update(progress)
    # ended by [train] max_train_seconds before its steps or its target: the CLI says so
    summary["time_capped"] = (not summary["interrupted"] and progress["update"] < num_updates
                              and progress["solved_seconds"] is None)
    summary["max_train_seconds"] = tc["max_train_seconds"]
    summary["timers"] = dict(timers.total)
    summary["losses"] = losses
    summary["rank"], summary["world_size"] = dist.rank, dist.world_size
    if not summary["interrupted"] and dist.is_main:
        try:   # held out from the stopping rule (its own seed); its row is the log's last
            policy.eval()
            final = evaluate(policy, env, tc["eval_episodes"], final_eval_seed, tc["eval_deterministic"],
                             device, env_kwargs=eval_kwargs)
            summary["eval_return"] = final["mean_return"]
            write_final_eval(run_dir, final, final_eval_seed, progress)
            logger.scalar("final_eval_return", final["mean_return"], progress["global_step"])
        finally:
            logger.close()
            run_lock.close()
    # The process group is destroyed before the interpreter exits (gloo's
    # threads then abort it: "terminate called without an active exception"),
    # and on a normal end the ranks leave together, so that none tears its
    # end down while another still works (seen to abort too). After a Ctrl-C
    # the ranks are not in step: no meeting.
    if not summary["interrupted"]:
        dist.barrier()
    dist.close()
    return summary
