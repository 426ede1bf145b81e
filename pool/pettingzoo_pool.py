"""pettingzoo: pool any ParallelEnv, one row per agent.

    from shoal.pool import ParallelEnvPool
    pool = ParallelEnvPool([lambda: simple_tag_v3.parallel_env()] * 8)
    obs, info = pool.reset(seed=0)                  # obs: (8 * 4 agents, 16)
    obs, rewards, terminals, truncations, info = pool.step(actions)
    live = pool.masks                                # (32,) bool, per row

Rows: env e, agent k (its index in possible_agents) is row e * A + k. A row
whose agent is absent (not yet spawned, or gone after it terminated or
truncated) has mask False and obs, reward and flags zero; its action is
ignored. On the step an agent leaves, its row still carries that step's
obs, reward and flag with mask True (zeros for the obs if the env gave it
none, which pettingzoo's spec asks for but its parallel_api_test only
warns about).

Agents and spaces: every env has the same possible_agents, in the same
order (checked). Every agent's action space must be the same (SuperSuit's
pad_action_space_v0 pads ones that differ). Observation spaces must be the
same too, except Boxes of one dtype and rank, which are zero-padded to the
largest shape (mpe's simple_tag: 16 vs 14 features), and have a fixed
layout (Box, Discrete, MultiDiscrete, MultiBinary, Dict / Tuple of them).

Episodes: an env's episode ends when it has no agents left; with NEXT_STEP
(default) the next step resets it (rewards zero, flags false), as
gymnasium's vector envs do.

How: each ParallelEnv is wrapped as a gymnasium Env whose observation holds
all of its agent rows (obs, mask, reward, flags); shoal's AsyncVectorEnv
then runs blocks of them in worker processes over shared memory, with its
fault handling, and this pool hands out (envs * agents)-row views.
"""
from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import gymnasium
import numpy as np
from gymnasium import spaces
from gymnasium.vector import AutoresetMode
from gymnasium.vector.utils import batch_space, create_empty_array

from shoal.pool.native import parse_autoreset_mode
from shoal.pool.python_pool import AsyncVectorEnv
from shoal.pool.spaces import check_shareable, copy_arrays, row_writer


def padded_space(by_agent: dict[str, spaces.Space], what: str) -> spaces.Space:
    """One space for all agents: the common space, or (observations only)
    Boxes of one dtype and rank padded to the largest shape."""
    unique = list({id(s): s for s in by_agent.values()}.values())
    if all(s == unique[0] for s in unique):
        return unique[0]
    boxes = all(isinstance(s, spaces.Box) for s in unique)
    if what == "observation" and boxes and len({(s.dtype, len(s.shape)) for s in unique}) == 1:
        shape = tuple(int(d) for d in np.max([s.shape for s in unique], axis=0))
        low = np.zeros(shape, dtype=unique[0].dtype)
        high = np.zeros(shape, dtype=unique[0].dtype)
        for s in unique:
            region = tuple(slice(0, d) for d in s.shape)
            low[region] = np.minimum(low[region], s.low)
            high[region] = np.maximum(high[region], s.high)
        return spaces.Box(low, high, dtype=unique[0].dtype)
    listing = ", ".join(f"{agent}: {space}" for agent, space in by_agent.items())
    rule = ("only Box observation spaces of one dtype and rank can be padded"
            if what == "observation" else "action spaces must be equal; SuperSuit's pad_action_space_v0 "
                                          "pads them to one")
    raise ValueError(f"the agents' {what} spaces differ and cannot be pooled as rows ({rule}): {listing}")


