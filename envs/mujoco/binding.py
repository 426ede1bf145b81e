"""The binding of shoal's MuJoCo envs: what a header env's Cython module
gives the pool (sizes, dtypes, `Block`), built per spec over the library
that build.py compiles, through ctypes.

`binding_for(spec)` is what `EnvSpec.load_binding()` returns for these envs.
Each process loads a model once (the first block that needs it) and every
block of that process shares it; forked workers inherit the pool process's
copy. A Block owns its envs' mjData; the worker loop drives it through the
same shoal_block_ops table as any env (ctypes releases the GIL in calls).
"""
from __future__ import annotations

import ctypes
import importlib.util
import os
import sys
from pathlib import Path

import numpy as np

from shoal.envs import EnvSpec, SpecMismatchError, check_spec_against_binding
from shoal.envs.mujoco import MODELS, cfg_values, default_kwargs
from shoal.envs.mujoco.build import library_path
from shoal.pool.layout import EPISODE_DTYPE

_P = ctypes.c_void_p
LOCOMOTION = {"HalfCheetah", "Hopper", "Walker2d", "Ant", "Humanoid", "HumanoidStandup", "Swimmer"}


def _load_library():
    lib = ctypes.CDLL(str(library_path()))
    lib.shoal_mj_load_model.restype = _P
    lib.shoal_mj_load_model.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_int]
    lib.shoal_mj_free_model.argtypes = [_P]
    lib.shoal_mj_model_sizes.argtypes = [_P, _P, _P, _P]
    lib.shoal_mj_kind_name.restype = ctypes.c_char_p
    lib.shoal_mj_obs_size.argtypes = [ctypes.c_int, _P, _P]
    lib.shoal_mj_block_new.restype = _P
    lib.shoal_mj_block_new.argtypes = [ctypes.c_int, _P, _P, ctypes.c_int, ctypes.c_int, ctypes.c_int,
                                       ctypes.c_int64] + [_P] * 12 + [ctypes.c_int, ctypes.c_char_p,
                                                                      ctypes.c_int]
    lib.shoal_mj_block_free.argtypes = [_P]
    lib.shoal_mj_block_run.argtypes = [_P, ctypes.c_int]
    lib.shoal_mj_block_ops.restype = _P
    lib.shoal_mj_block_ops.argtypes = [_P]
    lib.shoal_mj_block_set_state.argtypes = [_P, ctypes.c_int64, _P, _P]
    lib.shoal_mj_block_get_state.argtypes = [_P, ctypes.c_int64, _P, _P]
    lib.shoal_mj_block_run_steps.argtypes = [_P, _P, ctypes.c_int64, ctypes.c_int64, ctypes.c_int64]
    lib.kind_index = {lib.shoal_mj_kind_name(k).decode(): k for k in range(lib.shoal_mj_num_kinds())}
    return lib


_library = None
_models: dict[str, int] = {}          # model path -> mjModel* (this process)
_bindings: dict[tuple, "MujocoBinding"] = {}


def library():
    """The built library, loaded once per process."""
    global _library
    if _library is None:
        _library = _load_library()
    return _library


def model_path(xml_file: str) -> Path:
    """gymnasium's rule: a bare file name is one of gymnasium's MuJoCo assets;
    an absolute path or one starting with ./ or ../ is used as is."""
    if xml_file.startswith(("/", "./", "../")):
        return Path(xml_file)
    spec = importlib.util.find_spec("gymnasium")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError('shoal\'s MuJoCo envs load their models from gymnasium\'s assets; '
                          'pip install "shoal[mujoco]"')
    return Path(spec.submodule_search_locations[0]) / "envs" / "mujoco" / "assets" / xml_file


def load_model(xml_file: str) -> int:
    """The mjModel* of `xml_file` in this process (loaded on first request)."""
    path = str(model_path(xml_file))
    if path not in _models:
        if not os.path.isfile(path):
            raise FileNotFoundError(f"MuJoCo model {path} not found")
        error = ctypes.create_string_buffer(1000)
        model = library().shoal_mj_load_model(path.encode(), error, len(error))
        if not model:
            raise ValueError(f"MuJoCo could not load {path}: {error.value.decode(errors='replace')}")
        _models[path] = model
    return _models[path]


