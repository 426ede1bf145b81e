"""shoal.cuda: the CUDA backend, the same env headers run as GPU kernels.

    from shoal.cuda import CudaVecEnv
    env = CudaVecEnv("CartPole", num_envs=1 << 20, device="cuda", seed=0)
    obs, info = env.reset(seed=0)
    obs, rewards, terminals, truncations, info = env.step(actions)   # actions: a device tensor

Every array is a torch tensor on `device`, allocated once and updated in
place by each call (like the pool's numpy views: copy to keep). Rows are
agents, env i owning rows i*agents .. (i+1)*agents - 1; `masks` says which
rows hold a live agent.

device="cuda" (or "cuda:k"): each env's kernel is envs/<env>/kernel.cu, the
env header run through shoal_vec.h's P_slot_step / P_slot_reset with one
thread per env (envs/shoal_kernel.cuh), so step logic, seeds and autoreset
are the Cython loop's. It is compiled on first use with torch's extension
loader (nvcc, -O3 -fmad=false so float math rounds as on the CPU) and cached
in torch's extension folder. Shared read-only assets (Drive's maps,
Explorer's floorplans) are built on the host by the Cython binding and
uploaded once per GPU.

device="cpu": the same object over a Serial pool (the Cython loop), its numpy
buffers shared zero-copy as CPU tensors; this is how the API is tested on
machines without a GPU.

Importing shoal never imports this module; importing this module needs torch
but neither nvcc nor a GPU.
"""
from __future__ import annotations

import hashlib
import os
import shutil
import threading
from pathlib import Path

import numpy as np
import torch
from gymnasium.vector import AutoresetMode
from gymnasium.vector.utils import batch_space

import shoal.envs
from shoal.envs import EnvSpec, spec as lookup_spec
from shoal.pool.contract import (
    SEEN_DTYPE,
    ConstructionSeed,
    check_reset_options,
    construction_seed,
    episode_stats_since,
    fill_reset_requests,
    keep_unmasked,
    out_of_range_message,
    parse_reset_mask,
    same_step_info,
    validate_num_envs,
)
from shoal.pool.layout import EPISODE_DTYPE, pool_step_limit
from shoal.pool.native import AUTORESET_CODES, PoolClosedError, Serial, parse_autoreset_mode

ENVS_DIR = Path(shoal.envs.__file__).parent
# nvcc flags of every kernel. -fmad=false: no fused multiply-adds, so float
# envs round like the host build (the determinism invariant, DESIGN.md).
CUDA_FLAGS = ["-O3", "-fmad=false"]
CXX_FLAGS = ["-O3"]

_kernels: dict[str, object] = {}            # env folder -> loaded extension
_assets: dict[tuple[str, int], torch.Tensor] = {}   # (env folder, GPU index) -> assets on it
_lock = threading.Lock()


def env_folder(spec: EnvSpec) -> str:
    """The env's folder under envs/ (also its C prefix): 'cartpole', 'explorer_pointgoal'."""
    return spec.binding.split(".")[-2]


def kernel_sources(folder: str) -> list[Path]:
    """What one env's extension is built from: its kernel.cu and the pybind face."""
    return [ENVS_DIR / folder / "kernel.cu", ENVS_DIR / "shoal_kernel_binding.cpp"]


def _headers_digest() -> str:
    """Hash of every header and kernel source: part of the build flags, so an
    edited env header rebuilds the cached extension."""
    h = hashlib.sha1()
    for path in sorted(ENVS_DIR.glob("*.h")) + sorted(ENVS_DIR.glob("*.cuh")) \
            + sorted(ENVS_DIR.glob("*/*.h")) + sorted(ENVS_DIR.glob("*/kernel.cu")):
        h.update(path.name.encode())
        h.update(path.read_bytes())
    return h.hexdigest()[:16]


def find_nvcc() -> str | None:
    """nvcc of the CUDA toolkit torch would use (CUDA_HOME), else on PATH."""
    from torch.utils.cpp_extension import CUDA_HOME
    if CUDA_HOME and os.path.exists(os.path.join(CUDA_HOME, "bin", "nvcc")):
        return os.path.join(CUDA_HOME, "bin", "nvcc")
    return shutil.which("nvcc")


