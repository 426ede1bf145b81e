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

import collections
import ctypes
import hashlib
import importlib.util
import os
import sys
import warnings
import weakref
from pathlib import Path

import numpy as np

from shoal.envs import EnvSpec, SpecMismatchError, check_spec_against_binding
from shoal.envs.mujoco import (GYMNASIUM_INFO_DTYPES, MODELS, TENDON_INFO_KEYS, cfg_values, default_kwargs,
                               render_options)
from shoal.envs.mujoco.build import library_path
from shoal.pool import _native
from shoal.pool.layout import EPISODE_DTYPE

_P = ctypes.c_void_p


def _load_library():
    lib = ctypes.CDLL(str(library_path()))
    lib.shoal_mj_load_model.restype = _P
    lib.shoal_mj_load_model.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_int]
    lib.shoal_mj_free_model.argtypes = [_P]
    lib.shoal_mj_model_sizes.argtypes = [_P, _P, _P, _P]
    lib.shoal_mj_model_bytes.restype = ctypes.c_int64
    lib.shoal_mj_model_bytes.argtypes = [_P, _P, ctypes.c_int64]
    lib.shoal_mj_kind_name.restype = ctypes.c_char_p
    lib.shoal_mj_obs_size.argtypes = [ctypes.c_int, _P, _P]
    lib.shoal_mj_block_new.restype = _P
    lib.shoal_mj_block_new.argtypes = [ctypes.c_int, _P, _P, ctypes.c_int, ctypes.c_int, ctypes.c_int,
                                       ctypes.c_int64] + [_P] * 12 + [ctypes.c_int, ctypes.c_char_p,
                                                                      ctypes.c_int]
    lib.shoal_mj_block_free.argtypes = [_P]
    lib.shoal_mj_block_run.argtypes = [_P, ctypes.c_int]
    lib.shoal_mj_block_run.restype = ctypes.c_int64   # how long it took, ns
    lib.shoal_mj_block_ops.restype = _P
    lib.shoal_mj_block_ops.argtypes = [_P]
    lib.shoal_mj_block_set_state.argtypes = [_P, ctypes.c_int64, _P, _P]
    lib.shoal_mj_block_get_state.argtypes = [_P, ctypes.c_int64, _P, _P]
    lib.shoal_mj_block_copy_data.argtypes = [_P, ctypes.c_int64, _P, _P]
    lib.shoal_mj_block_run_steps.argtypes = [_P, _P, ctypes.c_int64, ctypes.c_int64, ctypes.c_int64]
    lib.kind_index = {lib.shoal_mj_kind_name(k).decode(): k for k in range(lib.shoal_mj_num_kinds())}
    # The same function called with the GIL kept (ctypes.CDLL gives it up
    # for every call): Block._run's short calls
    lib.block_run_keeping_gil = ctypes.PyDLL(str(library_path())).shoal_mj_block_run
    lib.block_run_keeping_gil.argtypes = [_P, ctypes.c_int]
    lib.block_run_keeping_gil.restype = ctypes.c_int64
    return lib


# A block whose last two calls took less than this keeps the GIL
# (Block._run); the pool's rule, pool/_native.pyx.
HOLD_GIL_NS = int(_native.HOLD_GIL_S * 1e9)


_library = None


class LoadedModel:
    """One mjModel* of this process, freed when the last binding holding
    it goes (blocks hold their binding, so never under a live env)."""

    def __init__(self, address: int):
        self.address = address
        # (not at exit: blocks still being freed then may follow it)
        weakref.finalize(self, library().shoal_mj_free_model, address).atexit = False


# model_identity(xml_file) -> its LoadedModel, while a binding holds it.
_models: weakref.WeakValueDictionary[tuple, LoadedModel] = weakref.WeakValueDictionary()
# Bindings of the envs' own models: kept for the process (a few, one per
# env and keyword arguments). Those of other model files (a sweep may make
# thousands, ~0.5 MB each for Humanoid) live while a pool, SingleEnv or
# spec user holds them, and the last few made stay for reuse.
_bindings: dict[tuple, "MujocoBinding"] = {}
_file_bindings: weakref.WeakValueDictionary[tuple, "MujocoBinding"] = weakref.WeakValueDictionary()
_recent_file_bindings: collections.OrderedDict[tuple, "MujocoBinding"] = collections.OrderedDict()
RECENT_FILE_BINDINGS = 4


