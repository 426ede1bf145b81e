"""Stable-Baselines3 on shoal's native pool: a `VecEnv`.

    from stable_baselines3 import PPO
    from stable_baselines3.common.vec_env import VecMonitor
    from shoal.sb3 import ShoalVecEnv

    env = VecMonitor(ShoalVecEnv("CartPole", num_envs=64))   # VecMonitor: episode stats in SB3's logs
    model = PPO("MlpPolicy", env, seed=0)
    env.seed(0)
    model.learn(100_000)

It behaves as SB3's `DummyVecEnv` over single shoal envs does, step for step
(tested): the step that ends an episode returns the next episode's first
obs, with the last obs in `infos[i]["terminal_observation"]` and
`infos[i]["TimeLimit.truncated"]` set as SB3 expects; `seed(s)` seeds env i
with s + i at the next reset (multi-agent envs: SB3 seeds rows, and env i
takes its first row's seed, s + i * agents; `ShoalVecEnv(..., seed=s)`
gives env i s + i, as `shoal.make`). Library-backed envs (MuJoCo, Atari) also put
their own step info in `infos[i]` ("reward_forward", "lives", ...), on the
step that ends an episode that episode's last; Atari envs also report each
whole game as SB3's Monitor under AtariWrapper does (infos[i]["episode"] at
game over, the real score), so do not wrap them in VecMonitor, which would
count lives. The envs step in shoal's worker processes
(any `shoal.make` argument: `num_workers`, `backend`, ...), straight into
shared memory.

Multi-agent envs: each agent row is one SB3 env. SB3 has no notion of
absent agents, so rows whose mask is false (Drive's finished cars,
Explorer's inactive agents) are trained on as zero obs with zero reward;
shoal's own trainer (`shoal train`) honours the masks instead.

Python envs: `VectorEnvAdapter(shoal.pool.AsyncVectorEnv([...],
autoreset_mode="same_step"))` turns shoal's pool of gymnasium envs (or any
gymnasium VectorEnv that autoresets in SAME_STEP, as SB3 does) into a VecEnv
the same way.

Needs `stable-baselines3` (`pip install "shoal[sb3]"`); importing shoal never
imports it.
"""
from __future__ import annotations

import time
from typing import Any, Sequence

import numpy as np

try:
    from stable_baselines3.common.vec_env.base_vec_env import VecEnv
except ModuleNotFoundError as e:  # pragma: no cover - the message is the point
    # (a ModuleNotFoundError still: pytest.importorskip and `except ModuleNotFoundError` see it)
    raise ModuleNotFoundError(f'shoal.sb3 needs Stable-Baselines3 ({e}): pip install "shoal[sb3]" '
                              f'(or pip install stable-baselines3; it needs torch)', name=e.name) from e

import shoal
from shoal.pool import render
from shoal.pool.contract import ATARI_BINDING, POOL_OWN_INFO_KEYS, GameScores, game_info_keys
from shoal.pool.spaces import copy_arrays
from shoal.registration import sub_env_spec


def sb3_dones_and_infos(terminated, truncated, info: dict) -> tuple[np.ndarray, list[dict[str, Any]]]:
    """SB3's dones and per-env infos from a SAME_STEP step: "TimeLimit.truncated"
    (truncated, not terminated) for every env, and "terminal_observation" (a
    copy of info["final_obs"][i]) for the envs whose episode ended."""
    terminated = np.asarray(terminated, dtype=bool)
    truncated = np.asarray(truncated, dtype=bool)
    dones = terminated | truncated
    infos: list[dict[str, Any]] = [{"TimeLimit.truncated": t}
                                   for t in (truncated & ~terminated).tolist()]
    _add_env_infos(info, dones, infos)
    ended = np.flatnonzero(dones)
    if not ended.size:
        return dones, infos
    final = info["final_obs"]
    if isinstance(final, np.ndarray) and final.dtype != object:
        # The native pool's final_obs buffer: one copy of the ended rows,
        # each env's terminal_observation its row of it.
        for i, row in zip(ended.tolist(), final[ended]):
            infos[i]["terminal_observation"] = row
    else:  # a gymnasium VectorEnv's object array (or dict / tuple obs per env)
        for i in ended.tolist():
            obs = final[i]
            infos[i]["terminal_observation"] = obs.copy() if isinstance(obs, np.ndarray) else obs
    return dones, infos