class AgentRows(gymnasium.Env):
    """A ParallelEnv seen as one gymnasium Env whose observation is all of
    its agent rows: {"obs", "mask", "reward", "terminated", "truncated"},
    each with a leading axis of len(possible_agents). The action is the
    batch of per-agent actions, one row per possible agent.

    The env-level episode ends when no agent is left: terminated, or
    truncated if any agent left truncated on that step.
    """

    def __init__(self, parallel_env_fn: Callable[[], Any]):
        self.parallel_env = parallel_env_fn()
        env = self.parallel_env
        self.agents = list(env.possible_agents)
        self.index = {agent: k for k, agent in enumerate(self.agents)}
        count = len(self.agents)
        self.agent_observation_space = padded_space(
            {a: env.observation_space(a) for a in self.agents}, "observation")
        self.agent_action_space = padded_space({a: env.action_space(a) for a in self.agents}, "action")
        try:   # the rows are written into arrays
            check_shareable(self.agent_observation_space)
        except gymnasium.error.CustomSpaceError as e:
            raise ValueError(f"the agents' observation space {self.agent_observation_space} cannot be "
                             f"pooled as rows: {e}") from None
        self.observation_space = spaces.Dict({
            "obs": batch_space(self.agent_observation_space, count),
            "mask": spaces.MultiBinary(count),
            "reward": spaces.Box(-np.inf, np.inf, (count,), np.float64),
            "terminated": spaces.MultiBinary(count),
            "truncated": spaces.MultiBinary(count),
        })
        self.action_space = batch_space(self.agent_action_space, count)
        self.metadata = dict(getattr(env, "metadata", {}))
        self.render_mode = getattr(env, "render_mode", None)
        self._rows = {key: create_empty_array(space, n=1, fn=np.zeros)[0] if key != "obs"
                      else create_empty_array(self.agent_observation_space, n=count, fn=np.zeros)
                      for key, space in self.observation_space.spaces.items()}
        self._write_obs = self._obs_writer()

    def _obs_writer(self) -> Callable[[int, Any], None]:
        space, rows = self.agent_observation_space, self._rows["obs"]
        if isinstance(space, spaces.Box):
            # each agent's obs has its own space's shape (not broadcast), in the padded row's corner
            shapes = [self.parallel_env.observation_space(agent).shape for agent in self.agents]
            regions = [(k,) + tuple(slice(0, d) for d in shape) for k, shape in enumerate(shapes)]

            def write_padded(k, value):
                value = np.asarray(value)
                if value.shape != shapes[k]:
                    raise ValueError(f"agent {self.agents[k]!r}'s observation has shape {value.shape}, "
                                     f"its observation space's is {shapes[k]}")
                rows[regions[k]] = value
            return write_padded
        return row_writer(space, rows)

    def _clear(self) -> None:
        _zero(self._rows["obs"])
        for key in ("mask", "reward", "terminated", "truncated"):
            self._rows[key][:] = 0

    def _observation(self) -> dict:
        return {key: copy_arrays(value) for key, value in self._rows.items()}

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        observations, infos = self.parallel_env.reset(seed=seed, options=options)
        self._clear()
        for agent, obs in observations.items():
            k = self.index[agent]
            self._write_obs(k, obs)
            self._rows["mask"][k] = 1
        return self._observation(), {a: i for a, i in infos.items() if i}

    def step(self, action):
        env = self.parallel_env
        actions = {agent: _row(action, self.index[agent]) for agent in env.agents}
        observations, rewards, terminations, truncations, infos = env.step(actions)
        self._clear()
        rows = self._rows
        for agent, obs in observations.items():
            self._write_obs(self.index[agent], obs)
        # An agent that stepped holds the step's reward and flags also when the
        # env left it out of `observations` (off pettingzoo's spec, which
        # parallel_api_test only warns about; its obs row is then zeros):
        # dropped, a learner would never see that agent's episode end.
        stepped = [a for a in actions if a not in observations
                   and (a in rewards or a in terminations or a in truncations)]
        for agent in [*observations, *stepped]:
            k = self.index[agent]
            rows["mask"][k] = 1
            rows["reward"][k] = rewards.get(agent, 0.0)
            rows["terminated"][k] = bool(terminations.get(agent, False))
            rows["truncated"][k] = bool(truncations.get(agent, False))
        done = not env.agents
        truncated = done and bool(rows["truncated"].any())
        terminated = done and not truncated
        total = float(sum(rewards.values()))
        return self._observation(), total, terminated, truncated, {a: i for a, i in infos.items() if i}

    def render(self):
        return self.parallel_env.render()

    def close(self):
        self.parallel_env.close()