def library():
    """The built library, loaded once per process."""
    global _library
    if _library is None:
        _library = _load_library()
    return _library


def model_path(xml_file: str) -> Path:
    """gymnasium's rule (mujoco_env.expand_model_path): a path starting
    with "." or "/" is used as is, one starting with "~" is the user's;
    any other is a file of gymnasium's MuJoCo assets."""
    if xml_file.startswith((".", "/")):
        return Path(xml_file)
    if xml_file.startswith("~"):
        return Path(xml_file).expanduser()
    spec = importlib.util.find_spec("gymnasium")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError('shoal\'s MuJoCo envs load their models from gymnasium\'s assets; '
                          'pip install "shoal[mujoco]"')
    return Path(spec.submodule_search_locations[0]) / "envs" / "mujoco" / "assets" / xml_file


def model_identity(xml_file: str) -> tuple:
    """(absolute path, digest of the model's files): what a loaded model is
    cached under, so that a model rewritten between pools (a mass sweep, a
    generated model; its own file or one it includes, a mesh it reads) is
    loaded again, as gymnasium's envs load theirs each time."""
    path = model_path(xml_file)
    if not path.is_file():
        raise FileNotFoundError(f"MuJoCo model {path} not found")
    digest = hashlib.sha256()
    for file in model_files(path):
        digest.update(f"{file.relative_to(path.parent) if file.is_relative_to(path.parent) else file}\0".encode())
        with open(file, "rb") as f:
            digest.update(hashlib.file_digest(f, "sha256").digest())
    return str(path.resolve()), digest.hexdigest()


# The MJCF elements that read files, and the <compiler> folder each is under.
_FILE_ELEMENTS = {"mesh": "meshdir", "skin": "meshdir", "hfield": "assetdir", "texture": "texturedir",
                  "model": "assetdir"}


def model_files(path: Path) -> list[Path]:
    """The MJCF file `path` and the files it reads that exist: those it
    <include>s (and theirs), meshes, height fields, textures and skins,
    found as MuJoCo finds them (relative to the model's folder and the
    <compiler>'s meshdir / texturedir / assetdir). A file that cannot be
    parsed is itself only: MuJoCo's load then says what is wrong."""
    import xml.etree.ElementTree as ElementTree

    root_dir, files, folders = path.parent, [path], {}
    pending = [path]
    while pending:
        try:
            tree = ElementTree.parse(pending.pop())
        except (ElementTree.ParseError, OSError):
            continue
        for element in tree.iter():
            if element.tag == "compiler":
                for key in ("meshdir", "texturedir", "assetdir"):
                    if key in element.attrib:
                        folders[key] = element.attrib[key]
        for element in tree.iter():
            for attribute, value in element.attrib.items():
                if not attribute.startswith("file"):
                    continue
                if element.tag == "include":
                    candidates = [root_dir / value]
                else:
                    folder = folders.get(_FILE_ELEMENTS.get(element.tag, ""), folders.get("assetdir"))
                    candidates = [root_dir / folder / value] if folder else []
                    candidates.append(root_dir / value)
                found = next((c for c in candidates if c.is_file()), None)
                if found is not None and found not in files:
                    files.append(found)
                    if element.tag == "include":
                        pending.append(found)
    return files


def load_model(xml_file: str, digest: str | None = None) -> LoadedModel:
    """The mjModel of `xml_file` as it is now on disk, in this process
    (loaded on first request for these file contents, shared while held);
    ValueError if `digest` is given and the file's is another (it changed
    on disk since the env's spec was configured)."""
    identity = model_identity(xml_file)
    if digest is not None and identity[1] != digest:
        raise ValueError(f"MuJoCo model {identity[0]} changed on disk since this env was made: make the "
                         f"env (or pool) again to use the new file")
    model = _models.get(identity)
    if model is None:
        path = identity[0]
        error = ctypes.create_string_buffer(1000)
        address = library().shoal_mj_load_model(path.encode(), error, len(error))
        if not address:
            raise ValueError(f"MuJoCo could not load {path}: {error.value.decode(errors='replace')}")
        model = _models[identity] = LoadedModel(address)
    return model


