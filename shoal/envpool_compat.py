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
  options are errors, as there. reset(env_id) is the pool's: it resets
  those envs at once and, with async batches, drops the batches in flight
  (EnvPool keeps them).

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

import multiprocessing
import re
import types
import warnings
from collections import namedtuple

import gymnasium
import numpy as np

from shoal import __version__  # noqa: F401  (shoal's: code that logs envpool.__version__ says which library ran)
from shoal.pool.contract import parse_reset_mask
from shoal.pool.spaces import copy_arrays
from shoal.single import ATARI_BINDING, MUJOCO_BINDING

# EnvPool's Atari v5 defaults where they differ from shoal's (gymnasium's
# v5 stack): fire start, no sticky actions, a 27,000-step limit (108,000
# frames), RGB stacks channel-first.
# (EnvPool sets no emulator frame limit: its step limit is the only one,
# where gymnasium's 108,000 frames, counting reset frames, would cut first)
ENVPOOL_ATARI_DEFAULTS = {"use_fire_reset": True, "repeat_action_probability": 0.0,
                          "max_episode_steps": 27_000, "channels_first": True,
                          "max_num_frames_per_episode": 0}
# EnvPool's options that shoal takes only at the value that changes nothing.
_ATARI_FIXED = {"use_inter_area_resize": (True, "shoal always resizes with INTER_AREA")}
# EnvPool's options that change nothing in its gymnasium API, taken as given
# (zero_discount_on_life_loss sets a discount that only its dm_env API has)
_ATARI_NO_EFFECT = {"zero_discount_on_life_loss": False}
_MUJOCO_FIXED = {"frame_stack": (1, "stack observations in the learner"),
                 "gymnasium_v5_render_camera": (True, "shoal renders gymnasium v5's camera")}
# EnvPool's make() keywords for drawing, which the drop-in refuses (saying why)
_ENVPOOL_RENDER_OPTIONS = ("render_width", "render_height", "render_camera_id", "render_env_id", "from_pixels")
_POOL_FIXED = {"max_num_players": (1, "shoal's EnvPool tasks are single-player"),
               "gym_reset_return_info": (True, "shoal's reset() always returns (obs, info)"),
               "env_seed": ([], "pass seed=, or reset(seed=[...]) for a seed per env")}


class EnvPoolSpec:
    """EnvPool's `envs.spec` of a pool: its task id, one env's spaces,
    reward_threshold and `config` (EnvPoolCompat.config as a named tuple:
    `spec.config.max_episode_steps`); anything else is shoal's EnvSpec's."""

    def __init__(self, compat: "EnvPoolCompat"):
        self._env_spec = compat.pool.spec
        self.id = compat.task_id or compat.pool.spec.name
        self.observation_space = compat.observation_space
        self.action_space = compat.action_space
        config = compat.config
        self.config = namedtuple("Config", list(config))(**config)
        self.reward_threshold = config.get("reward_threshold", self._env_spec.reward_threshold)
        self.max_episode_steps = config["max_episode_steps"]

    def __getattr__(self, name: str):
        return getattr(self.__dict__["_env_spec"], name)

    def __repr__(self) -> str:
        return f"EnvPoolSpec({self.id!r}, config={self.config})"


