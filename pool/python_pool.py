"""A drop-in for gymnasium.vector.AsyncVectorEnv, around any gymnasium env.

    from shoal.pool import AsyncVectorEnv
    envs = AsyncVectorEnv([lambda: gymnasium.make("CartPole-v1")] * 16)
    obs, infos = envs.reset(seed=0)
    obs, rewards, terminations, truncations, infos = envs.step(envs.action_space.sample())

Same constructor, methods, errors and outputs as gymnasium's AsyncVectorEnv
(outputs equal SyncVectorEnv's for the same seeds and actions; in DISABLED
mode, as in gymnasium's AsyncVectorEnv, stepping an ended env without a
reset is no error, where SyncVectorEnv asserts). What differs is how the
work moves:

- Envs are split into contiguous blocks, one block per worker process
  (default: one worker per core), not one process per env.
- Actions, observations, rewards, terminations and truncations live in one
  shared-memory region, laid out in gymnasium's batched structure
  (shoal.pool.spaces). A step writes the actions, wakes the workers through
  the same futex control blocks as the native pool (pool/shoal_sync.h), and
  each worker steps its envs in a Python loop that writes rows in place.
- Actions of another dtype or structure than the action space's batch (say
  float64 for a float32 Box, or lists) travel pickled instead, so that envs
  see exactly the rows SyncVectorEnv would pass them. One exception: integer
  actions that widen into the batch's dtype (int32 or uint8 for a Discrete
  or MultiDiscrete space's int64) are copied into shared memory, so an env
  sees the same values as int64 where SyncVectorEnv passes them as given.
- Nothing is pickled on a step unless there is something to say: a worker
  sends infos (and SAME_STEP final observations) only when an env returned a
  non-empty info, and flags that in its control block. They are pickled into
  the worker's reply area of the shared region (over its pipe when larger
  than REPLY_BYTES). After long steps (Atari, MuJoCo) the parent reads each
  worker's reply as soon as that worker is done, while the others still
  step, and sleeps instead of yielding its core while it waits.
- Other commands (reset with seeds and options, call, get_attr, set_attr,
  render) travel as messages over the worker's pipe; their replies come back
  as a step's infos do.

Faults: an exception in an env is re-raised in the parent with the worker's
traceback attached as a note, and the pool is closed. A worker that dies is
reported within a second (WorkerError naming the worker and its envs), and
Ctrl-C while waiting closes the pool; memory is a memfd, so nothing can be
left in /dev/shm. Workers exit with the process that made the pool (not its
thread) on every start method, and forked workers drop the memory of that
process's other pools (shoal.pool.workers). close() from another thread
during a command stops that command (its caller gets ClosedEnvironmentError)
and waits for it; from a signal handler inside one, the workers are killed
as it ends: no command touches the workers' control block once it is freed.
"""
from __future__ import annotations

import multiprocessing as mp
import os
import pickle
import sys
import threading
import time
import traceback
import weakref
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from gymnasium import Env, Space, Wrapper, logger
from gymnasium.error import AlreadyPendingCallError, ClosedEnvironmentError, CustomSpaceError, NoAsyncCallError
from gymnasium.spaces.utils import is_space_dtype_shape_equiv
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.async_vector_env import AsyncState
from gymnasium.vector.utils import (
    CloudpickleWrapper,
    batch_differing_spaces,
    batch_space,
    concatenate,
    create_empty_array,
    iterate,
)

from shoal.pool import _native
from shoal.pool.gym_compat import validate_reset_mask
from shoal.pool.layout import ALIGN, CTRL_BYTES, SharedRegion
from shoal.pool.native import available_cores, parse_autoreset_mode
from shoal.pool.spaces import (
    ObsSplit,
    batch_bytes,
    carve_batch,
    copy_if_fits,
    is_shareable,
    row_reader,
    row_writer,
)
from shoal.pool.workers import WAIT_SLICE_S as _WAIT_SLICE_S
from shoal.pool.workers import ParentWatch, Workers, exited, in_a_method_of, start_method, start_worker

# What a worker's control block says about its last command.
STATUS_QUIET = 0   # results are in shared memory, nothing on the pipe
STATUS_REPLY = 1   # a reply waits on the pipe
STATUS_ERROR = 2   # an exception report waits on the pipe
STATUS_SHARED = 3  # a reply waits in the worker's reply area of shared memory

# Each worker's reply area: a pickled reply (infos, call results) up to this
# size travels through shared memory, written before the worker reports done;
# a larger one goes over the pipe. Saves a write on the worker's side and a
# poll and reads on the parent's, on every step whose envs return infos
# (Atari's lives and frame numbers, MuJoCo's reward terms).
REPLY_BYTES = 64 * 1024

# How long a waiter yields its core (sched_yield) before sleeping on the
# futex: PARENT_YIELD_S for the parent waiting on its workers, WORKER_YIELD_S
# for a worker waiting for the next command.
#
# After LONG_STEPS_IN_A_ROW steps that took longer than LONG_STEP_S each
# (Atari, MuJoCo: a block costs milliseconds; one short step preempted by
# other work does not count) the parent yields only LONG_STEP_YIELD_S, then sleeps:
# a parent that keeps yielding stays runnable, a third process on a machine
# with as many workers as cores, while its futex wake-up costs tens of
# microseconds, little next to such a step. It then also waits for the
# workers one by one, reading each reply while the later workers still step
# (AsyncVectorEnv._wait). Short steps (CartPole: microseconds per env) keep
# yielding, as there a wake-up would cost more than the step (the rule of
# the native pool's parent, shoal.pool.native).
#
# A worker may do the same after a long command (WORKER_LONG_STEP_YIELD_S);
# by default it does not: measured on 2 cores (scripts/profile_python_pool.py,
# Pong and HalfCheetah) sleeping at once gained nothing, and a sleeping
# worker puts a wake-up from an idle core on every step's critical path.
PARENT_YIELD_S = _native.YIELD_S
WORKER_YIELD_S = _native.YIELD_S
LONG_STEP_S = 0.5e-3
LONG_STEPS_IN_A_ROW = 3
LONG_STEP_YIELD_S = 20e-6                   # the parent's, after a long step
WORKER_LONG_STEP_YIELD_S = WORKER_YIELD_S   # a worker's, after a long command
_RESERVED_CALLS = ("reset", "step", "close", "_setattr", "_check_spaces")