def binding_for(spec: EnvSpec) -> "MujocoBinding":
    """The binding of `spec` (one per env and keyword arguments, per process,
    while in use: see _bindings)."""
    key = (spec.name, tuple(sorted((k, v) for k, v in spec.env_kwargs.items())), spec.asset_digest)
    if spec.asset_digest is None:
        if key not in _bindings:
            _bindings[key] = MujocoBinding(spec)
        return _bindings[key]
    binding = _file_bindings.get(key)
    if binding is None:
        binding = _file_bindings[key] = MujocoBinding(spec)
    _recent_file_bindings[key] = binding
    _recent_file_bindings.move_to_end(key)
    while len(_recent_file_bindings) > RECENT_FILE_BINDINGS:
        _recent_file_bindings.popitem(last=False)
    return binding


# Mirrors `mujoco_state` in shoal_mujoco.h: one env's slot of env_states.
INFO_SLOTS = 13       # MUJOCO_INFO_SLOTS
INFO_TENDONS = 2      # MUJOCO_INFO_TENDONS
STATE_DTYPE = np.dtype([("rng", np.uint64), ("elapsed_steps", np.int32), ("pad", np.int32),
                        ("info", np.float64, (INFO_SLOTS,)),
                        ("final_info", np.float64, (INFO_SLOTS,))])


# gymnasium's OpenGL backends for offscreen frames (mujoco_rendering's
# _ALL_RENDERERS), tried in this order, and why each that could not start in
# this process failed: a failed one is never tried again (GLFW's second
# failed initialisation aborts the process: libc++'s recursive-init guard).
GL_BACKENDS = ("glfw", "egl", "osmesa")
_failed_gl_backends: dict[str, str] = {}