class EnvPoolCompat(gymnasium.vector.VectorEnv, gymnasium.Env):
    """`pool` with EnvPool's conventions: observation_space / action_space
    are one env's; step(), recv() and reset() return arrays of the caller's
    own (copy=True) and reset's reset_mask selects rows; every other
    attribute and call is the pool's.

    As EnvPool's envs, it is a gymnasium VectorEnv and a gymnasium Env, so
    that wrappers written over EnvPool (gymnasium.Wrapper subclasses such as
    CleanRL's RecordEpisodeStatistics, gymnasium's vector wrappers) take it.
    """

    def __init__(self, pool, copy: bool = True, task_id: str | None = None, render_mode: str | None = None):
        if getattr(pool, "agents", 1) != 1:
            # EnvPool's num_envs counts envs while its arrays hold a row per
            # player: gymnasium's vector wrappers, which this class is for,
            # then index rows with env-sized masks and fail
            raise ValueError(f"EnvPoolCompat takes single-agent pools; {pool.spec.name} has {pool.agents} agents "
                             f"per env. Use the pool itself (rows are env-major, env e agent k at "
                             f"e * agents + k) or gymnasium.make_vec('shoal/{pool.spec.name}-v0', num_envs=N, "
                             f"vectorization_mode='vector_entry_point'), whose num_envs attribute counts rows, N * agents")
        if render_mode not in (None, "rgb_array"):
            raise ValueError(f"render_mode={render_mode!r}: shoal's drop-in draws 'rgb_array' frames only "
                             f"(EnvPool's 'human' shows them with cv2.imshow: show render()'s frames so)")
        if render_mode is not None:
            from shoal.pool import Serial
            from shoal.pool import render as pool_render
            pool_render.check_render_mode(pool.spec, render_mode,
                                          "serial" if isinstance(pool, Serial) else "multiprocessing")
        self.pool = pool
        self.copy = copy
        self.task_id = task_id                     # EnvPool's id, when made by make()
        self._render_mode = render_mode
        self.num_envs = pool.num_envs
        self.observation_space = self.single_observation_space = pool.single_observation_space
        self.action_space = self.single_action_space = pool.single_action_space
        self.config_extra: dict = {}               # EnvPool's config entries that make() fixed
        self._discrete = isinstance(pool.single_action_space, gymnasium.spaces.Discrete)
        box = pool.single_action_space
        self._box_width = box.shape[0] if isinstance(box, gymnasium.spaces.Box) and len(box.shape) == 1 else 0
        self._sent_step = None   # a sync pool's subset send(): its step, for the next recv()
        # Atari: each env's console RAM after its last step or reset (EnvPool's
        # info["ram"], with the obs), and before its last reset (SAME_STEP's
        # final_info: the ended step's), views of the pool's env states
        self._ram = self._final_ram = None
        if pool.spec.binding == ATARI_BINDING:
            binding = pool.spec.load_binding()
            self._ram = binding.info(pool.env_states, keys=("ram",))["ram"]
            if pool.autoreset_mode == gymnasium.vector.AutoresetMode.SAME_STEP:
                self._final_ram = binding.info(pool.env_states, final=True, keys=("ram",))["ram"]

    is_vector_env = True   # gym's old marker, which EnvPool's envs carry

    @property
    def all_env_ids(self) -> np.ndarray:
        """EnvPool's: every env's id, 0 .. num_envs - 1 (int32), as
        `render(env_ids=envs.all_env_ids)` takes it (EnvPool's SB3 adapter)."""
        return np.arange(self.num_envs, dtype=np.int32)

    def __getattr__(self, name: str):
        # only for what this class does not define: the pool's own (none
        # before __init__ ran, as in copy.copy)
        pool = self.__dict__.get("pool")
        if pool is None:
            raise AttributeError(name)
        try:
            return getattr(pool, name)
        except AttributeError:
            raise AttributeError(f"'EnvPoolCompat' object has no attribute {name!r} (nor has its "
                                 f"{type(pool).__name__} pool)") from None

    # VectorEnv's and Env's class attributes would hide the pool's: these say the pool's
    @property
    def closed(self) -> bool:
        return self.pool.closed

    @property
    def metadata(self) -> dict:
        from shoal.pool import render as pool_render
        return {**self.pool.metadata, **pool_render.env_metadata(self.pool.spec),
                "render_modes": ["rgb_array"] if pool_render.supports_render(self.pool.spec) else []}

    @property
    def render_mode(self):
        return self._render_mode

    @property
    def spec(self) -> EnvPoolSpec:
        return EnvPoolSpec(self)

    def render(self, env_ids=None) -> np.ndarray:
        """EnvPool's render: RGB frames of envs `env_ids` (default: env 0),
        stacked (len(env_ids), H, W, 3); made with render_mode="rgb_array"."""
        from shoal.pool import render as pool_render
        if self._render_mode is None:
            raise ValueError("render(): make the envs with render_mode='rgb_array' (EnvPool's rule)")
        ids = [0] if env_ids is None else [int(i) for i in np.atleast_1d(env_ids)]
        if not all(0 <= i < self.pool.num_envs for i in ids):
            raise ValueError(f"render(env_ids={env_ids!r}): env ids are 0..{self.pool.num_envs - 1}")
        return np.stack([pool_render.frame(self.pool, i) for i in ids])

    def close(self, **kwargs) -> None:
        self._sent_step = None
        self.pool.close()

    def __del__(self):
        pass   # the pool closes itself when dropped (VectorEnv's __del__ would close it under others)

    def _result(self, result: tuple, reset: bool = False) -> tuple:
        """A call's result with EnvPool's info: env_id as int32, players'
        env_id, and (Atari) the RAM and a reset's reward and terminated as
        zeros."""
        *arrays, info = result
        info = dict(info)
        info["env_id"] = np.asarray(info["env_id"], dtype=np.int32)
        info["players"] = {"env_id": info["env_id"]}
        if self._ram is not None:
            info["ram"] = self._ram[info["env_id"]]   # (a copy: the rows' envs step on)
            if self._final_ram is not None and "final_info" in info:   # SAME_STEP: the ended steps' RAM
                info["final_info"] = {**info["final_info"], "ram": self._final_ram[info["env_id"]]}
            if reset:
                rows = len(info["env_id"])
                info.setdefault("reward", np.zeros(rows, np.float32))
                info.setdefault("terminated", np.zeros(rows, np.int32))
        if self.copy:
            arrays, info = [copy_arrays(part) for part in arrays], copy_arrays(info)
        return (*arrays, info)

    def _actions(self, actions):
        """A discrete task's actions as (n,), or as (n, 1) (a policy's
        trailing action axis; EnvPool 1.2.5 refuses that shape, and taking it
        costs nothing). Any integer dtype is taken. A Box task's (n, A)
        actions may also come with extra axes of 1 ((n, 1, A), (n, A, 1))
        or flat ((n * A,)), which EnvPool reshapes too; other shapes (a
        transposed (A, n), say, which EnvPool would take as wrong rows) are
        the pool's error."""
        if not isinstance(actions, np.ndarray):
            return actions
        if self._discrete:
            return actions[:, 0] if actions.ndim == 2 and actions.shape[1] == 1 else actions
        width = self._box_width
        if width and actions.ndim != 2 and actions.size and actions.size % width == 0:
            rows = actions.size // width
            if actions.ndim == 1 or [d for d in actions.shape if d != 1] == [d for d in (rows, width) if d != 1]:
                return actions.reshape(rows, width)
        return actions

    def step(self, action=None, env_id=None, *, actions=None):
        """The pool's step (env_id: EnvPool's, see NativePool.step). As
        EnvPool's, `action` may be a dict {"action": ..., "env_id": ...}."""
        action, env_id = _action_and_ids(action, actions, env_id)
        self._refuse_if_sent("step()")
        return self._result(self.pool.step(self._actions(action), env_id))

    def _refuse_if_sent(self, call: str) -> None:
        if self._sent_step is not None:
            raise RuntimeError(f"{call} while the envs of a send() await recv(): recv() them first")

    def send(self, action=None, env_id=None, *, actions=None, env_ids=None) -> None:
        """The pool's send: actions for the batch the last recv() returned
        (env_id: EnvPool's name for the pool's env_ids). On a sync pool, as
        EnvPool's, any subset of the envs may be sent: recv() then returns
        their step (it is stepped here)."""
        action, env_id = _action_and_ids(action, actions, env_id)
        if env_id is not None and env_ids is not None:
            raise TypeError("send() takes env_id or env_ids, not both")
        ids = env_id if env_id is not None else env_ids
        self._refuse_if_sent("send()")
        if not self.pool.is_async and ids is not None and not self.pool._in_flight \
                and not np.array_equal(np.asarray(ids), np.arange(self.num_envs)):
            self._sent_step = self.pool.step(self._actions(action), ids)
            return
        self.pool.send(self._actions(action), ids)

    def recv(self, reset: bool = False, return_info: bool = True):
        """The pool's recv: the next batch (EnvPool's arguments: reset=True
        returns (obs, info) as reset() does, else the step's 5-tuple;
        return_info is taken and, as by EnvPool 1.2.5's gymnasium envs,
        not used: a reset's info comes back either way)."""
        sent, self._sent_step = self._sent_step, None
        result = self._result(sent if sent is not None else self.pool.recv(), reset=reset)
        if reset:
            return result[0], result[-1]
        return result

    def async_reset(self, **kwargs) -> None:
        """The pool's async_reset (a step sent and not received is dropped, as in reset())."""
        self._sent_step = None
        self.pool.async_reset(**kwargs)

    def seed(self, seed=None) -> None:
        """EnvPool's seed(): abandoned there, a no-op with a warning; seeds are
        make()'s `seed` (env i gets seed + i), or reset(seed=...) here."""
        warnings.warn("seed() does nothing (as EnvPool's, which abandoned it): pass make(..., seed=...) "
                      "or reset(seed=...)", stacklevel=2)

    def reset(self, env_id=None, *, seed=None, options: dict | None = None):
        """The pool's reset, except that options["reset_mask"] returns the
        masked envs' rows only (EnvPool's); options may hold nothing else,
        and the mask must select at least one env."""
        if options and set(options) != {"reset_mask"}:
            raise ValueError(f"reset options: only 'reset_mask' is taken (EnvPool's rule), got "
                             f"{sorted(options)}")
        self._sent_step = None   # (a reset drops a step sent and not received, as the pool's batches)
        if options and options["reset_mask"] is not None:   # (None: every env, as EnvPool's)
            if env_id is not None:
                raise ValueError("reset() takes env_id or options['reset_mask'], not both")
            # EnvPool casts the mask to bool (0/1 integers are a mask too)
            mask = parse_reset_mask({"reset_mask": np.asarray(options["reset_mask"]).astype(np.bool_)},
                                    self.pool.num_envs)
            if not mask.any():
                raise ValueError("options['reset_mask'] selects no env: at least one must be True")
            env_id = np.flatnonzero(mask)
        if env_id is None and self.pool.is_async:
            # EnvPool's async reset: every env resets, the first batch comes back
            # (step(actions, info["env_id"]) then answers it and returns the next)
            self.pool.async_reset(seed=seed)
            obs, _, _, _, info = self.pool.recv()
            return self._result((obs, info), reset=True)
        return self._result(self.pool.reset(env_id, seed=seed), reset=True)

    def xla(self) -> tuple:
        """EnvPool's XLA interface: (handle, recv, send, step), JAX functions
        that run inside jax.jit, lax.scan and lax.while_loop:

            handle, recv, send, step = envs.xla()
            handle, (obs, rew, term, trunc, info) = recv(handle)
            handle = send(handle, actions, env_id)      # env_id optional
            handle, result = step(handle, actions, env_id)

        Thread the handle through (its value means nothing; it orders the
        calls). Results are recv()'s, as JAX arrays of JAX's dtypes (float64
        as float32 unless jax_enable_x64). Made with jax.experimental's
        io_callback: each call leaves the compiled program for a call into
        the pool on the host, where EnvPool's runs as an XLA custom call, so
        it works everywhere JAX does (CPU, GPU) at the cost of a host round
        trip per call. Needs jax (pip install jax)."""
        try:
            import jax
            from jax.experimental import io_callback
        except ImportError as e:
            raise ImportError("xla() needs JAX: pip install jax (EnvPool's XLA interface is "
                              "built on jax.experimental.io_callback)") from e
        # recv()'s result for the first batch, read without waiting: its
        # structure, shapes and (JAX's) dtypes are every recv()'s
        sample = self._result(self.pool._batch_result(0))
        result_type = jax.tree_util.tree_map(
            lambda x: jax.ShapeDtypeStruct(np.shape(x), jax.dtypes.canonicalize_dtype(np.asarray(x).dtype)),
            sample)
        handle = jax.numpy.zeros(8, jax.numpy.uint8)
        handle_type = jax.ShapeDtypeStruct(handle.shape, handle.dtype)

        def host_recv(handle):
            result = jax.tree_util.tree_map(lambda x, t: np.asarray(x, dtype=t.dtype), self.recv(), result_type)
            return handle, result

        def host_send(handle, actions, env_id=None):
            self.send(np.asarray(actions), None if env_id is None else np.asarray(env_id))
            return handle

        def host_step(handle, actions, env_id=None):
            return host_recv(host_send(handle, actions, env_id))

        def with_env_id(handle, actions, env_id):
            return (handle, actions) if env_id is None else (handle, actions, env_id)

        def recv(handle):
            return io_callback(host_recv, (handle_type, result_type), handle)

        def send(handle, actions, env_id=None):
            return io_callback(host_send, handle_type, *with_env_id(handle, actions, env_id))

        def step(handle, actions, env_id=None):   # one host call (a callback costs ~0.2 ms here)
            return io_callback(host_step, (handle_type, result_type), *with_env_id(handle, actions, env_id))

        return handle, recv, send, step

    @property
    def config(self) -> dict:
        """EnvPool's `envs.config`: the pool's settings under EnvPool's names
        (num_threads: the worker processes; 0 for a Serial pool, which has
        none), then the env's own options."""
        from shoal.pool import Serial
        pool = self.pool
        workers = 0 if isinstance(pool, Serial) else pool.num_workers
        options = {("frame_skip" if key == "frameskip" else key): value   # EnvPool's name for Atari's
                   for key, value in pool.spec.env_kwargs.items()}
        for key in ("mode", "difficulty"):   # the ROM's default: EnvPool's -1 (shoal's None)
            if key in options and options[key] is None:
                options[key] = -1
        return {"num_envs": pool.num_envs, "batch_size": pool.batch_size, "num_threads": workers,
                "seed": pool._construction_seed.seed, "max_episode_steps": pool.spec.max_episode_steps,
                # EnvPool's own entries that code reads: one player per env, no
                # thread pinning, the gymnasium reset's (obs, info)
                "max_num_players": pool.spec.agents, "thread_affinity_offset": -1,
                "gym_reset_return_info": True, "env_seed": [],
                **self.config_extra, **options}

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


