"""shoal's native pools as an exact `gymnasium.vector.VectorEnv`.

    envs = NativeVectorEnv("CartPole", num_envs=64, autoreset_mode="same_step")
    obs, infos = envs.reset(seed=0)
    obs, rewards, terminations, truncations, infos = envs.step(envs.action_space.sample())

or, once `import shoal` has registered the ids,

    envs = gymnasium.make_vec("shoal/CartPole-v0", num_envs=64)   # this class

Every result equals, step by step, what `gymnasium.vector.SyncVectorEnv`
returns over the same number of `gymnasium.make("shoal/CartPole-v0")` envs
with the same seeds and actions:

- obs are copies (Sync's default copy=True; `copy=False` returns the pool's
  obs buffer itself, overwritten by the next step); rewards are float64,
  terminations / truncations bool, all fresh arrays.
- seeds: None continues each env's RNG, an int s seeds env i with s + i, a
  list gives one seed (or None) per env; options["reset_mask"] resets only
  the masked envs and is validated, and popped from `options`, as Sync does.
- infos: header envs report no info of their own: {} in NEXT_STEP and
  DISABLED. Library-backed envs (Atari, MuJoCo) report gymnasium's step-info
  keys ("lives", "frame_number"...; "reward_forward", "x_position"...) as
  float64 arrays with their "_" masks, false (and the value 0) where the
  step was an autoreset, whose reset info is empty. In SAME_STEP, on a step
  where some envs ended, "final_obs" (object array: None, or that env's
  last obs), "final_info" (the ended steps' info, in the same form; {} for
  header envs), and their masks "_final_obs", "_final_info"; nothing of the
  kind on steps where no env ended.

One difference from Sync, shared with gymnasium's AsyncVectorEnv: in
DISABLED mode, stepping an env whose episode ended without resetting it is
not an error (Sync raises an AssertionError); the env steps on as its C
code says. Reset ended envs with options={"reset_mask": ...}.
"""
from __future__ import annotations

from copy import deepcopy
from typing import Any

import numpy as np
from gymnasium.error import ClosedEnvironmentError, ResetNeeded
from gymnasium.vector import AutoresetMode, VectorEnv

from shoal.pool.gym_compat import validate_reset_mask
from shoal.pool import render
from shoal.pool.contract import check_reset_options, construction_seed, game_info_keys
from shoal.envs import spec as lookup_spec
from shoal.pool.native import Multiprocessing, NativePool, Serial, parse_autoreset_mode, split_env_kwargs

_BACKENDS: dict[str, type[NativePool]] = {"serial": Serial, "multiprocessing": Multiprocessing}