class _SharedMemory:
    """The pool's one shared region: worker control blocks, rewards and flags,
    the workers' reply areas (REPLY_BYTES each) and (when shareable) the
    observation and action batches."""

    def __init__(self, num_envs: int, num_workers: int, observation_space: Space | None,
                 action_space: Space | None, region: SharedRegion | None = None,
                 reply_bytes: int | None = None):
        self.num_envs, self.num_workers = num_envs, num_workers
        self.reply_bytes = reply_bytes = REPLY_BYTES if reply_bytes is None else reply_bytes
        self.observation_space, self.action_space = observation_space, action_space
        n = num_envs
        sizes = [num_workers * CTRL_BYTES, _up(8 * n), _up(n), _up(n),
                 _up(8 * num_workers), _up(num_workers * reply_bytes)]
        if observation_space is not None:
            sizes.append(batch_bytes(observation_space, n))
        if action_space is not None:
            sizes.append(batch_bytes(action_space, n))
        self.region = region or SharedRegion(sum(sizes))
        memory = self.region.memory
        offsets = np.cumsum([0] + sizes)
        self.control_address = _address_of(memory)
        self.rewards = np.frombuffer(memory, np.float64, n, offsets[1])
        self.terminations = np.frombuffer(memory, np.bool_, n, offsets[2])
        self.truncations = np.frombuffer(memory, np.bool_, n, offsets[3])
        self.reply_sizes = np.frombuffer(memory, np.int64, num_workers, offsets[4])
        self.reply_areas = np.frombuffer(memory, np.uint8, num_workers * reply_bytes, offsets[5]) \
            .reshape(num_workers, reply_bytes)
        k = 6
        self.observations = self.actions = None
        if observation_space is not None:
            self.observations = carve_batch(observation_space, n, memory, int(offsets[k]))
            k += 1
        if action_space is not None:
            self.actions = carve_batch(action_space, n, memory, int(offsets[k]))

    def __reduce__(self):  # spawned workers rebuild the same views over the same region
        return (_SharedMemory, (self.num_envs, self.num_workers, self.observation_space,
                                self.action_space, self.region, self.reply_bytes))

    def close(self) -> None:
        # Our own views first: while any is alive the mapping cannot close,
        # and a closed pool would keep its memory as long as it is referenced.
        self.rewards = self.terminations = self.truncations = None
        self.reply_sizes = self.reply_areas = None
        self.observations = self.actions = None
        self.region.close()


def _up(nbytes: int) -> int:
    return (nbytes + ALIGN - 1) // ALIGN * ALIGN


def _address_of(memory) -> int:
    return np.frombuffer(memory, np.uint8).ctypes.data


# ---------------------------------------------------------------------------
# Worker side
# ---------------------------------------------------------------------------


def _keep_info(infos: list, i: int, info, env) -> None:
    """Env i's reset / step info onto `infos` for the parent (an empty one,
    the usual, travels not at all); one that is no dict is a TypeError
    (gymnasium's vector envs fail on it too, as they merge it)."""
    if not isinstance(info, dict):
        raise TypeError(f"{env} returned info {info!r} ({type(info).__name__}): gymnasium's reset and step "
                        f"return a dict (empty for none)")
    if info:
        infos.append((i, info))


def _as_sync_adds(info):
    """info as SyncVectorEnv's _add_info takes it in: dicts rebuilt and
    arrays copied, other values as they are. A SAME_STEP reset right after
    may reuse the env's info dict or write into an array the info holds
    (a view of the simulator's state); final_info keeps the ended step's."""
    if isinstance(info, dict):
        return {key: _as_sync_adds(value) for key, value in info.items()}
    return info.copy() if isinstance(info, np.ndarray) else info


class _EnvBlock:
    """Worker side: envs [start, start + len(envs)) of the pool, stepped in
    order, their results written to rows of the shared buffers."""

    def __init__(self, envs: list[Env], start: int, memory: _SharedMemory, mode: AutoresetMode,
                 observation_space: Space):
        self.envs, self.start, self.mode = envs, start, mode
        self.rows = range(start, start + len(envs))
        self.rewards, self.terminations, self.truncations = \
            memory.rewards, memory.terminations, memory.truncations
        shared_obs = memory.observations is not None
        # a space partly without a fixed layout: its shared part here, the rest by pipe
        self.split = ObsSplit.of(observation_space) if shared_obs else None
        self.write_obs = row_writer(self.split.shared if self.split else observation_space,
                                    memory.observations) if shared_obs else None
        self.read_action = row_reader(memory.action_space, memory.actions) \
            if memory.actions is not None else None
        self.last_obs: list[Any] = [None] * len(envs)  # kept when obs travel by pipe
        self.autoreset = [False] * len(envs)           # NEXT_STEP: reset on the next step
        self.current: int | None = None                # the env being stepped (error reports)

    def _store_obs(self, j: int, obs) -> None:
        if self.split is not None:
            self.write_obs(self.start + j, self.split.shared_part(obs))
            self.last_obs[j] = self.split.piped_part(obs)
        elif self.write_obs is not None:
            self.write_obs(self.start + j, obs)
        else:
            self.last_obs[j] = obs

    def _obs_reply(self):
        return None if self.write_obs is not None and self.split is None else list(self.last_obs)

    def step(self, actions: list | None = None):
        """Step every env (actions from shared memory unless given); returns a
        reply for the parent, or None when everything is in shared memory."""
        infos = []
        mode = self.mode
        for j, env in enumerate(self.envs):
            i = self.current = self.start + j
            action = self.read_action(i) if actions is None else actions[j]
            if mode == AutoresetMode.NEXT_STEP:
                if self.autoreset[j]:
                    obs, info = env.reset()
                    reward, terminated, truncated = 0.0, False, False
                else:
                    obs, reward, terminated, truncated, info = env.step(action)
                self.autoreset[j] = terminated or truncated
            elif mode == AutoresetMode.SAME_STEP:
                obs, reward, terminated, truncated, info = env.step(action)
                if terminated or truncated:
                    # the same two infos, in the same order, as SyncVectorEnv adds them
                    # (the ended step's info as it is, None too, as SyncVectorEnv's final_info),
                    # taken before the reset can change them, as SyncVectorEnv takes them
                    infos.append((i, {"final_obs": obs, "final_info": _as_sync_adds(info)}))
                    obs, info = env.reset()
            else:  # DISABLED: the user resets done envs with reset_mask
                obs, reward, terminated, truncated, info = env.step(action)
            self._store_obs(j, obs)
            self.rewards[i] = reward
            self.terminations[i] = terminated
            self.truncations[i] = truncated
            _keep_info(infos, i, info, env)
        obs_reply = self._obs_reply()
        if infos or obs_reply is not None:
            return obs_reply, infos
        return None

    def reset(self, seeds: list, options: dict | None, mask: list | None):
        infos = []
        for j, env in enumerate(self.envs):
            if mask is not None and not mask[j]:
                continue
            self.current = self.start + j
            obs, info = env.reset(seed=seeds[j], options=options)
            self._store_obs(j, obs)
            self.autoreset[j] = False
            _keep_info(infos, self.start + j, info, env)
        return self._obs_reply(), infos

    def call(self, name: str, args: tuple, kwargs: dict) -> list:
        results = []
        for env in self.envs:
            attr = env.get_wrapper_attr(name)
            results.append(attr(*args, **kwargs) if callable(attr) else attr)
        return results

    def set_attr(self, name: str, values: list) -> None:
        for env, value in zip(self.envs, values, strict=True):
            env.set_wrapper_attr(name, value)

    def is_wrapped(self, module: str, qualname: str) -> list[bool] | None:
        """Per env: is a wrapper of class module.qualname among its wrappers
        (outermost to innermost; the env itself is not a wrapper)? None when
        this process cannot find the class (defined after the fork, or in
        __main__ under spawn): the parent says so, and the pool goes on."""
        wrapper_class = sys.modules.get(module)
        for name in qualname.split("."):
            wrapper_class = getattr(wrapper_class, name, None)
        if not isinstance(wrapper_class, type):
            return None
        results = []
        for env in self.envs:
            while isinstance(env, Wrapper) and not isinstance(env, wrapper_class):
                env = env.env
            results.append(isinstance(env, Wrapper))
        return results

    def check_spaces(self, observation_mode, single_observation_space, single_action_space):
        """Per env: (observation space matches, action space matches)."""
        results = []
        for env in self.envs:
            same_obs = (env.observation_space == single_observation_space
                        if observation_mode == "same"
                        else is_space_dtype_shape_equiv(env.observation_space, single_observation_space))
            results.append((same_obs, env.action_space == single_action_space))
        return results

    def handle(self, message: tuple):
        kind, *data = message
        if kind == "step":
            return self.step(*data)
        if kind == "reset":
            return self.reset(*data)
        if kind == "call":
            return self.call(*data)
        if kind == "setattr":
            return self.set_attr(*data)
        if kind == "is_wrapped":
            return self.is_wrapped(*data)
        raise RuntimeError(f"unknown message {kind!r}")

    def close(self) -> None:
        for env in self.envs:
            try:
                env.close()
            except Exception:  # closing the others matters more
                logger.warn(f"closing an env raised:\n{traceback.format_exc()}")