def check_header_env(spec: EnvSpec) -> None:
    """ValueError unless `spec` is a header env: only those compile to CUDA
    kernels. Library-backed envs (MuJoCo) keep their state in CPU workers."""
    if spec.kind != "header":
        from shoal.envs import names
        raise ValueError(f"{spec.name} is a library-backed env (kind {spec.kind!r}: its state lives in "
                         f"CPU worker processes, e.g. MuJoCo's mjData) and has no CUDA kernel; use the "
                         f"CPU pool (shoal.make). The CUDA backend runs: {', '.join(names('header'))}")


def load_kernel(env: str | EnvSpec, verbose: bool = False):
    """The compiled CUDA kernel module of `env`, built on first use (cached by
    torch in its extension folder, TORCH_EXTENSIONS_DIR) and loaded once per
    process."""
    spec = lookup_spec(env) if isinstance(env, str) else env
    check_header_env(spec)
    folder = env_folder(spec)
    with _lock:
        if folder in _kernels:
            return _kernels[folder]
        if find_nvcc() is None:
            raise RuntimeError(
                f"shoal's CUDA backend compiles the {spec.name} kernel with nvcc on first use, "
                f"and no CUDA toolkit was found: install one and set CUDA_HOME or put nvcc on PATH")
        if torch.version.cuda is None:
            raise RuntimeError(f"torch {torch.__version__} is a CPU-only build: the CUDA backend "
                               f"needs a CUDA build of torch")
        from torch.utils.cpp_extension import load
        module = load(
            name=f"shoal_{folder}_kernel",
            sources=[str(p) for p in kernel_sources(folder)],
            extra_include_paths=[str(ENVS_DIR)],
            extra_cflags=CXX_FLAGS + [f"-DSHOAL_KERNEL_ENV={folder}"],
            extra_cuda_cflags=CUDA_FLAGS + [f"-DSHOAL_HEADERS_DIGEST={_headers_digest()}"],
            verbose=verbose,
        )
        binding = spec.load_binding()
        if module.ENV_BYTES != binding.ENV_BYTES:
            raise RuntimeError(f"{spec.name}: the env struct is {module.ENV_BYTES} bytes in the "
                               f"CUDA build but {binding.ENV_BYTES} in the Cython build")
        _kernels[folder] = module
        return module


def _upload_assets(spec: EnvSpec, module, device: torch.device) -> None:
    """Copy the env's host-built assets to `device` once and point the
    kernel's __device__ assets pointer there (envs without assets: nothing)."""
    if module.ASSETS_BYTES == 0:
        return
    key = (env_folder(spec), device.index)
    with _lock:
        if key in _assets:
            return
        host = spec.load_binding().assets_bytes()
        if len(host) != module.ASSETS_BYTES:
            raise RuntimeError(f"{spec.name}: assets are {len(host)} bytes on the host but "
                               f"{module.ASSETS_BYTES} in the CUDA build")
        on_device = torch.frombuffer(bytearray(host), dtype=torch.uint8).to(device)
        with torch.cuda.device(device):
            torch.cuda.synchronize(device)
            module.set_assets(on_device.data_ptr(), len(host))
        _assets[key] = on_device   # kept alive for the life of the process


def _cuda_device(device: torch.device) -> torch.device:
    if not torch.cuda.is_available():
        raise RuntimeError(
            f"CudaVecEnv(device={str(device)!r}): no CUDA device is available "
            f"(torch {torch.__version__}, CUDA build: {torch.version.cuda or 'no'}); "
            f"use device='cpu' to run the same API on the Cython loop")
    index = torch.cuda.current_device() if device.index is None else device.index
    if not 0 <= index < torch.cuda.device_count():
        raise RuntimeError(f"no CUDA device {index}: this machine has {torch.cuda.device_count()}")
    return torch.device("cuda", index)