# EnvPool's id where it spells a game otherwise than ale-py (make takes either)
_ENVPOOL_SPELLING = {"TicTacToe3D": "TicTacToe3d"}


def list_all_envs() -> list[str]:
    """The EnvPool task ids `make` serves: CartPole-v0 / -v1, the Atari
    games as "<Game>-v5", the MuJoCo envs as "<Env>-v5" (gymnasium v5's)."""
    ids = ["CartPole-v0", "CartPole-v1"]
    for name, spec in _first_party_specs().items():
        if spec.binding in (ATARI_BINDING, MUJOCO_BINDING):
            ids.append(f"{_ENVPOOL_SPELLING.get(name, name)}-v5")
    return ids


def _action_and_ids(action, actions, env_id):
    """step()/send()'s action under either name (EnvPool's `action`, the
    pool's `actions`), and EnvPool's dict form {"action": ..., "env_id": ...}."""
    if actions is not None:
        if action is not None:
            raise TypeError("pass the actions once: action (EnvPool's name) or actions")
        action = actions
    if isinstance(action, dict):
        if set(action) - {"action", "env_id"} or "action" not in action:
            raise ValueError(f"a dict of actions holds 'action' and optionally 'env_id' (EnvPool's form), got "
                             f"keys {sorted(action)}")
        if env_id is not None and action.get("env_id") is not None:
            raise ValueError("env_id given both in the dict and as an argument")
        action, env_id = action["action"], (action["env_id"] if action.get("env_id") is not None else env_id)
    if action is None:
        raise TypeError("step() / send() need the actions")
    return action, env_id