_NOT_ENV_INFO = frozenset({"final_obs", "final_info"}) | POOL_OWN_INFO_KEYS


def _add_env_infos(info: dict, dones: np.ndarray, infos: list[dict]) -> None:
    """The envs' own step info (library-backed envs: MuJoCo's reward terms,
    Atari's lives...) into each env's dict, as DummyVecEnv passes on each
    env's: from the step's dict of arrays for the envs that stepped on, and,
    for an env whose episode ended, from "final_info", the ended step's."""
    _spread(info, ~dones, infos)
    _spread(info.get("final_info") or {}, dones, infos)


def _spread(source: dict, envs: np.ndarray, infos: list[dict], keys=None) -> None:
    """A dict of per-env arrays (a gymnasium VectorEnv's, where its "_" mask
    is set; a native pool's, every env) into infos[i] for the envs in `envs`
    (only `keys`, when given), as Python scalars where they are numpy's."""
    for key, values in source.items():
        if _is_mask(key, source) or key in _NOT_ENV_INFO or (keys is not None and key not in keys):
            continue
        present = source.get(f"_{key}")
        for i in np.flatnonzero(envs if present is None else present & envs).tolist():
            infos[i][key] = _env_value(values, i)


def _is_mask(key: str, infos: dict) -> bool:
    """Whether `key` is gymnasium's mask of another key ("_x" beside "x"),
    not an env's own key that starts with "_"."""
    return key.startswith("_") and key[1:] in infos


def _env_value(values, i: int):
    """Env i's value of one info key: a Python scalar where numpy's; a
    dict-valued key (a Monitor's "episode" inside a gymnasium VectorEnv) is
    a dict of arrays with "_" masks of its own, gymnasium's nesting, and
    becomes env i's dict."""
    if isinstance(values, dict):
        return {key: _env_value(value, i) for key, value in values.items()
                if not _is_mask(key, values) and (f"_{key}" not in values or values[f"_{key}"][i])}
    value = values[i]
    if isinstance(value, np.ndarray):   # a row of a per-env array (Humanoid's tendon lengths)
        return value.copy()
    return value.item() if isinstance(value, np.generic) else value


def _fps(metadata: dict) -> dict:
    """{"render_fps": ...} of a metadata dict that has it, else {}."""
    return {"render_fps": metadata["render_fps"]} if "render_fps" in metadata else {}