class NativeVectorEnv(VectorEnv):
    """`num_envs` copies of first-party env `env` stepped by a native pool.

    Args:
        env: a first-party env name ("CartPole", case-insensitive).
        num_envs: number of envs. A multi-agent env's agent rows are the
            vector env's sub-envs: its num_envs is then envs x agents, and
            infos["mask"] says which rows hold a present agent (see reset).
        backend: "multiprocessing" (worker processes, shared memory) or
            "serial" (in this process).
        autoreset_mode: a gymnasium AutoresetMode or its string value.
            Envs whose agents respawn within the step that ends their
            episode (Snake): under NEXT_STEP the step after a death is the
            new agent's real step, not a reset step, so gymnasium's
            RecordEpisodeStatistics cuts each life a step short; SAME_STEP
            counts them exactly (but gymnasium's vector observation
            wrappers take only NEXT_STEP or DISABLED).
        render_mode: None, "rgb_array" or "ansi" where the env draws itself.
        max_episode_steps: None (the env's own limit, CartPole: 500) or a
            step limit, as gymnasium's TimeLimit: a header env's may only
            be shorter than its header's (the pool's vector loop truncates
            there); MuJoCo and Atari envs take any.
        **kwargs: the pool's (num_workers, seed, context, ...: see
            NativePool) and, any other, the env's own (MuJoCo envs:
            gymnasium's, e.g. ctrl_cost_weight=0.2).
        copy: default for step()/reset(): return copies of the obs (True,
            gymnasium's default) or the pool's obs buffer (False, faster).
            batch_size is not accepted: a VectorEnv steps all envs at once.
    """

    def __init__(self, env: str = "cartpole", num_envs: int = 1, *,
                 backend: str = "multiprocessing",
                 autoreset_mode: AutoresetMode | str = AutoresetMode.NEXT_STEP,
                 render_mode: str | None = None, max_episode_steps: int | None = None,
                 copy: bool = True, **pool_kwargs: Any):
        self._pool = None  # close() works even if construction fails below
        if backend not in _BACKENDS:
            raise ValueError(f"unknown backend {backend!r}; expected one of {sorted(_BACKENDS)}")
        if "batch_size" in pool_kwargs:
            raise TypeError("NativeVectorEnv steps all envs together: batch_size is not accepted "
                            "(use the pool's send/recv for batched async stepping)")
        autoreset_mode = parse_autoreset_mode(autoreset_mode)
        pool_kwargs, env_kwargs = split_env_kwargs(pool_kwargs)
        spec = lookup_spec(env) if isinstance(env, str) else env
        if max_episode_steps is not None and ("max_episode_steps" in spec.env_kwargs
                                              or spec.kind == "header"):
            env_kwargs["max_episode_steps"] = max_episode_steps
        env = spec.configure(**env_kwargs)
        render.check_render_mode(env, render_mode, backend)   # before any worker starts
        # None drawn here (and a list's None entries) rather than in the
        # pool, so that np_random_seed can report them.
        seed = construction_seed(pool_kwargs.pop("seed", None))
        pool = _BACKENDS[backend](env, num_envs, autoreset_mode=autoreset_mode, seed=seed,
                                  **pool_kwargs)
        try:
            self._check_supported(pool, max_episode_steps)
        except BaseException:
            pool.close()
            raise
        self._pool = pool
        # Multi-agent envs: every agent row is a sub-env (as PufferLib does),
        # so num_envs counts rows; infos["mask"] says which rows are present.
        self.agents_per_env = pool.spec.agents
        self.num_envs = pool.num_rows
        self.autoreset_mode = autoreset_mode
        self.copy = copy
        self.render_mode = render_mode
        # Like SyncVectorEnv: the single env's metadata plus the autoreset mode.
        self.metadata = {**render.env_metadata(pool.spec), "autoreset_mode": autoreset_mode}
        # This env's own copies, as SyncVectorEnv's: a script that edits one
        # (CleanRL's `single_observation_space.dtype = np.float32`) changes
        # neither the pool's nor the batched spaces built from the pool's.
        self.single_observation_space = deepcopy(pool.single_observation_space)
        self.single_action_space = deepcopy(pool.single_action_space)
        # observation_space / action_space: the pool's, built on first read (properties below)
        # (the pool checked the seed: an int, or a list of one int per env)
        self._env_seeds = [int(seed) + i // self.agents_per_env if isinstance(seed, (int, np.integer))
                           else int(seed[i // self.agents_per_env]) for i in range(self.num_envs)]
        self._reset_done = False
        # Library-backed envs' step info: the keys of gymnasium's (a pool's
        # may add others: Atari's EnvPool keys), and in NEXT_STEP which envs
        # this step resets instead of stepping.
        binding = pool.spec.load_binding()
        info_of = getattr(binding, "info", None)
        self._gym_info_keys = frozenset(info_of(pool.env_states)) if info_of is not None else frozenset()
        self._gym_info_keys |= frozenset(game_info_keys(pool.spec))   # (Atari's, as SingleEnv's)
        # ... and those gymnasium's env also gives at reset (MuJoCo: positions)
        self._reset_info_keys = frozenset(getattr(binding, "RESET_INFO_KEYS", ()))
        # keys whose values gymnasium's env gives in a dtype of its own (MuJoCo's float32 reward_ctrl)
        self._gym_info_dtypes = getattr(binding, "GYMNASIUM_INFO_DTYPES", {})
        self._autoresets = np.zeros(self.num_envs, dtype=np.bool_)

    @staticmethod
    def _check_supported(pool: NativePool, max_episode_steps) -> None:
        spec = pool.spec
        if max_episode_steps is not None and max_episode_steps != spec.max_episode_steps:
            raise ValueError(f"{spec.name} truncates episodes after {spec.max_episode_steps} steps "
                             f"in its C code; max_episode_steps={max_episode_steps} cannot change that")

    # ---- state and spaces -----------------------------------------------------
    @property
    def closed(self) -> bool:
        """True after close(), and also once a failure (WorkerError,
        Ctrl-C, a timeout) has closed the pool: every later call then raises
        gymnasium's ClosedEnvironmentError."""
        return self._closed or (self._pool is not None and self._pool.closed)

    @closed.setter
    def closed(self, value: bool) -> None:  # VectorEnv.close() sets it
        self._closed = value

    _closed = False

    # The batched spaces hold per-row bounds as large as the obs buffer: the
    # pool builds them on first read. Assigning one (as a wrapper might)
    # replaces it for this env only.
    @property
    def observation_space(self):
        space = self.__dict__.get("_observation_space")
        return self._pool.observation_space if space is None else space

    @observation_space.setter
    def observation_space(self, space) -> None:
        self.__dict__["_observation_space"] = space

    @property
    def action_space(self):
        space = self.__dict__.get("_action_space")
        return self._pool.action_space if space is None else space

    @action_space.setter
    def action_space(self, space) -> None:
        self.__dict__["_action_space"] = space

    # ---- core API ---------------------------------------------------------------
    def _check_open(self) -> None:
        if self.closed:
            raise ClosedEnvironmentError(f"Trying to operate on `{type(self).__name__}`, "
                                         f"after a call to `close()`.")

    def reset(self, *, seed: int | list[int | None] | None = None,
              options: dict[str, Any] | None = None):
        """Reset all envs, or those in options["reset_mask"], as gymnasium's VectorEnv.

        Args:
            seed: None, an int s (env i gets s + i) or one seed (or None) per env.
            options: {"reset_mask": bool array (num_envs,)} resets only those envs.

        Returns:
            (obs, infos): obs of every row (a copy when copy=True, else the
            shared buffer); infos in gymnasium's dict-of-arrays form (multi-agent
            envs: infos["mask"]).

        Raises:
            ValueError: a seed list of the wrong length, a bad reset_mask.
            ClosedEnvironmentError: after close() or a worker failure.
        """
        self._check_open()
        # Checks in SyncVectorEnv's order: seeds, then the reset mask.
        if isinstance(seed, (list, tuple)) and len(seed) != self.num_envs:
            raise ValueError(f"If seeds are passed as a list the length must match "
                             f"num_envs={self.num_envs} but got length={len(seed)}.")
        check_reset_options(options, self._pool.spec)   # before the pop: the dict is the caller's
        reset_mask = None
        if options is not None and "reset_mask" in options:
            reset_mask = options.pop("reset_mask")  # Sync pops it too (the dict is the caller's)
            validate_reset_mask(reset_mask, self.num_envs)
        pool_seed, pool_mask = self._per_pool_env(seed, reset_mask)
        obs, pool_info = self._pool.reset(seed=pool_seed, options=None if pool_mask is None
                                          else {"reset_mask": pool_mask})
        self._remember_seeds(seed, reset_mask)
        self._autoresets[slice(None) if reset_mask is None else reset_mask] = False
        self._reset_done = True
        infos = self._mask_info()
        env_info = self._gym_keys_of(pool_info)   # the envs' own (not the pool's "env_id")
        if env_info:
            # Sync gathers the reset info of the envs it reset
            reset = np.ones(self.num_envs, dtype=np.bool_) if reset_mask is None else reset_mask
            infos.update(self._masked(env_info, reset))
        return (obs.copy() if self.copy else obs), infos

    def _per_pool_env(self, seed, reset_mask):
        """Seeds and reset mask over rows -> over the pool's envs. With several
        agents per env, an env's rows reset together: a seed list or a mask
        must give all rows of an env the same value."""
        a = self.agents_per_env
        if a == 1:
            return seed, reset_mask
        if isinstance(seed, (list, tuple)):
            per_env = [seed[e * a] for e in range(self._pool.num_envs)]
            if any(seed[e * a + k] != per_env[e] for e in range(self._pool.num_envs) for k in range(a)):
                raise ValueError(f"{self._pool.spec.name} has {a} agent rows per env, which reset "
                                 f"together: a seed list must repeat each env's seed for its {a} rows")
            seed = per_env
        # (an int seed s already means env e gets s + e: its rows report that seed)
        if reset_mask is not None:
            by_env = reset_mask.reshape(-1, a)
            if not (by_env == by_env[:, :1]).all():
                raise ValueError(f"{self._pool.spec.name} has {a} agent rows per env, which reset "
                                 f"together: reset_mask must be equal over each env's {a} rows")
            reset_mask = np.ascontiguousarray(by_env[:, 0])
        return seed, reset_mask

    def _mask_info(self) -> dict:
        """Multi-agent envs: {"mask": rows present, "_mask": all true}."""
        if self.agents_per_env == 1:
            return {}
        masks = self._pool.masks.copy()
        return {"mask": masks, "_mask": np.ones(self.num_envs, dtype=np.bool_)}

    def _remember_seeds(self, seed, reset_mask) -> None:
        if seed is None:
            return
        a = self.agents_per_env
        seeds = ([int(seed) + i // a for i in range(self.num_envs)]
                 if isinstance(seed, (int, np.integer)) else list(seed))
        for i, s in enumerate(seeds):
            if s is not None and (reset_mask is None or reset_mask[i]):
                self._env_seeds[i] = int(s)

    def step(self, actions):
        """Step every env, as gymnasium's VectorEnv in `autoreset_mode`.

        Args:
            actions: a batch of action_space: any integer dtype for
                discrete spaces, float32/float64 for Box (finite; MuJoCo
                clamps out-of-bounds controls as gymnasium does).

        Returns:
            (obs, rewards, terminations, truncations, infos); SAME_STEP infos
            hold "final_obs" and "final_info" with their "_" masks.

        Raises:
            ResetNeeded: step() before the first reset().
            ValueError: actions of the wrong shape, dtype or range.
            ClosedEnvironmentError: after close() or a worker failure.
        """
        self._check_open()
        if not self._reset_done:
            # What Sync and Async raise (their sub-envs are wrapped in OrderEnforcing),
            # although the pool itself has reset its envs at construction.
            raise ResetNeeded("Cannot call env.step() before calling env.reset()")
        obs, rewards, terminations, truncations, pool_info = self._pool.step(actions)
        # Only what the caller gets back is copied, once each, into fresh
        # arrays (copy=True: later steps never overwrite them); nothing is
        # built for infos on the common step where no env ended.
        infos = {} if self.agents_per_env == 1 else self._mask_info()
        env_infos = self._env_infos(pool_info, terminations, truncations) if self._gym_info_keys else {}
        ended = pool_info["_final_obs"] if self.autoreset_mode is AutoresetMode.SAME_STEP else None
        if ended is not None and ended.any():
            # Sync's key order: that of the first env's own entries
            final_infos = self._final_infos(pool_info["final_obs"], ended, pool_info.get("final_info", {}))
            for part in ((final_infos, env_infos) if ended[0] else (env_infos, final_infos)):
                infos.update(part)
        else:
            infos.update(env_infos)
        return ((obs.copy() if self.copy else obs),
                rewards.astype(np.float64),  # the pool's float32 -> a new float64 array, as Sync
                terminations.copy(),
                truncations.copy(),
                infos)

    def _env_infos(self, pool_info: dict, terminations: np.ndarray, truncations: np.ndarray) -> dict:
        """The library-backed env's info as SyncVectorEnv gathers it from
        shoal.single.SingleEnv's: where this step stepped an env, its step
        info; where it reset one (an autoreset), its reset info, which holds
        only the reset keys (the pool's values there are the reset's)."""
        ended = terminations | truncations
        reset = None   # DISABLED: every env stepped
        if self.autoreset_mode is AutoresetMode.NEXT_STEP:
            reset = self._autoresets
            self._autoresets = ended
        elif self.autoreset_mode is AutoresetMode.SAME_STEP:
            reset = ended
        per_env = self._gym_keys_of(pool_info)
        everywhere = np.ones(self.num_envs, dtype=np.bool_)
        if reset is None or not reset.any():
            return self._masked(per_env, everywhere)
        stepped = ~reset
        if reset[0]:   # Sync's key order: env 0's reset info first, then the step's other keys
            per_env = dict(sorted(per_env.items(), key=lambda item: item[0] not in self._reset_info_keys))
        return self._masked(per_env, {key: everywhere if key in self._reset_info_keys else stepped
                                      for key in per_env})

    def _gym_keys_of(self, pool_info: dict) -> dict:
        return {k: v for k, v in pool_info.items() if k in self._gym_info_keys}

    def _masked(self, per_env_info: dict, present) -> dict:
        """Sync's dict-of-arrays form of per-env values reported where
        `present` (over rows; one mask, or one per key): float64 for float
        values, int64 for integers (Sync's arrays of Python floats and
        ints), or the dtype of the env's own values where the binding names
        one, 0 elsewhere, with "_" masks; no key where no row has it."""
        infos = {}
        for key, per_env in per_env_info.items():
            where = present[key] if isinstance(present, dict) else present
            if not where.any():
                continue
            values = np.repeat(per_env, self.agents_per_env, axis=0) if self.agents_per_env > 1 else per_env
            dtype = self._gym_info_dtypes.get(key) or (np.float64 if values.dtype.kind == "f" else np.int64)
            # (an array value per env, Humanoid's tendon lengths: a row each)
            row_mask = where.reshape(where.shape + (1,) * (values.ndim - 1))
            infos[key] = np.where(row_mask, values, 0).astype(dtype, copy=False)
            infos[f"_{key}"] = where.copy()
        return infos

    def _final_infos(self, final_obs: np.ndarray, ended: np.ndarray, final_info: dict) -> dict:
        """SyncVectorEnv's SAME_STEP infos (its `_add_info` of {"final_obs",
        "final_info"}), for a step where some env ended; final_info: the
        pool's per-env info of the ended steps (library-backed envs)."""
        rows = np.flatnonzero(ended)
        objects = np.empty(self.num_envs, dtype=object)  # None where no episode ended
        # One copy of the ended rows (the pool's are overwritten next step);
        # each env's final obs is its row of that copy.
        for i, row in zip(rows.tolist(), final_obs[rows]):
            objects[i] = row
        return {"final_obs": objects, "_final_obs": ended.copy(),
                "final_info": self._masked(self._gym_keys_of(final_info), ended),
                "_final_info": ended.copy()}

    def render(self):
        """A frame (render_mode "rgb_array") or text view ("ansi") per
        sub-env, as a tuple like SyncVectorEnv's (num_envs long, as
        gymnasium's HumanRendering and RecordVideo expect): the agent rows of
        a multi-agent env each show their env's view (the same object,
        drawn once). Without a render_mode, a tuple of None.

        Raises:
            ResetNeeded: before the first reset() (as Sync's envs).
        """
        self._check_open()
        if not self._reset_done:
            raise ResetNeeded("Cannot call `env.render()` before calling `env.reset()`")
        if self.render_mode is None:
            return (None,) * self.num_envs
        views = [render.render(self._pool, self.render_mode, i) for i in range(self._pool.num_envs)]
        return tuple(views[row // self.agents_per_env] for row in range(self.num_envs))

    def close_extras(self, **kwargs: Any) -> None:
        if self._pool is not None:
            self._pool.close()

    # ---- seeds ------------------------------------------------------------------
    @property
    def np_random_seed(self) -> tuple[int, ...]:
        """The seed each env was last seeded with (as SyncVectorEnv: one per env).

        The C envs draw from their own RNG, not from numpy generators, so
        there is no per-env `np_random`; `np_random` is the VectorEnv's own
        generator, for wrappers and users.
        """
        return tuple(self._env_seeds)

    # ---- attributes ---------------------------------------------------------------
    def _env_attributes(self) -> dict[str, Any]:
        """What a sub-env attribute lookup can answer: each env's value of
        the attributes a gymnasium.Env has."""
        return {"observation_space": self.single_observation_space,
                "action_space": self.single_action_space,
                "metadata": {k: v for k, v in self.metadata.items() if k != "autoreset_mode"},
                "render_mode": self.render_mode,
                "np_random_seed": None}  # per env, filled in by get_attr

    def get_attr(self, name: str) -> tuple[Any, ...]:
        """One value per env of a sub-env attribute (as SyncVectorEnv.get_attr).

        Supported: observation_space, action_space, metadata, render_mode,
        np_random_seed, spec (gymnasium's registered EnvSpec of the id;
        shoal's own is `pool.spec`), and the pool's own attributes
        (num_workers, autoreset_mode, ...), the same for every env. The
        envs are C structs: other names raise AttributeError.
        """
        self._check_open()
        if name == "np_random_seed":
            return self.np_random_seed
        if name == "spec":   # each sub-env's gymnasium EnvSpec, as gymnasium.make's envs have
            from shoal.registration import sub_env_spec
            return (sub_env_spec(self._pool.spec),) * self.num_envs
        attributes = self._env_attributes()
        if name in attributes:
            return tuple(attributes[name] for _ in range(self.num_envs))
        if not name.startswith("_") and hasattr(self._pool, name) \
                and not callable(getattr(self._pool, name)):
            value = getattr(self._pool, name)
            return tuple(value for _ in range(self.num_envs))
        raise AttributeError(f"{type(self).__name__}: sub-envs are C envs without a Python "
                             f"attribute {name!r}; available: {sorted(attributes)} and the "
                             f"pool's attributes (e.g. spec, num_workers, autoreset_mode)")

    def call(self, name: str, *args: Any, **kwargs: Any) -> tuple[Any, ...]:
        """As SyncVectorEnv.call: attributes come back as values (get_attr);
        "render" gives each sub-env's frame (render()), as skrl's wrapper
        asks; "get_wrapper_attr" an attribute. The C envs have no other
        Python methods to call: those raise AttributeError."""
        if name == "render" and not (args or kwargs):
            return self.render()
        if name == "get_wrapper_attr" and len(args) == 1 and not kwargs:
            return self.get_attr(args[0])
        if args or kwargs:
            self._check_open()
            raise AttributeError(f"{type(self).__name__}: sub-envs are C envs and have no "
                                 f"method {name!r} to call")
        return self.get_attr(name)

    def set_attr(self, name: str, values: Any) -> None:
        """Not supported: the sub-envs are C structs with no Python attributes."""
        self._check_open()
        raise AttributeError(f"{type(self).__name__}: cannot set {name!r}; sub-envs are C envs "
                             f"without Python attributes")

    # ---- access to the pool -------------------------------------------------------
    @property
    def pool(self) -> NativePool:
        """The underlying pool (for its async send/recv or episode_stats)."""
        return self._pool

    def __repr__(self) -> str:
        backend = type(self._pool).__name__ if self._pool is not None else "?"
        if self.spec is None:
            return f"{type(self).__name__}({backend}, num_envs={getattr(self, 'num_envs', '?')})"
        closed = ", closed" if self._pool is not None and self._pool.closed else ""
        return f"{type(self).__name__}({self.spec.id}, {backend}, num_envs={self.num_envs}{closed})"