class MujocoBinding:
    """Sizes and dtypes of one configured MuJoCo env, and its Block."""

    AGENTS_PER_ENV = 1
    # gymnasium's MuJoCo render modes but "human" (no window here): depth is
    # the raw OpenGL depth buffer in [0, 1], as gymnasium returns it
    RENDER_MODES = ["rgb_array", "depth_array", "rgbd_tuple"]
    STATE_DTYPE = STATE_DTYPE
    OBS_DTYPE = np.dtype(np.float64)
    ACT_DTYPE = np.dtype(np.float32)

    def __init__(self, spec: EnvSpec):
        lib = library()
        self.spec = spec
        if spec.name not in lib.kind_index:
            raise RuntimeError(f"{spec.name} is not in shoal's MuJoCo library (library.c's KINDS)")
        self.kind = lib.kind_index[spec.name]
        self._loaded_model = load_model(spec.env_kwargs["xml_file"], spec.asset_digest)   # held: see LoadedModel
        self.model = self._loaded_model.address
        sizes = (ctypes.c_int * 5)()
        timestep = ctypes.c_double()
        ctrlrange = np.zeros((64, 2))
        lib.shoal_mj_model_sizes(self.model, sizes, ctypes.byref(timestep), ctrlrange.ctypes.data)
        self.nq, self.nv, self.nu, self.na, self.ntendon = sizes
        self._info_slots = self._info_slots_of(MODELS[spec.name])
        # gymnasium's reset info
        self.RESET_INFO_KEYS = tuple(key for key in MODELS[spec.name].reset_info_keys
                                     if key in {name for _, name in self._info_slots})
        # what gymnasium's front ends cast those keys to (info() gives float64 views)
        self.GYMNASIUM_INFO_DTYPES = GYMNASIUM_INFO_DTYPES.get(spec.name, {})
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
                             f"{spec.env_kwargs['xml_file']} (main_body must be one of its body indices; "
                             f"Reacher's and Pusher's models need the bodies their gymnasium envs read)")
        self.ACT_ELEMENTS = self.nu
        self.MAX_EPISODE_STEPS = spec.max_episode_steps
        check_spec_against_binding(spec, self)
        # gymnasium's action space is the model's ctrlrange, as float32.
        low, high = ctrlrange[:self.nu].T.astype(np.float32)
        if not (np.array_equal(low, spec.action_low) and np.array_equal(high, spec.action_high)):
            raise SpecMismatchError(f"{spec.name}: the model's ctrlrange {list(zip(low, high))} is not "
                                    f"the spec's action bounds")

    def _info_slots_of(self, model) -> list[tuple]:
        """(slot, name) in gymnasium's key order, so info dicts list keys as
        its envs do; a tendon array's slot is a slice (its ntendon values).
        A model with more tendons than the C env keeps has no tendon keys."""
        slots = []
        for key in model.gymnasium_info_keys:
            if key in TENDON_INFO_KEYS:
                if self.ntendon > INFO_TENDONS:
                    continue
                first = model.tendon_slot + TENDON_INFO_KEYS.index(key) * self.ntendon
                slots.append((slice(first, first + self.ntendon), key))
            else:
                slots.append((model.info_keys.index(key), key))
        return slots

    def info(self, env_states: np.ndarray, final: bool = False, keys=None) -> dict:
        """The last step's info values of every env (final: when its last
        reset began, i.e. a SAME_STEP autoreset's ended step), from the
        pool's env_states buffer: {name: array (num_envs,), or (num_envs,
        ntendon) for the Humanoids' tendon arrays}, names as
        gymnasium's step info. After a reset: the positions (RESET_INFO_KEYS),
        zeros elsewhere."""
        slots = env_states.view(STATE_DTYPE)["final_info" if final else "info"]
        return {key: slots[:, k] for k, key in self._info_slots if keys is None or key in keys}

    def Block(self, buffers, start: int, stop: int, mode: int, keep_final_obs: bool = False):
        return Block(self, buffers, start, stop, mode, keep_final_obs)

    # ---- the state of envs in this process (Serial pools; SingleEnv is one) ----

    def block_of(self, pool, index: int) -> tuple["Block", int]:
        """The block holding env `index` of a pool whose envs live in this
        process, and the env's index within it: MuJoCo's state is in the
        worker, out of reach of a Multiprocessing pool's process."""
        for batch in getattr(pool, "_blocks", ()):
            for block in batch:
                if block._start <= index < block._start + block.count:
                    return block, index - block._start
        raise ValueError(f"{self.spec.name}: reaching env {index}'s MuJoCo state (rendering, "
                         f"set_state) needs it in this process: use backend='serial' "
                         f"(gymnasium.make and SingleEnv do); a Multiprocessing pool keeps it in "
                         f"its workers")

    def state_of(self, pool, index: int) -> tuple[np.ndarray, np.ndarray]:
        """(qpos, qvel) of env `index` of a pool in this process (copies)."""
        block, i = self.block_of(pool, index)
        return block.get_state(i)

    def set_state_of(self, pool, index: int, qpos, qvel) -> None:
        """gymnasium's MujocoEnv.set_state on env `index` of a pool in this
        process: the next step goes on from qpos / qvel (its obs row is
        rewritten; the episode's step count and statistics go on)."""
        block, i = self.block_of(pool, index)
        block.set_state(i, qpos, qvel)

    def python_model(self):
        """A new mujoco.MjModel equal to the C envs' model: the one loaded from
        the XML file when this env was first made in this process, whatever
        the file holds now (a copy: changing it changes nothing in the envs)."""
        mujoco = import_mujoco()
        lib = library()
        size = lib.shoal_mj_model_bytes(self.model, None, 0)
        mjb = ctypes.create_string_buffer(size)
        lib.shoal_mj_model_bytes(self.model, mjb, size)
        return mujoco.MjModel.from_binary_path("model.mjb", {"model.mjb": mjb.raw})

    def model_copy(self):
        """This env's model as a mujoco.MjModel, for its constants (made
        once; the C envs have their own: changing this one changes nothing)."""
        if getattr(self, "_model_copy", None) is None:
            self._model_copy = self.python_model()
        return self._model_copy

    @property
    def init_qpos(self) -> np.ndarray:
        """The model's qpos0, gymnasium's init_qpos (read-only: the C env
        resets from the model's own, so changing it would change nothing)."""
        if getattr(self, "_init_qpos", None) is None:
            self._init_qpos = np.array(self.model_copy().qpos0, dtype=np.float64)
            self._init_qpos.flags.writeable = False
        return self._init_qpos

    # ---- rendering (MuJoCo's own renderer, through its Python bindings) ----

    def render_pool(self, pool, index: int, tracking: bool = False, mode: str = "rgb_array"):
        """An RGB frame of env `index` of a pool whose envs live in this
        process, as gymnasium's env renders it with its default render
        keywords (each env keeps its own camera, fixed at its first frame,
        as each of a SyncVectorEnv's envs does). tracking (shoal's GIFs):
        from the model's camera "track", which follows the body, where it
        has one (gymnasium's default view before gymnasium 1.4, whose free
        camera stays where the env's first frame was drawn). mode: one of
        RENDER_MODES (FrameRenderer.frame)."""
        block, i = self.block_of(pool, index)
        mujoco = import_mujoco()
        tracking = tracking and mujoco.mj_name2id(self.model_copy(), mujoco.mjtObj.mjOBJ_CAMERA, "track") != -1
        if getattr(self, "_pool_frames", None) is None:
            self._pool_frames = {}
        if tracking not in self._pool_frames:
            options = render_options(self.spec.name, **({"camera_name": "track"} if tracking else {}))
            self._pool_frames[tracking] = FrameRenderer(self.spec, options)
        return self._pool_frames[tracking].frame(block, i, cameras=block.render_cameras, key=(tracking, i),
                                                 mode=mode)