def _resolve(task_id: str):
    """(shoal env name, default max_episode_steps, family) of an EnvPool task id."""
    match = re.fullmatch(r"(.+)-v(0|[1-9]\d*)", str(task_id))
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
    if name == "CartPole":
        raise ValueError(f"EnvPool task {task_id!r}: shoal has CartPole as CartPole-v0 and CartPole-v1 only")
    why = "gymnasium v5's semantics; EnvPool's v3 / v4 differ from it" if spec.binding == MUJOCO_BINDING \
        else "EnvPool's Atari ids are all v5"
    raise ValueError(f"EnvPool task {task_id!r}: shoal has {name} as {name}-v5 only ({why})")


def _take_fixed(options: dict, fixed: dict, task_id: str) -> None:
    for key, (value, why) in fixed.items():
        if key in options:
            given = options.pop(key)
            same = np.shape(given) == np.shape(value) and bool(np.all(np.asarray(given) == np.asarray(value)))
            if not same or isinstance(given, (bool, np.bool_)) != isinstance(value, bool):
                raise ValueError(f"{task_id}: {key} can only be {value!r} in shoal ({why}), got {given!r}")


def make(task_id: str, env_type: str = "gymnasium", **kwargs) -> EnvPoolCompat:
    """envpool.make for the tasks shoal has (list_all_envs()): EnvPool's
    task id, arguments (num_envs, batch_size, num_threads, seed,
    max_episode_steps and the task's options) and defaults (seed 42;
    batch_size 0 or num_threads 0 for shoal's own choice; Atari's v5
    defaults: fire start, no sticky actions, 27,000 steps, EnvPool's
    channel-first RGB), made as a shoal pool and returned in an
    EnvPoolCompat (copies, one env's spaces, reset_mask, config).

    Differences that stay: num_threads are worker processes (in a daemonic
    process, which cannot start any, the envs step in this process, with a
    warning); shoal's async batches come back in a fixed order; only the
    gymnasium API exists; a Ctrl-C inside a call closes the pool (its
    workers may be mid-step), where EnvPool's stays usable.
    """
    import shoal
    if env_type not in ("gymnasium", "gym"):   # EnvPool 1.x makes gymnasium envs for "gym" too
        raise ValueError(f"env_type={env_type!r}: shoal has gymnasium's API only (EnvPool's "
                         f"env_type='gymnasium' or 'gym'; make_gymnasium)")
    name, default_limit, family = _resolve(task_id)
    options = dict(kwargs)
    render_mode = options.pop("render_mode", None)
    num_envs = options.pop("num_envs", 1)
    batch_size = options.pop("batch_size", 0) or num_envs
    num_threads = options.pop("num_threads", 0)
    seed = options.pop("seed", 42)   # EnvPool's default
    if options.pop("thread_affinity_offset", -1) != -1:
        warnings.warn(f"{task_id}: thread_affinity_offset is ignored (shoal's workers are processes, "
                      f"not pinned to cores)", stacklevel=2)
    _take_fixed(options, _POOL_FIXED, task_id)
    if not options.get("from_pixels", True):
        del options["from_pixels"]   # EnvPool's default
    render_options = [key for key in _ENVPOOL_RENDER_OPTIONS if key in options]
    if render_options:
        raise ValueError(f"{task_id}: {', '.join(render_options)}: EnvPool's render options, which shoal's "
                         f"drop-in does not take: render() draws gymnasium's frame of the env_ids asked "
                         f"(CartPole 400 x 600, MuJoCo 480 x 480 from gymnasium v5's camera, Atari the "
                         f"emulator's screen); resize those, or draw one MuJoCo env at another size with "
                         f"gymnasium.make('shoal/<Env>-v5', render_mode='rgb_array', width=, height=, camera_id=)")
    options.setdefault("max_episode_steps", default_limit)
    if family == "atari":
        no_resize = options.get("use_inter_area_resize") is False and \
            (options.get("img_height"), options.get("img_width")) == (210, 160)
        if no_resize:   # the screen's own size: no resize, either rule (checked below: tall screens)
            del options["use_inter_area_resize"]
        no_effect = {}
        for key, default in _ATARI_NO_EFFECT.items():
            value = options.pop(key, default)
            if value is not None and not isinstance(value, (bool, np.bool_, int, np.integer)):
                raise ValueError(f"{task_id}: {key} must be a bool, got {value!r}")
            no_effect[key] = bool(value)   # (EnvPool's truth value: None is False, 2 True)
        _take_fixed(options, _ATARI_FIXED, task_id)
        if "frame_skip" in options:
            options["frameskip"] = options.pop("frame_skip")
        for key in ("mode", "difficulty"):   # EnvPool's -1: the ROM's default (shoal's None)
            if options.get(key) == -1:
                options[key] = None
        for key, value in ENVPOOL_ATARI_DEFAULTS.items():
            options.setdefault(key, value)
    elif family == "mujoco":
        from shoal.envs.mujoco import ENVPOOL_V5_VALUES, envpool_fixed_why
        _take_fixed(options, _MUJOCO_FIXED, task_id)
        _take_fixed(options, {key: (value, envpool_fixed_why(name, key))
                              for key, value in ENVPOOL_V5_VALUES.get(name, {}).items()}, task_id)
        options = _gymnasium_mujoco_options(name, options)
    workers = _worker_count(task_id, num_threads, num_envs, batch_size)
    # To be drawn, an Atari or MuJoCo env's state must be in this process
    # (EnvPool's threads are): with render_mode, those tasks step here.
    in_process = render_mode is not None and family in ("atari", "mujoco")
    if in_process and workers not in (None, 1):
        warnings.warn(f"{task_id}: render_mode={render_mode!r} steps the envs in this process "
                      f"(num_threads={num_threads} not used): drawing needs their state here", stacklevel=2)
    if not in_process and multiprocessing.current_process().daemon:
        # EnvPool's threads run anywhere; a daemonic process (a multiprocessing.Pool,
        # DataLoader or SubprocVecEnv worker) cannot start worker processes
        in_process = True
        warnings.warn(f"{task_id}: this process is daemonic and cannot start shoal's worker "
                      f"processes, so the {num_envs} envs step in this process, on one core",
                      stacklevel=2)
    pool = shoal.make(name, num_envs, num_workers=None if in_process else workers,
                      backend="serial" if in_process else "multiprocessing", batch_size=batch_size,
                      seed=seed, env_kwargs=options)
    try:
        screen_rows = pool.spec.load_binding().screen_shape[0] if family == "atari" and no_resize else 210
        if screen_rows != 210:
            raise ValueError(f"{task_id}: use_inter_area_resize=False: this game's screen has "
                             f"{screen_rows} rows, which shoal resizes to "
                             f"210 with INTER_AREA, as gymnasium's AtariPreprocessing does (EnvPool crops "
                             f"the top 210 rows instead)")
        envs = EnvPoolCompat(pool, task_id=task_id, render_mode=render_mode)
        if family == "mujoco":   # EnvPool's MuJoCo actions are float64 (the pool rounds them to float32)
            box = pool.single_action_space
            envs.action_space = envs.single_action_space = gymnasium.spaces.Box(
                _decimal(box.low), _decimal(box.high), box.shape, np.float64)
    except BaseException:
        pool.close()
        raise
    if family != "atari":   # EnvPool's config has the task's threshold: gymnasium's, but for these two
        envs.config_extra = {"reward_threshold": _ENVPOOL_REWARD_THRESHOLDS.get(task_id, pool.spec.reward_threshold)}
    else:   # EnvPool's Atari config names the game by its ROM id ("pong", "montezuma_revenge")
        from shoal.envs.atari import ROM_IDS
        envs.config_extra = {"task": ROM_IDS[name], **no_effect,
                             **{key: value for key, (value, _) in _ATARI_FIXED.items()}}
    if family == "mujoco":
        envs.config_extra.update(_envpool_mujoco_config(name, pool.spec.env_kwargs))
    return envs