def _error_report(worker: int, env: int | None = None) -> tuple:
    """(worker, pickled exception or None, type name, message, traceback,
    the env that raised or None)."""
    error = __import__("sys").exc_info()[1]
    payload = None
    # As pickle does it; else by parts: pickle rebuilds an exception by
    # calling its class with its args, which fails for an __init__ that takes
    # other arguments (MyError(message, code) sets args to (message,)).
    for form in (error, _ErrorParts(error)):
        try:
            payload = pickle.dumps(form)
            rebuilt = pickle.loads(payload)  # some exceptions pickle but cannot be rebuilt
            if form is error or str(rebuilt) == str(error):   # by parts, fields in C slots (OSError's) are lost
                break
        except Exception:
            pass
        payload = None
    return worker, payload, type(error).__name__, str(error), traceback.format_exc(), env


class _ErrorParts:
    """Pickles an exception as its class (by reference: the parent imports
    it), args and attributes; unpickled, it is that exception again, made
    without calling __init__, so the caller's `except MyError` still matches."""

    def __init__(self, error: BaseException):
        self.error = error

    def __reduce__(self):
        error = self.error
        return _rebuilt_error, (type(error), error.args, dict(getattr(error, "__dict__", {})))


def _rebuilt_error(cls: type, args: tuple, attributes: dict) -> BaseException:
    error = cls.__new__(cls, *args)
    error.args = args
    error.__dict__.update(attributes)
    return error


def _worker_main(worker: int, env_fns: CloudpickleWrapper, start: int, memory: _SharedMemory,
                 autoreset_mode: AutoresetMode, observation_mode, single_observation_space: Space,
                 single_action_space: Space, pipe, parent_end, watch: ParentWatch) -> None:
    """Entry point of a worker process: build the envs, report, serve commands.
    It exits when the pool's process does (watch: see shoal.pool.workers)."""
    if parent_end is not None:
        parent_end.close()
    try:   # a failure to start (no thread for the parent watch: a pids limit) is reported too
        start_worker(watch, memory.region)
        envs = [fn() for fn in env_fns.fn]
        block = _EnvBlock(envs, start, memory, autoreset_mode, single_observation_space)
        report = ("ready", block.check_spaces(observation_mode, single_observation_space,
                                              single_action_space))
    except BaseException:
        report = ("error", _error_report(worker))
    try:
        pipe.send(report)
    except OSError:   # the pool's process stopped waiting (Ctrl-C while it starts us): no one to tell
        return
    if report[0] == "error":
        return
    control = memory.control_address + worker * CTRL_BYTES
    reply_area, reply_sizes = memory.reply_areas[worker], memory.reply_sizes
    seen = 0
    clock = time.perf_counter
    yield_s = WORKER_YIELD_S
    while True:
        seen, command = _native.next_request(control, seen, yield_s)
        started = clock()
        if command == _native.CMD_CLOSE:
            block.close()
            _native.report_done(control, seen, STATUS_QUIET)
            return
        try:
            if command == _native.CMD_STEP:
                reply = block.step()
            else:  # CMD_MESSAGE: the parent sends the message after waking us
                reply = block.handle(pipe.recv())
            quiet = reply is None and command == _native.CMD_STEP
            # Pickled here, before reporting: a reply that cannot be pickled
            # (an info holding a lock) is reported as the env's exception.
            payload = None if quiet else _pickle_reply(reply)
        except BaseException:
            # Report done first: the parent reads the pipe only then, and a
            # large report could not be written before it reads.
            _native.report_done(control, seen, STATUS_ERROR)
            pipe.send(_error_report(worker, block.current))
            block.current = None
            continue
        # how long the next wait yields (WORKER_LONG_STEP_YIELD_S after a long command)
        yield_s = WORKER_LONG_STEP_YIELD_S if clock() - started > LONG_STEP_S else WORKER_YIELD_S
        if quiet:
            _native.report_done(control, seen, STATUS_QUIET)
        elif len(payload) <= memory.reply_bytes:
            reply_area[:len(payload)] = memoryview(payload)
            reply_sizes[worker] = len(payload)
            _native.report_done(control, seen, STATUS_SHARED)
        else:
            _native.report_done(control, seen, STATUS_REPLY)
            pipe.send_bytes(payload)


def _pickle_reply(reply):
    """The reply as pipe.send would pickle it (pipe.recv reads it back)."""
    try:
        return mp.reduction.ForkingPickler.dumps(reply)
    except BaseException as error:
        error.add_note("shoal: the worker's reply (infos, observations or call results) could not be "
                       "pickled to send to the parent")
        raise


# ---------------------------------------------------------------------------
# Parent side
# ---------------------------------------------------------------------------