STEP_KERNELS = ("direct", "staged", "staged_obs")
# step_kernel="auto": (variant, threads per block) per env, the fastest of
# scripts/profile_gpu.py's sweep on an H100 at 2^18 envs (docs/gpu-h100/
# profile.md): Snake staged_obs 1.29x direct, CartPole staged_obs 1.31x,
# Explorer staged 1.27x, Drive staged 1.10x; ExplorerPointGoal staged 1.03x
# (a tie). Envs not listed run direct. Where a GPU's shared memory is too
# small for these threads, fewer are used; where even 32 do not fit, direct.
STEP_KERNEL_AUTO: dict[str, tuple[str, int]] = {
    "CartPole": ("staged_obs", 32),
    "Snake": ("staged_obs", 32),
    "Explorer": ("staged", 32),
    "ExplorerPointGoal": ("staged", 32),
    "Drive": ("staged", 32),
}


def _smem_limit(device: torch.device) -> int:
    return getattr(torch.cuda.get_device_properties(device), "shared_memory_per_block_optin", 48 * 1024)


def measured_fits(module, kind: str, threads: int, device: torch.device) -> bool:
    return module.staged_smem(threads, int(kind == "staged_obs")) <= _smem_limit(device)


def staged_threads(module, stage_obs: bool, device: torch.device, wanted: int | None) -> int:
    """Threads per block of a staged kernel: `wanted`, else the largest of
    128, 96, 64, 32 whose shared-memory stage fits the device (0: none fits)."""
    limit = _smem_limit(device)
    if wanted is not None:
        if wanted <= 0 or wanted % 32:
            raise ValueError(f"threads_per_block must be a positive multiple of 32, got {wanted}")
        if module.staged_smem(wanted, int(stage_obs)) > limit:
            raise ValueError(f"threads_per_block={wanted}: the staged kernel needs "
                             f"{module.staged_smem(wanted, int(stage_obs))} bytes of shared memory "
                             f"per block, the device allows {limit}")
        return wanted
    for threads in (128, 96, 64, 32):
        if module.staged_smem(threads, int(stage_obs)) <= limit:
            return threads
    return 0


def _host_array(value) -> np.ndarray:
    """A user's array or tensor (on any device) as a numpy array."""
    return value.detach().cpu().numpy() if isinstance(value, torch.Tensor) else np.asarray(value)


_TORCH_DTYPES = {np.dtype(np.float32): torch.float32, np.dtype(np.uint8): torch.uint8,
                 np.dtype(np.int32): torch.int32, np.dtype(np.int8): torch.int8,
                 np.dtype(np.int16): torch.int16, np.dtype(np.float64): torch.float64}


