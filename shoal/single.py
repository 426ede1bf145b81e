"""One first-party env as a plain `gymnasium.Env`.

Useful where a library wants a single env (wrappers, SyncVectorEnv, tests).
It is a Serial pool of one env with autoreset disabled, so it runs the same
C code as every pool and obeys the seed rule: reset(seed=s) here behaves
exactly like env i of a pool reset with seed s - i.
"""
from __future__ import annotations

import copy
import operator

import gymnasium
import numpy as np
from gymnasium.utils import seeding
from gymnasium.vector import AutoresetMode

from shoal.envs import spec as env_spec
from shoal.pool import render
from shoal.pool.contract import (ATARI_BINDING, POOL_OWN_INFO_KEYS, check_reset_options, game_info_keys,
                                 nonfinite_action_message)
from shoal.pool.native import PoolClosedError, Serial

MUJOCO_BINDING = "shoal.envs.mujoco.binding"

_ATARI_PREPROCESSED = (
    "the env is already preprocessed as gymnasium's FrameStackObservation(AtariPreprocessing(...)) "
    "(noop_max, frameskip, max-pooling, 84x84 grayscale, stack_num frames), so wrappers that need "
    "the emulator, such as SB3's AtariWrapper / EpisodicLifeEnv / NoopResetEnv / FireResetEnv and "
    "gymnasium's AtariPreprocessing, don't apply: use shoal's options episodic_life=True or "
    "terminal_on_life_loss=True for lost lives, use_fire_reset=True, reward_clip=True, and "
    "info['lives']")
_NO_SNAPSHOTS = (
    "shoal's Atari envs cannot snapshot an emulator; runs are deterministic, so reset(seed=s) "
    "and the same actions reach the same state again")
_MUJOCO_STATE_IN_C = (
    "shoal's MuJoCo state lives in C structs (one mjData per env in its pool), not in "
    "mujoco.MjModel / MjData objects: env.unwrapped offers dt, frame_skip, init_qpos, init_qvel, "
    "set_state(qpos, qvel) and state_vector(), and step info holds gymnasium's positions and "
    "reward terms. For the model's constants load a copy (changes to it do not reach the env): "
    "mujoco.MjModel.from_xml_path(str(shoal.envs.mujoco.binding.model_path(xml_file)))")
_CARTPOLE_STATE_IN_C = (
    "shoal's CartPole keeps its state in a C struct (envs/cartpole/cartpole.h): the observation "
    "is that state (x, x_dot, theta, theta_dot), and its constants are gymnasium's CartPole-v1's "
    "(x_threshold 2.4, theta_threshold_radians 12 degrees, tau 0.02, euler integration)")
# gymnasium's CartPole-v1 warns once when stepped on after the pole fell
# without a reset in between (and pays 0.0 while it is down, as
# envs/cartpole/cartpole.h does for every backend).
WARNS_AFTER_TERMINATION = frozenset({"shoal.envs.cartpole.binding"})
_STEP_AFTER_TERMINATION = (
    "You are calling 'step()' even though this environment has already returned terminated = True. "
    "You should always call 'reset()' once you receive 'terminated = True' -- any further steps are "
    "undefined behavior.")

# gymnasium's attributes that shoal's envs of a binding cannot have, and
# what to use instead: the AttributeError says so (hasattr and getattr
# with a default still see an AttributeError).
GYMNASIUM_ONLY_ATTRIBUTES = {
    "shoal.envs.cartpole.binding": {name: _CARTPOLE_STATE_IN_C for name in (
        "state", "x_threshold", "theta_threshold_radians", "tau", "gravity", "masscart", "masspole",
        "length", "force_mag", "kinematics_integrator")},
    MUJOCO_BINDING: {
        **{name: _MUJOCO_STATE_IN_C for name in (
            "model", "data", "fullpath", "do_simulation", "reset_model", "get_body_com",
            "observation_structure", "is_healthy", "healthy_reward", "control_cost", "contact_cost",
            "contact_forces", "terminated")},
        "mujoco_renderer": "render() draws as gymnasium's renderer does; gymnasium.make's keywords "
                           "width, height, camera_id, camera_name and default_camera_config set it",
    },
    ATARI_BINDING: {
        "ale": "shoal's emulators run inside its pool, out of Python's reach; " + _ATARI_PREPROCESSED,
        "clone_state": _NO_SNAPSHOTS,
        "restore_state": _NO_SNAPSHOTS,
        "seed_game": "reset(seed=s) seeds the game (shoal's seed rule: docs/design.md)",
        "load_game": "the game is the env's: make another env for another game",
        "get_keys_to_action": "gymnasium.utils.play needs a window and the emulator, which runs inside "
                              "shoal's pool; render_mode='rgb_array' gives the frames",
    },
}