def _same_value(a, b) -> bool:
    """a == b for option values: dicts, lists and tuples item by item, arrays
    element by element (their == is an array)."""
    if a is b:
        return True
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same_value(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(map(_same_value, a, b))
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return np.array_equal(a, b)
    return bool(a == b)


class _SameStepVecEnv(VecEnv):
    """SB3's reset / step_async / step_wait over a vector env that autoresets
    in SAME_STEP mode; a subclass says how to reset and step it and
    whether its obs must be copied (views of the pool's buffer are)."""

    copy_obs = False
    _actions = None
    # The keys of an autoreset's info, among what the step's info holds for
    # an ended env; None: the "_" masks say (a gymnasium VectorEnv's infos).
    _reset_info_keys = None

    def _reset_vector(self, seeds: list, options: dict | None):
        """Reset with SB3's per-env seeds (None where unseeded) and the
        options of set_options() (None when unset): (obs, info)."""
        raise NotImplementedError

    def _step_vector(self, actions: np.ndarray) -> tuple:
        """(obs, rewards, terminated, truncated, info) of one step."""
        raise NotImplementedError

    def reset(self):
        """Reset every env (seeds from `seed()` apply once) and return the
        obs; `reset_infos[i]` holds env i's reset info, as DummyVecEnv's."""
        obs, info = self._reset_vector(self._seeds, self._one_options())
        self._reset_seeds()
        self._reset_options()
        self.reset_infos = [{} for _ in range(self.num_envs)]
        _spread(info, np.ones(self.num_envs, dtype=bool), self.reset_infos, self._reset_info_keys)
        return copy_arrays(obs) if self.copy_obs else obs

    def _one_options(self) -> dict | None:
        """set_options()'s per-env dicts as the one dict a vector env's reset
        takes (None when every env's is empty); envs with different options
        are an error (DummyVecEnv could give each its own)."""
        options = self._options
        if not any(options):
            return None
        first = options[0]
        if not all(_same_value(other, first) for other in options[1:]):
            self._reset_options()   # refused once: the next reset() goes on without them
            raise ValueError("set_options() gave the envs different options: a vector env resets "
                             "every env with one options dict (pass one dict to set_options)")
        return dict(first)

    def step_async(self, actions: np.ndarray) -> None:
        if actions is None:   # (None also marks "no step pending" below)
            raise TypeError(f"step_async() takes the {self.num_envs} envs' actions "
                            f"({self.action_space}), got None")
        self._actions = actions

    def step_wait(self):
        """Step every env with the actions of step_async: (obs, rewards, dones, infos)."""
        if self._actions is None:
            raise RuntimeError("step_wait() without step_async()")
        actions, self._actions = self._actions, None
        obs, rewards, terminated, truncated, info = self._step_vector(np.asarray(actions))
        dones, infos = sb3_dones_and_infos(terminated, truncated, info)
        if dones.any():   # DummyVecEnv keeps each autoreset's info in reset_infos
            fresh = [{} for _ in range(self.num_envs)]
            _spread(info, dones, fresh, self._reset_info_keys)
            for i in np.flatnonzero(dones).tolist():
                self.reset_infos[i] = fresh[i]
        # rewards: always a fresh array (VecNormalize keeps the last step's)
        return (copy_arrays(obs) if self.copy_obs else obs), np.array(rewards, dtype=np.float32), dones, infos

    def env_is_wrapped(self, wrapper_class, indices=None) -> list[bool]:
        return [False] * len(self._get_indices(indices))

    def get_images(self) -> Sequence[np.ndarray | None]:
        return [None] * self.num_envs


class ShoalVecEnv(_SameStepVecEnv):
    """A first-party shoal env pool as an SB3 `VecEnv` (one SB3 env per agent row).

    Args:
        env: env name ("CartPole") or EnvSpec.
        num_envs: shoal envs; SB3 sees num_envs * agents envs.
        seed: seeds env i with seed + i now (as `shoal.make`); SB3's own
            `seed()` then applies at the next `reset()`.
        render_mode: None or "rgb_array" (SB3's render(), VecVideoRecorder):
            one frame per row (an agent row shows its env's). MuJoCo and
            Atari draw from envs in this process: backend="serial".
        **pool_kwargs: passed to `shoal.make` (num_workers, backend, timeout...).
            The autoreset mode is SAME_STEP, the one SB3 expects.
    """

    def __init__(self, env, num_envs: int, *, seed: int | None = None, render_mode: str | None = None,
                 **pool_kwargs):
        if "autoreset_mode" in pool_kwargs or "batch_size" in pool_kwargs:
            raise ValueError("ShoalVecEnv sets autoreset_mode (same_step) and steps every env at "
                             "once (no batch_size): SB3's VecEnv protocol needs both")
        if render_mode not in (None, "rgb_array"):
            raise ValueError(f"ShoalVecEnv renders 'rgb_array' frames (or nothing: None), not {render_mode!r}")
        render.check_render_mode(shoal.envs.spec(env) if isinstance(env, str) else env, render_mode,
                                 pool_kwargs.get("backend", "multiprocessing"))
        self._render_mode = render_mode
        self.pool = shoal.make(env, num_envs, autoreset_mode="same_step", seed=seed, **pool_kwargs)
        self.env_spec = self.pool.spec                       # shoal's EnvSpec
        # The step info single envs give (gymnasium's keys), as DummyVecEnv passes on;
        # a pool's may hold more (Atari's EnvPool keys).
        binding = self.env_spec.load_binding()
        info_of = getattr(binding, "info", None)
        self._info_keys = set(info_of(self.pool.env_states)) if info_of is not None else set()
        self._info_keys |= set(game_info_keys(self.env_spec))
        self._reset_info_keys = frozenset(getattr(binding, "RESET_INFO_KEYS", ()))
        self.spec = sub_env_spec(self.env_spec)  # gymnasium's, as SB3's wrappers expect
        super().__init__(self.pool.num_rows, self.pool.single_observation_space,
                         self.pool.single_action_space)
        # a sub-env's frame rate (VecVideoRecorder reads render_fps here; SB3 sets render_modes)
        self.metadata = {**self.metadata, **_fps(render.env_metadata(self.env_spec))}
        # Atari: whole games, as SB3's Monitor under AtariWrapper sees them (the
        # pool's episodes are lives with episodic_life, and rewards may be
        # clipped); the games that ended this step, as that Monitor's "episode".
        self._games = GameScores(self.pool.num_envs) if self.env_spec.binding == ATARI_BINDING else None
        self._ended_games: dict[int, dict] = {}
        self._started = time.time()

    copy_obs = True  # the pool's obs are views of its shared buffer, rewritten next step

    def _reset_vector(self, seeds: list, options: dict | None):
        if any(s is not None for s in seeds):
            # SB3 seeds per row; shoal per env: env i takes its first row's
            # seed (single-agent: exactly SB3's seed + i; None: RNG goes on).
            seed = [seeds[i * self.env_spec.agents] for i in range(self.pool.num_envs)]
        else:
            seed = None
        if self._games is not None:
            self._games.restart()   # a reset starts new games
        return self.pool.reset(seed=seed, options=options)   # options gymnasium would honour and shoal cannot are refused

    def _step_vector(self, actions: np.ndarray) -> tuple:
        obs, rewards, terminated, truncated, info = self.pool.step(actions)
        if self._games is not None:
            now = round(time.time() - self._started, 6)
            ended, scores, _, frames = self._games.add(info, truncated)
            self._ended_games = {i: {"r": float(r), "l": int(n), "t": now}   # l: frames, as that Monitor's
                                 for i, r, n in zip(ended, scores, frames)}
        for key in set(info) - self._info_keys - {"final_obs", "_final_obs", "final_info"}:
            del info[key]
        if "final_info" in info:
            info["final_info"] = {k: v for k, v in info["final_info"].items() if k in self._info_keys}
        return obs, rewards, terminated, truncated, info

    def step_wait(self):
        """As the base class's; an Atari game's end also puts SB3's Monitor
        "episode" info ({"r": its real score, "l": its emulator frames, as
        that Monitor under AtariWrapper counts them, "t"}) in the
        env's infos, which SB3's loggers and evaluate_policy read."""
        obs, rewards, dones, infos = super().step_wait()
        for i, episode in self._ended_games.items():
            infos[i]["episode"] = episode
        self._ended_games = {}
        return obs, rewards, dones, infos

    def env_is_wrapped(self, wrapper_class, indices=None) -> list[bool]:
        """Atari envs count as wrapped in SB3's Monitor (their infos carry its
        whole-game "episode"), so evaluate_policy scores games, not lives."""
        from stable_baselines3.common.monitor import Monitor
        wrapped = self._games is not None and issubclass(wrapper_class, Monitor)
        return [wrapped] * len(self._get_indices(indices))

    def close(self) -> None:
        self.pool.close()

    # ---- attributes and methods of the sub-envs ----------------------------------
    # The envs are C structs in shared memory, not Python objects: there is
    # nothing to get, set or call on them but the render mode SB3 asks for.
    def get_images(self) -> Sequence[np.ndarray | None]:
        """One RGB frame per row (render_mode "rgb_array"; else None each)."""
        if self._render_mode is None:
            return [None] * self.num_envs
        frames = [render.render(self.pool, "rgb_array", i) for i in range(self.pool.num_envs)]
        return [frames[row // self.env_spec.agents] for row in range(self.num_envs)]

    def get_attr(self, attr_name: str, indices=None) -> list[Any]:
        """A gymnasium.Env attribute every sub-env shares (render_mode, spec,
        metadata, observation_space, action_space), once per index; any
        other is an AttributeError (an env's state is a C struct)."""
        n = len(self._get_indices(indices))
        if attr_name == "render_mode":
            return [self._render_mode] * n
        if attr_name == "metadata":
            from shoal.pool import render
            return [render.env_metadata(self.env_spec)] * n
        if attr_name in ("spec", "observation_space", "action_space"):   # the VecEnv's own are one env's
            return [getattr(self, attr_name)] * n
        raise AttributeError(f"shoal envs are C structs, not Python objects: no attribute "
                             f"{attr_name!r} to get (ShoalVecEnv.env_spec and .pool hold what there is; "
                             f"get_attr answers render_mode, spec, metadata, observation_space and "
                             f"action_space)")

    def set_attr(self, attr_name: str, value: Any, indices=None) -> None:
        raise AttributeError(f"shoal envs are C structs, not Python objects: cannot set {attr_name!r}")

    def env_method(self, method_name: str, *method_args, indices=None, **method_kwargs) -> list[Any]:
        raise AttributeError(f"shoal envs are C structs, not Python objects: no method {method_name!r}")

    def __repr__(self) -> str:
        closed = ", closed" if self.pool.closed else ""
        return f"ShoalVecEnv({self.env_spec.name}, {self.pool.num_envs} envs, {self.num_envs} rows{closed})"


class VectorEnvAdapter(_SameStepVecEnv):
    """Any gymnasium `VectorEnv` (shoal.pool.AsyncVectorEnv over Python envs,
    gymnasium's own) as an SB3 `VecEnv`.

    The vector env must autoreset in SAME_STEP mode, the one SB3 expects
    (`shoal.pool.AsyncVectorEnv(fns, autoreset_mode="same_step")`): the step
    that ends an episode returns the next episode's first obs, with the last
    obs in infos["final_obs"]. Sub-env attributes and methods go through the
    vector env's get_attr / set_attr / call.

    Each env's info is read back from the vector env's merged infos, so it
    is what gymnasium's merging kept (DummyVecEnv passes each env's dict
    as it is): a key's array takes the dtype and shape of the first env
    that gave it (an int then 2.5 is 2; rows of other shapes fail in the
    vector env), and numpy scalars come back as Python numbers.
    """

    def __init__(self, vector_env):
        from gymnasium.vector import AutoresetMode

        mode = vector_env.metadata.get("autoreset_mode")
        if mode != AutoresetMode.SAME_STEP:
            raise ValueError(f"SB3 needs SAME_STEP autoreset; this vector env autoresets {mode}: make it "
                             f"with autoreset_mode='same_step'")
        self.vector_env = vector_env
        # copy=False: its obs are views rewritten by the next step, which SB3
        # would store as the obs its action was taken from (DummyVecEnv's are copies)
        inner = vector_env
        while not hasattr(inner, "copy") and hasattr(inner, "env"):   # under gymnasium's vector wrappers
            inner = inner.env
        self.copy_obs = getattr(inner, "copy", True) is False
        super().__init__(vector_env.num_envs, vector_env.single_observation_space,
                         vector_env.single_action_space)
        self.metadata = {**self.metadata, **_fps(vector_env.metadata)}   # for VecVideoRecorder

    def _reset_vector(self, seeds: list, options: dict | None):
        return self.vector_env.reset(seed=seeds if any(s is not None for s in seeds) else None,
                                     options=options)

    def _step_vector(self, actions: np.ndarray) -> tuple:
        return self.vector_env.step(actions)

    def close(self) -> None:
        self.vector_env.close()

    def env_is_wrapped(self, wrapper_class, indices=None) -> list[bool]:
        """Whether each sub-env has a `wrapper_class` around it, as
        DummyVecEnv answers (SB3's evaluate_policy counts whole episodes from a
        Monitor inside, e.g. under AtariWrapper's life losses): asked of
        shoal.pool.AsyncVectorEnv's workers, or of a SyncVectorEnv's envs.
        Another vector env keeps its envs out of reach: False for each."""
        vector_env = self.vector_env
        while not hasattr(vector_env, "env_is_wrapped") and not hasattr(vector_env, "envs") \
                and hasattr(vector_env, "env"):   # under gymnasium's vector wrappers
            vector_env = vector_env.env
        if hasattr(vector_env, "env_is_wrapped"):
            answers = list(vector_env.env_is_wrapped(wrapper_class))
        elif hasattr(vector_env, "envs"):
            from stable_baselines3.common.env_util import is_wrapped
            answers = [is_wrapped(env, wrapper_class) for env in vector_env.envs]
        else:
            answers = [False] * self.num_envs
        return self._subset(answers, indices)

    def _subset(self, values, indices) -> list[Any]:
        return [values[i] for i in self._get_indices(indices)]

    def get_attr(self, attr_name: str, indices=None) -> list[Any]:
        return self._subset(self.vector_env.get_attr(attr_name), indices)

    def get_images(self) -> Sequence[np.ndarray | None]:
        """The vector env's frames (render_mode "rgb_array"), one per env."""
        if self.render_mode != "rgb_array":
            return [None] * self.num_envs
        return list(self.vector_env.render())

    def set_attr(self, attr_name: str, value: Any, indices=None) -> None:
        if indices is not None and list(self._get_indices(indices)) != list(range(self.num_envs)):
            raise ValueError("set_attr through a gymnasium VectorEnv sets every sub-env (indices=None)")
        self.vector_env.set_attr(attr_name, value)

    def env_method(self, method_name: str, *method_args, indices=None, **method_kwargs) -> list[Any]:
        return self._subset(self.vector_env.call(method_name, *method_args, **method_kwargs), indices)