def _decimal(bounds: np.ndarray) -> np.ndarray:
    """float32 bounds as the float64 of their shortest decimal (the model's
    ctrlrange as written, 0.4, not float32's 0.4000000059604645)."""
    return np.array([float(str(value)) for value in bounds.flat], np.float64).reshape(bounds.shape)


def _envpool_mujoco_config(name: str, env_kwargs: dict) -> dict:
    """EnvPool's config entries of a MuJoCo task under its own names, from
    the env's (gymnasium's) options: a <x>_range's finite ends as <x>_min /
    <x>_max, renamed weights (Reacher's ctrl_cost_weight), and the options
    EnvPool has at the one value shoal takes; so code that reads
    `config["healthy_z_min"]` reads what the env does."""
    from shoal.envs.mujoco import _ENVPOOL_RENAMED, ENVPOOL_NO_CONTACT_FORCE, ENVPOOL_V5_VALUES
    entries = {key: value for key, (value, _) in _MUJOCO_FIXED.items()}
    entries["post_constraint"] = True
    entries.update(ENVPOOL_V5_VALUES.get(name, {}))
    if name in ENVPOOL_NO_CONTACT_FORCE:
        entries["use_contact_force"] = not all(env_kwargs.get(key) == value
                                               for key, value in ENVPOOL_NO_CONTACT_FORCE[name].items())
    for key, usages in _ENVPOOL_RENAMED.items():
        base, _, end = key.rpartition("_")
        if base == "contact_cost" and "impact_cost_range" in env_kwargs:   # HumanoidStandup's name for it
            base = "impact_cost"
        bounds = env_kwargs.get(f"{base}_range")
        if end in ("min", "max") and bounds is not None:
            value = float(bounds[0] if end == "min" else bounds[1])
            if np.isfinite(value):
                entries[key] = value
        else:
            renamed = [usage for usage in usages if "=" not in usage and usage in env_kwargs]
            if renamed and not key.startswith("reset_q"):
                entries[key] = env_kwargs[renamed[0]]
    return entries