def import_mujoco():
    """mujoco's Python bindings. Imported here first on a machine without a
    display, MUJOCO_GL defaults to egl: the default of MuJoCo's and
    gymnasium's renderers, GLFW, cannot open a context there."""
    if "mujoco" not in sys.modules and not os.environ.get("DISPLAY"):
        os.environ.setdefault("MUJOCO_GL", "egl")
    import mujoco
    return mujoco


class FrameRenderer:
    """RGB frames of one env's model drawn as gymnasium's MujocoRenderer
    draws them for render_mode="rgb_array", from (qpos, qvel) states: the
    same framebuffer size, scene and camera, so equal states give equal
    frames (tests/test_single_env_parity.py).

    gymnasium's camera: unless camera_id / camera_name pick one of the
    model's cameras (fixed), the free camera, which at the env's first
    frame looks at the median of the geoms' positions from the model's
    extent, then takes default_camera_config's fields; it does not follow
    the body (a free camera ignores trackbodyid). A frame draws a copy of
    the C env's mjData, as gymnasium draws its env's data: after a step the
    bodies stand where the last substep started (what mj_step leaves in
    xpos), not at the final qpos.

    `options`: render_options()'s dict. Loads the model when made (an
    unknown camera_id is an error then); the OpenGL context starts at the
    first frame.
    """

    def __init__(self, spec: EnvSpec, options: dict):
        mujoco = import_mujoco()
        self._mujoco = mujoco
        self.options = options
        self._name = spec.name
        model = binding_for(spec).python_model()   # the envs' own model, not the file as it is now
        # gymnasium grows the offscreen framebuffer to the frame, never shrinks it
        model.vis.global_.offwidth = max(model.vis.global_.offwidth, options["width"])
        model.vis.global_.offheight = max(model.vis.global_.offheight, options["height"])
        self._model, self._data = model, mujoco.MjData(model)
        self.camera_id = self._resolve_camera(spec.env_kwargs["xml_file"])
        self._scene_option = mujoco.MjvOption()
        for flag, value in (options["visual_options"] or {}).items():
            if not 0 <= int(flag) < len(self._scene_option.flags):
                raise ValueError(f"{self._name}: visual_options key {flag!r} is not a mujoco.mjtVisFlag")
            self._scene_option.flags[flag] = value
        self._context = None
        self.cameras: dict = {}   # each env's camera (key: the caller's), made at its first frame

    def _resolve_camera(self, xml_file: str) -> int:
        """gymnasium's camera choice: camera_id as given (-1: the free
        camera), camera_name's id, or (neither given) the free camera."""
        camera_id, camera_name = self.options["camera_id"], self.options["camera_name"]
        mujoco, model = self._mujoco, self._model
        if camera_id is not None:
            if not -1 <= camera_id < model.ncam:
                raise ValueError(f"{self._name}: camera_id {camera_id} is not a camera of {xml_file} "
                                 f"(-1, the free camera, to {model.ncam - 1})")
            return camera_id
        if camera_name is None:
            return -1
        found = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_CAMERA, camera_name)
        if found == -1:   # gymnasium draws from the free camera then, silently
            names = [mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_CAMERA, k) for k in range(model.ncam)]
            warnings.warn(f"{self._name}: camera_name {camera_name!r} is not a camera of {xml_file} "
                          f"(its named cameras: {[name for name in names if name]}); frames come "
                          f"from the free camera, as in gymnasium", stacklevel=3)
        return found

    def _start(self) -> None:
        """The OpenGL context and MuJoCo's offscreen buffer, as gymnasium's
        OffScreenViewer makes them; its backend is MUJOCO_GL's, read now
        (so it may be set after importing mujoco), else the first of
        GL_BACKENDS that starts, glfw only where there is a display to open
        (without one it fails at the first frame instead)."""
        mujoco, width, height = self._mujoco, self.options["width"], self.options["height"]
        chosen = os.environ.get("MUJOCO_GL", "").strip().lower()
        has_display = bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))
        backends = [chosen] if chosen else [b for b in GL_BACKENDS if b != "glfw" or has_display]
        for backend in backends:
            if backend in _failed_gl_backends:
                continue
            try:
                if backend not in GL_BACKENDS:
                    raise ValueError(f"MUJOCO_GL must be one of {GL_BACKENDS}")
                context = importlib.import_module(f"mujoco.{backend}").GLContext(width, height)
                context.make_current()
                mjr_context = mujoco.MjrContext(self._model, mujoco.mjtFontScale.mjFONTSCALE_150)
            except Exception as e:
                _failed_gl_backends[backend] = f"{backend}: {type(e).__name__}: {e}"
                continue
            mujoco.mjr_setBuffer(mujoco.mjtFramebuffer.mjFB_OFFSCREEN, mjr_context)
            self._context, self._mjr_context = context, mjr_context
            self._scene = mujoco.MjvScene(self._model, self.options["max_geom"])
            self._viewport = mujoco.MjrRect(0, 0, width, height)
            self._perturb = mujoco.MjvPerturb()
            return
        tried = "; ".join(_failed_gl_backends[b] for b in backends if b in _failed_gl_backends)
        raise RuntimeError(
            f"MuJoCo's renderer could not create an OpenGL context ({tried or 'no backend to try'}). "
            f"On a machine without a display set MUJOCO_GL=egl (or MUJOCO_GL=osmesa with OSMesa "
            f"installed)")

    def _first_camera(self):
        """gymnasium's OffScreenViewer._init_camera, then its default camera
        config, then the chosen camera (its render)."""
        mujoco = self._mujoco
        camera = mujoco.MjvCamera()
        camera.type = mujoco.mjtCamera.mjCAMERA_FREE
        camera.fixedcamid = -1
        for axis in range(3):
            camera.lookat[axis] = np.median(self._data.geom_xpos[:, axis])
        camera.distance = self._model.stat.extent
        for key, value in (self.options["default_camera_config"] or {}).items():
            if key == "lookat":
                camera.lookat[:] = np.asarray(value, dtype=np.float64)
            else:
                setattr(camera, key, value)
        fixed = self.camera_id != -1
        camera.type = mujoco.mjtCamera.mjCAMERA_FIXED if fixed else mujoco.mjtCamera.mjCAMERA_FREE
        camera.fixedcamid = self.camera_id
        return camera

    def frame(self, block: "Block", i: int, cameras: dict | None = None, key=0, mode: str = "rgb_array"):
        """Env `i` of `block` as it is now, through camera `key` of `cameras`
        (default: this renderer's own), made from this state if it has none
        yet: for mode "rgb_array" an RGB frame (height, width, 3) uint8,
        "depth_array" the depth buffer (height, width) float32, "rgbd_tuple"
        both, as gymnasium's renderer returns them."""
        if self._context is None:
            self._start()
        mujoco, data = self._mujoco, self._data
        block.copy_data_into(i, self._model, data)
        cameras = self.cameras if cameras is None else cameras
        if key not in cameras:
            cameras[key] = self._first_camera()
        self._context.make_current()   # another renderer's (gymnasium's) may be current
        mujoco.mjv_updateScene(self._model, data, self._scene_option, self._perturb, cameras[key],
                               mujoco.mjtCatBit.mjCAT_ALL, self._scene)
        mujoco.mjr_render(self._viewport, self._scene, self._mjr_context)
        height, width = self.options["height"], self.options["width"]
        pixels = np.empty((height, width, 3), dtype=np.uint8) if mode != "depth_array" else None
        depth = np.empty((height, width), dtype=np.float32) if mode != "rgb_array" else None
        mujoco.mjr_readPixels(pixels, depth, self._viewport, self._mjr_context)
        # OpenGL's rows run bottom to top
        if mode == "rgb_array":
            return np.ascontiguousarray(pixels[::-1])
        if mode == "depth_array":
            return np.ascontiguousarray(depth[::-1])
        return np.ascontiguousarray(pixels[::-1]), np.ascontiguousarray(depth[::-1])

    def close(self) -> None:
        """Free the OpenGL context (a later frame starts a new one)."""
        if getattr(self, "_context", None) is not None:
            self._context.make_current()   # MuJoCo frees its buffers in the current context
            self._mjr_context.free()
            self._context.free()
            self._context = self._mjr_context = None

    def __del__(self, _finalizing=sys.is_finalizing):   # bound now: at exit the module's globals are None
        if not _finalizing():   # at exit EGL's display is gone already, and the OS frees all
            self.close()


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
            said = error.value.decode(errors="replace")
            if said.startswith("out of memory"):
                of_pool = f" (envs {start}..{stop - 1} of a pool of {n})" if self.count != n else ""
                raise MemoryError(f"{binding.spec.name}: {said}{of_pool}: make fewer envs per process")
            raise RuntimeError(f"{binding.spec.name}: {said}")
        self._start = start
        self._call_ns = (0, 0)   # how long the last two steps / resets took (_run)
        # Each env's camera for render_pool (gymnasium fixes a free camera
        # when the env's first frame is drawn): (tracking, env index in the
        # block) -> camera.
        self.render_cameras: dict = {}

    def __del__(self):
        if getattr(self, "_block", None):
            self._lib.shoal_mj_block_free(self._block)
            self._block = None

    @property
    def ops_address(self) -> int:
        """Address of this block's C ops table, for the worker loop."""
        return self._lib.shoal_mj_block_ops(self._block)

    def _run(self, command: int) -> None:
        """`command` over the block, without the GIL only if the last two
        calls took HOLD_GIL_NS or more: as a header env's Block
        (vec_binding.pxi), a short call that gave it up got it back from a
        busy Python thread only after that thread's switch interval (5 ms)."""
        long_block = min(self._call_ns) >= HOLD_GIL_NS
        run = self._lib.shoal_mj_block_run if long_block else self._lib.block_run_keeping_gil
        # (timed in C: taking the GIL back can wait)
        self._call_ns = (self._call_ns[1], run(self._block, command))

    def step(self):
        """Step every env of the block once (actions read from the buffer)."""
        self._run(1)   # SHOAL_CMD_STEP

    def reset(self):
        """Reset the envs whose reset_requests entry is RESET or RESEED."""
        self._run(2)   # SHOAL_CMD_RESET

    def step_selected(self):
        """Step the envs whose step_selected entry is nonzero; the others stay as they are."""
        self._run(5)   # SHOAL_CMD_STEP_SELECTED

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

    def copy_data_into(self, i: int, model, data) -> None:
        """Env `i`'s whole mjData into `data`, a mujoco.MjData of `model`
        (this env's model file, loaded by the mujoco package)."""
        if not 0 <= i < self.count:
            raise ValueError(f"copy_data_into needs 0 <= i < {self.count}")
        if self._lib.shoal_mj_block_copy_data(self._block, i, model._address, data._address) != 0:
            raise ValueError(f"{self._binding.spec.name}: the renderer's model does not match the "
                             f"env's (another compiled model, or data of other sizes); both should "
                             f"come from the same model file")

    def get_state(self, i: int) -> tuple[np.ndarray, np.ndarray]:
        """(qpos, qvel) of env `i` of the block (copies)."""
        b = self._binding
        if not 0 <= i < self.count:
            raise ValueError(f"get_state needs 0 <= i < {self.count}")
        qpos, qvel = np.zeros(b.nq), np.zeros(b.nv)
        self._lib.shoal_mj_block_get_state(self._block, i, qpos.ctypes.data, qvel.ctypes.data)
        return qpos, qvel
