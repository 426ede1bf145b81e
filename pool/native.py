"""Pools of shoal's first-party C envs: Serial (in process) and Multiprocessing.

Both share one design. All buffers live in one memory region allocated at
construction (shared memory for Multiprocessing). Envs are split into
`num_envs // batch_size` batches; each batch is split into contiguous blocks,
one per worker. A step writes the actions into the buffer, hands a command to
the workers of each batch and waits for them; the envs write obs, rewards and
flags in place, and the pool returns views of those rows. Nothing is pickled
per step.

Sync:   obs, info = pool.reset(seed=0)
        obs, rewards, terminals, truncations, info = pool.step(actions)
Async:  pool.async_reset(seed=0)                     # all batches in flight
        obs, rewards, terminals, truncations, info = pool.recv()
        ids = info["env_id"]                          # which envs these rows are
        pool.send(actions)                            # actions for those envs
Batches come back in a fixed round-robin order, so async runs are as
reproducible as sync ones.

Returned arrays are views of the pool's buffers: they are overwritten by the
next step of the same envs. Copy them to keep them.

A pool belongs to the process and is used by one thread at a time: a call
from another thread while one is in progress raises RuntimeError (a step
would otherwise be lost), and so does any call from a forked child (it
would drive the parent's workers). close() works from any thread: it stops
a call in progress elsewhere (which raises PoolClosedError) and waits for
it, so no call reads memory after it is freed; from a signal handler inside
a call, the pool closes as that call returns. Pools cannot be pickled.
"""
from __future__ import annotations

import functools
import math
import multiprocessing as mp
import os
import sys
import time
import traceback
import weakref
from collections import deque

import numpy as np
from gymnasium.error import ClosedEnvironmentError
from gymnasium.vector import AutoresetMode
from gymnasium.vector.utils import batch_space

from shoal.envs import EnvSpec, names as env_names, spec as lookup_spec
from shoal.pool import _native
from shoal.pool.contract import (
    SEEN_DTYPE,
    ConstructionSeed,
    check_reset_options,
    construction_seed,
    episode_stats_since,
    fill_reset_requests,
    keep_unmasked,
    nonfinite_action_message,
    out_of_range_message,
    parse_reset_mask,
    same_step_info,
    validate_num_envs,
)
from shoal.pool.layout import Buffers
from shoal.pool.workers import WAIT_SLICE_S as _WAIT_SLICE_S
from shoal.pool.workers import (ParentWatch, WorkerError, Workers, in_a_method_of, start_method,
                                start_worker)

# The parent's wait (Multiprocessing): after a step longer than LONG_STEP_S it
# yields its core for only LONG_STEP_YIELD_S before sleeping on a futex.
LONG_STEP_S = 0.5e-3
LONG_STEP_YIELD_S = 20e-6

# Keyword arguments of the pools themselves; shoal.make and the gymnasium
# vector env pass any other keyword to the env (env_kwargs).
POOL_ARGS = frozenset({"num_workers", "batch_size", "autoreset_mode", "seed", "timeout", "context",
                       "parent_share"})


def split_env_kwargs(kwargs: dict) -> tuple[dict, dict]:
    """(pool keyword arguments, env keyword arguments) of a mixed dict."""
    pool = {k: v for k, v in kwargs.items() if k in POOL_ARGS}
    return pool, {k: v for k, v in kwargs.items() if k not in POOL_ARGS}


# The C loop's autoreset mode codes (shoal_vec.h), shared with the CUDA backend.
AUTORESET_CODES = {AutoresetMode.NEXT_STEP: 0, AutoresetMode.SAME_STEP: 1, AutoresetMode.DISABLED: 2}
class WorkerTimeoutError(WorkerError, TimeoutError):
    """A worker did not finish a command within the pool's `timeout`
    (stopped, stuck or far too slow). The pool has been closed and its
    workers killed: they were mid-command, so the buffers are inconsistent."""


class PoolClosedError(ClosedEnvironmentError, RuntimeError):
    """The pool is closed (by close(), or by a failure that closed it); its
    buffers and methods are no longer available."""


# This process's pid, kept current across os.fork() so that the per-call
# "created in this process?" check is a comparison, not a syscall.
_this_pid = os.getpid()


def _after_fork_in_child() -> None:
    global _this_pid
    _this_pid = os.getpid()


os.register_at_fork(after_in_child=_after_fork_in_child)

_NO_INFO: dict = {}   # header envs' step info (never handed out itself: _step_info copies it)


def _forwards_the_call(frame) -> bool:
    """A frame of step(actions, env_id) or _step_env_ids: it hands the call to
    another method of the pool (send, recv, step, _step_some) before any
    lock is taken, so it is no call in progress (see _heal_leaked_lock)."""
    code = frame.f_code
    return code is _STEP_ENV_IDS_CODE or (code is _STEP_CODE and frame.f_locals.get("env_id") is not None)


# A command, run in this process: the Block method that does it.
BLOCK_METHODS = {_native.CMD_STEP: "step", _native.CMD_RESET: "reset",
                 _native.CMD_STEP_SELECTED: "step_selected"}


def _select_info(info: dict, ids: np.ndarray, rows: np.ndarray) -> dict:
    """A reset's or step's info for envs `ids` (rows `rows`) alone, copied:
    final_obs / _final_obs are per row, the envs' own keys per env; env_id
    is `ids`."""
    selected = {}
    for key, values in info.items():
        if key == "final_info":
            selected[key] = {k: v[ids] for k, v in values.items()}
        else:
            selected[key] = values[rows if key in ("final_obs", "_final_obs") else ids]
    selected["env_id"] = ids
    return selected


def available_cores() -> int:
    """Cores this process may run on: its affinity mask (taskset, Slurm's
    cpusets), and its cgroup's CPU quota where one is set (`docker --cpus`,
    a Kubernetes CPU limit: the host's cores stay visible there, and a
    worker per host core would be throttled), rounded up."""
    try:
        cores = max(1, len(os.sched_getaffinity(0)))
    except AttributeError:
        cores = max(1, os.cpu_count() or 1)
    quota = cgroup_cpu_quota()
    return cores if quota is None else max(1, min(cores, math.ceil(quota)))