class AsyncVectorEnv(VectorEnv):
    """Vectorized env running gymnasium envs in worker processes over shared
    memory; a drop-in for gymnasium.vector.AsyncVectorEnv (module doc).

    Args (as gymnasium's, plus num_workers):
        env_fns: functions that create the envs.
        shared_memory: observations travel through shared memory (default);
            False sends them over pipes. gymnasium's spaces without a fixed
            layout (Text, Graph, Sequence, OneOf, or a Dict / Tuple holding
            one) always travel over pipes (gymnasium raises for them
            instead); a custom Space subclass needs shared_memory=False, as
            in gymnasium (shoal cannot know its layout).
            Actions use shared memory whenever the action space has a fixed
            layout.
        copy: reset() and step() return a copy of the observations (default);
            False returns views of the shared buffers, overwritten next step.
        context: multiprocessing start method (default: the one chosen with
            multiprocessing.set_start_method(), as gymnasium's; else "fork"
            on Linux).
        daemon: daemonic worker processes (default True; False lets envs
            start processes of their own).
        worker: gymnasium's custom pipe worker; not supported here (shoal's
            workers step blocks of envs over shared memory): must be None.
        observation_mode: "same", "different", or (observation_space,
            single_observation_space), as in gymnasium.
        autoreset_mode: NEXT_STEP (default), SAME_STEP or DISABLED, as the
            enum or its value.
        max_concurrency: at most this many envs run at once; here it caps the
            number of workers (each steps one env at a time).
        num_workers: worker processes (default: available cores), at most
            num_envs.
    """

    def __init__(self, env_fns: Sequence[Callable[[], Env]], shared_memory: bool = True,
                 copy: bool = True, context: str | None = None, daemon: bool = True,
                 worker: Callable | None = None, observation_mode: str | tuple = "same",
                 autoreset_mode: str | AutoresetMode = AutoresetMode.NEXT_STEP,
                 max_concurrency: int | None = None, *, num_workers: int | None = None):
        self.closed = True  # until construction succeeds: close() is then a no-op
        self._pid = os.getpid()   # a forked child's copy drives no command (_begin_command)
        # Held by a command's start or wait (_begin_command), so that close() cannot
        # free the control block under it; reentrant for close()'s own wait.
        self._calls = threading.RLock()
        self._stop_waits = False   # close() asks the wait in progress to stop
        self._close_pending = False   # close() from inside a command: kill the workers as it ends
        self._closer = None        # the thread running close(): other threads' commands are refused
        if worker is not None:
            raise ValueError("shoal's AsyncVectorEnv steps blocks of envs over shared memory and "
                             "takes no custom `worker`; use gymnasium.vector.AsyncVectorEnv for one")
        if max_concurrency is not None:
            if not isinstance(max_concurrency, (int, np.integer)):
                raise ValueError(f"`max_concurrency` must be an integer or None, got {type(max_concurrency)}.")
            if max_concurrency < 1:
                raise ValueError(f"`max_concurrency` must be a positive or None, got {max_concurrency}.")
        self.env_fns = env_fns
        self.shared_memory = shared_memory
        self.copy = copy
        self.context = context
        self.daemon = daemon
        self.worker = None
        self.observation_mode = observation_mode
        self.autoreset_mode = parse_autoreset_mode(autoreset_mode)
        self.max_concurrency = max_concurrency
        self.num_envs = len(env_fns)
        if self.num_envs < 1:
            raise ValueError("env_fns must hold at least one env constructor")

        # Spaces and metadata come from one env made here, as gymnasium does.
        dummy_env = env_fns[0]()
        self.metadata = dict(dummy_env.metadata)
        self.metadata["autoreset_mode"] = self.autoreset_mode
        self.render_mode = dummy_env.render_mode
        self.single_action_space = dummy_env.action_space
        self.action_space = batch_space(self.single_action_space, self.num_envs)
        if isinstance(observation_mode, tuple) and len(observation_mode) == 2:
            if not isinstance(observation_mode[0], Space) or not isinstance(observation_mode[1], Space):
                raise TypeError(f"Expected both elements of observation_mode to be Spaces, got "
                                f"{type(observation_mode[0])} and {type(observation_mode[1])}")
            self.observation_space, self.single_observation_space = observation_mode
        elif observation_mode == "same":
            self.single_observation_space = dummy_env.observation_space
            self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        elif observation_mode == "different":
            env_spaces = [env().observation_space for env in self.env_fns]
            self.single_observation_space = env_spaces[0]
            self.observation_space = batch_differing_spaces(env_spaces)
        else:
            raise ValueError("Invalid `observation_mode`, expected: 'same' or 'different' or tuple of "
                             f"single and batch observation space, actual got {observation_mode}")
        dummy_env.close()
        del dummy_env

        # Observations without a fixed layout (Text, Graph, Sequence, OneOf)
        # travel pickled over the pipes instead of failing as gymnasium's do:
        # in a Dict / Tuple mixing them with fixed-layout entries only those
        # entries (_obs_split: the rest stays in shared memory), else the
        # whole observation, as with shared_memory=False.
        space = self.single_observation_space
        self._obs_split = ObsSplit.of(space) if shared_memory else None
        self._obs_by_pipe = not (shared_memory and is_shareable(space)) and self._obs_split is None
        own = _own_space(space) if shared_memory else None
        if own is not None:
            # a space of the user's own: gymnasium's error (its test suite
            # expects it), not a silent fallback, saying which entry and why
            where, kind = own
            detail = (f"the observation space{where} is a {kind}, not one of gymnasium's spaces, so shoal "
                      f"cannot know its layout: shared memory takes Box, Discrete, MultiDiscrete, "
                      f"MultiBinary and Dict / Tuple of them, and Text, Graph, Sequence and OneOf travel "
                      f"pickled; with shared_memory=False every observation travels pickled")
            raise ValueError("Using `AsyncVector(..., shared_memory=True)` caused an error, you can "
                             "disable this feature with `shared_memory=False` however this is slower. "
                             f"({detail})") from CustomSpaceError(detail)

        cap = available_cores() if num_workers is None else num_workers
        if not isinstance(cap, (int, np.integer)) or isinstance(cap, bool) or cap < 1:
            raise ValueError(f"num_workers must be a positive int, got {num_workers!r}")
        if max_concurrency is not None:
            cap = min(cap, int(max_concurrency))
        self.num_workers = int(min(cap, self.num_envs))
        edges = np.linspace(0, self.num_envs, self.num_workers + 1).round().astype(int)
        self._blocks = [(int(edges[k]), int(edges[k + 1])) for k in range(self.num_workers)]

        self._memory = _SharedMemory(
            self.num_envs, self.num_workers,
            None if self._obs_by_pipe else self._obs_split.shared if self._obs_split else space,
            self.single_action_space if is_shareable(self.single_action_space) else None)
        if self._obs_split is not None:
            self._piped_obs = self._obs_split.empty_piped(self.num_envs)
            self.observations = self._obs_split.join(self._memory.observations, self._piped_obs)
        elif not self._obs_by_pipe:
            self.observations = self._memory.observations
        else:
            self.observations = create_empty_array(self.single_observation_space, n=self.num_envs,
                                                   fn=np.zeros)
        self._ctrl = self._memory.control_address
        self._yield_s, self._long_steps, self._long_waits = PARENT_YIELD_S, False, 0  # see _wait
        self._replies, self._errors, self._taken = [], [], 0  # see _start_command
        self._infos = self._merge_error = None
        self._state = AsyncState.DEFAULT
        self._stale = False  # a timed-out command may still be running
        self.closed = False
        try:
            self._start_workers()
        except BaseException:
            self._shutdown(kill=True)
            raise

    # ---- workers ------------------------------------------------------------------
    def _start_workers(self) -> None:
        context = start_method(self.context)
        ctx = mp.get_context(context)
        self._workers = workers = Workers(self._memory)
        self._finalizer = weakref.finalize(self, workers.shutdown)
        self._pipes = []
        watch = ParentWatch()
        try:
            self._launch(ctx, context, watch)
        finally:
            watch.close()  # every worker has its own copy once started
        checks = []
        for k in range(self.num_workers):
            kind, data = self._receive(k, "exited while starting")
            if kind == "error":
                self._raise_worker_errors([data], while_starting=True)
            checks.extend(data)
        same_obs, same_action = zip(*checks)
        if not all(same_obs):
            if self.observation_mode == "same":
                raise RuntimeError("AsyncVectorEnv(..., observation_mode='same') however some of the "
                                   "sub-environments observation spaces are not equivalent. If this is "
                                   "intentional, use `observation_mode='different'` instead.")
            raise RuntimeError("AsyncVectorEnv(..., observation_mode='different' or custom space) however "
                               "the sub-environment's observation spaces do not share a common shape and dtype.")
        if not all(same_action):
            raise RuntimeError(f"Some environments have an action space different from "
                               f"`{self.single_action_space}`. In order to batch actions, the action "
                               f"spaces from all environments must be equal.")

    def _launch(self, ctx, context: str, watch: ParentWatch) -> None:
        """Start one worker per block."""
        workers = self._workers
        for k, (start, stop) in enumerate(self._blocks):
            parent_end, child_end = ctx.Pipe()
            workers.start(ctx, _worker_main, f"Worker<{type(self).__name__}>-{k}",
                          (k, CloudpickleWrapper(list(self.env_fns[start:stop])), start, self._memory,
                           self.autoreset_mode, self.observation_mode, self.single_observation_space,
                           self.single_action_space, child_end,
                           parent_end if context == "fork" else None, watch),
                          start, stop, daemon=self.daemon)
            child_end.close()
            self._pipes.append(parent_end)

    def _receive(self, k: int, what: str = "died"):
        """The next message from worker k; WorkerError if it dies first."""
        return self._workers.receive(k, self._pipes[k], what)

    def _start_messages(self, messages: list, infos: bool = False) -> None:
        """Hand worker k messages[k] (a CMD_MESSAGE command; infos as
        _start_command's). Every message is pickled before any worker is
        woken: one that cannot be (a lock or a lambda in reset's options or
        call's arguments) raises here, and the pool stays open, as
        gymnasium's AsyncVectorEnv does."""
        payloads, pickled = [], {}
        for message in messages:  # `[message] * num_workers` is pickled once
            if id(message) not in pickled:
                pickled[id(message)] = mp.reduction.ForkingPickler.dumps(message)
            payloads.append(pickled[id(message)])
        self._start_command(lambda: self._send_payloads(payloads), infos)

    def _send_payloads(self, payloads: list) -> None:
        """Wake each worker for a message, then write it (the worker is
        reading by then, so a large message cannot block us)."""
        _native.send(self._ctrl, 0, self.num_workers, _native.CMD_MESSAGE)
        for pipe, payload in zip(self._pipes, payloads, strict=True):
            pipe.send_bytes(payload)

    def _wait(self, timeout: float | None) -> bool:
        """Wait until every worker finished its command, reading each reply
        as soon as its worker is done (_take_reply); False on timeout (the
        replies read so far are kept for when the command is drained).

        After long steps (LONG_STEPS_IN_A_ROW waits over LONG_STEP_S) the
        parent waits for the workers one at a time, in order: a reply (infos, final observations) is then
        read and merged while the workers after it still step, instead of
        after the last one, with every worker idle. Short commands wait for
        all workers in one call (a call per worker would cost more than it
        saves), then read the replies."""
        deadline = None if timeout is None else time.monotonic() + timeout
        started = time.perf_counter()
        ctrl, count, replies = self._ctrl, self.num_workers, self._replies
        one_by_one = self._long_steps
        try:
            while self._taken < count:
                k = self._taken
                slice_s = _WAIT_SLICE_S if deadline is None else \
                    min(_WAIT_SLICE_S, max(0.0, deadline - time.monotonic()))
                busy = _native.wait_done(ctrl, k, 1 if one_by_one else count - k, slice_s, self._yield_s)
                done = (k + 1 if one_by_one else count) if busy < 0 else busy
                for j in range(k, done):  # workers before `busy` are done
                    if _native.worker_status(ctrl, j) == STATUS_QUIET:
                        replies.append(None)
                    else:
                        self._take_reply(j)
                self._taken = done
                if busy < 0:
                    continue
                if self._stop_waits or self._workers.shutting_down:   # before a worker told to close looks dead
                    raise ClosedEnvironmentError(f"{type(self).__name__} was closed during this call "
                                                 f"(by another thread, a signal handler or the interpreter's exit)")
                self._workers.check_alive(busy, count)
                if deadline is not None and time.monotonic() >= deadline:
                    return False
            return True
        finally:
            # How the last waits went decides how the next one waits
            # (LONG_STEP_S): long after LONG_STEPS_IN_A_ROW long ones (one
            # preempted short step is not a long step), short after any short one.
            self._long_waits = self._long_waits + 1 if time.perf_counter() - started > LONG_STEP_S else 0
            self._long_steps = self._long_waits >= LONG_STEPS_IN_A_ROW
            self._yield_s = LONG_STEP_YIELD_S if self._long_steps else PARENT_YIELD_S

    def _take_reply(self, k: int) -> None:
        """Read the reply of worker k (done, not quiet) to the finished
        command; an exception report is kept for _finish to raise; infos of
        a step or reset are merged now, in env order (the workers' order)."""
        status = _native.worker_status(self._ctrl, k)
        if status == STATUS_SHARED:
            reply = pickle.loads(self._memory.reply_areas[k, :self._memory.reply_sizes[k]])
        else:
            reply = self._receive(k)
        if status == STATUS_ERROR:
            self._errors.append(reply)
        elif reply is not None and self._infos is not None and not self._errors \
                and self._merge_error is None:
            try:
                for i, info in reply[1]:
                    self._infos = self._add_info(self._infos, info, i)
            except Exception as error:  # raised by _gather, as when merged after the wait
                self._merge_error = error
        self._replies.append(reply)

    def _begin_command(self) -> None:
        """Before a command's start or wait (the code that reads and writes
        the workers' control block by address); _end_command after it, in a
        finally: see close_extras. A forked child's copy is refused: its
        commands would reach the parent's workers."""
        self._refuse_a_forked_child()
        self._calls.acquire()
        # Checked with the lock held: a close() may have run since the caller's
        # _assert_is_running (a signal handler's, in this very thread, say).
        if self._closer not in (None, threading.get_ident()) or getattr(self, "_workers", None) is None:
            self._calls.release()
            raise ClosedEnvironmentError(f"Trying to operate on `{type(self).__name__}`, after a "
                                         f"call to `close()`.")

    def _end_command(self) -> None:
        self._calls.release()
        if self._close_pending and not self._calls._is_owned():
            self._close_pending = False
            self._close_now()

    def _finish(self, timeout: float | None, call: str, then: Callable | None = None):
        """Wait for the command in flight and collect its replies, one per
        worker (None: quiet); closes the pool on any failure (a dead worker,
        an env's exception, Ctrl-C), raising the workers' exceptions.
        then(replies), if given, reads the results out of shared memory
        while close() still cannot free it; its value is returned."""
        self._assert_is_running()
        self._begin_command()
        try:
            replies = self._finish_command(timeout, call)
            return replies if then is None else then(replies)
        finally:
            self._end_command()

    def _finish_command(self, timeout: float | None, call: str) -> list | None:
        try:
            if not self._wait(timeout):
                self._state = AsyncState.DEFAULT
                self._stale = True
                raise mp.TimeoutError(f"The call to `{call}` has timed out after {timeout} second(s).")
            self._state = AsyncState.DEFAULT
            if self._errors:
                self._raise_worker_errors(self._errors)
            return self._replies
        except mp.TimeoutError:
            raise
        except BaseException:
            self._close_now()
            raise

    def _drain(self, timeout: float | None = None) -> None:
        """Let a command that timed out finish, dropping its results (up to
        `timeout`: mp.TimeoutError after it, the command still stale)."""
        if self._stale:
            self._stale = False
            self._finish(timeout, "drain")

    def _raise_worker_errors(self, errors: list, while_starting: bool = False) -> None:
        self._close_now()
        for k, _, type_name, message, trace, env in errors:
            # gymnasium runs one worker per env and names the env's index: so do we
            logger.error(f"Received the following error from Worker-{k if env is None else env} "
                         f"- Shutting it down")
            logger.error(trace)
        logger.error("Raising the last exception back to the main process.")   # gymnasium's three
        k, payload, type_name, message, trace, _ = errors[-1]
        error = pickle.loads(payload) if payload is not None else RuntimeError(f"{type_name}: {message}")
        if not isinstance(error, Exception):
            # An env's sys.exit() (or a KeyboardInterrupt it raised) would end
            # or interrupt this process as if by its own choice: an error instead
            error = RuntimeError(f"an env raised {type_name}({message}) in a worker; the pool cannot "
                                 f"go on without it")
        start, stop = self._blocks[k]
        where = " while starting" if while_starting else ""
        error.add_note(f"Raised in shoal worker {k} (envs {start}..{stop - 1}){where}; the pool is "
                       f"closed. Worker traceback:\n{trace.rstrip()}")
        raise error

    def _close_now(self) -> None:
        self._shutdown(kill=True)
        self.closed = True

    def _shutdown(self, kill: bool, join_timeout: float = 1.0) -> None:
        workers = getattr(self, "_workers", None)
        if workers is not None:
            try:
                workers.kill() if kill else workers.shutdown(join_timeout)   # Ctrl-C: raised once done
            finally:
                if hasattr(self, "_finalizer"):   # (a Ctrl-C may land before it is made)
                    self._finalizer.detach()
                for pipe in getattr(self, "_pipes", ()):
                    pipe.close()
                self._pipes = []
                self._workers = None
        elif getattr(self, "_memory", None) is not None:
            self._memory.close()
        if not getattr(self, "_obs_by_pipe", True):   # views of the region: drop them, so close() frees it
            self.observations = None

    # ---- gymnasium API --------------------------------------------------------------
    @property
    def np_random_seed(self) -> tuple[int, ...]:
        """The np_random seed of each env."""
        return self.get_attr("np_random_seed")

    @property
    def np_random(self) -> tuple[np.random.Generator, ...]:
        """The np_random generator of each env (copies, from the workers)."""
        return self.get_attr("np_random")

    def reset(self, *, seed: int | list[int | None] | None = None, options: dict[str, Any] | None = None):
        """Reset all envs (or those in options["reset_mask"]), as gymnasium's AsyncVectorEnv.

        Args:
            seed: None, an int s (env i gets s + i) or one seed (or None) per env.
            options: passed to every env's reset; "reset_mask" (bool,
                (num_envs,)) resets only those envs.

        Returns:
            (observations, infos) in gymnasium's batched structure.

        Raises:
            gymnasium.error.Error / ValueError / TypeError: bad seeds, as
                gymnasium raises them (checked before anything is sent: the
                pool stays open).
            Any env exception, re-raised with the worker's traceback (the
            pool is then closed); WorkerError if a worker died.
        """
        self.reset_async(seed=seed, options=options)
        return self.reset_wait()

    def reset_async(self, seed: int | list[int | None] | None = None, options: dict[str, Any] | None = None) -> None:
        self._assert_is_running()
        if seed is None:
            seed = [None for _ in range(self.num_envs)]
        elif isinstance(seed, (int, np.integer)):
            seed = [int(seed) + i for i in range(self.num_envs)]
        if len(seed) != self.num_envs:
            raise ValueError(f"If seeds are passed as a list the length must match num_envs={self.num_envs} "
                             f"but got length={len(seed)}.")
        seed = _checked_seeds(seed)  # here, not in the workers: a bad seed leaves the pool open
        if self._state != AsyncState.DEFAULT:
            raise AlreadyPendingCallError(f"Calling `reset_async` while waiting for a pending call to "
                                          f"`{self._state.value}` to complete", str(self._state.value))
        reset_mask = None
        if options is not None and "reset_mask" in options:
            reset_mask = options.pop("reset_mask")
            validate_reset_mask(reset_mask, self.num_envs)
        self._drain()
        messages = [("reset", list(seed[a:b]), options,
                     None if reset_mask is None else reset_mask[a:b].tolist())
                    for a, b in self._blocks]
        self._start_messages(messages, infos=True)
        self._state = AsyncState.WAITING_RESET

    def reset_wait(self, timeout: float | None = None):
        self._assert_is_running()
        if self._state != AsyncState.WAITING_RESET:
            raise NoAsyncCallError("Calling `reset_wait` without any prior call to `reset_async`.",
                                   AsyncState.WAITING_RESET.value)
        def outputs(replies):
            infos = self._gather(replies)
            return self._observations_out(), infos
        return self._finish(timeout, "reset_wait", then=outputs)

    def step(self, actions):
        """Step every env; (observations, rewards, terminations, truncations, infos)."""
        self.step_async(actions)
        return self.step_wait()

    def step_async(self, actions) -> None:
        self._assert_is_running()
        if self._state != AsyncState.DEFAULT:
            raise AlreadyPendingCallError(f"Calling `step_async` while waiting for a pending call to "
                                          f"`{self._state.value}` to complete.", str(self._state.value))
        self._drain()
        # Actions go through shared memory only when that changes nothing: an
        # env must see what SyncVectorEnv would pass it (a float64 row for a
        # float32 Box changes Pendulum's dynamics), so other dtypes, shapes
        # and lists travel pickled, as rows of `iterate`.
        if self._memory.actions is not None and copy_if_fits(self.single_action_space,
                                                             self._memory.actions, actions):
            self._start_command(lambda: _native.send(self._ctrl, 0, self.num_workers, _native.CMD_STEP),
                                infos=True)
        else:  # actions travel pickled, a block per worker
            per_env = list(iterate(self.action_space, actions))
            if len(per_env) != self.num_envs:
                raise ValueError(f"expected actions for {self.num_envs} envs, got {len(per_env)}")
            messages = [("step", per_env[a:b]) for a, b in self._blocks]
            self._start_messages(messages, infos=True)
        self._state = AsyncState.WAITING_STEP

    def step_wait(self, timeout: float | None = None):
        self._assert_is_running()
        if self._state != AsyncState.WAITING_STEP:
            raise NoAsyncCallError("Calling `step_wait` without any prior call to `step_async`.",
                                   AsyncState.WAITING_STEP.value)
        def outputs(replies):
            infos = self._gather(replies)
            m = self._memory
            return (self._observations_out(), m.rewards.copy(), m.terminations.copy(),
                    m.truncations.copy(), infos)
        return self._finish(timeout, "step_wait", then=outputs)

    def call(self, name: str, *args: Any, **kwargs: Any) -> tuple[Any, ...]:
        """Call method `name` (or read attribute `name`) of every env."""
        self.call_async(name, *args, **kwargs)
        return self.call_wait()

    def call_async(self, name: str, *args: Any, **kwargs: Any) -> None:
        self._assert_is_running()
        if self._state != AsyncState.DEFAULT:
            raise AlreadyPendingCallError(f"Calling `call_async` while waiting for a pending call to "
                                          f"`{self._state.value}` to complete.", str(self._state.value))
        if name in _RESERVED_CALLS:
            raise ValueError(f"Trying to call function `{name}` with `call`, use `{name}` directly instead.")
        self._drain()
        messages = [("call", name, args, kwargs)] * self.num_workers
        self._start_messages(messages)
        self._state = AsyncState.WAITING_CALL

    def call_wait(self, timeout: float | None = None) -> tuple[Any, ...]:
        self._assert_is_running()
        if self._state != AsyncState.WAITING_CALL:
            raise NoAsyncCallError("Calling `call_wait` without any prior call to `call_async`.",
                                   AsyncState.WAITING_CALL.value)
        replies = self._finish(timeout, "call_wait")
        return tuple(result for block in replies for result in block)

    def get_attr(self, name: str) -> tuple[Any, ...]:
        """Attribute `name` of every env."""
        return self.call(name)

    def set_attr(self, name: str, values: list[Any] | tuple[Any] | object) -> None:
        """Set attribute `name` of every env: one value per env (list or
        tuple), or the same value for all."""
        self._assert_is_running()
        if not isinstance(values, (list, tuple)):
            values = [values for _ in range(self.num_envs)]
        if len(values) != self.num_envs:
            raise ValueError("Values must be a list or tuple with length equal to the number of environments. "
                             f"Got `{len(values)}` values for {self.num_envs} environments.")
        if self._state != AsyncState.DEFAULT:
            raise AlreadyPendingCallError(f"Calling `set_attr` while waiting for a pending call to "
                                          f"`{self._state.value}` to complete.", str(self._state.value))
        self._drain()
        messages = [("setattr", name, list(values[a:b])) for a, b in self._blocks]
        self._start_messages(messages)
        self._finish(None, "set_attr")

    def env_is_wrapped(self, wrapper_class: type) -> tuple[bool, ...]:
        """Per env, whether a `wrapper_class` (a gymnasium.Wrapper subclass)
        wraps it, asked in the workers: SB3's VecEnv.env_is_wrapped, which
        shoal.sb3.VectorEnvAdapter answers with it (SB3's evaluate_policy
        counts whole episodes from a Monitor inside the env when there is one)."""
        self._assert_is_running()
        if self._state != AsyncState.DEFAULT:
            raise AlreadyPendingCallError(f"Calling `env_is_wrapped` while waiting for a pending call to "
                                          f"`{self._state.value}` to complete.", str(self._state.value))
        self._drain()
        # By name: unpickling a class a worker cannot find would be an env
        # error, and close the pool over a question.
        messages = [("is_wrapped", wrapper_class.__module__, wrapper_class.__qualname__)] * self.num_workers
        self._start_messages(messages)
        replies = self._finish(None, "env_is_wrapped")
        if any(block is None for block in replies):
            raise ValueError(f"the workers cannot find {wrapper_class.__module__}.{wrapper_class.__qualname__} "
                             f"(a class defined after they started, or in __main__ under spawn / "
                             f"forkserver), so they cannot say whether their envs are wrapped in it")
        return tuple(result for block in replies for result in block)

    def worker_busy_seconds(self) -> np.ndarray:
        """Seconds each worker has spent on commands (from receiving one to
        reporting it done) since it started, one float per worker: see
        shoal.pool.Multiprocessing.worker_busy_seconds."""
        self._assert_is_running()
        self._begin_command()
        try:
            return _native.worker_busy_ns(self._ctrl, self.num_workers) / 1e9
        finally:
            self._end_command()

    def render(self):
        """The frame of every env (env.render())."""
        return self.call("render")

    @property
    def processes(self) -> list:
        """The worker processes (multiprocessing Process objects: pid,
        is_alive()), one per worker, each stepping a block of envs; gymnasium's
        AsyncVectorEnv has one per env. Empty once closed."""
        workers = getattr(self, "_workers", None)
        return [] if workers is None else list(workers.processes)

    def close_extras(self, timeout: float | None = None, terminate: bool = False) -> None:
        """Close the envs and workers. A pending call is waited for first (up
        to `timeout`); terminate=True (or a timeout) kills the workers instead.

        From another thread while a command is running (inside step_wait(),
        say): the command stops at its next wait slice, its caller gets
        ClosedEnvironmentError, and close waits for it. From a signal handler
        inside a command of this thread: the command stops waiting and the
        workers are killed as it ends. In a forked child it only marks this
        copy closed: the workers are the parent's."""
        if os.getpid() != self._pid:
            return
        if self._calls._is_owned():
            if self._command_on_this_stack():   # a signal handler inside this thread's command
                self._stop_waits = self._close_pending = True
                return
            while self._calls._is_owned():   # held by no command: a signal interrupted one
                self._calls.release()        # just after it took the lock; let it go
        if not self._calls.acquire(False):
            self._stop_waits = True
            self._calls.acquire()
            self._stop_waits = False   # that command has stopped; our own waits below must not
        try:
            self._closer = threading.get_ident()
            self._close_extras(timeout, terminate)
        finally:
            self._calls.release()

    def _command_on_this_stack(self) -> bool:
        """Whether this thread is inside one of this env's commands: a frame
        of this module running a method of this env, above close_extras."""
        return in_a_method_of(self, __file__, sys._getframe(2))

    def _close_extras(self, timeout: float | None, terminate: bool) -> None:
        if getattr(self, "_workers", None) is None:
            self._shutdown(kill=True)
            return
        timeout = 0 if terminate else timeout
        try:
            if self._state != AsyncState.DEFAULT:
                logger.warn(f"Calling `close` while waiting for a pending call to `{self._state.value}` to complete.")
                getattr(self, f"{self._state.value}_wait")(timeout)
            elif self._stale and not terminate:
                self._drain(timeout)   # (a stuck env: the timeout, then the workers are killed)
        except mp.TimeoutError:
            terminate = True
        except Exception:
            terminate = True  # the pool is already closed by the failing wait
        try:
            self._shutdown(kill=terminate or self._stale, join_timeout=10.0 if timeout is None else timeout)
        finally:
            self.closed = True   # even when a Ctrl-C surfaces as the shutdown ends

    def __reduce__(self):
        raise TypeError(f"{type(self).__name__} cannot be pickled or copied (it owns worker processes "
                        f"and shared memory): create one in each process instead")

    def __del__(self):
        # vars(), not getattr: VectorEnv's class attribute `closed = False`
        # would make an instance whose __init__ never ran (a bad keyword) look open
        if not vars(self).get("closed", True):
            self.close(terminate=True)

    # ---- helpers ------------------------------------------------------------------------
    def _refuse_a_forked_child(self) -> None:
        if os.getpid() != self._pid:
            raise RuntimeError(f"this {type(self).__name__} belongs to process {self._pid}; a forked "
                               f"child (process {os.getpid()}) cannot use it: create one in each process")

    def _assert_is_running(self) -> None:
        """First in every public method: before it writes actions into the
        shared memory (which a forked child shares with the parent's pool)."""
        self._refuse_a_forked_child()
        if self.closed:
            raise ClosedEnvironmentError(f"Trying to operate on `{type(self).__name__}`, after a call to `close()`.")

    def _start_command(self, start: Callable[[], None], infos: bool = False) -> None:
        """Hand a command to the workers (`start`); infos: its replies carry
        infos to merge (step, reset)."""
        self._replies, self._errors, self._taken = [], [], 0
        self._infos, self._merge_error = ({} if infos else None), None
        self._begin_command()
        try:
            start()
        except BaseException as error:
            dead = [k for k, p in enumerate(self._workers.processes) if exited(p)]
            failure = self._workers.failure(dead[0], "died") if dead else None
            self._close_now()
            if failure is not None:
                raise failure from error
            raise
        finally:
            self._end_command()

    def _gather(self, replies: list) -> dict:
        """Infos in env order (as SyncVectorEnv builds them: merged by
        _take_reply as the replies came) and, when obs travel by pipe, the
        observations."""
        if (self._obs_by_pipe or self._obs_split is not None) and any(replies):
            observations = [obs for reply in replies for obs in reply[0]]
            split = self._obs_split
            if split is None:
                self.observations = concatenate(self.single_observation_space, observations, self.observations)
            else:  # the piped entries only; the others are in shared memory already
                for k in split.piped_keys:
                    self._piped_obs[k] = concatenate(split.space[k], [obs[k] for obs in observations],
                                                     self._piped_obs[k])
                self.observations = split.join(self._memory.observations, self._piped_obs)
        if self._merge_error is not None:
            error, self._merge_error = self._merge_error, None
            raise error
        return self._infos

    def _observations_out(self):
        return _copy_structure(self.observations) if self.copy else self.observations

    def __repr__(self) -> str:
        where = f"{self.spec.id}, " if self.spec is not None else ""
        closed = ", closed" if self.closed else ""
        return f"{type(self).__name__}({where}num_envs={self.num_envs}, num_workers={self.num_workers}{closed})"


