"""Memory for a pool: one region per pool, carved into named numpy arrays.

A pool's region is a memfd (anonymous shared memory, Linux): it never shows
up in /dev/shm, and the kernel frees it once the last process holding it
exits or unmaps it, so no crash, Ctrl-C or SIGKILL can leak a segment.
Forked workers inherit the mapping (and drop those of other pools: see
shoal.pool.workers); spawned or forkserver workers receive the file
descriptor when the region is pickled. Buffers refuses, before allocating,
a pool larger than the memory available.
"""
from __future__ import annotations

import errno
import os
import weakref
from dataclasses import dataclass

import numpy as np

from shoal.pool._native import SharedMapping

ALIGN = 64  # every array starts on its own cache line

# Mirrors `shoal_episode` in envs/shoal_vec.h (48 bytes).
EPISODE_DTYPE = np.dtype({
    "names": ["episode_return", "return_sum", "finished", "length_sum",
              "episode_length", "needs_reset", "step_limit"],
    "formats": [np.float64, np.float64, np.int64, np.int64, np.int32, np.uint8, np.int32],
    "offsets": [0, 8, 16, 24, 32, 36, 40],
    "itemsize": 48,
})

MEMFD_NAME = "shoal-pool"  # workers recognise other pools' regions by it (shoal.pool.workers)
CTRL_BYTES = 128  # mirrors `shoal_ctrl` in pool/shoal_sync.h


def pool_step_limit(spec) -> int:
    """The step limit the vector loop applies on top of the env's own
    (shoal_episode.step_limit): a header env's max_episode_steps where it
    was configured shorter than its header's limit, else 0 (none)."""
    if spec.kind != "header" or not spec.max_episode_steps:
        return 0
    own = spec.load_binding().MAX_EPISODE_STEPS
    return spec.max_episode_steps if not own or spec.max_episode_steps < own else 0


# Per-env reset requests (envs/shoal_vec.h).
KEEP, RESET, RESEED = 0, 1, 2


class SharedRegion:
    """A block of shared memory backed by a memfd; picklable for workers."""

    def __init__(self, size: int, fd: int | None = None):
        self.size = size
        owned = fd is None
        if owned:
            from shoal.pool.workers import deferred_signals   # (which imports this module)
            # A Ctrl-C raised as memfd_create returns would lose the descriptor:
            # it is handled once the finalizer owns it.
            with deferred_signals():
                fd = os.memfd_create(MEMFD_NAME, os.MFD_CLOEXEC)
                self._close_fd = weakref.finalize(self, os.close, fd)
        else:
            self._close_fd = weakref.finalize(self, os.close, fd)
        # From here, a pool interrupted while it is being made (a Ctrl-C
        # before its own cleanup is armed) drops its region unclosed: the
        # descriptor closes with the object then, so no memfd stays open.
        self.fd = fd
        try:
            if owned:
                os.ftruncate(fd, size)
            self.memory = SharedMapping(fd, size)
        except BaseException as e:
            self.close()   # a failed pool keeps no descriptor
            if isinstance(e, OSError) and e.errno in (errno.ENOMEM, errno.EFBIG, errno.ENOSPC):
                # a process limit (ulimit -v, -f) the MemAvailable check cannot see
                raise MemoryError(f"cannot map {size:,} bytes of shared memory for the pool: "
                                  f"{e.strerror} (a process limit such as ulimit -v or ulimit -f?); "
                                  f"use fewer envs") from e
            raise

    def __reduce__(self):
        # Only reached when a worker is spawned (fork copies the object
        # as is): DupFd hands the descriptor to the child process.
        from multiprocessing.reduction import DupFd
        return (_attach_region, (DupFd(self.fd), self.size))

    def close(self) -> None:
        """Drop the descriptor and the mapping: it unmaps once no array
        refers to it (arrays handed out stay valid, with no descriptor
        held), then the kernel frees the memory."""
        if self.fd >= 0:
            self.fd = -1
            self._close_fd()   # closes it once (never a number reused since)
        self.memory = None


def _attach_region(dup_fd, size):
    return SharedRegion(size, dup_fd.detach())


CGROUP_ROOT = "/sys/fs/cgroup"

