"""A native pool with EnvPool's conventions, for code written for EnvPool.

    from shoal.envpool_compat import EnvPoolCompat
    envs = EnvPoolCompat(shoal.make("CartPole", 8))   # for envpool.make_gymnasium("CartPole-v1", num_envs=8)

Three conventions differ between a shoal pool and EnvPool; this view gives
EnvPool's and passes everything else to the pool (send, async_reset, close,
len, is_async, ...):

- Spaces. A shoal pool follows gymnasium's vector convention:
  `observation_space` and `action_space` are the batch's, one env's are
  `single_observation_space` / `single_action_space`. EnvPool's are one
  env's, and code written for it reads them as such: Tianshou's collector
  samples its random actions (the warm-up of DQN, SAC, TD3) from
  `env.action_space` one env at a time; over the batch space it draws the
  same action for every env (gymnasium's MultiDiscrete indexing copies the
  RNG state) or a batch per env (Box).
- Ownership. A pool's step() / recv() / reset() return views of its shared
  buffers, which the next call overwrites: the fast path for a learner that
  copies each batch to its device at once. EnvPool returns new arrays every
  call, and code written for it keeps them (a list of the last steps'
  obs, Sebulba-style async collection). This view returns copies
  (copy=False: the views, as the pool's).
- Partial resets by mask. reset(options={"reset_mask": m}) returns the
  masked envs' rows only, with their info["env_id"], as EnvPool's does
  (the pool itself follows gymnasium: every row). An empty mask and other
  options are errors, as there. reset(env_id) is the pool's, the same in
  both.

It also has EnvPool's `config`: the pool's settings under EnvPool's names
(num_envs, batch_size, num_threads, seed, max_episode_steps) and the env's
options.
"""
from __future__ import annotations

import numpy as np

from shoal.pool.contract import parse_reset_mask


def _owned(value):
    """`value` with every array in it copied (dicts of arrays: info, final_info)."""
    if isinstance(value, np.ndarray):
        return value.copy()
    if isinstance(value, dict):
        return {key: _owned(v) for key, v in value.items()}
    return value


class EnvPoolCompat:
    """`pool` with EnvPool's conventions: observation_space / action_space
    are one env's; step(), recv() and reset() return arrays of the caller's
    own (copy=True) and reset's reset_mask selects rows; every other
    attribute and call is the pool's."""

    def __init__(self, pool, copy: bool = True):
        self.pool = pool
        self.copy = copy
        self.observation_space = pool.single_observation_space
        self.action_space = pool.single_action_space

    def __getattr__(self, name: str):
        # only for what this class does not define: the pool's own (none
        # before __init__ ran, as in copy.copy)
        pool = self.__dict__.get("pool")
        if pool is None:
            raise AttributeError(name)
        return getattr(pool, name)

    def _result(self, result: tuple) -> tuple:
        return tuple(_owned(part) for part in result) if self.copy else result

    def step(self, actions, env_id=None):
        """The pool's step (env_id: EnvPool's, see NativePool.step)."""
        return self._result(self.pool.step(actions, env_id))

    def recv(self):
        """The pool's recv: the next batch."""
        return self._result(self.pool.recv())

    def reset(self, env_id=None, *, seed=None, options: dict | None = None):
        """The pool's reset, except that options["reset_mask"] returns the
        masked envs' rows only (EnvPool's); options may hold nothing else,
        and the mask must select at least one env."""
        if options and set(options) != {"reset_mask"}:
            raise ValueError(f"reset options: only 'reset_mask' is taken (EnvPool's rule), got "
                             f"{sorted(options)}")
        if options and options["reset_mask"] is not None:   # (None: every env, as EnvPool's)
            if env_id is not None:
                raise ValueError("reset() takes env_id or options['reset_mask'], not both")
            # EnvPool casts the mask to bool (0/1 integers are a mask too)
            mask = parse_reset_mask({"reset_mask": np.asarray(options["reset_mask"]).astype(np.bool_)},
                                    self.pool.num_envs)
            if not mask.any():
                raise ValueError("options['reset_mask'] selects no env: at least one must be True")
            env_id = np.flatnonzero(mask)
        options = None
        return self._result(self.pool.reset(env_id, seed=seed, options=options))

    @property
    def config(self) -> dict:
        """EnvPool's `envs.config`: the pool's settings under EnvPool's names
        (num_threads: the worker processes; 0 for a Serial pool, which has
        none), then the env's own options."""
        from shoal.pool import Serial
        pool = self.pool
        workers = 0 if isinstance(pool, Serial) else pool.num_workers
        return {"num_envs": pool.num_envs, "batch_size": pool.batch_size, "num_threads": workers,
                "seed": pool._construction_seed.seed, "max_episode_steps": pool.spec.max_episode_steps,
                **pool.spec.env_kwargs}

    def __len__(self) -> int:
        return len(self.pool)

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.pool.close()

    def __repr__(self) -> str:
        return f"EnvPoolCompat({self.pool!r}{'' if self.copy else ', copy=False'})"