class SingleEnv(gymnasium.Env):
    """A single copy of shoal env `env_name` (e.g. "CartPole"). A MuJoCo
    env is a MujocoSingleEnv (below): gymnasium's MujocoEnv attributes and
    render keywords."""

    def __new__(cls, env_name: str = "CartPole", *args, **kwargs):
        if cls is SingleEnv and env_spec(env_name).binding == MUJOCO_BINDING:
            cls = MujocoSingleEnv
        return super().__new__(cls)

    # What gymnasium.make checks before construction: every mode shoal can
    # draw (MuJoCo's depth modes included). An instance narrows it to its
    # env's (an env that does not draw rejects a render_mode with a clear error).
    metadata = {"render_modes": ["rgb_array", "ansi", "depth_array", "rgbd_tuple"]}

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
        self._was_reset = False   # step() before a first reset() is an error, as gymnasium's envs assert
        self._warns_after_termination = spec.binding in WARNS_AFTER_TERMINATION
        self._steps_beyond_terminated: int | None = None   # gymnasium CartPole's counter
        self._action = np.zeros(self._pool.action_space.shape, dtype=self._pool.buffers.actions.dtype)
        # Library-backed envs report gymnasium's step and reset info (reward
        # terms, positions, lives) from their shared state; header envs have none.
        self._binding = spec.load_binding()
        self._info_of = getattr(self._binding, "info", None)
        self._info_dtypes = getattr(self._binding, "GYMNASIUM_INFO_DTYPES", {})
        self._game_keys = game_info_keys(spec)
        if spec.binding == ATARI_BINDING:
            # ale-py's AtariEnv attribute, which gymnasium's AtariPreprocessing
            # checks first: with it, wrapping a shoal id stops at `ale`, whose
            # error says the env is preprocessed already, not at a misleading
            # "disable frame-skipping" when frameskip=1 was given.
            self._frameskip = spec.env_kwargs["frameskip"]

    def __getattr__(self, name: str):
        # Reached only when the usual lookup fails: gymnasium's attributes
        # that this env cannot have say what to use instead.
        pool = self.__dict__.get("_pool")   # absent until __init__ has made it
        hint = GYMNASIUM_ONLY_ATTRIBUTES.get(pool.spec.binding, {}).get(name) if pool is not None else None
        message = f"{type(self).__name__!r} object has no attribute {name!r}"
        raise AttributeError(f"{message}: {hint}" if hint else message, name=name, obj=self)

    def __reduce__(self):
        """Pickling (cloudpickle in SuperSuit or SubprocVecEnv, copy.copy)
        makes a fresh env from the same arguments (its state is a C struct
        in a pool): reset it before use (step() refuses until then)."""
        return rebuild, (type(self), *self._args), {"spec": self.spec}   # gymnasium.make's spec

    def __deepcopy__(self, memo):
        """copy.deepcopy: a header env's copy goes on from this env's state,
        as a deepcopy of gymnasium's CartPole does (the whole state is the
        pool's pointer-free buffers, copied: the C struct with its RNG, the
        episode's count, the last outputs). A library-backed env's state
        (MuJoCo's mjData, Atari's emulator) is out of reach: its copy is a
        fresh env, to reset before use."""
        clone = rebuild(type(self), *self._args)
        memo[id(self)] = clone
        clone.spec = copy.deepcopy(self.spec, memo)
        if self._pool.spec.kind == "header" and self._was_reset and not self._pool.closed:
            clone._pool.buffers.copy_state_from(self._pool.buffers)
            # a reset without a seed goes on as the original's would (not from the clone's own seed)
            clone._pool._construction_seed = copy.deepcopy(self._pool._construction_seed, memo)
            clone._np_random = copy.deepcopy(self._np_random, memo)
            clone._np_random_seed = self._np_random_seed
            clone._was_reset = True
            clone._steps_beyond_terminated = self._steps_beyond_terminated
        return clone

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        check_reset_options(options, self._pool.spec)
        if self._pool.closed:
            self._reopen()
            if seed is None and self._np_random is not None:
                # gymnasium's envs go on from their generator after close():
                # so does a seeded run here, with a seed drawn from it
                seed = int(self._np_random.integers(2**63))
        super().reset(seed=seed)
        if seed is None:
            # The first reset without a seed is the pool's construction seed's
            # (one drawn from OS entropy): np_random_seed reports it, so that
            # reset(seed=env.np_random_seed) replays this episode, as it does
            # on gymnasium's envs (gymnasium would report a seed of its own).
            drawn = self._pool._construction_seed
            if drawn is not None and drawn.unstepped is not None and isinstance(drawn.seed, int):
                self._np_random, self._np_random_seed = seeding.np_random(drawn.seed)
        elif isinstance(seed, (int, np.integer)) and seed >= 2**64:
            # gymnasium's envs take any int >= 0; the C env's seed is 64 bits
            seed = int(seed) % 2**64
        obs, info = self._pool.reset(seed=seed)
        self._was_reset = True
        self._steps_beyond_terminated = None
        return obs[0].copy(), one_env_info(info, self._info_dtypes)

    def step(self, action):
        if not self._was_reset:
            raise gymnasium.error.ResetNeeded("Cannot call env.step() before calling env.reset() (a copy "
                                              "or unpickled env starts fresh, too)")
        if self.spec_continuous:
            # gymnasium's MuJoCo envs take out-of-bounds actions (the physics
            # clamps them); the pool refuses NaN / inf.
            # (NaN / inf are the pool's check, in C; its error is put in this env's words below)
            given = action
            if getattr(action, "dtype", None) == np.float32:   # (a policy's usual: no cast, no errstate's 0.8 us)
                action = np.asarray(action)
            else:
                with np.errstate(over="ignore"):   # beyond float32: inf, which the pool refuses
                    action = np.asarray(action, dtype=np.float32)
            if action.shape != self.action_space.shape:
                raise ValueError(f"action of shape {action.shape} for {self._pool.spec.name} is not in "
                                 f"{self.action_space}")
        elif self._discrete_n is not None and (isinstance(action, (int, np.integer))
                                               or isinstance(action := scalar_index(action), int)):
            # the common case (a 0-d integer array or tensor counts as its int),
            # checked without Discrete.contains (a quarter of a step)
            if not 0 <= action < self._discrete_n:
                raise ValueError(f"action {action!r} is not in {self.action_space}")
        elif not self.action_space.contains(action):
            raise ValueError(f"action {action!r} is not in {self.action_space}")
        self._action[0] = action
        try:
            obs, rewards, terminals, truncations, pool_info = self._pool.step(self._action)
        except PoolClosedError:
            self._check_open("step()")   # this env's words, not its pool's
            raise
        except ValueError:   # a Box action the pool refused: not finite (nothing was stepped)
            if self.spec_continuous:
                raise ValueError(nonfinite_action_message(np.asarray(given).tolist(),
                                                          f"for {self._pool.spec.name}")) from None
            raise
        info = ({} if self._info_of is None
                else one_env_info(self._info_of(self._pool.env_states), self._info_dtypes))
        for key in self._game_keys:   # as Python scalars, as the env's other keys
            info[key] = pool_info[key][0].item()
        terminated = bool(terminals[0])
        if terminated and self._warns_after_termination:
            if self._steps_beyond_terminated is None:
                self._steps_beyond_terminated = 0   # it fell on this step
            else:
                if self._steps_beyond_terminated == 0:
                    gymnasium.logger.warn(_STEP_AFTER_TERMINATION)
                self._steps_beyond_terminated += 1
        return obs[0].copy(), float(rewards[0]), terminated, bool(truncations[0]), info

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
        """An RGB frame ("rgb_array") or a text view ("ansi"); None without a
        render_mode, with gymnasium's warning (its classic-control envs')."""
        if self.render_mode is None:
            own = self._pool.spec
            env_id = self.spec.id if self.spec is not None else f"shoal/{own.name}-v{own.version}"
            gymnasium.logger.warn(
                "You are calling render method without specifying any render mode. You can specify "
                f'the render_mode at initialization, e.g. gym.make("{env_id}", render_mode="rgb_array")')
            return None
        self._check_open("render()")
        return render.render(self._pool, self.render_mode)

    def _check_open(self, call: str) -> None:
        if self._pool.closed:
            raise PoolClosedError(f"{call} on a closed {self._pool.spec.name} env: its state went with "
                                  f"env.close(); reset() it first (a closed env resets as new)")

    def _reopen(self) -> None:
        """A closed env resets as gymnasium's do (SB3's check_env resets one
        after its render check closed it): on a new one-env pool, as a new
        env, since the state (the C struct, emulator or mjData) went with
        the old pool; reset() seeds it from this env's generator, as
        gymnasium's envs go on from theirs."""
        self._pool = Serial(self._pool.spec, 1, autoreset_mode=AutoresetMode.DISABLED)
        self._was_reset = False

    def close(self):
        self._pool.close()
        super().close()