# What a library-backed env holds besides the pool's buffers (its emulator,
# its mjData), per env, for the memory check: measured as the proportional
# set size of parent + workers (a probe, 2026-11-25: Pong 0.87-1.08 MiB per
# env at 64-256 envs; Humanoid 227 KiB at 1,024 envs), rounded up.
LIBRARY_BYTES_PER_ENV = {"shoal.envs.atari.binding": 5 << 18,    # 1.25 MiB
                         "shoal.envs.mujoco.binding": 1 << 18}   # 256 KiB


def available_memory() -> int | None:
    """Bytes this process could still get: MemAvailable, capped by the
    memory limit of its cgroup and of every cgroup above it (v2, and v1's
    memory controller: Docker, Slurm and systemd put a job's limit there,
    not at the root); None where nothing can be read."""
    limits = []
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    limits.append(int(line.split()[1]) * 1024)
    except OSError:
        pass
    limits += _cgroup_headroom()
    return min(limits) if limits else None


def _cgroup_headroom(proc_cgroup: str = "/proc/self/cgroup", root: str = CGROUP_ROOT) -> list[int]:
    """limit - usage of each limited memory cgroup from this process's up
    to the root: v2 (memory.max / memory.current under `root`) and v1
    (memory.limit_in_bytes / memory.usage_in_bytes under root/memory)."""
    try:
        with open(proc_cgroup) as f:
            entries = [line.rstrip("\n").split(":", 2) for line in f if line.count(":") >= 2]
    except OSError:
        return []
    found = []
    for _, controllers, path in entries:
        if controllers == "":        # v2: "0::/path"
            base, files, cache = root, ("memory.max", "memory.current"), "inactive_file"
        elif "memory" in controllers.split(","):
            base, files = os.path.join(root, "memory"), ("memory.limit_in_bytes", "memory.usage_in_bytes")
            cache = "total_inactive_file"
        else:
            continue
        parts = [p for p in path.split("/") if p]
        for depth in range(len(parts), -1, -1):   # this cgroup, then each one above it
            folder = os.path.join(base, *parts[:depth])
            try:
                with open(os.path.join(folder, files[0])) as f:
                    limit = f.read().strip()
                with open(os.path.join(folder, files[1])) as f:
                    usage = int(f.read())
            except (OSError, ValueError):
                continue
            if limit != "max" and limit.isdigit() and int(limit) < 2**60:   # (v1's "none": ~2**63)
                # usage counts page cache the kernel reclaims under the limit:
                # its inactive files are headroom too (docker's working set)
                found.append(max(0, int(limit) - usage + _memory_stat(folder, cache)))
    return found


def _memory_stat(folder: str, key: str) -> int:
    """`key`'s value in a cgroup's memory.stat (0 if absent)."""
    try:
        with open(os.path.join(folder, "memory.stat")) as f:
            for line in f:
                name, _, value = line.partition(" ")
                if name == key:
                    return int(value)
    except (OSError, ValueError):
        pass
    return 0


def _gib(nbytes: int) -> str:
    return f"{nbytes / 2**30:.3g} GiB" if nbytes >= 2**30 else f"{nbytes / 2**20:.3g} MiB"


class PrivateRegion:
    """Process-local memory with the same interface (the Serial backend)."""

    def __init__(self, size: int):
        self.size = size
        try:
            self.memory = bytearray(size)
        except MemoryError:   # (a bare one: a ulimit -v, say)
            raise MemoryError(f"cannot allocate the pool's {_gib(size)} of buffers in this process "
                              f"(a memory limit: ulimit -v, a cgroup?)") from None

    def close(self) -> None:
        pass


@dataclass(frozen=True)
class Field:
    name: str
    dtype: np.dtype
    shape: tuple