def binding_for(spec: EnvSpec) -> "MujocoBinding":
    """The binding of `spec` (one per env and keyword arguments, per process)."""
    key = (spec.name, tuple(sorted((k, v) for k, v in spec.env_kwargs.items())))
    if key not in _bindings:
        _bindings[key] = MujocoBinding(spec)
    return _bindings[key]


# Mirrors `mujoco_state` in shoal_mujoco.h: one env's slot of env_states.
STATE_DTYPE = np.dtype([("rng", np.uint64), ("elapsed_steps", np.int32), ("pad", np.int32),
                        ("info", np.float64, (10,)), ("final_info", np.float64, (10,))])


# Why MuJoCo's renderer could not start in this process, once it failed:
# later tries raise it again instead of calling into GLFW, whose second
# failed initialisation aborts the process (libc++'s recursive-init guard).
_GL_FAILURE: str | None = None


class MujocoBinding:
    """Sizes and dtypes of one configured MuJoCo env, and its Block."""

    AGENTS_PER_ENV = 1
    STATE_DTYPE = STATE_DTYPE
    OBS_DTYPE = np.dtype(np.float64)
    ACT_DTYPE = np.dtype(np.float32)

    def __init__(self, spec: EnvSpec):
        lib = library()
        self.spec = spec
        if spec.name not in lib.kind_index:
            raise RuntimeError(f"{spec.name} is not in shoal's MuJoCo library (library.c's KINDS)")
        self.kind = lib.kind_index[spec.name]
        self.info_keys = MODELS[spec.name].info_keys
        # (slot, name) in gymnasium's key order, so info dicts list keys as its envs do
        self._info_slots = [(self.info_keys.index(key), key)
                            for key in MODELS[spec.name].gymnasium_info_keys]
        self.RESET_INFO_KEYS = MODELS[spec.name].reset_info_keys   # gymnasium's reset info
        self.model = load_model(spec.env_kwargs["xml_file"])
        sizes = (ctypes.c_int * 4)()
        timestep = ctypes.c_double()
        ctrlrange = np.zeros((64, 2))
        lib.shoal_mj_model_sizes(self.model, sizes, ctypes.byref(timestep), ctrlrange.ctypes.data)
        self.nq, self.nv, self.nu, self.na = sizes
        self.timestep = timestep.value
        self.dt = self.timestep * spec.env_kwargs["frame_skip"]
        self.cfg = np.asarray(cfg_values(spec), dtype=np.float64)
        self.ENV_BYTES = lib.shoal_mj_state_bytes()
        if self.ENV_BYTES != STATE_DTYPE.itemsize:
            raise RuntimeError(f"mujoco_state is {self.ENV_BYTES} bytes, STATE_DTYPE {STATE_DTYPE.itemsize}")
        if lib.shoal_mj_episode_bytes() != EPISODE_DTYPE.itemsize:
            raise RuntimeError(f"shoal_episode is {lib.shoal_mj_episode_bytes()} bytes in the library, "
                               f"EPISODE_DTYPE {EPISODE_DTYPE.itemsize}")
        self.OBS_ELEMENTS = lib.shoal_mj_obs_size(self.kind, self.model, self.cfg.ctypes.data)
        if self.OBS_ELEMENTS < 0:
            changed = {k: v for k, v in spec.env_kwargs.items() if v != default_kwargs(spec.name)[k]}
            raise ValueError(f"{spec.name}: keyword arguments {changed} do not fit the model "
                             f"{spec.env_kwargs['xml_file']} (main_body must be one of its body indices)")
        self.ACT_ELEMENTS = self.nu
        self.MAX_EPISODE_STEPS = spec.max_episode_steps
        check_spec_against_binding(spec, self)
        # gymnasium's action space is the model's ctrlrange, as float32.
        low, high = ctrlrange[:self.nu].T.astype(np.float32)
        if not (np.array_equal(low, spec.action_low) and np.array_equal(high, spec.action_high)):
            raise SpecMismatchError(f"{spec.name}: the model's ctrlrange {list(zip(low, high))} is not "
                                    f"the spec's action bounds")

    def info(self, env_states: np.ndarray, final: bool = False, keys=None) -> dict:
        """The last step's info values of every env (final: when its last
        reset began, i.e. a SAME_STEP autoreset's ended step), from the
        pool's env_states buffer: {name: array (num_envs,)}, names as
        gymnasium's step info. After a reset: the positions (RESET_INFO_KEYS),
        zeros elsewhere."""
        slots = env_states.view(STATE_DTYPE)["final_info" if final else "info"]
        return {key: slots[:, k] for k, key in self._info_slots if keys is None or key in keys}

    def Block(self, buffers, start: int, stop: int, mode: int, keep_final_obs: bool = False):
        return Block(self, buffers, start, stop, mode, keep_final_obs)

    # ---- rendering (MuJoCo's own renderer, through its Python bindings) ----
    RENDER_SIZE = (480, 480)   # gymnasium's default width, height

    def render_pool(self, pool, index: int) -> np.ndarray:
        """An RGB frame of env `index` of a pool whose envs live in this
        process (Serial; SingleEnv is one): MuJoCo's state is in the worker,
        out of reach of a Multiprocessing pool's process."""
        for batch in getattr(pool, "_blocks", ()):
            for block in batch:
                if block._start <= index < block._start + block.count:
                    return self.render_state(*block.get_state(index - block._start))
        raise ValueError(f"rendering {self.spec.name} needs its MuJoCo state in this process: use "
                         f"backend='serial' (gymnasium.make and SingleEnv do); a Multiprocessing "
                         f"pool keeps it in its workers")

    def render_state(self, qpos: np.ndarray, qvel: np.ndarray) -> np.ndarray:
        """An RGB frame (480, 480, 3) of the model at qpos / qvel, from a
        camera tracking the main body."""
        if "mujoco" not in sys.modules and not os.environ.get("DISPLAY"):
            # No display: MuJoCo's default (GLFW) cannot open a context, EGL can.
            os.environ.setdefault("MUJOCO_GL", "egl")
        import mujoco
        if getattr(self, "_renderer", None) is None:
            model = mujoco.MjModel.from_xml_path(str(model_path(self.spec.env_kwargs["xml_file"])))
            width, height = self.RENDER_SIZE
            model.vis.global_.offwidth = max(model.vis.global_.offwidth, width)
            model.vis.global_.offheight = max(model.vis.global_.offheight, height)
            global _GL_FAILURE
            if _GL_FAILURE is not None:   # a second try would abort the process (GLFW's init)
                raise RuntimeError(_GL_FAILURE)
            try:
                renderer = mujoco.Renderer(model, height, width)
            except Exception as e:
                _GL_FAILURE = (
                    f"MuJoCo's renderer could not create an OpenGL context ({type(e).__name__}: {e}). "
                    f"On a machine without a display set MUJOCO_GL=egl (or MUJOCO_GL=osmesa with "
                    f"OSMesa installed) before importing mujoco")
                raise RuntimeError(_GL_FAILURE) from e
            camera = mujoco.MjvCamera()
            mujoco.mjv_defaultFreeCamera(model, camera)
            if self.spec.name in LOCOMOTION:   # follow the walker, as gymnasium's cameras do
                camera.type = mujoco.mjtCamera.mjCAMERA_TRACKING
                camera.trackbodyid = 1
                camera.distance, camera.elevation = 4.0, -20.0
            self._render_model, self._render_data = model, mujoco.MjData(model)
            self._renderer, self._camera = renderer, camera
        data = self._render_data
        data.qpos[:], data.qvel[:] = qpos, qvel
        mujoco.mj_forward(self._render_model, data)
        self._renderer.update_scene(data, self._camera)
        return self._renderer.render().copy()