class MujocoSingleEnv(SingleEnv):
    """A MuJoCo env as a gymnasium.Env, with what research code reads from
    gymnasium's MujocoEnv (env.unwrapped): dt, frame_skip, init_qpos,
    init_qvel, set_state(), state_vector(), and the render keywords
    width, height, camera_id, camera_name, default_camera_config, max_geom
    and visual_options (gymnasium's meanings and defaults: 480x480 frames
    from the env's DEFAULT_CAMERA_CONFIG). Its model and data are C structs
    (AttributeError saying what to use instead)."""

    def __init__(self, env_name: str = "HalfCheetah", render_mode: str | None = None, **kwargs):
        from shoal.envs.mujoco import RENDER_DEFAULTS, render_options
        from shoal.envs.mujoco.binding import FrameRenderer

        render_kwargs = {key: kwargs.pop(key) for key in RENDER_DEFAULTS if key in kwargs}
        options = render_options(env_spec(env_name).name, **render_kwargs)   # before the pool exists
        super().__init__(env_name, render_mode, **kwargs)
        self._args = (env_name, render_mode, {**kwargs, **render_kwargs})
        spec = self._pool.spec
        # gymnasium's MujocoEnv keeps these as given (camera_id None: not chosen)
        self.width, self.height = options["width"], options["height"]
        self.camera_id, self.camera_name = options["camera_id"], options["camera_name"]
        self.frame_skip = spec.env_kwargs["frame_skip"]
        # Made (its camera choice checked against the model) only for a mode
        # that draws; its OpenGL context starts at the first frame, as gymnasium's.
        try:
            self._frames = FrameRenderer(spec, options) if render_mode is not None else None
        except BaseException:
            self._pool.close()
            raise

    @property
    def dt(self) -> float:
        """Seconds of simulation per step: the model's timestep x frame_skip."""
        return self._binding.dt

    @property
    def init_qpos(self) -> np.ndarray:
        """The model's qpos0 (read-only: shoal's C env resets from the model's own)."""
        return self._binding.init_qpos

    @property
    def init_qvel(self) -> np.ndarray:
        """Zeros, as a fresh mjData's qvel (read-only, as init_qpos)."""
        qvel = np.zeros(self._binding.nv)
        qvel.flags.writeable = False
        return qvel

    def set_state(self, qpos, qvel) -> None:
        """gymnasium's MujocoEnv.set_state: qpos (nq,) and qvel (nv,) become
        the env's state (mj_forward), and the next step goes on from it."""
        self._check_open("set_state()")
        qpos, qvel = np.asarray(qpos), np.asarray(qvel)
        nq, nv = self._binding.nq, self._binding.nv
        if qpos.shape != (nq,) or qvel.shape != (nv,):   # gymnasium asserts the same shapes
            raise ValueError(f"{self._pool.spec.name}: set_state needs qpos of shape ({nq},) and qvel "
                             f"of shape ({nv},), got {qpos.shape} and {qvel.shape}")
        self._binding.set_state_of(self._pool, 0, qpos, qvel)
        self._was_reset = True   # a state of the caller's own: step() may go on from it

    def state_vector(self) -> np.ndarray:
        """gymnasium's MujocoEnv.state_vector: qpos and qvel, concatenated (a copy)."""
        self._check_open("state_vector()")
        return np.concatenate(self._binding.state_of(self._pool, 0))

    def render(self):
        """What gymnasium's env draws for render_mode: an RGB frame (height,
        width, 3) uint8, the depth buffer (height, width) float32, or both
        ("rgbd_tuple"); None without a render_mode, with a warning (gymnasium's
        MuJoCo envs raise instead)."""
        if self.render_mode is None:
            return super().render()
        self._check_open("render()")
        return self._frames.frame(*self._binding.block_of(self._pool, 0), mode=self.render_mode)

    def close(self):
        if self._frames is not None:
            self._frames.close()
        super().close()