def cgroup_cpu_quota(root: str = "/sys/fs/cgroup", own_cgroups: str = "/proc/self/cgroup") -> float | None:
    """The CPU bandwidth this process's cgroup may use, in cores (the
    smallest quota / period of its cgroup and the ones above it), or None
    where none is set or nothing can be read. cgroup v2: `cpu.max`
    ("QUOTA PERIOD", or "max PERIOD"); v1: the cpu controller's
    `cpu.cfs_quota_us` (-1: none) and `cpu.cfs_period_us`."""
    try:
        with open(own_cgroups) as f:
            lines = [line.rstrip("\n").split(":", 2) for line in f]
    except OSError:
        return None
    places = []   # (mount, the cgroup's path under it, quota file, period file or None)
    for fields in lines:
        if len(fields) != 3:
            continue
        _, controllers, path = fields
        path = os.path.normpath(path.removesuffix(" (deleted)"))   # (a cgroup removed since)
        if path.startswith(".."):   # above a cgroup namespace's root: the mount's own files
            path = "/"
        if controllers == "":   # v2: one hierarchy, mounted at root (or root/unified on hybrid hosts)
            for mount in (root, os.path.join(root, "unified")):
                if os.path.exists(os.path.join(mount, "cgroup.controllers")):
                    places.append((mount, path, "cpu.max", None))
                    break
        elif "cpu" in controllers.split(","):
            for name in (controllers, "cpu", "cpu,cpuacct", "cpuacct,cpu"):
                mount = os.path.join(root, name)
                if os.path.isdir(mount):
                    places.append((mount, path, "cpu.cfs_quota_us", "cpu.cfs_period_us"))
                    break
    limits = []
    for mount, path, quota_file, period_file in places:
        # the cgroup's folder, then each one above it up to the mount (inside
        # a container's cgroup namespace the path is "/": the mount's own files)
        parts = [part for part in path.strip("/").split("/") if part]
        for depth in range(len(parts), -1, -1):
            folder = os.path.join(mount, *parts[:depth])
            try:
                with open(os.path.join(folder, quota_file)) as f:
                    text = f.read().split()
                if period_file is not None:
                    with open(os.path.join(folder, period_file)) as f:
                        text = text[:1] + f.read().split()[:1]
                if text[0] in ("max", "-1"):   # no quota at this level
                    continue
                quota, period = float(text[0]), float(text[1])
            except (OSError, ValueError, IndexError):
                continue
            if quota > 0 and period > 0:
                limits.append(quota / period)
    return min(limits) if limits else None


def parse_autoreset_mode(mode) -> AutoresetMode:
    if isinstance(mode, AutoresetMode):
        return mode
    if isinstance(mode, str):
        # "next_step", "NextStep", "NEXT_STEP" all name AutoresetMode.NEXT_STEP
        by_name = {m.name.replace("_", "").lower(): m for m in AutoresetMode}
        key = mode.replace("_", "").replace("-", "").lower()
        if key in by_name:
            return by_name[key]
    raise ValueError(f"autoreset_mode must be a gymnasium.vector.AutoresetMode or one of "
                     f"'next_step', 'same_step', 'disabled', got {mode!r}")


def plan_blocks(num_envs: int, batch_size: int, num_workers: int) -> list[list[tuple[int, int]]]:
    """Split envs into batches and each batch into per-worker blocks.

    Returns, per batch, the [start, stop) env ranges of its workers.
    """
    num_batches = num_envs // batch_size
    per_batch = num_workers // num_batches
    plan = []
    for b in range(num_batches):
        edges = np.linspace(b * batch_size, (b + 1) * batch_size, per_batch + 1).round().astype(int)
        plan.append([(int(edges[k]), int(edges[k + 1])) for k in range(per_batch)])
    return plan


