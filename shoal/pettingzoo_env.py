"""One first-party env as a pettingzoo ParallelEnv (the multi-agent view).

Agents are named "agent_0" .. "agent_{A-1}", one per row of the C env. An
agent is live after reset or a step while its row's mask is true and it has
not terminated or truncated; it then leaves `agents` until the next reset,
as pettingzoo's parallel API requires.

Envs whose agents respawn (spec.agents_respawn: Snake) are the exception: a
snake that dies is replaced at once in its row and plays on, so its agent
stays in `agents` with terminated False, and infos[agent]["respawned"] is
True on that step (reward -1, and the obs is already the new snake's: the
end of that snake's episode, where a learner stops bootstrapping). Removing
the agent instead would leave its snake in the world, moving on actions no
one sends. Such agents leave only when the env's episode ends.

Underneath is a Serial pool of one env
with autoreset disabled, so it runs the same C code as every pool and obeys
the seed rule: reset(seed=s) here is env i of a pool reset with seed s - i.
"""
from __future__ import annotations

import copy

import numpy as np
from gymnasium.error import ResetNeeded
from gymnasium.spaces import Box
from gymnasium.utils import seeding
from gymnasium.vector import AutoresetMode
try:
    from pettingzoo import ParallelEnv
except ModuleNotFoundError as e:   # (still one: pytest.importorskip and `except ModuleNotFoundError` see it)
    raise ModuleNotFoundError('shoal.pettingzoo_env needs PettingZoo: pip install "shoal[pettingzoo]" '
                              '(or pip install pettingzoo)', name=e.name) from e

from shoal.envs import spec as env_spec
from shoal.pool import render
from shoal.pool.contract import check_reset_options
from shoal.pool.native import PoolClosedError, Serial
from shoal.single import box_action, one_env_info, rebuild