# EnvPool 1.2.5's reward_threshold where it is not shoal's env's (gymnasium's):
# CartPole-v0 is gymnasium's v0 (shoal's CartPole is v1's), Hopper-v5 is EnvPool's own
_ENVPOOL_REWARD_THRESHOLDS = {"CartPole-v0": 195.0, "Hopper-v5": 6000.0}


def _gymnasium_mujoco_options(name: str, options: dict) -> dict:
    """EnvPool's MuJoCo option names as gymnasium v5's keywords, where the
    env has one: a <x>_min / <x>_max pair becomes <x>_range (the other end
    from the env's default), a plain rename (Reacher's ctrl_cost_weight ->
    reward_control_weight, ...) is renamed, use_contact_force=False is
    gymnasium's keywords for no contact cost (and, for Ant, no contact
    forces observed). Anything else stays as given,
    for the env's own error (which names gymnasium's keyword)."""
    from shoal.envs import spec
    from shoal.envs.mujoco import _ENVPOOL_RENAMED, ENVPOOL_NO_CONTACT_FORCE
    defaults = spec(name).env_kwargs
    translated: dict = {}
    options = dict(options)
    use_contact_force = options.pop("use_contact_force", True) if name in ENVPOOL_NO_CONTACT_FORCE else True
    if not isinstance(use_contact_force, (bool, np.bool_)):
        raise ValueError(f"{name}: use_contact_force must be True or False, got {use_contact_force!r}")
    if not use_contact_force:
        # EnvPool's v4-style Ant / Humanoid: it computes no contact cost at
        # all, so a contact weight given with it changes nothing there either
        translated.update(ENVPOOL_NO_CONTACT_FORCE[name])
        if "include_cfrc_ext_in_observation" in options and "include_cfrc_ext_in_observation" in translated:
            raise ValueError(f"{name}: use_contact_force=False (EnvPool's) and "
                             f"include_cfrc_ext_in_observation (gymnasium's) both given; give one")
        options.pop("contact_cost_weight", None)
    for key, value in options.items():
        base, _, end = key.rpartition("_")
        if base == "contact_cost" and "impact_cost_range" in defaults:   # HumanoidStandup's name for it
            base = "impact_cost"
        if key in defaults:
            target = key
        elif end in ("min", "max") and f"{base}_range" in defaults:
            target = f"{base}_range"
            low, high = translated.get(target, defaults[target])
            value = (value, high) if end == "min" else (low, value)
        else:
            renames = [usage for usage in _ENVPOOL_RENAMED.get(key, ())
                       if "=" not in usage and usage in defaults and not key.startswith("reset_q")]
            target = renames[0] if renames else key
        if target != key and target in options:
            raise ValueError(f"{name}: {key} (EnvPool's name) and {target} (gymnasium's) both given; "
                             f"give one")
        translated[target] = value
    return translated


