"""How a worker process starts: shared by the native and the Python pools.

Lifetime. Workers die with the *process* that created their pool, on every
start method and whatever thread created the pool: the pool hands each
worker a ParentWatch (a pidfd of the pool's process), and the worker runs a
C thread that sleeps in poll() on it and _exit()s the worker when that
process is gone (see shoal_sync.h). Nothing is added to the per-step path.

Shutdown. `Workers` holds a pool's processes and closes them (CLOSE, join,
kill stragglers, free the memory), from close() or a finalizer.

Inherited memory. A forked worker inherits every descriptor and mapping of
the pool's process, including the memfds of the process's *other* pools;
holding them would keep those pools' memory alive after their close(). So
a worker swaps other pools' memfd descriptors for /dev/null and replaces
their mappings with private anonymous memory, keeping only its own region.
"""
from __future__ import annotations

import contextlib
import multiprocessing as mp
import multiprocessing.connection
import multiprocessing.process
import os
import signal
import sys
import threading
import time
import weakref

from shoal.pool import _native
from shoal.pool.layout import MEMFD_NAME

WAIT_SLICE_S = 0.25  # how often a waiting parent checks its workers are alive


def in_a_method_of(obj, filename: str, frame, skip=None) -> bool:
    """Whether `frame` or a frame below it on this thread's stack runs a
    method of `obj` defined in `filename` (other than frames for which
    `skip(frame)` is true): a pool's close() asks it to tell a signal
    handler inside one of the pool's calls (then the call closes the pool
    as it ends) from a lock left held by an interrupted call."""
    while frame is not None:
        if frame.f_code.co_filename == filename and frame.f_locals.get("self") is obj \
                and not (skip is not None and skip(frame)):
            return True
        frame = frame.f_back
    return False


class WorkerError(RuntimeError):
    """A worker process failed or died; the pool has been closed."""


def start_method(context: str | None) -> str:
    """The multiprocessing start method of a pool: `context`; else one the
    program set with multiprocessing.set_start_method() (gymnasium's
    AsyncVectorEnv follows it too); else "fork" where the platform has it
    (fast to start), else "spawn"."""
    return (context or _start_method_set_by_the_program()
            or ("fork" if "fork" in mp.get_all_start_methods() else "spawn"))


def _start_method_set_by_the_program() -> str | None:
    """The global start method where set_start_method() made it differ from
    the platform's default; None otherwise. (get_start_method() cannot tell:
    any use of multiprocessing fixes the platform default, which on Python
    3.14 is forkserver, chosen by nobody.)"""
    default = getattr(mp.context, "_default_context", None)
    actual = getattr(default, "_actual_context", None)
    if actual is None or actual is getattr(default, "_default_context", None):
        return None
    return actual.get_start_method()


class ParentWatch:
    """Made in the pool's process before its workers start; passed to each
    worker (fork: inherited as is; spawn / forkserver: pickled, the
    descriptor travels with it). close() once the workers have started."""

    def __init__(self):
        self.pid = os.getpid()
        try:
            self.fd = os.pidfd_open(self.pid)  # close-on-exec, as every pidfd
        except (AttributeError, OSError):  # kernel < 5.3: workers poll the pid
            self.fd = -1

    def __reduce__(self):
        from multiprocessing.reduction import DupFd
        return (_rebuild_watch, (self.pid, DupFd(self.fd) if self.fd >= 0 else None))

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


def _rebuild_watch(pid: int, dup_fd) -> ParentWatch:
    watch = ParentWatch.__new__(ParentWatch)
    watch.pid = pid
    watch.fd = dup_fd.detach() if dup_fd is not None else -1
    return watch


# Signals whose Python handlers Workers.start defers while it starts a worker.
DEFERRED_SIGNALS = (signal.SIGINT, signal.SIGTERM)


