"""One first-party env as a pettingzoo ParallelEnv (the multi-agent view).

Agents are named "agent_0" .. "agent_{A-1}", one per row of the C env. An
agent is live after reset or a step while its row's mask is true and it has
not terminated or truncated; it then leaves `agents` until the next reset,
as pettingzoo's parallel API requires. Underneath is a Serial pool of one env
with autoreset disabled, so it runs the same C code as every pool and obeys
the seed rule: reset(seed=s) here is env i of a pool reset with seed s - i.
"""
from __future__ import annotations

import numpy as np
from gymnasium.vector import AutoresetMode
from pettingzoo import ParallelEnv

from shoal.envs import spec as env_spec
from shoal.pool import render
from shoal.pool.native import Serial


class ShoalParallelEnv(ParallelEnv):
    """Shoal env `env_name` as a pettingzoo ParallelEnv (module doc)."""

    def __init__(self, env_name: str = "cartpole", render_mode: str | None = None):
        spec = env_spec(env_name)
        render.check_render_mode(spec, render_mode)
        self._pool = Serial(spec, 1, autoreset_mode=AutoresetMode.DISABLED)
        self.render_mode = render_mode
        self.metadata = {**render.env_metadata(spec), "name": f"shoal/{spec.name}",
                         "is_parallelizable": True}
        self.possible_agents = [f"agent_{k}" for k in range(spec.agents)]
        self.agents: list[str] = []
        self._index = {agent: k for k, agent in enumerate(self.possible_agents)}
        self._observation_space = spec.single_observation_space
        self._action_space = spec.single_action_space
        self._actions = np.zeros(self._pool.action_space.shape, dtype=np.int32)

    def observation_space(self, agent):
        return self._observation_space  # one object for every agent and call

    def action_space(self, agent):
        return self._action_space

    def reset(self, seed: int | None = None, options: dict | None = None):
        obs, _ = self._pool.reset(seed=seed)
        masks = self._pool.masks
        self.agents = [a for a in self.possible_agents if masks[self._index[a]]]
        return {a: obs[self._index[a]].copy() for a in self.agents}, {a: {} for a in self.agents}

    def step(self, actions: dict):
        if not self.agents:
            raise RuntimeError("step() with no live agents: call reset()")
        self._actions[:] = 0  # rows of absent agents: ignored by the env
        for agent, action in actions.items():
            if agent not in self._index:
                raise ValueError(f"unknown agent {agent!r}; agents are {self.possible_agents}")
            if not self._action_space.contains(action):
                raise ValueError(f"action {action!r} for {agent} is not in {self._action_space}")
            self._actions[self._index[agent]] = action
        obs, rewards, terminals, truncations, _ = self._pool.step(self._actions)
        acted = self.agents
        observations = {a: obs[self._index[a]].copy() for a in acted}
        reward = {a: float(rewards[self._index[a]]) for a in acted}
        terminated = {a: bool(terminals[self._index[a]]) for a in acted}
        truncated = {a: bool(truncations[self._index[a]]) for a in acted}
        masks = self._pool.masks
        self.agents = [a for a in acted
                       if masks[self._index[a]] and not (terminated[a] or truncated[a])]
        return observations, reward, terminated, truncated, {a: {} for a in acted}

    def render(self):
        """An RGB frame ("rgb_array") or a text view ("ansi"); None without a render_mode."""
        return render.render(self._pool, self.render_mode)

    def close(self):
        self._pool.close()
