"""One first-party env as a plain `gymnasium.Env`.

Useful where a library wants a single env (wrappers, SyncVectorEnv, tests).
It is a Serial pool of one env with autoreset disabled, so it runs the same
C code as every pool and obeys the seed rule: reset(seed=s) here behaves
exactly like env i of a pool reset with seed s - i.
"""
from __future__ import annotations

import gymnasium
import numpy as np
from gymnasium.vector import AutoresetMode

from shoal.envs import spec as env_spec
from shoal.pool import render
from shoal.pool.contract import POOL_OWN_INFO_KEYS
from shoal.pool.native import Serial


class SingleEnv(gymnasium.Env):
    """A single copy of shoal env `env_name` (e.g. "CartPole")."""

    # What gymnasium.make checks before construction: every mode shoal can
    # draw. An instance narrows it to its env's (an env that does not draw
    # rejects a render_mode with a clear error).
    metadata = {"render_modes": ["rgb_array", "ansi"]}

    def __init__(self, env_name: str = "CartPole", render_mode: str | None = None, **env_kwargs):
        spec = env_spec(env_name, **env_kwargs)
        self._args = (env_name, render_mode, env_kwargs)
        if spec.agents != 1:
            raise ValueError(f"{spec.name} has {spec.agents} agents per env; use the pool or "
                             f"the pettingzoo view for multi-agent envs")
        render.check_render_mode(spec, render_mode)
        self._pool = Serial(spec, 1, autoreset_mode=AutoresetMode.DISABLED)
        self.metadata = render.env_metadata(spec)
        self.observation_space = spec.single_observation_space
        self.action_space = spec.single_action_space
        self._discrete_n = (int(self.action_space.n) if isinstance(self.action_space, gymnasium.spaces.Discrete)
                            and self.action_space.start == 0 else None)
        self.render_mode = render_mode
        self._action = np.zeros(self._pool.action_space.shape, dtype=self._pool.buffers.actions.dtype)
        # Library-backed envs report gymnasium's step and reset info (reward
        # terms, positions, lives) from their shared state; header envs have none.
        self._binding = spec.load_binding()
        self._info_of = getattr(self._binding, "info", None)

    def __reduce__(self):
        """Pickling (cloudpickle in SuperSuit or SubprocVecEnv, copy.deepcopy)
        makes a fresh env from the same arguments (its state is a C struct
        in a pool): reset it before use."""
        return rebuild, (type(self), *self._args), {"spec": self.spec}   # gymnasium.make's spec

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        obs, info = self._pool.reset(seed=seed)
        return obs[0].copy(), one_env_info(info)

    def step(self, action):
        if self.spec_continuous:
            # gymnasium's MuJoCo envs take out-of-bounds actions (the physics
            # clamps them); the pool refuses NaN / inf.
            action = np.asarray(action, dtype=np.float32)
            if action.shape != self.action_space.shape:
                raise ValueError(f"action of shape {action.shape} is not in {self.action_space}")
        elif self._discrete_n is not None and isinstance(action, (int, np.integer)):
            # the common case, checked without Discrete.contains (a quarter of a step)
            if not 0 <= action < self._discrete_n:
                raise ValueError(f"action {action!r} is not in {self.action_space}")
        elif not self.action_space.contains(action):
            raise ValueError(f"action {action!r} is not in {self.action_space}")
        self._action[0] = action
        obs, rewards, terminals, truncations, _ = self._pool.step(self._action)
        info = {} if self._info_of is None else one_env_info(self._info_of(self._pool.env_states))
        return obs[0].copy(), float(rewards[0]), bool(terminals[0]), bool(truncations[0]), info

    def get_action_meanings(self) -> list[str]:
        """Atari envs: each action's name, as ale-py's AtariEnv gives them
        ("NOOP", "FIRE", ...; SB3's AtariWrapper and CleanRL's FireReset
        read them). Other envs have none: AttributeError."""
        action_set = getattr(self._binding, "action_set", None)
        if action_set is None:
            raise AttributeError(f"{self._pool.spec.name} has no action meanings (Atari envs have them)")
        return [action.name for action in action_set]

    @property
    def spec_continuous(self) -> bool:
        return self._pool.spec.continuous_action

    def render(self):
        """An RGB frame ("rgb_array") or a text view ("ansi"); None without a render_mode."""
        return render.render(self._pool, self.render_mode)

    def close(self):
        self._pool.close()
        super().close()


def one_env_info(info: dict) -> dict:
    """A one-env pool's per-env info arrays -> that env's scalars, as
    gymnasium's envs give them: Python ints for Atari's counters (ale-py's),
    numpy float64 for MuJoCo's values (gymnasium's MuJoCo envs'). The pool's
    own keys ("env_id", "elapsed_step") are not the env's."""
    return {key: values[0] if values.dtype.kind == "f" else values[0].item()
            for key, values in info.items() if key not in POOL_OWN_INFO_KEYS}


def rebuild(cls, env_name: str, render_mode, env_kwargs: dict):
    """Unpickling of an env over a one-env pool (SingleEnv, ShoalParallelEnv):
    a fresh env of the same arguments."""
    return cls(env_name, render_mode=render_mode, **env_kwargs)