def _row_address(array: np.ndarray, dtype, first_item: int, items: int) -> int:
    if array.dtype != np.dtype(dtype) or not array.flags.c_contiguous or array.size < items:
        raise ValueError(f"expected a C-contiguous {np.dtype(dtype)} buffer of {items} items, got "
                         f"{array.dtype} {array.shape}")
    return array.ctypes.data + first_item * array.itemsize


class Block:
    """Envs [start, stop) of a pool, stepped in place in the pool's buffers
    (the same interface as a header env's Cython Block)."""

    def __init__(self, binding: MujocoBinding, buffers, start: int, stop: int, mode: int,
                 keep_final_obs: bool = False):
        n = buffers.num_envs
        if not 0 <= start < stop <= n:
            raise ValueError(f"block [{start}, {stop}) is not inside [0, {n})")
        if mode not in (0, 1, 2):
            raise ValueError(f"autoreset mode must be 0, 1 or 2, got {mode}")
        lib = library()
        self._lib = lib
        self._binding = binding
        self._buffers = buffers   # keeps the memory alive while the C block points into it
        self.count = stop - start
        obs, act = binding.OBS_ELEMENTS, binding.ACT_ELEMENTS
        error = ctypes.create_string_buffer(500)
        self._block = lib.shoal_mj_block_new(
            binding.kind, binding.model, binding.cfg.ctypes.data, len(binding.cfg),
            binding.spec.env_kwargs["frame_skip"], binding.spec.max_episode_steps or 0, self.count,
            _row_address(buffers.env_states, np.uint8, start * binding.ENV_BYTES, n * binding.ENV_BYTES),
            _row_address(buffers.episodes, buffers.episodes.dtype, start, n),
            _row_address(buffers.reset_requests, np.uint8, start, n),
            _row_address(buffers.step_selected, np.uint8, start, n),
            _row_address(buffers.seeds, np.uint64, start, n),
            _row_address(buffers.actions, np.float32, start * act, n * act),
            _row_address(buffers.obs, np.float64, start * obs, n * obs),
            _row_address(buffers.final_obs, np.float64, start * obs, n * obs) if keep_final_obs else None,
            _row_address(buffers.rewards, np.float32, start, n),
            _row_address(buffers.terminals, np.bool_, start, n),
            _row_address(buffers.truncations, np.bool_, start, n),
            _row_address(buffers.masks, np.bool_, start, n),
            mode, error, len(error))
        if not self._block:
            raise RuntimeError(f"{binding.spec.name}: {error.value.decode(errors='replace')}")
        self._start = start

    def __del__(self):
        if getattr(self, "_block", None):
            self._lib.shoal_mj_block_free(self._block)
            self._block = None

    @property
    def ops_address(self) -> int:
        """Address of this block's C ops table, for the worker loop."""
        return self._lib.shoal_mj_block_ops(self._block)

    def step(self):
        """Step every env of the block once (actions read from the buffer)."""
        self._lib.shoal_mj_block_run(self._block, 1)   # SHOAL_CMD_STEP

    def reset(self):
        """Reset the envs whose reset_requests entry is RESET or RESEED."""
        self._lib.shoal_mj_block_run(self._block, 2)   # SHOAL_CMD_RESET

    def step_selected(self):
        """Step the envs whose step_selected entry is nonzero; the others stay as they are."""
        self._lib.shoal_mj_block_run(self._block, 5)   # SHOAL_CMD_STEP_SELECTED

    def run_steps(self, action_table: np.ndarray, steps: int, first_row: int = 0) -> None:
        """The plain C loop, for benchmarks: `steps` steps of the block in one
        C call, step t reading its actions from row (first_row + t) %
        len(action_table)."""
        table = np.ascontiguousarray(action_table, dtype=np.float32)
        if table.ndim != 2 or table.shape[1] != self.count * self._binding.ACT_ELEMENTS:
            raise ValueError(f"action_table rows need {self.count * self._binding.ACT_ELEMENTS} actions")
        self._lib.shoal_mj_block_run_steps(self._block, table.ctypes.data, len(table), int(steps),
                                           int(first_row) % len(table))

    def set_state(self, i: int, qpos, qvel) -> None:
        """Env `i` of the block (0-based within it): set qpos / qvel as
        gymnasium's MujocoEnv.set_state does, and write its obs row."""
        b = self._binding
        qpos = np.ascontiguousarray(qpos, dtype=np.float64)
        qvel = np.ascontiguousarray(qvel, dtype=np.float64)
        if not 0 <= i < self.count or qpos.shape != (b.nq,) or qvel.shape != (b.nv,):
            raise ValueError(f"set_state needs 0 <= i < {self.count}, qpos ({b.nq},), qvel ({b.nv},)")
        self._lib.shoal_mj_block_set_state(self._block, i, qpos.ctypes.data, qvel.ctypes.data)

    def get_state(self, i: int) -> tuple[np.ndarray, np.ndarray]:
        """(qpos, qvel) of env `i` of the block (copies)."""
        b = self._binding
        if not 0 <= i < self.count:
            raise ValueError(f"get_state needs 0 <= i < {self.count}")
        qpos, qvel = np.zeros(b.nq), np.zeros(b.nv)
        self._lib.shoal_mj_block_get_state(self._block, i, qpos.ctypes.data, qvel.ctypes.data)
        return qpos, qvel