class NativePool:
    """Shared logic of the Serial and Multiprocessing pools (see module doc).

    Args:
        env: a first-party env name ("CartPole") or its EnvSpec.
        num_envs: number of envs; the pool has num_envs * agents rows.
        num_workers: worker processes (Multiprocessing) or blocks (Serial).
            Default: one per available core, reduced to num_envs and rounded
            down to a multiple of the number of batches (at least one worker
            per batch). An explicit value must be a multiple of
            num_envs // batch_size and at most num_envs. More workers than
            cores is allowed.
        batch_size: envs returned by each recv(); must divide num_envs.
            Default num_envs (sync use).
        autoreset_mode: NEXT_STEP (default, gymnasium's), SAME_STEP or
            DISABLED; an AutoresetMode or its string value.
        seed: seeds the envs at construction (env i gets seed + i) so that
            reset() without a seed is reproducible; default: OS entropy.
            As EnvPool's make(seed=s): the first reset() (or async_reset())
            without a seed, before any step, is the seeded reset, the same
            as reset(seed=s); later ones go on with each env's RNG.
        timeout: seconds step(), reset() and recv() wait for a worker before
            raising WorkerTimeoutError (which closes the pool); default None
            waits forever, as gymnasium does. Serial runs in the caller's
            thread and ignores it.
        env_kwargs: the env's own keyword arguments (MuJoCo envs: gymnasium's,
            e.g. {"ctrl_cost_weight": 0.2}); header envs take none.

    The pool's total buffer size is checked against available memory before
    anything is allocated (MemoryError). observation_space and action_space
    (batched, with per-row bounds as large as the buffers) are built on
    first access.
    """

    _shared_memory = False
    # Slots, not the instance dict, for what the calls read: CPython's
    # specialized reads of instance-dict attributes stop working past about
    # 30 keys, and a pool has more (two more attributes on the 28 a Serial
    # pool had cost 0.45 us a step: docs/results.md). "__dict__" keeps
    # other attributes possible (a caller's own).
    __slots__ = ("__dict__", "__weakref__", "closed", "_pid", "_calls", "_closing", "_close_pending",
                 "spec", "num_envs", "batch_size", "num_workers", "agents", "num_rows", "timeout",
                 "autoreset_mode", "metadata", "single_observation_space", "single_action_space",
                 "_nvec", "_buffers", "_plan", "_env_ids", "_all_env_ids", "_elapsed_steps",
                 "_all_elapsed_steps", "_final_mask", "_in_flight", "_with_user", "_seen",
                 "_counts_at_send", "_count_copies", "_info_views", "_construction_seed")

    def __init__(self, env: str | EnvSpec, num_envs: int, *, num_workers: int | None = None,
                 batch_size: int | None = None, autoreset_mode=AutoresetMode.NEXT_STEP,
                 seed: int | None = None, timeout: float | None = None,
                 env_kwargs: dict | None = None):
        self.closed = True  # until construction succeeds
        self._pid = os.getpid()
        self._calls = _native.CallLock()   # held by the thread in a call (see _enter)
        self._closing = False          # close() from another thread waits for that call
        self._close_pending = False    # close() from inside it (a signal handler): on return
        if isinstance(env, str):
            self.spec = lookup_spec(env)
        elif isinstance(env, EnvSpec):
            self.spec = env
        else:
            raise TypeError(f"env must be a first-party env name or an EnvSpec, got {env!r}; "
                            f"shoal has: {', '.join(env_names())}")
        self.spec = self.spec.configure(**(env_kwargs or {}))
        if timeout is not None and (isinstance(timeout, (bool, np.bool_))
                                    or not isinstance(timeout, (int, float, np.integer, np.floating))
                                    or not timeout > 0):
            raise ValueError(f"timeout must be None or a positive number of seconds, got {timeout!r}")
        self.timeout = None if timeout is None else float(timeout)
        num_envs = validate_num_envs(num_envs)
        batch_size = num_envs if batch_size is None else batch_size
        if isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer)) \
                or not 1 <= batch_size <= num_envs \
                or num_envs % batch_size:
            raise ValueError(f"batch_size must divide num_envs={num_envs}, got {batch_size!r}")
        num_batches = num_envs // int(batch_size)
        num_workers = self._choose_workers(num_envs, num_batches, num_workers)

        self.num_envs = num_envs
        self.batch_size = int(batch_size)
        self.num_workers = num_workers
        self.agents = self.spec.agents
        self.num_rows = num_envs * self.agents
        self.autoreset_mode = parse_autoreset_mode(autoreset_mode)
        self.metadata = {"autoreset_mode": self.autoreset_mode}
        self.single_observation_space = self.spec.single_observation_space
        self.single_action_space = self.spec.single_action_space
        self._nvec = np.asarray(self.spec.action_nvec, dtype=np.int32)

        # First, as it checks the total size against available memory.
        self._buffers = Buffers(self.spec, num_envs, num_workers, shared=self._shared_memory)
        self._plan = plan_blocks(num_envs, self.batch_size, num_workers)
        # info["env_id"] of each batch, built once (read-only: shared by every recv)
        self._env_ids = [np.arange(b * self.batch_size, (b + 1) * self.batch_size)
                         for b in range(len(self._plan))]
        self._all_env_ids = np.arange(num_envs)   # info["env_id"] of reset() and step()
        # info["elapsed_step"] (EnvPool's): each env's steps into its episode,
        # read-only views of the episode counters the envs keep, built once
        lengths = self._buffers.episodes["episode_length"]
        self._elapsed_steps = [lengths[ids[0]:ids[-1] + 1] for ids in self._env_ids]
        self._all_elapsed_steps = lengths[:]
        for ids in (*self._env_ids, self._all_env_ids, *self._elapsed_steps, self._all_elapsed_steps):
            ids.flags.writeable = False
        self._final_mask = np.zeros(self.num_rows, dtype=np.bool_)
        self._in_flight: deque[int] = deque()   # batches sent, in recv order
        self._with_user: deque[int] = deque()   # batches received, awaiting send
        self._seen = np.zeros(num_envs, dtype=SEEN_DTYPE)
        # Each env's episode record as its batch was last sent, for
        # episode_stats() while it is in flight; kept from its first call on,
        # by one copy per send (_count_copies: per batch, (its rows of that
        # copy, its rows of the live records)).
        self._counts_at_send: np.ndarray | None = None
        self._count_copies: list | None = None
        self._info_views: dict | None = None   # library-backed envs' step info (see _env_info)
        self.closed = False
        self._construction_seed: ConstructionSeed | None = None
        try:
            self._start_workers()
            # Seed and reset every env now, so that reset() without a seed is
            # reproducible when `seed` is given, and random otherwise; the
            # first reset() repeats this one (ConstructionSeed).
            seed = construction_seed(seed)
            self.reset(seed=seed)
            self._construction_seed = ConstructionSeed(seed, num_envs)
        except BaseException:
            self.close()
            raise

    # ---- construction helpers -------------------------------------------------
    @staticmethod
    def _choose_workers(num_envs: int, num_batches: int, num_workers: int | None) -> int:
        if num_workers is None:
            workers = min(available_cores(), num_envs)
            return max(num_batches, workers // num_batches * num_batches)
        if isinstance(num_workers, bool) or not isinstance(num_workers, (int, np.integer)) \
                or num_workers < 1:
            raise ValueError(f"num_workers must be a positive int, got {num_workers!r}")
        if num_workers > num_envs:
            raise ValueError(f"num_workers={num_workers} exceeds num_envs={num_envs}: "
                             f"every worker needs at least one env")
        if num_workers % num_batches:
            # Either more workers (whole workers per batch) or fewer, larger
            # batches: gcd(num_envs, num_workers) batches fit both.
            workers = max(num_batches, num_workers // num_batches * num_batches)
            fit = int(np.gcd(num_envs, int(num_workers)))
            raise ValueError(f"num_workers={num_workers} must be a multiple of the number of batches "
                             f"num_envs // batch_size = {num_envs} // {num_envs // num_batches} = "
                             f"{num_batches}: pass a num_workers that is a multiple of {num_batches} "
                             f"(e.g. {workers}), or a larger batch_size (fewer batches; e.g. "
                             f"batch_size={num_envs // fit}: {fit} batch{'es' if fit > 1 else ''})")
        return int(num_workers)

    def _start_workers(self) -> None:
        raise NotImplementedError

    # ---- spaces and views -------------------------------------------------------
    # Built on first access: their per-row bounds are as large as the obs
    # buffer itself, and most users only read the single_ spaces.
    @functools.cached_property
    def observation_space(self):
        return batch_space(self.single_observation_space, self.num_rows)

    @functools.cached_property
    def action_space(self):
        return batch_space(self.single_action_space, self.num_rows)

    @property
    def obs(self) -> np.ndarray:
        """The obs buffer (all rows). PoolClosedError once closed."""
        self._check_open()
        return self._buffers.obs

    @property
    def masks(self) -> np.ndarray:
        """Per row: the agent is present (always true for single-agent envs)."""
        self._check_open()
        return self._buffers.masks

    @property
    def env_states(self) -> np.ndarray:
        """The raw C structs of every env, back to back (uint8; env i is
        bytes [i * ENV_BYTES, (i + 1) * ENV_BYTES) of its binding): a view,
        for renderers and scripted policies. PoolClosedError once closed."""
        self._check_open()
        return self._buffers.env_states

    @property
    def episodes(self) -> np.ndarray:
        """Per env, the C loop's running episode bookkeeping (a view, dtype
        layout.EPISODE_DTYPE: finished, return_sum, length_sum, ...);
        episode_stats() summarises it."""
        self._check_open()
        return self._buffers.episodes

    @property
    def buffers(self) -> Buffers:
        """Every array of the pool's memory region (layout.Buffers: obs,
        actions, rewards, terminals, truncations, masks, final_obs,
        env_states, episodes, ...), for a backend that shares them
        zero-copy (shoal.cuda's device="cpu"). Views: writing them changes
        the pool. PoolClosedError once closed."""
        self._check_open()
        return self._buffers

    @property
    def num_batches(self) -> int:
        return len(self._plan)

    def _rows(self, batch: int) -> slice:
        return slice(batch * self.batch_size * self.agents, (batch + 1) * self.batch_size * self.agents)

    def _check_open(self, closing: bool = False) -> None:
        if self.closed or closing:
            raise PoolClosedError(f"this {type(self).__name__} pool is closed; its buffers and "
                                  f"methods are no longer available")

    def _enter(self) -> None:
        """Start a call: this process made the pool, it is open and no other
        thread is in a call: takes the call lock (a C step: _native.CallLock);
        _leave releases it. A pid comparison and that C call per step."""
        if self._pid != _this_pid:
            raise RuntimeError(f"this {type(self).__name__} pool belongs to process {self._pid}; a "
                               f"forked child (process {_this_pid}) cannot use it: create a pool "
                               f"in each process")
        if not self._calls.enter() and not self._heal_leaked_lock():
            if self.closed or self._closing:
                self._check_open(closing=True)
            raise RuntimeError(f"this {type(self).__name__} pool is being used by another thread "
                               f"(a call is in progress): use one pool per thread, or a lock")
        if self.closed or self._closing:   # with the lock held: a close() may have run just
            self._leave()                  # before, or waits for it (then it goes first), or
            self._check_open(closing=True)   # was asked for by a handler just now (_leave runs it)

    def _leave(self) -> None:
        """End a call (see _enter); a close() asked for during it runs now."""
        self._calls.leave()
        if self._close_pending:
            self._close_pending = False
            self.close()

    def _heal_leaked_lock(self) -> bool:
        """True if the lock is held for this thread by no call: a signal
        (Ctrl-C, SIGTERM) interrupted a call just after it took the lock or
        just before it let go. The lock then stays this thread's."""
        return self._calls.mine() and not self._call_on_this_stack(above=4)   # above step() & co

    def _call_on_this_stack(self, above: int = 2) -> bool:
        """Whether this thread is inside one of this pool's calls: a frame
        of this module running a method of this pool, `above` frames up
        from here (2: from the caller of the method asking)."""
        return in_a_method_of(self, __file__, sys._getframe(above), skip=_forwards_the_call)

    def __reduce__(self):
        raise TypeError(f"{type(self).__name__} pools cannot be pickled (they own worker processes "
                        f"and shared memory): create one in each process instead")

    # ---- seeds and reset --------------------------------------------------------
    def _set_seeds(self, seed) -> None:
        """Fill reset_requests / seeds for a reset with `seed` (see reset),
        after dropping the async batches still out (the workers of those in
        flight may read these buffers): a bad seed drops nothing."""
        b = self._buffers
        if self._in_flight or self._with_user:
            fill_reset_requests(seed, np.empty_like(b.reset_requests), np.empty_like(b.seeds))
            self._drop_async_batches()
        fill_reset_requests(seed, b.reset_requests, b.seeds)

    def reset(self, env_id=None, *, seed=None, options: dict | None = None):
        """Reset envs and return the first observations of every row.

        Args:
            seed: None keeps each env's RNG going; an int s gives env i the
                seed s + i; a sequence gives one seed (or None) per env.
            options: {"reset_mask": bool array (num_envs,)} resets only those
                envs; the others keep their state and obs rows.
            env_id: EnvPool's partial reset (its one positional argument,
                as there): resets only these envs (as a reset_mask would)
                and returns only their rows (a copy, in env_id's order),
                with info["env_id"].

        Returns:
            (obs, info): obs is a view of the shared buffer, (num_rows,
            *obs_shape), overwritten by the next call; info["env_id"] is
            range(num_envs) (read-only), as EnvPool's, and
            info["elapsed_step"] each env's steps into its episode (see
            step()); library-backed envs
            add gymnasium's reset-info keys, one value per env (Atari:
            "lives", "episode_frame_number", "frame_number"; MuJoCo: the
            positions, e.g. "x_position").

        Raises:
            ValueError / TypeError: a bad seed or reset_mask (nothing is reset).
            RuntimeError: another thread or a forked child calls;
                PoolClosedError once closed.
            WorkerError: a worker died (the pool is then closed).

        Async batches still out (in flight, or awaiting send()) are
        dropped: those in flight are waited for, then every env resets.
        """
        self._enter()
        try:
            if env_id is None:
                return self._reset(seed, options)
            if options and "reset_mask" in options:
                raise ValueError("reset() takes env_id or options['reset_mask'], not both")
            ids = self._env_id_array(env_id)
            mask = np.zeros(self.num_envs, dtype=np.bool_)
            mask[ids] = True
            obs, info = self._reset(seed, {**(options or {}), "reset_mask": mask})
            rows = self._env_rows(ids)
            return obs[rows], _select_info(info, ids, rows)
        finally:
            self._leave()

    def _env_id_array(self, env_id) -> np.ndarray:
        """EnvPool's env_id argument as an int array of distinct env indices."""
        ids = np.asarray(env_id)
        if ids.ndim == 0 and ids.dtype.kind in "iu":
            raise ValueError(f"env_id={env_id!r}: env_id is a sequence of env indices (EnvPool's); "
                             f"for a seed, pass seed={env_id!r} by name")
        if ids.size == 0:
            ids = ids.astype(np.int64)   # [] is float64 to numpy
        if ids.ndim != 1 or ids.dtype.kind not in "iu" or len(np.unique(ids)) != len(ids) \
                or (len(ids) and (ids.min() < 0 or ids.max() >= self.num_envs)):
            raise ValueError(f"env_id must be distinct env indices in [0, {self.num_envs}), got {env_id!r}")
        return ids.astype(np.int64)

    def _env_rows(self, ids: np.ndarray) -> np.ndarray:
        """The rows of envs `ids`, env by env."""
        return (ids[:, None] * self.agents + np.arange(self.agents)).reshape(-1)

    def _reset(self, seed, options):
        check_reset_options(options, self.spec)
        mask = parse_reset_mask(options, self.num_envs)
        self._set_seeds(seed)
        keep_unmasked(self._buffers.reset_requests, mask)
        if self._construction_seed is not None:
            self._construction_seed.on_reset(self._buffers.reset_requests, self._buffers.seeds)
        self._run_all(_native.CMD_RESET)
        return self._buffers.obs, self._reset_info()

    def _reset_info(self) -> dict:
        """Every env's reset info (see reset): a new dict of views."""
        views, _ = self._env_info(slice(0, self.num_rows))
        reset_keys = self._info_views["reset_keys"]
        info = {key: values for key, values in views.items() if key in reset_keys}
        info["env_id"] = self._all_env_ids
        info["elapsed_step"] = views.get("elapsed_step", self._all_elapsed_steps)
        return info

    def _drop_async_batches(self) -> None:
        """A reset starts the async protocol over: wait for the batches in
        flight and drop them, with those awaiting send()."""
        try:   # (an interrupt between taking a batch and waiting for it: close, as below)
            while self._in_flight:
                self._finish(self._in_flight.popleft())
            self._with_user.clear()
        except BaseException:
            self.close()
            raise

    def async_reset(self, *, seed=None, options: dict | None = None) -> None:
        """Reset all envs without waiting; recv() then returns batches in
        order. Batches still in flight or awaiting send() are dropped (those
        in flight are waited for first), as in reset()."""
        self._enter()
        try:
            self._async_reset(seed, options)
        finally:
            self._leave()

    def _async_reset(self, seed, options) -> None:
        if options:
            raise ValueError("async_reset() takes no options")
        self._set_seeds(seed)
        if self._construction_seed is not None:
            self._construction_seed.on_reset(self._buffers.reset_requests, self._buffers.seeds)
        if self._counts_at_send is not None:
            np.copyto(self._counts_at_send, self._buffers.episodes)
        try:   # (an interrupt between queueing a batch and starting it: close, as in _send)
            for batch in range(self.num_batches):
                self._in_flight.append(batch)
                self._start(batch, _native.CMD_RESET)
        except BaseException:
            self.close()
            raise

    # ---- stepping -----------------------------------------------------------------
    def _write_actions(self, actions, rows: slice, target: np.ndarray | None = None) -> None:
        """Validate actions for `rows` and copy them into the action buffer
        (or into `target`, an array of those rows' shape)."""
        if target is None:
            target = self._buffers.actions[rows]
        a = np.asarray(actions)
        if not a.dtype.isnative:   # big-endian data: the copy loops read native order
            a = a.astype(a.dtype.newbyteorder("="))
        if a.shape != target.shape:
            raise ValueError(f"actions must have shape {target.shape} "
                             f"({rows.stop - rows.start} rows x {self.single_action_space}), got {a.shape}")
        if self.spec.continuous_action:
            if a.dtype.kind not in "fiu":
                raise ValueError(f"actions must be real numbers (Box), got dtype {a.dtype}")
            if a.dtype not in (np.float32, np.float64):
                a = a.astype(np.float64)
            # Copied with a finiteness check in one pass; bounds are the env's
            # business (MuJoCo clamps ctrl to its ctrlrange, as in gymnasium).
            bad = _native.copy_float_actions(np.ascontiguousarray(a), target)
            if bad >= 0:
                raise ValueError(nonfinite_action_message(a[bad].tolist(), f"at row {rows.start + bad}"))
            return
        if a.dtype.kind not in "iu":
            raise ValueError(f"actions must be integers (discrete), got dtype {a.dtype}")
        # Checked and copied in one pass, whatever the integer width: the
        # int64 actions of gymnasium, torch and numpy cost what int32 ones do.
        # After a bad row nothing is stepped, and the next call rewrites
        # every row. (This copy is the step's serial part: see copy_actions.)
        bad = _native.copy_actions(np.ascontiguousarray(a.reshape(len(a), -1)),
                                   target.reshape(len(target), -1), self._nvec)
        if bad >= 0:
            raise ValueError(out_of_range_message(a[bad], rows.start + bad, self._nvec.tolist()))

    def step(self, actions, env_id=None):
        """Step every env once.

        Args:
            actions: integers of shape action_space.shape, one row per agent
                row (any integer dtype; each component in [0, nvec)).

        Returns:
            (obs, rewards, terminals, truncations, info), views of the shared
            buffers overwritten by the next call. info["env_id"] is
            range(num_envs) (read-only), as recv()'s and EnvPool's.
            info["elapsed_step"] (EnvPool's; a read-only view of the
            episode counters, int32 per env) is each env's steps into its
            episode: 0 after a reset, the episode's length on the step
            that ends it, but 0 there in SAME_STEP, which resets at once. In
            SAME_STEP mode info holds "final_obs", valid in the rows where
            info["_final_obs"].
            Library-backed envs add gymnasium's step-info keys, one value
            per env (Atari: "lives", "episode_frame_number",
            "frame_number"; MuJoCo: its reward terms and positions): after
            an autoreset, the reset's (MuJoCo: its positions, the reward
            terms 0); in SAME_STEP mode also
            "final_info", the same keys for the ended step, valid in the
            rows where info["_final_obs"].

        Raises:
            ValueError: actions of the wrong shape, dtype or range (nothing
                is stepped).
            RuntimeError: async batches are out, or another thread or a
                forked child calls; PoolClosedError once closed.
            WorkerError: a worker died; WorkerTimeoutError: one did not
                answer within `timeout` (the pool is then closed).

        env_id (EnvPool's step(action, env_id)): with async batches out,
        send(actions, env_id) then recv(). Otherwise the envs listed step
        (actions: their rows, in env_id's order) and the others keep their
        state and rows; the result holds their rows only, copied, in
        env_id's order, with info["env_id"] = env_id (as EnvPool's; what
        Tianshou's collector does to collect a number of episodes). An
        env_id of every env in order is step(actions): views, as above.
        """
        if env_id is not None:
            return self._step_env_ids(actions, env_id)
        self._enter()
        try:
            self._answer_received_batch_by_step()
            all_rows = slice(0, self.num_rows)
            self._write_actions(actions, all_rows)
            self._construction_seed.stepped()
            self._run_all(_native.CMD_STEP)
            b = self._buffers
            info = self._step_info(all_rows)
            info["env_id"] = self._all_env_ids
            info.setdefault("elapsed_step", self._all_elapsed_steps)   # (an env may count its own)
            return b.obs, b.rewards, b.terminals, b.truncations, info
        finally:
            self._leave()

    def _answer_received_batch_by_step(self) -> None:
        """step() with no batch in flight answers a one-batch pool's recv()
        (EnvPool's step is send + recv: code mixes them); with async
        batches out it is an error."""
        if self._in_flight or (self._with_user and self.num_batches > 1):
            raise RuntimeError("step() while async batches are out: use send()/recv(), or "
                               "reset() to drop them")
        self._with_user.clear()

    def _step_env_ids(self, actions, env_id):
        if self._with_user and self.num_batches > 1:
            self.send(actions, env_id)
            return self.recv()
        ids = self._env_id_array(env_id)
        if np.array_equal(ids, self._all_env_ids):
            return self.step(actions)
        return self._step_some(actions, ids)

    def _step_some(self, actions, ids: np.ndarray):
        """step(actions, env_id) of envs `ids`, not every env in order."""
        self._enter()
        try:
            self._answer_received_batch_by_step()
            b = self._buffers
            rows = self._env_rows(ids)
            if len(ids) == 0:   # nothing to step: the actions must still be none
                if np.shape(actions)[:1] != (0,):
                    raise ValueError(f"env_id is empty, so actions must have no rows, got shape "
                                     f"{np.shape(actions)}")
            else:
                given = np.empty((len(rows), *b.actions.shape[1:]), b.actions.dtype)
                self._write_actions(actions, slice(0, len(rows)), target=given)
                b.actions[rows] = given
                self._construction_seed.stepped()
                b.step_selected[:] = 0
                b.step_selected[ids] = 1
                self._run_all(_native.CMD_STEP_SELECTED)
            info = self._step_info(slice(0, self.num_rows))
            info.setdefault("elapsed_step", self._all_elapsed_steps)
            return b.obs[rows], b.rewards[rows], b.terminals[rows], b.truncations[rows], \
                _select_info(info, ids, rows)
        finally:
            self._leave()

    def __len__(self) -> int:
        """num_envs, as len() of an EnvPool env."""
        return self.num_envs

    @property
    def is_async(self) -> bool:
        """EnvPool's flag: True when batches are smaller than the pool (send/recv)."""
        return self.batch_size < self.num_envs

    def _run_all(self, command: int) -> None:
        """Run `command` on every batch and wait. An exception in between
        (Ctrl-C, a dead worker) closes the pool: workers may be mid-command."""
        try:
            for batch in range(self.num_batches):
                self._start(batch, command)
            for batch in range(self.num_batches):
                self._finish(batch)
        except BaseException:
            self.close()
            raise

    def _step_info(self, rows: slice) -> dict:
        views, final_views = self._env_info(rows)
        info = dict(views)   # a new dict per step: the caller may extend it
        if self.autoreset_mode != AutoresetMode.SAME_STEP:
            return info
        b = self._buffers
        info.update(same_step_info(b.final_obs[rows], self._final_mask[rows], b.terminals[rows],
                                   b.truncations[rows]))
        if final_views is not None:
            info["final_info"] = dict(final_views)
        return info

    def _env_info(self, rows: slice) -> tuple[dict, dict | None]:
        """The step info of the envs of `rows`, and the info of their step
        before their last reset (a SAME_STEP autoreset's ended step; None for
        header envs): {} and None for header envs; for library-backed envs
        gymnasium's step-info keys (Atari's lives and frame numbers, MuJoCo's
        reward terms and positions), one value per env, as views of the
        shared env states. The views of each row range are built once (the
        binding is loaded on first use, after any fork) and returned as
        they are: _step_info copies what it hands out."""
        if self._info_views is None:
            binding = self.spec.load_binding()
            self._info_views = {"of": getattr(binding, "info", None),
                                "keys": getattr(binding, "POOL_INFO_KEYS", None),
                                "reset_keys": getattr(binding, "RESET_INFO_KEYS", ())}
        info_of = self._info_views["of"]
        if info_of is None:
            return _NO_INFO, None
        views = self._info_views.get((rows.start, rows.stop))
        if views is None:
            envs = slice(rows.start // self.agents, rows.stop // self.agents)
            states, keys = self._buffers.env_states, self._info_views["keys"]
            views = tuple({key: values[envs] for key, values in
                           (info_of(states, final=final) if keys is None
                            else info_of(states, final=final, keys=keys)).items()}
                          for final in (False, True))
            for view in views:
                if "elapsed_step" in view:   # an env's own count: read-only, as the pool's
                    view["elapsed_step"].flags.writeable = False
            self._info_views[(rows.start, rows.stop)] = views
        return views

    def send(self, actions, env_ids=None, *, env_id=None) -> None:
        """Step the batch returned by the oldest unanswered recv(); returns at once.

        Args:
            actions: integers for that batch's rows, shape
                (batch_size * agents, ...), as step()'s.
            env_ids: optional; must equal that batch's info["env_id"].
                (env_id: the same, under EnvPool's name.)

        Raises:
            ValueError: bad actions or env_ids (nothing is sent).
            RuntimeError: no batch awaits actions; misuse as step().
        """
        if env_id is not None:
            if env_ids is not None:
                raise TypeError("send() takes env_ids or env_id (EnvPool's name), not both")
            env_ids = env_id
        self._enter()
        try:
            self._send(actions, env_ids)
        finally:
            self._leave()

    def _send(self, actions, env_ids) -> None:
        if not self._with_user and self.num_batches == 1 and not self._in_flight:
            # a one-batch pool's reset() / step() handed every env to the
            # caller: send() answers them (EnvPool's reset() is async_reset + recv)
            self._with_user.append(0)
        if not self._with_user:
            raise RuntimeError("send() without a batch to answer: call async_reset() and recv() first")
        batch = self._with_user[0]
        rows = self._rows(batch)
        if env_ids is not None:
            expected = self._env_ids[batch]
            if not np.array_equal(np.asarray(env_ids), expected):
                raise ValueError(f"env_ids do not match the batch awaiting actions "
                                 f"(envs {expected[0]}..{expected[-1]})")
        self._write_actions(actions, rows)
        if self._count_copies is not None:
            np.copyto(*self._count_copies[batch])
        # A Ctrl-C (any signal handler's exception) between moving the
        # batch and starting it would lose the batch, or leave one in flight
        # that never runs (recv() would wait forever): the pool closes instead.
        try:
            self._construction_seed.stepped()
            self._with_user.popleft()
            self._in_flight.append(batch)
            self._start(batch, _native.CMD_STEP)
        except BaseException:
            self.close()
            raise

    def recv(self):
        """Wait for the next batch in flight (batches come back in a fixed
        round-robin order, so async runs are reproducible).

        Returns:
            (obs, rewards, terminals, truncations, info) for the batch's rows,
            views of the shared buffers; info["env_id"] holds its env indices,
            info["elapsed_step"] their counts (and library-backed envs'
            step-info keys, as step()'s).

        Raises:
            RuntimeError: nothing in flight; misuse as step().
            WorkerError / WorkerTimeoutError: as step() (the pool is closed).
        """
        self._enter()
        try:
            return self._recv()
        finally:
            self._leave()

    def _recv(self):
        if not self._in_flight:
            raise RuntimeError("recv() with nothing in flight: call async_reset() or send() first")
        try:   # (an interrupt between these would lose the batch: close, as in _send)
            batch = self._in_flight.popleft()
            self._finish(batch)
            self._with_user.append(batch)
        except BaseException:
            self.close()
            raise
        return self._batch_result(batch)

    def _batch_result(self, batch: int) -> tuple:
        """What recv() returns for `batch`, read from the buffers as they are
        (EnvPoolCompat.xla reads one for its shapes and dtypes)."""
        rows = self._rows(batch)
        b = self._buffers
        info = self._step_info(rows)
        info["env_id"] = self._env_ids[batch]
        info.setdefault("elapsed_step", self._elapsed_steps[batch])
        return b.obs[rows], b.rewards[rows], b.terminals[rows], b.truncations[rows], info

    # ---- episode statistics (off the hot path) -----------------------------------
    def episode_stats(self) -> dict:
        """Episodes finished since the last call, summed over all envs:
        {"episodes", "mean_return", "mean_length"} (means NaN if none). An
        episode's return sums the rewards of all its rows. Envs in flight
        (async) count as of their batch's last send() (their workers are
        writing the live counts); from the first call on, send() keeps that
        copy, so before it such envs are counted at a later call."""
        self._check_open()
        live = self._buffers.episodes
        if self._counts_at_send is None:   # the first call: send() keeps the copy from now on
            self._counts_at_send = live.copy()
            batches = [self._batch_envs(b) for b in range(self.num_batches)]
            # (as bytes: numpy copies a structured array field by field, 1.4 us a batch; bytes 0.2)
            snapshot_bytes, live_bytes = self._counts_at_send.view(np.uint8), live.view(np.uint8)
            size = live.dtype.itemsize
            self._count_copies = [(snapshot_bytes[envs.start * size:envs.stop * size],
                                   live_bytes[envs.start * size:envs.stop * size]) for envs in batches]
            for batch in self._in_flight:   # their counts are being written: nothing new from them yet
                envs = batches[batch]
                for name in SEEN_DTYPE.names:
                    self._counts_at_send[name][envs] = self._seen[name][envs]
        counts = np.empty(self.num_envs, dtype=SEEN_DTYPE)
        in_flight = set(self._in_flight)
        for name in SEEN_DTYPE.names:
            counts[name] = live[name]
            for batch in in_flight:
                envs = self._batch_envs(batch)
                counts[name][envs] = self._counts_at_send[name][envs]
        return episode_stats_since(counts, self._seen)

    def _batch_envs(self, batch: int) -> slice:
        return slice(batch * self.batch_size, (batch + 1) * self.batch_size)

    # ---- backend hooks -----------------------------------------------------------
    def _start(self, batch: int, command: int) -> None:
        raise NotImplementedError

    def _finish(self, batch: int) -> None:
        raise NotImplementedError

    def close(self) -> None:
        """Release workers and memory. Safe to call twice, and from any
        thread: a call in progress in another thread is stopped (it raises
        PoolClosedError) and waited for; called from inside a call of this
        thread (a signal handler), the pool closes as that call returns.
        Arrays already returned stay readable (they keep their memory
        alive); the pool's own (obs, masks, methods) raise PoolClosedError.
        In a forked child it only marks this copy closed: the workers are
        the parent's."""
        if self._pid != _this_pid:   # (and the lock may be held by a thread not copied here)
            self.closed = True
            return
        if self._calls.mine() and self._call_on_this_stack():
            # a signal handler (or the call's own error path) inside this
            # thread's call, or inside close() itself: the call in progress
            # stops at its next wait slice and closes the pool as it returns
            self._closing = self._close_pending = True
            return
        if not self._calls.mine():
            # Before the lock: another thread's call in progress stops at its
            # next wait slice, and one it starts now (between two steps) is
            # refused as closed, not as "used by another thread".
            self._closing = True
            while not self._calls.enter():
                time.sleep(0.001)
        # (mine() with no call on the stack: a lock left by an interrupted call, ours now)
        try:
            self._close()
        finally:
            self._close_pending = False
            self._calls.leave()

    def _close(self) -> None:
        """close()'s work, with the lock held and no call in progress."""
        self.closed = True
        self._info_views = None
        self._elapsed_steps = self._all_elapsed_steps = None   # views: they would keep the memory mapped

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self):
        # a Serial pool's "workers" are blocks it steps itself
        unit = "blocks in this process" if isinstance(self, Serial) else "workers"
        state = "closed" if self.closed else f"{self.num_workers} {unit}"
        if not self.closed and getattr(self, "parent_share", False):
            state += ", one of them this process"
        return (f"{type(self).__name__}({self.spec.name}, num_envs={self.num_envs}, "
                f"batch_size={self.batch_size}, {state})")


_STEP_CODE = NativePool.step.__code__
_STEP_ENV_IDS_CODE = NativePool._step_env_ids.__code__


class Serial(NativePool):
    """All envs stepped in this process, block by block, GIL released.

    num_workers only sets how envs are split into blocks; results never
    depend on it.
    """

    __slots__ = ("_blocks",)

    def _start_workers(self) -> None:
        binding = self.spec.load_binding()
        mode = AUTORESET_CODES[self.autoreset_mode]
        keep_final = self.autoreset_mode == AutoresetMode.SAME_STEP
        self._blocks = [[binding.Block(self._buffers, start, stop, mode, keep_final)
                         for start, stop in batch] for batch in self._plan]

    def _start(self, batch: int, command: int) -> None:
        run = BLOCK_METHODS[command]
        for block in self._blocks[batch]:
            getattr(block, run)()

    def _finish(self, batch: int) -> None:
        pass

    def _close(self) -> None:
        if not self.closed:
            self._blocks = []
            self._buffers.close()  # arrays handed out keep their memory
        super()._close()


def _worker_main(buffers: Buffers, worker: int, start: int, stop: int, mode: int,
                 keep_final: bool, watch: ParentWatch, ready) -> None:
    """Entry point of a worker process: build the block, then serve commands.
    It exits when the pool's process does (watch: see shoal.pool.workers)."""
    try:   # a failure to start (no thread for the parent watch: a pids limit) is reported too
        start_worker(watch, buffers.region)
        block = buffers.spec.load_binding().Block(buffers, start, stop, mode, keep_final)
    except BaseException:
        report = traceback.format_exc()
    else:
        report = None
    try:
        ready.send(report)
    except OSError:   # the pool's process stopped waiting (Ctrl-C while it starts us): no one to tell
        return
    if report is not None:
        return
    ready.close()
    _native.serve(buffers.control_address + worker * _native.CTRL_BYTES, block.ops_address)


class Multiprocessing(NativePool):
    """Envs stepped by worker processes, each owning a contiguous block of
    rows in shared memory.

    context: multiprocessing start method (default: the one chosen with
    multiprocessing.set_start_method(), else "fork" on Linux, fast to
    start; "spawn" / "forkserver" also work).

    parent_share: this process steps one of the num_workers blocks itself,
    inside step() / reset() while the worker processes step the others, so
    num_workers - 1 processes are started and a pool on N cores runs N
    stepping threads, not N workers plus a waiting parent. Default (None):
    on for a one-batch pool whose num_workers is left to the default (one
    block per core; at least 2); off with async batches (send() must return
    at once) and when num_workers is given. Measured on 2 cores: CartPole
    at 4,096 envs 1.17x, larger steps unchanged (docs/results.md). The parent's
    share is not covered by `timeout` and, like Serial, shares this
    process's fate.

    Workers exit within milliseconds of this process's death, however it
    dies (SIGKILL included) and whatever the start method; the thread that
    created the pool may exit meanwhile (shoal.pool.workers). Forked workers
    drop the memory of this process's other pools, so closing a pool frees
    its memory even while later pools live.
    """

    _shared_memory = True
    __slots__ = ("_context", "_yield_s", "_parent_share_arg", "_default_workers", "_local",
                 "_local_command", "_workers", "_finalizer", "_ctrl", "_batch_workers", "parent_share")

    def __init__(self, env, num_envs: int, *, context: str | None = None,
                 parent_share: bool | None = None, **kwargs):
        self._context = start_method(context)
        self._yield_s = _native.YIELD_S
        if parent_share not in (None, True, False):
            raise ValueError(f"parent_share must be None (auto), True or False, got {parent_share!r}")
        self._parent_share_arg = parent_share
        self._default_workers = kwargs.get("num_workers") is None
        self._local = None            # the parent's share: a Block, or None
        self._local_command = None    # the command it runs in the next _finish
        super().__init__(env, num_envs, **kwargs)

    def _choose_parent_share(self) -> bool:
        one_batch = len(self._plan) == 1
        if self._parent_share_arg is None:
            return one_batch and self._default_workers and self.num_workers >= 2
        if self._parent_share_arg and not one_batch:
            raise ValueError("parent_share=True needs one batch (batch_size == num_envs): with async "
                             "batches the parent returns from send() at once and steps nothing")
        if self._parent_share_arg and self.num_workers < 2:
            raise ValueError("parent_share=True needs num_workers >= 2 (one block for this process, "
                             "the rest for worker processes); for one block use Serial")
        return self._parent_share_arg

    def _start_workers(self) -> None:
        ctx = mp.get_context(self._context)
        mode = AUTORESET_CODES[self.autoreset_mode]
        keep_final = self.autoreset_mode == AutoresetMode.SAME_STEP
        self._workers = workers = Workers(self._buffers)
        self._finalizer = weakref.finalize(self, workers.shutdown)
        self._ctrl = self._buffers.control_address
        self._batch_workers = []  # per batch: (first worker, count)
        self.parent_share = self._choose_parent_share()
        watch = ParentWatch()
        try:
            pipes = self._launch(ctx, mode, keep_final, watch)
        finally:
            watch.close()  # every worker has its own copy once started
        self._wait_started(pipes)
        if self.parent_share:   # the last block, stepped here in _finish (built after the
            start, stop = self._plan[0][-1]   # forks: no worker inherits its env objects)
            self._local = self.spec.load_binding().Block(self._buffers, start, stop, mode, keep_final)

    def _launch(self, ctx, mode: int, keep_final: bool, watch: ParentWatch) -> list:
        """Start every worker; returns the pipes on which they report ready."""
        workers, pipes = self._workers, []
        for batch in self._plan:
            if self.parent_share:
                batch = batch[:-1]
            self._batch_workers.append((len(workers.processes), len(batch)))
            for start, stop in batch:
                k = len(workers.processes)
                receive, send = ctx.Pipe(duplex=False)
                workers.start(ctx, _worker_main, f"shoal-worker-{k}",
                              (self._buffers, k, start, stop, mode, keep_final, watch, send),
                              start, stop)
                send.close()
                pipes.append(receive)
        return pipes

    def _wait_started(self, pipes: list) -> None:
        workers = self._workers
        for k, receive in enumerate(pipes):
            try:
                message = workers.receive(k, receive, "exited while starting")
            finally:
                receive.close()
            if message is not None:
                raise WorkerError(f"worker {k} (envs {workers.ranges[k]}) failed to start:\n{message}")

    def _start(self, batch: int, command: int) -> None:
        first, count = self._batch_workers[batch]
        _native.send(self._ctrl, first, count, command)
        if self._local is not None:
            self._local_command = command

    def _finish(self, batch: int) -> None:
        first, count = self._batch_workers[batch]
        if self._local_command is not None:   # the parent's share, while the workers run theirs
            command, self._local_command = self._local_command, None
            getattr(self._local, BLOCK_METHODS[command])()
        started = time.perf_counter()
        try:
            self._wait(first, count)
        finally:
            # How this wait went decides how the next one waits: steps longer
            # than LONG_STEP_S (MuJoCo, Atari) sleep on the futex almost at
            # once, leaving the core to the workers (on a machine with as many
            # workers as cores, a yielding parent takes a share of theirs);
            # short steps (CartPole) yield, as a futex wake-up costs more than
            # the step.
            long_step = time.perf_counter() - started > LONG_STEP_S
            self._yield_s = LONG_STEP_YIELD_S if long_step else _native.YIELD_S

    def worker_busy_seconds(self) -> np.ndarray:
        """Seconds each worker process has spent running commands (steps,
        resets) since it started, one float per process (the parent's share,
        if any, is not counted), read without stopping them.
        Over an interval, (change in the sum) / (workers x wall time) is how
        busy the workers were; the rest is hand-off and the caller's time."""
        self._check_open()
        return _native.worker_busy_ns(self._ctrl, len(self._workers.processes)) / 1e9

    def _wait(self, first: int, count: int) -> None:
        """Wait for workers first..first+count-1; checks between slices that
        they live and that no other thread is closing the pool (the caller
        closes it on any exception)."""
        if self.timeout is None:
            while True:
                busy = _native.wait_done(self._ctrl, first, count, _WAIT_SLICE_S, self._yield_s)
                if busy < 0:
                    return
                self._check_waiting_on(busy, first + count)
        deadline = time.monotonic() + self.timeout
        while True:
            left = deadline - time.monotonic()
            busy = _native.wait_done(self._ctrl, first, count, max(0.0, min(_WAIT_SLICE_S, left)),
                                     self._yield_s)
            if busy < 0:
                return
            self._check_waiting_on(busy, first + count)
            if left <= 0:
                error = WorkerTimeoutError(
                    f"{self._workers.describe(busy)} did not finish within "
                    f"timeout={self.timeout:g} s (stopped, stuck or too slow); its workers "
                    f"are killed and the pool is closed")
                self._workers.kill()  # mid-command: no point asking them to close
                raise error

    def _check_waiting_on(self, busy: int, stop: int) -> None:
        if self._closing or self._workers.shutting_down:   # before a worker told to close looks dead
            raise PoolClosedError(f"this {type(self).__name__} pool was closed during this call "
                                  f"(by another thread, a signal handler or the interpreter's exit)")
        self._workers.check_alive(busy, stop)   # workers before `busy` are done

    def _close(self) -> None:
        if not self.closed:
            self._in_flight.clear()
            self._with_user.clear()
        self._local = self._local_command = None   # before the memory it steps is freed
        try:
            if getattr(self, "_workers", None) is not None:
                self._workers.shutdown()   # a Ctrl-C in it is raised once it is done
                if hasattr(self, "_finalizer"):   # (a Ctrl-C may land before it is made)
                    self._finalizer.detach()
            elif hasattr(self, "_buffers"):
                self._buffers.close()
        finally:
            super()._close()