def _row(batch, k):
    if isinstance(batch, dict):
        return {key: _row(value, k) for key, value in batch.items()}
    if isinstance(batch, tuple):
        return tuple(_row(value, k) for value in batch)
    return batch[k]


def _zero(batch) -> None:
    if isinstance(batch, dict):
        for value in batch.values():
            _zero(value)
    elif isinstance(batch, tuple):
        for value in batch:
            _zero(value)
    else:
        batch[...] = 0


def _merge_leading(batch, rows: int):
    """(envs, agents, ...) -> (envs * agents, ...) for every leaf (views)."""
    if isinstance(batch, dict):
        return {key: _merge_leading(value, rows) for key, value in batch.items()}
    if isinstance(batch, tuple):
        return tuple(_merge_leading(value, rows) for value in batch)
    return batch.reshape((rows,) + batch.shape[2:])


def _split_leading(batch, envs: int, agents: int):
    """(envs * agents, ...) -> (envs, agents, ...) for every leaf."""
    if isinstance(batch, dict):
        return {key: _split_leading(value, envs, agents) for key, value in batch.items()}
    if isinstance(batch, tuple):
        return tuple(_split_leading(value, envs, agents) for value in batch)
    array = np.asarray(batch)
    if array.shape[:1] != (envs * agents,):
        raise ValueError(f"actions must have {envs * agents} rows ({envs} envs x {agents} agents), "
                         f"got shape {array.shape}")
    return array.reshape((envs, agents) + array.shape[1:])