def box_action(action, space, where: str) -> np.ndarray:
    """One agent's Box action as the float32 array its pool takes, checked
    here so that the error names the agent (`where`), not a pool row. Out
    of bounds is the env's business (MuJoCo clamps ctrl, as gymnasium's).
    (SingleEnv leaves the finiteness check to its pool: 2 us a step.)"""
    given = np.asarray(action)
    if given.shape != space.shape:
        raise ValueError(f"action of shape {given.shape} {where} is not in {space}")
    if given.dtype.kind == "O":   # numbers as objects (a list mixing numpy and torch scalars)
        try:
            given = given.astype(np.float64)
        except (TypeError, ValueError):
            pass
    if given.dtype.kind not in "fiub":   # (bools are 0 / 1, as gymnasium's MuJoCo envs take them)
        raise ValueError(f"action {where} must be real numbers ({space}), got dtype {given.dtype}")
    with np.errstate(over="ignore"):   # beyond float32: becomes inf, refused below
        action = given.astype(np.float32)
    if not np.isfinite(action).all():
        raise ValueError(nonfinite_action_message(given.tolist(), where))
    return action


def scalar_index(action):
    """A 0-d integer array or tensor (numpy, torch) as a Python int, as
    gymnasium's envs take them; any other action as it is."""
    if getattr(action, "ndim", None) == 0 and not isinstance(action, np.generic):
        try:
            return operator.index(action)
        except TypeError:   # a float or bool 0-d array: Discrete.contains refuses it below
            return action
    return action


def one_env_info(info: dict, dtypes: dict | None = None) -> dict:
    """A one-env pool's per-env info arrays -> that env's scalars, as
    gymnasium's envs give them: Python ints for Atari's counters (ale-py's),
    numpy float64 for MuJoCo's values (gymnasium's MuJoCo envs'), or first
    cast to the dtype `dtypes` names for a key (MuJoCo's float32 reward_ctrl,
    InvertedPendulum's int reward_survive). The pool's own keys ("env_id",
    "elapsed_step") are not the env's."""
    dtypes = dtypes or {}
    env_info = {}
    for key, values in info.items():
        if key in POOL_OWN_INFO_KEYS:
            continue
        value = values[0] if key not in dtypes else values[0].astype(dtypes[key])
        if value.ndim:   # an array per env (Humanoid's tendon lengths): the env's own copy
            env_info[key] = value.copy()
        else:
            env_info[key] = value if value.dtype.kind == "f" else value.item()
    return env_info


def rebuild(cls, env_name: str, render_mode, env_kwargs: dict):
    """Unpickling of an env over a one-env pool (SingleEnv, ShoalParallelEnv):
    a fresh env of the same arguments."""
    return cls(env_name, render_mode=render_mode, **env_kwargs)