class ShoalParallelEnv(ParallelEnv):
    """Shoal env `env_name` as a pettingzoo ParallelEnv (module doc).

    Args:
        env_name: a first-party env ("Snake"; single-agent ones too, as one agent).
        render_mode: None, "rgb_array" or "ansi" where the env draws itself.
        **env_kwargs: the env's own keywords (MuJoCo's, Atari's).

    Pickling (SuperSuit's vector envs, copy.deepcopy) makes a fresh env
    from the same arguments: reset it before use.
    """

    def __init__(self, env_name: str = "cartpole", render_mode: str | None = None, **env_kwargs):
        spec = env_spec(env_name, **env_kwargs)
        render.check_render_mode(spec, render_mode)
        self._args = (env_name, render_mode, env_kwargs)
        self._pool = Serial(spec, 1, autoreset_mode=AutoresetMode.DISABLED)
        self.render_mode = render_mode
        self.metadata = {**render.env_metadata(spec), "name": f"shoal/{spec.name}",
                         "is_parallelizable": True}
        self.possible_agents = [f"agent_{k}" for k in range(spec.agents)]
        self.agents: list[str] = []
        self._reset_done = False
        self._index = {agent: k for k, agent in enumerate(self.possible_agents)}
        self._action_space = spec.single_action_space   # the one step() checks actions against
        # Each agent's own space objects, as pettingzoo's envs have: seeding
        # one agent's space (pettingzoo's seed tests do, agent by agent)
        # leaves the others' draws alone. Also pettingzoo's ParallelEnv
        # attributes (skrl's wrapper reads them).
        self.observation_spaces = {a: copy.deepcopy(spec.single_observation_space) for a in self.possible_agents}
        self.action_spaces = {a: copy.deepcopy(spec.single_action_space) for a in self.possible_agents}
        # pettingzoo's global state, for centralised critics (QMIX, MAPPO):
        # every agent row's observation, in agent order, flattened
        one = spec.single_observation_space
        self.state_space = Box(np.tile(one.low.reshape(-1), spec.agents), np.tile(one.high.reshape(-1), spec.agents),
                               dtype=one.dtype)
        self._actions = np.zeros(self._pool.action_space.shape, dtype=self._pool.buffers.actions.dtype)
        self._continuous = spec.continuous_action
        self._respawn = spec.agents_respawn
        # Library-backed envs (single-agent) report gymnasium's info, as SingleEnv.
        binding = spec.load_binding()
        self._info_of = getattr(binding, "info", None)
        self._info_dtypes = getattr(binding, "GYMNASIUM_INFO_DTYPES", {})

    def __reduce__(self):
        return rebuild, (type(self), *self._args)

    @property
    def np_random(self) -> np.random.Generator:
        """A generator for wrappers' own randomness (SuperSuit's frame_skip_v0
        draws from it), as pettingzoo's envs have: seeded by reset(seed=...),
        else from entropy on first use. The env's dynamics do not use it."""
        if getattr(self, "_np_random", None) is None:
            self._np_random, _ = seeding.np_random()
        return self._np_random

    @np_random.setter
    def np_random(self, value: np.random.Generator) -> None:
        self._np_random = value

    def observation_space(self, agent):
        self._check_agent(agent)
        return self.observation_spaces[agent]   # the same object at every call

    def action_space(self, agent):
        self._check_agent(agent)
        return self.action_spaces[agent]

    def _check_agent(self, agent) -> None:
        if agent not in self._index:
            raise KeyError(f"unknown agent {agent!r}; agents are {self.possible_agents}")

    def reset(self, seed: int | None = None, options: dict | None = None):
        if self._pool.closed:
            raise PoolClosedError("this ShoalParallelEnv is closed")
        check_reset_options(options, self._pool.spec)
        obs, info = self._pool.reset(seed=seed)
        if seed is not None:
            self._np_random, _ = seeding.np_random(seed)
        self._reset_done = True
        masks = self._pool.masks
        self.agents = [a for a in self.possible_agents if masks[self._index[a]]]
        infos = self._infos(info, self.agents)
        if self._respawn:
            for agent_info in infos.values():
                agent_info["respawned"] = False
        return {a: obs[self._index[a]].copy() for a in self.agents}, infos

    def _infos(self, env_info: dict, agents: list) -> dict:
        """Each agent's info: the env's own (library-backed envs: gymnasium's
        keys and types, as SingleEnv's), else {}."""
        one = one_env_info(env_info, self._info_dtypes)
        return {a: dict(one) for a in agents}

    def step(self, actions: dict):
        """pettingzoo's step: an action for every live agent (a missing one is
        an error; those of agents that left are ignored). After the episode
        ended (no live agents), the dicts are empty and nothing steps, as in
        pettingzoo's own parallel envs, which SuperSuit's black_death_v3
        steps once more before it resets."""
        if not self._reset_done:
            raise RuntimeError("step() before reset(): call reset() first")
        if self._pool.closed:
            raise PoolClosedError("this ShoalParallelEnv is closed")
        if not self.agents:
            return {}, {}, {}, {}, {}
        missing = [a for a in self.agents if a not in actions]
        if missing:
            raise ValueError(f"step() needs an action for every live agent; missing {missing}")
        unknown = [a for a in actions if a not in self._index]
        if unknown:
            raise ValueError(f"unknown agent {unknown[0]!r}; agents are {self.possible_agents}")
        self._actions[:] = 0  # rows of absent agents: ignored by the env
        for agent in self.agents:   # (those that left may send anything, None too: ignored)
            action = actions[agent]
            if self._continuous:
                # Box: any real dtype (the pool refuses NaN / inf; MuJoCo clamps the bounds)
                action = box_action(action, self._action_space, f"for {agent}")
            elif not self._action_space.contains(action):
                raise ValueError(f"action {action!r} for {agent} is not in {self._action_space}")
            self._actions[self._index[agent]] = action
        obs, rewards, terminals, truncations, _ = self._pool.step(self._actions)
        acted = self.agents
        observations = {a: obs[self._index[a]].copy() for a in acted}
        reward = {a: float(rewards[self._index[a]]) for a in acted}
        terminated = {a: bool(terminals[self._index[a]]) for a in acted}
        truncated = {a: bool(truncations[self._index[a]]) for a in acted}
        masks = self._pool.masks
        infos = self._infos({} if self._info_of is None else self._info_of(self._pool.env_states), acted)
        if self._respawn:
            for a in acted:
                # a death before the env's end: the row's new agent plays on
                respawned = terminated[a] and not truncated[a] and bool(masks[self._index[a]])
                infos[a]["respawned"] = respawned
                terminated[a] = terminated[a] and not respawned
        self.agents = [a for a in acted
                       if masks[self._index[a]] and not (terminated[a] or truncated[a])]
        return observations, reward, terminated, truncated, infos

    def state(self) -> np.ndarray:
        """The global state (state_space): every agent row's current
        observation, concatenated in agent order (an absent agent's row is
        zeros, as in the pools)."""
        if not self._reset_done:
            raise ResetNeeded("call reset() before state()")
        return self._pool.obs.reshape(-1).copy()

    def render(self):
        """An RGB frame ("rgb_array") or a text view ("ansi"); None without a render_mode."""
        return render.render(self._pool, self.render_mode)

    def close(self):
        self._pool.close()