def _worker_count(task_id: str, num_threads: int, num_envs: int, batch_size: int) -> int | None:
    """EnvPool's num_threads (0: shoal's choice) as a worker count shoal
    takes: a multiple of the async batches, at most num_envs (EnvPool's
    threads take any count; a changed one is a warning, not an error)."""
    if isinstance(num_threads, bool) or not isinstance(num_threads, (int, np.integer)) or num_threads < 0:
        raise ValueError(f"{task_id}: num_threads must be an int >= 0 (0: one worker per core), "
                         f"got {num_threads!r}")
    if not num_threads or not isinstance(num_envs, int) or not isinstance(batch_size, int) \
            or batch_size < 1 or num_envs % batch_size:
        return int(num_threads) or None   # shoal's own checks say what is wrong
    batches = num_envs // batch_size
    workers = min(-(-num_threads // batches) * batches, num_envs)
    if workers != num_threads:
        warnings.warn(f"{task_id}: num_threads={num_threads} runs as {workers} worker processes (a "
                      f"multiple of the {batches} batches of num_envs // batch_size, at most num_envs)",
                      stacklevel=3)
    return workers


def make_gymnasium(task_id: str, **kwargs) -> EnvPoolCompat:
    """envpool.make_gymnasium: make(task_id, env_type="gymnasium", ...)."""
    return make(task_id, env_type="gymnasium", **kwargs)


def make_gym(task_id: str, **kwargs) -> EnvPoolCompat:
    """envpool.make_gym: in EnvPool 1.x a gymnasium env too."""
    return make(task_id, env_type="gym", **kwargs)


def make_spec(task_id: str, **kwargs) -> EnvPoolSpec:
    """envpool.make_spec: the spec of make(task_id, **kwargs) (its config,
    one env's spaces), from a one-env pool made and closed (its config has
    the num_envs, batch_size and num_threads asked for)."""
    num_envs = kwargs.get("num_envs", 1)
    requested = {"num_envs": num_envs, "batch_size": kwargs.get("batch_size", 0) or num_envs,
                 "num_threads": kwargs.get("num_threads", 0)}
    with make(task_id, **{**kwargs, "num_envs": 1, "batch_size": 0, "num_threads": 0}) as envs:
        spec = envs.spec
    spec.config = spec.config._replace(**requested)   # the caller's, not the one-env pool's
    return spec


def make_dm(task_id: str, **kwargs):
    """envpool.make_dm: not there (shoal serves gymnasium's API only)."""
    raise ValueError(f"{task_id}: shoal has no dm_env API; use make_gymnasium")


# EnvPool's module layout where client code checks it: its envs derive from
# envpool.python.envpool.EnvPoolMixin (TorchRL's MultiThreadedEnvWrapper
# tests isinstance(env, envpool.python.envpool.EnvPoolMixin)).
python = types.ModuleType(f"{__name__}.python", "EnvPool's envpool.python, for isinstance checks")
python.envpool = types.ModuleType(f"{__name__}.python.envpool", "EnvPool's envpool.python.envpool")
python.envpool.EnvPoolMixin = EnvPoolCompat