@contextlib.contextmanager
def deferred_signals():
    """Run the block with the Python handlers of DEFERRED_SIGNALS (Ctrl-C's
    KeyboardInterrupt, a trainer's SIGTERM handler) put off: a signal that
    arrives meanwhile is handled, by the handler that was set, when the
    block ends. Python runs handlers in the main thread only, whichever
    thread the signal lands on (a blocked signal mask would not do: other
    threads, torch's, take it), so elsewhere this does nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    arrived, handlers = [], {}
    for sig in DEFERRED_SIGNALS:
        handler = signal.getsignal(sig)
        if callable(handler):
            handlers[sig] = handler
            signal.signal(sig, lambda number, frame: arrived.append((number, frame)))
    try:
        yield
    finally:
        for sig, handler in handlers.items():
            signal.signal(sig, handler)
        for number, frame in arrived:
            handlers[number](number, frame)


def start_worker(watch: ParentWatch, own_region) -> None:
    """First thing a worker does: die with the pool's process, leave Ctrl-C
    to it, and drop other pools' inherited memory (own_region: the
    SharedRegion this worker uses)."""
    _native.watch_parent(watch.fd, watch.pid, os.getppid() == watch.pid)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
    if callable(signal.getsignal(signal.SIGTERM)):
        # a forked worker has the parent's Python handler (deferred_signals's
        # while it started, or the parent's own): a worker just ends
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
    forget_other_regions(os.fstat(own_region.fd).st_ino)


def forget_other_regions(keep_inode: int) -> None:
    """Release every shoal memfd of this process but the one with inode
    `keep_inode`: descriptors become /dev/null (their numbers stay taken, so
    the Python objects owning them close nothing else later) and mappings
    become private anonymous memory."""
    prefix = f"/memfd:{MEMFD_NAME}"
    null = None
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        try:
            if not os.readlink(f"/proc/self/fd/{fd}").startswith(prefix) \
                    or os.fstat(fd).st_ino == keep_inode:
                continue
        except OSError:  # closed meanwhile (the listing's own descriptor)
            continue
        if null is None:
            null = os.open(os.devnull, os.O_RDWR | os.O_CLOEXEC)
        os.dup2(null, fd, inheritable=False)
    if null is not None:
        os.close(null)
    with open("/proc/self/maps") as maps:
        lines = maps.read().splitlines()
    for line in lines:
        fields = line.split(maxsplit=5)
        if len(fields) == 6 and fields[5].startswith(prefix) and int(fields[4]) != keep_inode:
            start, stop = (int(x, 16) for x in fields[0].split("-"))
            _native.forget_mapping(start, stop - start)


# Every Workers of this process, for _forget_workers_after_fork.
_ALL_WORKERS: weakref.WeakSet = weakref.WeakSet()


def _forget_workers_after_fork() -> None:
    """In an os.fork() child: the pools' worker processes are the parent's.
    multiprocessing still lists them as this process's children, and its
    exit handler would terminate them when the child exits; drop them."""
    children = multiprocessing.process._children
    for workers in list(_ALL_WORKERS):
        for process in workers.processes:
            children.discard(process)


os.register_at_fork(after_in_child=_forget_workers_after_fork)


def exited(process) -> bool:
    """Whether a started worker has ended: its sentinel (a pipe end the
    child holds until it exits) reads ready. Process.is_alive() asks
    waitpid, which fails once the child was reaped elsewhere (SIGCHLD
    ignored, inherited as ignored, or a handler that reaps every child):
    it then answers "alive" for ever, and a dead worker went unseen. (An
    exit status already read counts first: a forkserver worker's sentinel
    carries the status, and reads ready again only once the forkserver
    closes its end.)"""
    return process.exitcode is not None or bool(mp.connection.wait([process.sentinel], timeout=0))


def _not_closed(process) -> bool:
    """A started process not yet close()d (multiprocessing keeps the handle
    private: _popen is set by start() and cleared by close())."""
    return getattr(process, "_popen", None) is not None


class Workers:
    """The worker processes of one pool, and their shutdown (also run by a
    finalizer when a pool is dropped without close()).

    buffers: the pool's memory, with `control_address` (the workers'
    control blocks) and close(); processes / ranges: each worker's process
    and its [start, stop) envs, appended by the pool as it starts them."""

    def __init__(self, buffers):
        self.buffers = buffers
        self.processes: list = []
        self.ranges: list[tuple[int, int]] = []
        self.owner_pid = os.getpid()
        self.start_method = "fork"   # the last start()'s context's (its failure hints at spawn's rule)
        # Set once a shutdown begins (close(), or the pool's finalizer at the
        # interpreter's exit while another thread waits on a step): a call
        # still waiting then reports the pool closed, not its workers dead.
        self.shutting_down = False
        # One shutdown at a time: the pool's finalizer at interpreter exit
        # and a thread's close() after its call failed once raced on the
        # same Process objects (join on a closed one raised).
        self._shutdown_lock = threading.RLock()
        _ALL_WORKERS.add(self)

    def start(self, ctx, target, name: str, args: tuple, start: int, stop: int,
              daemon: bool = True):
        """Start one worker process (context `ctx`) for envs [start, stop).

        Ctrl-C (or a SIGTERM handler) raising between the fork and the
        append below would leave a started worker that no shutdown knows
        of, holding the pool's memory until this process exits: their
        handlers run after it is listed (deferred_signals)."""
        if mp.current_process().daemon:   # multiprocessing's own error is a bare assert
            raise RuntimeError("this process is daemonic (a multiprocessing.Pool, torch DataLoader "
                               "or SB3 SubprocVecEnv worker), and daemonic processes cannot start "
                               "worker processes: make the pool with backend='serial' here "
                               "(shoal.make, make_vec: it steps its envs in this process), or use "
                               "gymnasium's SyncVectorEnv for Python envs")
        process = ctx.Process(target=target, name=name, args=args, daemon=daemon)
        self.start_method = ctx.get_start_method()
        with deferred_signals():
            process.start()
            self.processes.append(process)
            self.ranges.append((start, stop))
        return process

    def describe(self, k: int) -> str:
        """"shoal worker k (pid ..., envs a..b)", for error messages."""
        start, stop = self.ranges[k]
        return f"shoal worker {k} (pid {self.processes[k].pid}, envs {start}..{stop - 1})"

    def check_alive(self, first: int, stop: int) -> None:
        """failure(k, "died") for the first dead one of workers first..stop-1
        (all of a command's workers not yet done: a dead one after a busy
        one is reported now, not once those before it finish)."""
        for k in range(first, stop):
            if exited(self.processes[k]):
                raise self.failure(k, "died")

    def failure(self, k: int, what: str) -> WorkerError:
        """The error for worker k that `what` ("died", "exited while
        starting"), with how it ended; the pool closes itself."""
        process = self.processes[k]
        if process.exitcode is None:   # its pipe closed as it exits: let it finish, for the code
            process.join(timeout=1.0)
        code = process.exitcode
        how = f"killed by signal {-code}" if code is not None and code < 0 else f"exit code {code}"
        if code is None and exited(process):
            how = "exit status unknown: reaped elsewhere, SIGCHLD is ignored or handled in this process"
        hint = ""
        if what == "exited while starting" and self.start_method != "fork":
            # a spawned child runs the main module again: unguarded, it makes
            # a pool while bootstrapping and Python stops it (its traceback above)
            if _start_method_set_by_the_program() == self.start_method:
                chosen = "which this program set (importing torchrl does)"
            else:
                chosen = "which the pool's context= chose (or the platform's default)"
            hint = (f". Workers start with multiprocessing's {self.start_method!r} method, {chosen}: "
                    f"they import the main module again, so a script must make its pools under "
                    f"`if __name__ == \"__main__\":`")
            main_file = getattr(sys.modules.get("__main__"), "__file__", None)
            if self.start_method == "spawn" and isinstance(main_file, str) and main_file.startswith("<"):
                hint = (f". Workers start with multiprocessing's 'spawn' method, {chosen}: "
                        f"they run the main module again from its file, and this one has none "
                        f"({main_file}, a script read from standard input): run the script from a "
                        f"file, or make the pool with context='fork' or 'forkserver'")
        return WorkerError(f"{self.describe(k)} {what} ({how}); the pool is closed{hint}")

    def receive(self, k: int, pipe, what: str = "died"):
        """The next message from worker k on `pipe`; its failure(k, what) if
        it dies (or closes the pipe) first."""
        while not pipe.poll(WAIT_SLICE_S):
            if exited(self.processes[k]):
                raise self.failure(k, what)
        try:
            return pipe.recv()
        except (EOFError, OSError):
            raise self.failure(k, what) from None

    def shutdown(self, join_timeout: float = 1.0) -> None:
        """Ask every worker to close, wait up to join_timeout for them all,
        kill the rest, free the memory. Safe to call again. Does nothing in a forked
        child (there, the workers and the memory are the parent's). Ctrl-C
        meanwhile is raised when it is done (deferred_signals): an
        interrupted shutdown would leave workers and memory that no later
        close() knows to free."""
        if os.getpid() != self.owner_pid:
            return
        with deferred_signals(), self._shutdown_lock:
            self._shutdown(join_timeout)

    def _shutdown(self, join_timeout: float) -> None:
        # A process leaves the list once closed, so a shutdown cut short (an
        # exception from a signal handler deferred_signals does not cover)
        # is finished by the next one, which skips what is done.
        self.shutting_down = True
        started = [p for p in self.processes if _not_closed(p)]
        if any(not exited(p) for p in started) and self.buffers.region.memory is not None:
            _native.send(self.buffers.control_address, 0, len(self.processes), _native.CMD_CLOSE)
        deadline = time.monotonic() + join_timeout   # for them all (close(timeout=)'s), not each
        for p in started:
            p.join(timeout=max(0.0, deadline - time.monotonic()))
        killed = {p for p in started if not exited(p)}
        for p in killed:   # all of them first, then one wait for them all
            p.kill()
        deadline = time.monotonic() + 1.0
        for p in started:
            if p in killed:
                p.join(timeout=max(0.0, deadline - time.monotonic()))
            if exited(p):
                if p.exitcode is None:   # reaped elsewhere (SIGCHLD ignored): its status is lost,
                    p._popen.returncode = -signal.SIGKILL if p in killed else 0   # and close() needs one
                p.close()  # releases its sentinel descriptor
        self.processes = [p for p in self.processes if _not_closed(p)]   # one that would not die stays
        self.buffers.close()

    def kill(self) -> None:
        """Kill every worker now (no goodbye), then shut down."""
        if os.getpid() != self.owner_pid:
            return
        for p in self.processes:
            if not exited(p):
                p.kill()
        self.shutdown()