class ParallelEnvPool:
    """A pool of pettingzoo ParallelEnvs with one row per (env, agent); see
    the module doc for rows, masks, padding and episodes.

    Args:
        env_fns: functions that create the ParallelEnvs (same agents each).
        num_workers, context, daemon, shared_memory, max_concurrency: as
            shoal.pool.AsyncVectorEnv, which runs the envs.
        autoreset_mode: NEXT_STEP (default) or DISABLED (reset finished envs
            yourself with reset(options={"reset_mask": ...}) over envs), as
            the enum or its name ("next_step", "disabled").
        copy: return copies (default) or views overwritten by the next step.
    """

    def __init__(self, env_fns: Sequence[Callable[[], Any]], *, num_workers: int | None = None,
                 autoreset_mode=AutoresetMode.NEXT_STEP, copy: bool = True, **vector_kwargs):
        mode = parse_autoreset_mode(autoreset_mode)  # the enum or a name ("next_step", "disabled")
        if mode == AutoresetMode.SAME_STEP:
            raise ValueError(f"ParallelEnvPool supports NEXT_STEP and DISABLED autoreset; SAME_STEP "
                             f"(autoreset_mode={autoreset_mode!r}) would overwrite the rows of agents "
                             f"that just finished")
        self.copy = copy
        try:
            self.vector_env = AsyncVectorEnv([functools.partial(AgentRows, fn) for fn in env_fns],
                                             copy=False, autoreset_mode=mode, num_workers=num_workers,
                                             **vector_kwargs)
        except RuntimeError as e:
            if "space" not in str(e):
                raise
            # the vector env's words are about its sub-envs' spaces; here those are the agents' rows
            raise ValueError("the envs' rows differ: every env of a ParallelEnvPool needs the same "
                             "possible_agents (as many, in the same order) with the same spaces") from e
        inner = self.vector_env.single_observation_space
        self.num_envs = self.vector_env.num_envs
        self.num_agents = int(inner["mask"].shape[0])
        self.num_rows = self.num_envs * self.num_agents
        agents_by_env = self.vector_env.get_attr("agents")
        self.possible_agents = list(agents_by_env[0])
        for e, agents in enumerate(agents_by_env):
            if list(agents) != self.possible_agents:
                self.vector_env.close()
                raise ValueError(f"env {e}'s possible_agents {list(agents)} differ from env 0's "
                                 f"{self.possible_agents}: a row is one agent of one env, so every env "
                                 f"of the pool needs the same agents, in the same order")
        self.single_observation_space = self.vector_env.get_attr("agent_observation_space")[0]
        self.single_action_space = self.vector_env.get_attr("agent_action_space")[0]
        self.observation_space = batch_space(self.single_observation_space, self.num_rows)
        self.action_space = batch_space(self.single_action_space, self.num_rows)
        self.metadata = dict(self.vector_env.metadata)
        self.render_mode = self.vector_env.render_mode
        self.autoreset_mode = mode
        self._masks = np.zeros(self.num_rows, dtype=np.bool_)

    @property
    def masks(self) -> np.ndarray:
        """Per row: the agent is present (as of the last reset or step; an
        array the next call rewrites: info["mask"] is this call's)."""
        self._check_open()
        return self._masks

    @property
    def closed(self) -> bool:
        return self.vector_env.closed

    def _rows(self, observation: dict):
        rows = self.num_rows
        obs = _merge_leading(observation["obs"], rows)
        np.not_equal(observation["mask"].reshape(rows), 0, out=self._masks)
        reward = observation["reward"].reshape(rows)
        terminated = observation["terminated"].reshape(rows).astype(np.bool_)
        truncated = observation["truncated"].reshape(rows).astype(np.bool_)
        if self.copy:
            obs, reward = copy_arrays(obs), reward.copy()
        return obs, reward, terminated, truncated

    def _info(self, infos: dict) -> dict:
        infos = dict(infos)
        infos["mask"] = self._masks.copy() if self.copy else self._masks
        return infos

    def reset(self, *, seed: int | list | None = None, options: dict | None = None):
        """Reset envs (env e gets seed + e for an int seed); (obs rows, info).
        info["mask"]: rows with an agent present; info[agent]: that agent's
        infos over envs, gymnasium-style with "_" masks."""
        self.reset_async(seed=seed, options=options)
        return self.reset_wait()

    def step(self, actions):
        """Step every env with one action row per (env, agent) row; rows of
        absent agents are ignored. Returns (obs, rewards, terminals,
        truncations, info) per row; info["mask"] as in reset."""
        self.step_async(actions)
        return self.step_wait()

    # gymnasium's async halves, with their timeouts: a late or stuck env is a
    # multiprocessing.TimeoutError and the pool stays usable (shoal.pool.AsyncVectorEnv's faults)

    def _check_open(self) -> None:
        if self.closed:   # (the vector env's own error would name AsyncVectorEnv)
            raise gymnasium.error.ClosedEnvironmentError(
                "this ParallelEnvPool is closed (by close(), or by a worker's failure)")

    def __reduce__(self):
        raise TypeError("ParallelEnvPool cannot be pickled or copied (it owns worker processes and "
                        "shared memory): create one in each process instead")

    def reset_async(self, *, seed: int | list | None = None, options: dict | None = None) -> None:
        self._check_open()
        self.vector_env.reset_async(seed=seed, options=options)

    def reset_wait(self, timeout: float | None = None):
        self._check_open()
        observation, infos = self.vector_env.reset_wait(timeout=timeout)
        obs, *_ = self._rows(observation)
        return obs, self._info(infos)

    def step_async(self, actions) -> None:
        self._check_open()
        self.vector_env.step_async(_split_leading(actions, self.num_envs, self.num_agents))

    def step_wait(self, timeout: float | None = None):
        self._check_open()
        observation, _, _, _, infos = self.vector_env.step_wait(timeout=timeout)
        obs, reward, terminated, truncated = self._rows(observation)
        return obs, reward, terminated, truncated, self._info(infos)

    def render(self):
        self._check_open()
        return self.vector_env.render()

    def close(self, **kwargs) -> None:
        """Close envs and workers; safe to call twice."""
        self.vector_env.close(**kwargs)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self):
        return (f"ParallelEnvPool(num_envs={self.num_envs}, agents={self.num_agents}, "
                f"rows={self.num_rows})")
