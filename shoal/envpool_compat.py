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

`make` / `make_gymnasium` take EnvPool's task ids, arguments and defaults
for the tasks shoal has (`list_all_envs()`), so that EnvPool code runs
with one import changed:

    import shoal.envpool_compat as envpool
    envs = envpool.make_gymnasium("Pong-v5", num_envs=16, batch_size=8, num_threads=2,
                                  episodic_life=True, reward_clip=True)
"""
from __future__ import annotations

import re

import numpy as np

from shoal.pool.contract import parse_reset_mask
from shoal.single import ATARI_BINDING, MUJOCO_BINDING

# EnvPool's Atari v5 defaults where they differ from shoal's (gymnasium's
# v5 stack): fire start, no sticky actions, a 27,000-step limit (108,000
# frames), RGB stacks channel-first.
ENVPOOL_ATARI_DEFAULTS = {"use_fire_reset": True, "repeat_action_probability": 0.0,
                          "max_episode_steps": 27_000, "channels_first": True}
# EnvPool's options that shoal takes only at the value that changes nothing.
_ATARI_FIXED = {"zero_discount_on_life_loss": (False, "shoal has no info['discount']; "
                                                      "terminal_on_life_loss=True ends the episode instead"),
                "use_inter_area_resize": (True, "shoal always resizes with INTER_AREA")}
_MUJOCO_FIXED = {"frame_stack": (1, "stack observations in the learner"),
                 "gymnasium_v5_render_camera": (True, "shoal renders gymnasium v5's camera")}
_POOL_FIXED = {"thread_affinity_offset": (-1, "shoal's workers are processes and are not pinned"),
               "max_num_players": (1, "shoal's EnvPool tasks are single-player")}


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


def _first_party_specs() -> dict:
    from shoal import envs
    return {name: envs.spec(name) for name in envs.names()}


def list_all_envs() -> list[str]:
    """The EnvPool task ids `make` serves: CartPole-v0 / -v1, the Atari
    games as "<Game>-v5", the MuJoCo envs as "<Env>-v5" (gymnasium v5's)."""
    ids = ["CartPole-v0", "CartPole-v1"]
    for name, spec in _first_party_specs().items():
        if spec.binding in (ATARI_BINDING, MUJOCO_BINDING):
            ids.append(f"{name}-v5")
    return ids


def _resolve(task_id: str):
    """(shoal env name, default max_episode_steps, family) of an EnvPool task id."""
    match = re.fullmatch(r"(.+)-v(\d+)", str(task_id))
    by_lower = {name.lower(): (name, spec) for name, spec in _first_party_specs().items()}
    name, spec = by_lower.get(match.group(1).lower(), (None, None)) if match else (None, None)
    if name is None or (name != "CartPole" and spec.binding not in (ATARI_BINDING, MUJOCO_BINDING)):
        raise ValueError(f"EnvPool task {task_id!r} is not one shoal has; shoal.envpool_compat.list_all_envs() "
                         f"lists those it has (CartPole-v0/-v1, Atari '<Game>-v5', MuJoCo '<Env>-v5'); "
                         f"shoal's own envs (Snake, Drive, Explorer) are made with shoal.make")
    version = int(match.group(2))
    if name == "CartPole" and version in (0, 1):
        return name, 200 if version == 0 else 500, "classic"
    if spec.binding == ATARI_BINDING and version == 5:
        return name, ENVPOOL_ATARI_DEFAULTS["max_episode_steps"], "atari"
    if spec.binding == MUJOCO_BINDING and version == 5:
        return name, spec.max_episode_steps, "mujoco"
    raise ValueError(f"EnvPool task {task_id!r}: shoal has {name} as {name}-v"
                     f"{5 if name != 'CartPole' else '1'} only (MuJoCo: gymnasium v5's semantics; "
                     f"EnvPool's v3 / v4 differ from it)")


def _take_fixed(options: dict, fixed: dict, task_id: str) -> None:
    for key, (value, why) in fixed.items():
        if key in options and options.pop(key) != value:
            raise ValueError(f"{task_id}: {key} can only be {value!r} in shoal ({why})")


def make(task_id: str, env_type: str = "gymnasium", **kwargs) -> EnvPoolCompat:
    """envpool.make for the tasks shoal has (list_all_envs()): EnvPool's
    task id, arguments (num_envs, batch_size, num_threads, seed,
    max_episode_steps and the task's options) and defaults (seed 42;
    batch_size 0 or num_threads 0 for shoal's own choice; Atari's v5
    defaults: fire start, no sticky actions, 27,000 steps, EnvPool's
    channel-first RGB), made as a shoal pool and returned in an
    EnvPoolCompat (copies, one env's spaces, reset_mask, config).

    Differences that stay: num_threads are worker processes; shoal's async
    batches come back in a fixed order; only the gymnasium API exists.
    """
    import shoal
    if env_type != "gymnasium":
        raise ValueError(f"env_type={env_type!r}: shoal has gymnasium's API only (EnvPool's "
                         f"env_type='gymnasium'; make_gymnasium)")
    name, default_limit, family = _resolve(task_id)
    options = dict(kwargs)
    num_envs = options.pop("num_envs", 1)
    batch_size = options.pop("batch_size", 0) or None
    num_threads = options.pop("num_threads", 0) or None
    seed = options.pop("seed", 42)   # EnvPool's default
    _take_fixed(options, _POOL_FIXED, task_id)
    options.setdefault("max_episode_steps", default_limit)
    if family == "atari":
        _take_fixed(options, _ATARI_FIXED, task_id)
        if "frame_skip" in options:
            options["frameskip"] = options.pop("frame_skip")
        for key, value in ENVPOOL_ATARI_DEFAULTS.items():
            options.setdefault(key, value)
    elif family == "mujoco":
        _take_fixed(options, _MUJOCO_FIXED, task_id)
    pool = shoal.make(name, num_envs, num_workers=num_threads, batch_size=batch_size, seed=seed,
                      env_kwargs=options)
    return EnvPoolCompat(pool)


def make_gymnasium(task_id: str, **kwargs) -> EnvPoolCompat:
    """envpool.make_gymnasium: make(task_id, env_type="gymnasium", ...)."""
    return make(task_id, env_type="gymnasium", **kwargs)