class Buffers:
    """Every array a pool shares with its workers, each with one job.

    Rows are agents: env i owns rows i*agents .. (i+1)*agents - 1.

    env_states      raw C structs, one per env (the env's whole state)
    episodes        episode bookkeeping per env (EPISODE_DTYPE)
    reset_requests  per env: KEEP, RESET or RESEED, read by the reset command
    step_selected   per env: nonzero for the envs the STEP_SELECTED command steps
    seeds           per env: the seed used by RESEED
    actions         per row, written by the pool before a step
    obs, rewards, terminals, truncations, masks
                    per row, written by the envs
    final_obs       per row, SAME_STEP's last obs of finished episodes
    control         one shoal_ctrl (128 bytes) per worker
    """

    def __init__(self, spec, num_envs: int, num_workers: int, shared: bool):
        self.spec = spec
        self.num_envs = num_envs
        self.num_workers = num_workers
        self.shared = shared
        rows = num_envs * spec.agents
        binding = spec.load_binding()
        if np.dtype(spec.obs_dtype) != binding.OBS_DTYPE:
            raise ValueError(f"{spec.name}: SPEC.obs_dtype is {np.dtype(spec.obs_dtype)} but the C header's "
                             f"obs_t is {binding.OBS_DTYPE}; they must agree")
        one_discrete = not spec.continuous_action and spec.discrete_action and len(spec.action_nvec) == 1
        act_shape = (rows,) if one_discrete else (rows, spec.action_size)
        fields = [
            Field("env_states", np.dtype(np.uint8), (num_envs * binding.ENV_BYTES,)),
            Field("episodes", EPISODE_DTYPE, (num_envs,)),
            Field("reset_requests", np.dtype(np.uint8), (num_envs,)),
            Field("step_selected", np.dtype(np.uint8), (num_envs,)),
            Field("seeds", np.dtype(np.uint64), (num_envs,)),
            Field("actions", binding.ACT_DTYPE, act_shape),
            Field("obs", np.dtype(spec.obs_dtype), (rows, *spec.obs_shape)),
            Field("final_obs", np.dtype(spec.obs_dtype), (rows, *spec.obs_shape)),
            Field("rewards", np.dtype(np.float32), (rows,)),
            Field("terminals", np.dtype(np.bool_), (rows,)),
            Field("truncations", np.dtype(np.bool_), (rows,)),
            Field("masks", np.dtype(np.bool_), (rows,)),
            Field("control", np.dtype(np.uint8), (max(num_workers, 1) * CTRL_BYTES,)),
        ]
        offsets, size = [], 0
        for f in fields:
            offsets.append(size)
            nbytes = f.dtype.itemsize * int(np.prod(f.shape))
            size += -(-nbytes // ALIGN) * ALIGN
        # Refuse up front what cannot fit: memfd pages are only allocated
        # when touched, so an oversized pool would otherwise fail (or swap)
        # deep into its first reset.
        available = available_memory()
        library = num_envs * LIBRARY_BYTES_PER_ENV.get(spec.binding, 0)
        if available is not None and size + library > available:
            its_own = f" and about {_gib(library)} for the envs' own state (emulators, physics)" if library else ""
            raise MemoryError(f"{spec.name} with num_envs={num_envs} needs {_gib(size)} of buffers{its_own} "
                              f"({_gib(-(-(size + library) // num_envs))} per env), but only {_gib(available)} "
                              f"of memory is available (MemAvailable, and this process's cgroup limits)")
        self.region = SharedRegion(size) if shared else PrivateRegion(size)
        self._fields = fields
        self._offsets = offsets
        self._carve()
        self.episodes["step_limit"] = pool_step_limit(spec)

    # What an env's state is in these buffers: its C struct, its episode
    # bookkeeping and its last outputs (a copy of them is a copy of the env)
    STATE_FIELDS = ("env_states", "episodes", "obs", "final_obs", "rewards", "terminals",
                    "truncations", "masks")

    def copy_state_from(self, other: "Buffers") -> None:
        """Every env's state from `other`, buffers of the same spec and size."""
        for name in self.STATE_FIELDS:
            getattr(self, name)[...] = getattr(other, name)

    def _carve(self):
        for f, offset in zip(self._fields, self._offsets):
            count = int(np.prod(f.shape))
            array = np.frombuffer(self.region.memory, f.dtype, count, offset).reshape(f.shape)
            setattr(self, f.name, array)

    @property
    def control_address(self) -> int:
        return self.control.__array_interface__["data"][0]

    def __getstate__(self):
        state = self.__dict__.copy()
        for f in self._fields:
            state.pop(f.name, None)
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
        self._carve()

    def close(self) -> None:
        for f in self._fields:
            self.__dict__.pop(f.name, None)
        self.region.close()

    def __getattr__(self, name: str):
        # Only for names not found: a buffer after close() (arrays taken
        # before stay readable; the Buffers object no longer hands them out)
        if name != "_fields" and any(f.name == name for f in self.__dict__.get("_fields", ())):
            from shoal.pool.native import PoolClosedError
            raise PoolClosedError(f"buffer {name!r}: these buffers were closed with their pool "
                                  f"(arrays taken before close() stay readable)")
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