class CudaVecEnv:
    """A vector env of a first-party shoal env whose arrays are torch tensors.

    Args:
        env: env name ("CartPole") or EnvSpec.
        num_envs: number of envs; there are num_envs * agents rows.
        device: "cuda", "cuda:k" (the CUDA kernels) or "cpu" (the Cython loop).
        autoreset_mode: NEXT_STEP (default), SAME_STEP or DISABLED, as the pool.
        seed: seeds every env at construction (env i: seed + i), as the pool; the
            first reset() without a seed, before any step, repeats that reset.
        check_actions: validate action range every step. On the GPU this
            costs a device-to-host sync per step; turn it off for benchmarks
            (out-of-range actions are then the env header's business). On
            the CPU the pool's own check always runs (it costs no sync).
        step_kernel: how the GPU step runs (outputs are identical):
            "direct": each thread works on its env struct in global memory;
            "staged": a block's env structs are copied to shared memory with
            coalesced loads, stepped there and copied back; "staged_obs":
            the obs rows too; "auto" (default): the measured best for the
            env (STEP_KERNEL_AUTO; docs/results.md). Ignored on the CPU.
        threads_per_block: block size of the staged kernels (a multiple of
            32; default: the largest of 32..128 whose stage fits in shared memory).
        env_kwargs: the env's keyword arguments; header envs take
            max_episode_steps (shorter than the header's limit).

    Attributes (tensors on `device`, updated in place): obs, rewards,
    terminals, truncations, masks, env_states (raw env structs, uint8),
    episodes (raw episode bookkeeping, uint8, EPISODE_DTYPE per env) and, in
    SAME_STEP mode, final_obs. env_states and episodes have the same bytes on
    both devices, so copying them from one CudaVecEnv to another (cpu to
    cuda) moves every env to the same state.
    """

    def __init__(self, env: str | EnvSpec, num_envs: int, *, device="cuda",
                 autoreset_mode=AutoresetMode.NEXT_STEP, seed: int | None = None,
                 check_actions: bool = True, step_kernel: str = "auto",
                 threads_per_block: int | None = None, env_kwargs: dict | None = None):
        self._closed = True
        self.spec = lookup_spec(env) if isinstance(env, str) else env
        self.spec = self.spec.configure(**(env_kwargs or {}))   # e.g. max_episode_steps
        check_header_env(self.spec)
        self.num_envs = validate_num_envs(num_envs)
        self.agents = self.spec.agents
        self.num_rows = self.num_envs * self.agents
        self.autoreset_mode = parse_autoreset_mode(autoreset_mode)
        self.metadata = {"autoreset_mode": self.autoreset_mode}
        self.check_actions = check_actions
        self.single_observation_space = self.spec.single_observation_space
        self.single_action_space = self.spec.single_action_space
        self.observation_space = batch_space(self.single_observation_space, self.num_rows)
        self.action_space = batch_space(self.single_action_space, self.num_rows)
        self._nvec = torch.tensor(self.spec.action_nvec, dtype=torch.int64)
        self._mode = AUTORESET_CODES[self.autoreset_mode]
        if step_kernel not in STEP_KERNELS + ("auto",):
            raise ValueError(f"step_kernel must be one of {', '.join(STEP_KERNELS)} or 'auto', "
                             f"got {step_kernel!r}")
        if threads_per_block is not None and (threads_per_block <= 0 or threads_per_block % 32):
            # (here, not only on the GPU: a config that runs on the CPU path runs on a GPU too)
            raise ValueError(f"threads_per_block must be a positive multiple of 32, got {threads_per_block}")
        self.step_kernel, self.threads_per_block = step_kernel, threads_per_block
        device = torch.device(device)
        if device.type == "cpu":
            self.device = device
            self._init_cpu(seed)
        elif device.type == "cuda":
            self.device = _cuda_device(device)
            self._init_cuda(seed)
        else:
            raise ValueError(f"device must be 'cpu' or 'cuda[:k]', got {str(device)!r}")

    # ---- construction ----------------------------------------------------------
    def _init_cpu(self, seed) -> None:
        self._pool = Serial(self.spec, self.num_envs, autoreset_mode=self.autoreset_mode, seed=seed)
        b = self._pool.buffers
        self.obs = torch.from_numpy(b.obs)
        self.rewards = torch.from_numpy(b.rewards)
        self.terminals = torch.from_numpy(b.terminals)
        self.truncations = torch.from_numpy(b.truncations)
        self.masks = torch.from_numpy(b.masks)
        self.env_states = torch.from_numpy(b.env_states)
        self.episodes = torch.from_numpy(b.episodes.view(np.uint8))
        # (None outside SAME_STEP, as on the GPU: the pool's buffer is not written then)
        self.final_obs = torch.from_numpy(b.final_obs) if self.autoreset_mode == AutoresetMode.SAME_STEP else None
        self.actions = torch.from_numpy(b.actions)
        self._final_mask = torch.zeros(self.num_rows, dtype=torch.bool)
        self._closed = False

    def _init_cuda(self, seed) -> None:
        self._pool = None
        self._kernel = load_kernel(self.spec)
        _upload_assets(self.spec, self._kernel, self.device)
        kind, wanted = self.step_kernel, self.threads_per_block
        if kind == "auto":
            kind, measured = STEP_KERNEL_AUTO.get(self.spec.name, ("direct", 0))
            if wanted is None and kind != "direct" and measured_fits(self._kernel, kind, measured,
                                                                     self.device):
                wanted = measured
        self._threads = 0
        if kind != "direct":
            self._threads = staged_threads(self._kernel, kind == "staged_obs", self.device, wanted)
            if self._threads == 0:  # the stage does not fit: an explicit choice is an error
                if self.step_kernel != "auto":
                    raise ValueError(f"step_kernel={kind!r}: {self.spec.name}'s stage does not fit "
                                     f"in this GPU's shared memory even at 32 threads per block")
                kind = "direct"
        self.step_kernel = kind
        binding = self.spec.load_binding()
        dev, n, rows = self.device, self.num_envs, self.num_rows
        obs_dtype = _TORCH_DTYPES[np.dtype(self.spec.obs_dtype)]
        act_cols = () if self.spec.discrete_action and len(self.spec.action_nvec) == 1 \
            else (len(self.spec.action_nvec),)
        self.env_states = torch.zeros(n * binding.ENV_BYTES, dtype=torch.uint8, device=dev)
        episodes = np.zeros(n, EPISODE_DTYPE)
        episodes["step_limit"] = pool_step_limit(self.spec)
        self.episodes = torch.from_numpy(episodes.view(np.uint8)).to(dev)
        self.actions = torch.zeros((rows, *act_cols), dtype=torch.int32, device=dev)
        self.obs = torch.zeros((rows, *self.spec.obs_shape), dtype=obs_dtype, device=dev)
        keep_final = self.autoreset_mode == AutoresetMode.SAME_STEP
        self.final_obs = torch.zeros_like(self.obs) if keep_final else None
        self.rewards = torch.zeros(rows, dtype=torch.float32, device=dev)
        self.terminals = torch.zeros(rows, dtype=torch.bool, device=dev)
        self.truncations = torch.zeros(rows, dtype=torch.bool, device=dev)
        self.masks = torch.zeros(rows, dtype=torch.bool, device=dev)
        self._final_mask = torch.zeros(rows, dtype=torch.bool, device=dev)
        self._nvec_dev = self._nvec.to(dev)
        # host side of a reset: per-env requests and seeds, as the pool's
        self._requests = np.zeros(n, np.uint8)
        self._seeds = np.zeros(n, np.uint64)
        self._requests_dev = torch.zeros(n, dtype=torch.uint8, device=dev)
        self._seeds_dev = torch.zeros(n, dtype=torch.int64, device=dev)  # uint64 bits
        self._seen = np.zeros(n, dtype=SEEN_DTYPE)
        self._closed = False
        self._construction_seed = None
        seed = construction_seed(seed)
        self.reset(seed=seed)
        if self._pool is None:   # on the CPU, the pool keeps its own
            self._construction_seed = ConstructionSeed(seed, n)

    # ---- the API ---------------------------------------------------------------------
    @property
    def closed(self) -> bool:
        """Closed by close(), or, on the CPU, by its pool (an error or a
        signal handler's exception inside a call closes a pool)."""
        pool = getattr(self, "_pool", None)
        return self._closed or (pool is not None and pool.closed)

    def _check_open(self) -> None:
        if self.closed:
            why = "" if self._closed else " (its CPU pool closed itself: an error or a signal inside a call)"
            raise PoolClosedError(f"this CudaVecEnv is closed{why}")

    def _stream(self) -> int:
        return torch.cuda.current_stream(self.device).cuda_stream

    def reset(self, *, seed=None, options: dict | None = None):
        """Reset envs, with the pool's rules.

        Args:
            seed: None keeps each env's RNG going; int s gives env i the seed
                s + i; a sequence gives one seed (or None) per env.
            options: {"reset_mask": bool (num_envs,), numpy or tensor} resets
                only those envs.

        Returns:
            (obs, info): obs is this env's own tensor on `device`, updated in
            place by later calls; info is {}.

        Raises:
            ValueError / TypeError: a bad seed or reset_mask (nothing is reset).
            RuntimeError: the env is closed.
        """
        self._check_open()
        check_reset_options(options, self.spec)
        mask = parse_reset_mask(options, self.num_envs, as_array=_host_array)
        if self._pool is not None:
            self._pool.reset(seed=seed, options=None if mask is None else {"reset_mask": mask})
            return self.obs, {}
        fill_reset_requests(seed, self._requests, self._seeds)
        keep_unmasked(self._requests, mask)
        if self._construction_seed is not None:
            self._construction_seed.on_reset(self._requests, self._seeds)
        self._requests_dev.copy_(torch.from_numpy(self._requests))
        self._seeds_dev.copy_(torch.from_numpy(self._seeds.view(np.int64)))
        with torch.cuda.device(self.device):
            self._kernel.reset(self.env_states.data_ptr(), self.episodes.data_ptr(), self.num_envs,
                               self._requests_dev.data_ptr(), self._seeds_dev.data_ptr(),
                               self.obs.data_ptr(), self.rewards.data_ptr(),
                               self.terminals.data_ptr(), self.truncations.data_ptr(),
                               self.masks.data_ptr(), self._stream())
        return self.obs, {}

    def _actions_tensor(self, actions) -> torch.Tensor:
        """actions as an int32 tensor on the device, shaped like self.actions,
        without a copy when it already is one."""
        a = actions if isinstance(actions, torch.Tensor) else torch.as_tensor(np.asarray(actions))
        if tuple(a.shape) != tuple(self.actions.shape):
            raise ValueError(f"actions must have shape {tuple(self.actions.shape)} "
                             f"({self.num_rows} rows x {self.single_action_space}), "
                             f"got {tuple(a.shape)}")
        if a.dtype.is_floating_point or a.dtype.is_complex or a.dtype == torch.bool:
            raise ValueError(f"actions must be integers (discrete), got dtype {a.dtype}")
        if self.check_actions:
            nvec = self._nvec_dev if a.device == self.device else self._nvec.to(a.device)
            flat = a.reshape(self.num_rows, -1).long()
            bad = ((flat < 0) | (flat >= nvec)).any(dim=1)
            if bool(bad.any()):
                row = int(bad.nonzero()[0, 0])
                raise ValueError(out_of_range_message(a[row].tolist(), row, list(self.spec.action_nvec)))
        if a.dtype == torch.int32 and a.device == self.device and a.is_contiguous():
            return a
        self.actions.copy_(a, non_blocking=True)
        return self.actions

    def step(self, actions):
        """Step every env once (on the GPU: launched on the current stream,
        no host sync unless check_actions).

        Args:
            actions: integers of shape action_space.shape; ideally an int32
                tensor on `device` (used in place), else copied in.

        Returns:
            (obs, rewards, terminals, truncations, info), this env's own
            tensors updated in place. SAME_STEP: info holds "final_obs",
            valid in the rows where info["_final_obs"].

        Raises:
            ValueError: actions of the wrong shape or kind, or out of range
                when check_actions.
            RuntimeError: the env is closed, or a CUDA launch failed.
        """
        self._check_open()
        if self._pool is not None:
            a = actions.detach().cpu().numpy() if isinstance(actions, torch.Tensor) else actions
            self._pool.step(a)
        else:
            a = self._actions_tensor(actions)
            if self._construction_seed is not None:
                self._construction_seed.stepped()
            final = self.final_obs.data_ptr() if self.final_obs is not None else 0
            args = (self.env_states.data_ptr(), self.episodes.data_ptr(), self.num_envs,
                    a.data_ptr(), self.obs.data_ptr(), self.rewards.data_ptr(),
                    self.terminals.data_ptr(), self.truncations.data_ptr(),
                    self.masks.data_ptr(), final, self._mode)
            with torch.cuda.device(self.device):
                if self.step_kernel == "direct":
                    self._kernel.step(*args, self._stream())
                else:
                    self._kernel.step_staged(*args, self._threads,
                                             int(self.step_kernel == "staged_obs"), self._stream())
        info = {}
        if self.autoreset_mode == AutoresetMode.SAME_STEP:
            info = same_step_info(self.final_obs, self._final_mask, self.terminals,
                                  self.truncations, logical_or=torch.logical_or)
        return self.obs, self.rewards, self.terminals, self.truncations, info

    def episode_stats(self) -> dict:
        """Episodes finished since the last call: {"episodes", "mean_return",
        "mean_length"} (means NaN if none), as the pool's. Copies the episode
        bookkeeping to the host (a sync): call it off the hot path."""
        self._check_open()
        if self._pool is not None:
            return self._pool.episode_stats()
        return episode_stats_since(self.episodes.cpu().numpy().view(EPISODE_DTYPE), self._seen)

    def close(self) -> None:
        """Release the pool (cpu) or the device tensors (cuda). Safe to call twice."""
        if self._closed:
            return
        self._closed = True
        if self._pool is not None:
            self._pool.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self):
        kernel = f", step_kernel={self.step_kernel!r}" if self.device.type == "cuda" else ""
        return (f"CudaVecEnv({self.spec.name}, num_envs={self.num_envs}, device={str(self.device)!r}{kernel}"
                f"{', closed' if self.closed else ''})")