def _own_space(space: Space, where: str = "") -> tuple[str, str] | None:
    """(where, class name) of the first part of `space` that is none of
    gymnasium's spaces (a space of the user's own: MiniGrid's MissionSpace,
    say), e.g. ("['mission']", "MissionSpace"); None if there is none."""
    from gymnasium import spaces
    if isinstance(space, (spaces.Dict, spaces.Tuple)):
        items = space.spaces.items() if isinstance(space, spaces.Dict) else enumerate(space.spaces)
        for key, sub in items:
            found = _own_space(sub, f"{where}[{key!r}]")
            if found is not None:
                return found
        return None
    if isinstance(space, (spaces.Box, spaces.Discrete, spaces.MultiDiscrete, spaces.MultiBinary,
                          spaces.Text, spaces.Graph, spaces.Sequence, spaces.OneOf)):
        return None
    return (f"'s entry {where}" if where else ""), type(space).__name__


def _checked_seeds(seeds) -> list:
    """Per-env seeds as gymnasium's seeding accepts them (None or an int >=
    0; numpy integers become ints, as an int seed does), else the
    gymnasium.error.Error that env.reset(seed=...) would raise."""
    from gymnasium.error import Error
    checked = []
    for seed in seeds:
        if isinstance(seed, np.integer):
            seed = int(seed)
        if seed is not None and not isinstance(seed, int):
            raise Error(f"Seed must be a python integer, actual type: {type(seed)}")
        if seed is not None and seed < 0:
            raise Error(f"Seed must be greater or equal to zero, actual value: {seed}")
        checked.append(seed)
    return checked


def _copy_structure(batch):
    if isinstance(batch, np.ndarray):
        return batch.copy()
    if isinstance(batch, dict):
        return {key: _copy_structure(value) for key, value in batch.items()}
    if type(batch) is tuple:   # not a namedtuple (GraphInstance): deepcopy keeps those whole
        return tuple(_copy_structure(value) for value in batch)
    from copy import deepcopy
    return deepcopy(batch)
