"""Faults of the pools' processes and objects (issue 10): workers die with
the process (not the thread) that made the pool on every start method,
timeouts, misuse from other threads or forked children, memory of closed
pools, closed-pool errors, oversized pools, unpicklable pools."""
import collections
import functools
import multiprocessing.process
import os
import pickle
import signal
import subprocess
import sys
import textwrap
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import gymnasium
import numpy as np
import pytest
from gymnasium.error import ClosedEnvironmentError

import shoal
from shoal.pool import AsyncVectorEnv, Multiprocessing, NativeVectorEnv, Serial, WorkerError
from shoal.pool.native import PoolClosedError, WorkerTimeoutError

from helpers import alive, children




def descendants(pid):
    """Every live descendant of `pid` (workers, forkserver, resource tracker)."""
    found, todo = [], [pid]
    while todo:
        kids = children(todo.pop())
        found += kids
        todo += kids
    return [p for p in found if alive(p)]


def wait_until(condition, timeout_s):
    deadline = time.monotonic() + timeout_s
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.02)
    return condition()


# ---- 1. workers die with the process that made the pool ---------------------------------
PARENT = textwrap.dedent("""
    import sys, numpy as np
    import shoal
    from shoal.pool import AsyncVectorEnv
    import gymnasium

    if __name__ == "__main__":
        kind, context = sys.argv[1], sys.argv[2]
        if kind == "native":
            pool = shoal.make("CartPole", 8, num_workers=2, context=context, seed=0)
            actions = np.zeros(8, np.int32)
        else:
            pool = AsyncVectorEnv([lambda: gymnasium.make("CartPole-v1")] * 2, num_workers=2,
                                  context=context)
            pool.reset(seed=0)
            actions = np.zeros(2, np.int64)
        print(" ".join(str(p.pid) for p in pool._workers.processes), flush=True)
        while True:
            pool.step(actions)
""")


def _default_signals():
    """Popen'd children start with default dispositions (the suite may run
    with SIGINT ignored under nohup or a background job)."""
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_DFL)


@pytest.mark.parametrize("kind, context, sig", [
    ("native", "fork", signal.SIGKILL), ("native", "fork", signal.SIGTERM),
    ("native", "spawn", signal.SIGKILL), ("native", "spawn", signal.SIGTERM),
    ("native", "forkserver", signal.SIGKILL), ("native", "forkserver", signal.SIGTERM),
    ("python", "forkserver", signal.SIGKILL), ("python", "spawn", signal.SIGTERM),
])
def test_workers_and_forkserver_die_with_the_process(kind, context, sig, tmp_path):
    script = tmp_path / "parent.py"
    script.write_text(PARENT)
    proc = subprocess.Popen([sys.executable, "-P", str(script), kind, context],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, preexec_fn=_default_signals)
    try:
        line = proc.stdout.readline()
        pids = [int(p) for p in line.split()]
        assert len(pids) == 2, proc.stderr.read() if proc.poll() is not None else line
        helpers = descendants(proc.pid)  # workers, and the forkserver where there is one
        assert set(pids) <= set(helpers)
        time.sleep(0.2)  # stepping
        proc.send_signal(sig)
        proc.wait(timeout=10)
        assert wait_until(lambda: not any(alive(p) for p in helpers), 5.0), \
            f"{[p for p in helpers if alive(p)]} outlived the pool's process ({kind}, {context}, {sig!r})"
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


@pytest.mark.parametrize("context", ["fork", "forkserver"])
@pytest.mark.parametrize("kind", ["native", "python"])
def test_ctrl_c_as_a_worker_starts_leaves_no_worker(kind, context, monkeypatch, no_leaks):
    """Ctrl-C arriving just after a worker's fork, before the pool has
    listed it (a real SIGINT, sent from inside Process.start), ends the
    construction with KeyboardInterrupt and no worker left: Workers.start
    defers the handler until the worker is listed. Another thread runs
    meanwhile, as torch's do: the signal may land on it."""
    other_thread_done = threading.Event()
    other_thread = threading.Thread(target=other_thread_done.wait, daemon=True)
    other_thread.start()
    started = []
    real_start = multiprocessing.process.BaseProcess.start

    def start_then_ctrl_c(process):
        real_start(process)
        started.append(process)
        if len(started) == 2:
            os.kill(os.getpid(), signal.SIGINT)
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)   # ignored under nohup
    monkeypatch.setattr(multiprocessing.process.BaseProcess, "start", start_then_ctrl_c)
    try:
        with pytest.raises(KeyboardInterrupt):
            if kind == "native":
                shoal.make("CartPole", 8, num_workers=4, context=context)
            else:
                AsyncVectorEnv([lambda: gymnasium.make("CartPole-v1")] * 4, num_workers=4, context=context)
    finally:
        signal.signal(signal.SIGINT, previous)
        other_thread_done.set()
        other_thread.join()
    assert len(started) == 2
    assert wait_until(lambda: not any(p.is_alive() for p in started if p._popen), 5.0)


@pytest.mark.parametrize("kind, where", [("native", "_carve"), ("native", "plan_blocks"),
                                         ("native", "finalize"), ("python", "finalize"),
                                         ("native", "memfd_create"), ("python", "memfd_create")])
def test_ctrl_c_while_a_pool_is_made_leaves_no_descriptor(kind, where, no_leaks):
    """A real SIGINT sent as construction calls `where`: before the pool's
    own cleanup is armed (its memory carved, its blocks planned), or as it
    arms the workers' finalizer; or as os.memfd_create returns the pool's
    descriptor. The user gets KeyboardInterrupt (not an AttributeError from
    the half-made pool's close) and the pool's memfd closes with the object
    (no_leaks checks after a gc)."""

    def ctrl_c_at(frame, event, arg):
        name = frame.f_code.co_name
        if where == "memfd_create":   # a C function: as it returns
            hit = event == "c_return" and getattr(arg, "__name__", "") == where
        elif where == "finalize":
            hit = (event == "call" and name == "__init__" and frame.f_code.co_filename.endswith("weakref.py")
                   and frame.f_back is not None and frame.f_back.f_code.co_name == "_start_workers")
        else:
            hit = event == "call" and name == where
        if hit:
            sys.setprofile(None)
            os.kill(os.getpid(), signal.SIGINT)
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)   # ignored under nohup
    try:
        sys.setprofile(ctrl_c_at)
        with pytest.raises(KeyboardInterrupt):
            if kind == "native":
                shoal.make("CartPole", 4, num_workers=2)
            else:
                AsyncVectorEnv([lambda: gymnasium.make("CartPole-v1")] * 2, num_workers=2)
    finally:
        sys.setprofile(None)
        signal.signal(signal.SIGINT, previous)


# ---- 2. workers outlive the thread that made the pool -----------------------------------
def test_pool_made_on_an_exited_thread_keeps_working(no_leaks):
    with ThreadPoolExecutor(1) as executor:
        pool = executor.submit(shoal.make, "CartPole", 8, num_workers=2, seed=0).result()
    # the executor's thread has exited; PR_SET_PDEATHSIG would have killed the workers
    time.sleep(0.3)
    for _ in range(20):
        pool.step(np.zeros(8, np.int32))
    assert all(p.is_alive() for p in pool._workers.processes)
    pool.close()


def test_python_pool_made_on_an_exited_thread_keeps_working(no_leaks):
    def make():
        envs = AsyncVectorEnv([lambda: gymnasium.make("CartPole-v1")] * 2, num_workers=2)
        envs.reset(seed=0)
        return envs
    with ThreadPoolExecutor(1) as executor:
        envs = executor.submit(make).result()
    time.sleep(0.3)
    for _ in range(5):
        envs.step(np.zeros(2, np.int64))
    envs.close()


# ---- 4. timeouts ----------------------------------------------------------------------------
def test_stopped_worker_times_out_and_closes_the_pool(no_leaks):
    pool = Multiprocessing("cartpole", 8, num_workers=2, seed=0, timeout=0.5)
    pool.step(np.zeros(8, np.int32))
    victim = pool._workers.processes[1].pid
    os.kill(victim, signal.SIGSTOP)
    try:
        start = time.monotonic()
        with pytest.raises(WorkerTimeoutError) as caught:
            pool.step(np.zeros(8, np.int32))
        elapsed = time.monotonic() - start
    finally:
        if alive(victim):
            os.kill(victim, signal.SIGCONT)
    assert 0.4 < elapsed < 5.0
    assert isinstance(caught.value, WorkerError) and isinstance(caught.value, TimeoutError)
    assert "worker 1" in str(caught.value) and "envs 4..7" in str(caught.value)
    assert pool.closed
    with pytest.raises(PoolClosedError):
        pool.step(np.zeros(8, np.int32))


@pytest.mark.parametrize("kind", ["native", "python"])
def test_a_dead_worker_is_reported_while_an_earlier_one_is_still_busy(kind, no_leaks):
    """Worker 0 stopped (a long step), worker 1 killed: the wait reports
    worker 1's death within a wait slice, not only once worker 0 is done
    (here never: the timeout of 30 s, which the old check reached, is the
    fallback)."""
    if kind == "native":
        pool = Multiprocessing("cartpole", 8, num_workers=2, seed=0, timeout=30)
        pool.step(np.zeros(8, np.int32))
    else:
        pool = AsyncVectorEnv([lambda: gymnasium.make("CartPole-v1")] * 2, num_workers=2)
        pool.reset(seed=0)
    stopped, killed = (p.pid for p in pool._workers.processes)
    os.kill(stopped, signal.SIGSTOP)
    os.kill(killed, signal.SIGKILL)
    try:
        start = time.monotonic()
        with pytest.raises(WorkerError) as caught:
            if kind == "native":
                pool.step(np.zeros(8, np.int32))
            else:
                pool.step_async(np.zeros(2, np.int64))
                pool.step_wait(timeout=30)
        elapsed = time.monotonic() - start
    finally:
        if alive(stopped):
            os.kill(stopped, signal.SIGCONT)
    assert "worker 1" in str(caught.value) and "died" in str(caught.value), caught.value
    assert elapsed < 10.0
    assert pool.closed


@pytest.mark.parametrize("kind", ["native", "python"])
def test_a_dead_worker_is_reported_when_sigchld_is_ignored(kind):
    """With SIGCHLD ignored (or inherited as ignored from a launcher, or a
    handler that reaps every child), the kernel reaps a dead worker at once:
    Process.is_alive() (waitpid) then says "alive" for ever, and the step
    hung. The worker's sentinel still tells."""
    previous = signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    try:
        if kind == "native":
            pool = Multiprocessing("cartpole", 8, num_workers=2, seed=0, timeout=30)
            step = lambda: pool.step(np.zeros(8, np.int32))   # noqa: E731
        else:
            pool = AsyncVectorEnv([lambda: gymnasium.make("CartPole-v1")] * 2, num_workers=2)
            pool.reset(seed=0)

            def step():
                pool.step_async(np.zeros(2, np.int64))
                pool.step_wait(timeout=30)
        try:
            victim = pool._workers.processes[0]
            os.kill(victim.pid, signal.SIGKILL)
            deadline = time.monotonic() + 5
            while alive(victim.pid) and time.monotonic() < deadline:
                time.sleep(0.01)
            start = time.monotonic()
            with pytest.raises(WorkerError, match="worker 0 .* died"):
                step()
            assert time.monotonic() - start < 10.0 and pool.closed
        finally:
            pool.close()
        before = len(os.listdir("/proc/self/fd"))   # and a clean close frees every descriptor
        for _ in range(3):
            Multiprocessing("cartpole", 4, num_workers=2, seed=0).close()
        assert len(os.listdir("/proc/self/fd")) == before
    finally:
        signal.signal(signal.SIGCHLD, previous)


def test_a_worker_that_cannot_start_says_why(monkeypatch, no_leaks):
    """A worker whose start fails before its env is built (no thread for its
    parent watch under a pids limit) reports the cause to the caller; it was
    only on the worker's stderr, the caller seeing "exited while starting"."""
    from shoal.pool import workers

    def no_thread(*args):
        raise BlockingIOError(11, "cannot start the parent watcher thread")
    monkeypatch.setattr(workers._native, "watch_parent", no_thread)   # forked workers inherit it
    with pytest.raises(WorkerError, match="cannot start the parent watcher thread"):
        shoal.make("CartPole", 4, num_workers=2)
    with pytest.warns(UserWarning), pytest.raises(BlockingIOError, match="cannot start the parent watcher"):
        AsyncVectorEnv([lambda: gymnasium.make("CartPole-v1")] * 2, num_workers=2)


def test_an_unguarded_script_under_spawn_is_told_to_guard_its_entry_point(tmp_path):
    """A script that sets the spawn start method (importing torchrl does)
    and makes a pool at module level: each spawned worker runs the script
    again and Python stops it while bootstrapping; the pool's error says
    why and what to do, not only "exited while starting"."""
    script = tmp_path / "unguarded.py"
    script.write_text("import multiprocessing as mp\nmp.set_start_method('spawn')\nimport shoal\n"
                      "shoal.make('CartPole', 4, num_workers=2).close()\n")
    done = subprocess.run([sys.executable, "-P", str(script)], capture_output=True, text=True, timeout=120,
                          cwd=tmp_path)
    assert done.returncode != 0
    last = done.stderr.strip().splitlines()[-1]
    assert "exited while starting" in last and "'spawn' method" in last, last
    assert 'if __name__ == "__main__":' in last and "this program set" in last, last
    # unguarded with the pool's own context="spawn": the hint names that, not the program
    script.write_text("import shoal\nshoal.make('CartPole', 4, num_workers=2, context='spawn').close()\n")
    done = subprocess.run([sys.executable, "-P", str(script)], capture_output=True, text=True, timeout=120,
                          cwd=tmp_path)
    last = done.stderr.strip().splitlines()[-1]
    assert "'spawn' method, which the pool's context= chose" in last and "this program set" not in last, last
    # the same script, guarded, read from standard input: the workers have no file to run
    guarded = ("import multiprocessing as mp\nimport shoal\nif __name__ == '__main__':\n"
               "    mp.set_start_method('spawn')\n    shoal.make('CartPole', 4, num_workers=2).close()\n")
    done = subprocess.run([sys.executable, "-P", "-"], input=guarded, capture_output=True, text=True,
                          timeout=120, cwd=tmp_path)
    last = done.stderr.strip().splitlines()[-1]
    assert done.returncode != 0 and "read from standard input" in last and "context='fork'" in last, last


def _make_a_pool_here(backend):
    try:
        with shoal.make("CartPole", 4, num_workers=2, backend=backend) as pool:
            return pool.reset(seed=0)[0].shape
    except RuntimeError as e:
        return str(e)


def test_a_pool_in_a_daemonic_process_says_to_step_serially(no_leaks):
    """A multiprocessing.Pool (or DataLoader, SubprocVecEnv) worker may not
    start processes: multiprocessing's bare AssertionError becomes an error
    that names the way out, and backend="serial" works there."""
    import multiprocessing as mp
    with mp.get_context("fork").Pool(1) as workers:
        refused, served = workers.map(_make_a_pool_here, ["multiprocessing", "serial"])
    assert "daemonic" in refused and "backend='serial'" in refused and served == (4, 4)


def _envpool_dropin_here(_):
    import warnings
    from shoal import envpool_compat
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        envs = envpool_compat.make("CartPole-v1", env_type="gymnasium", num_envs=4, seed=3)
    try:
        obs = [envs.reset()[0]] + [envs.step(np.ones(4, np.int32))[0] for _ in range(5)]
        return np.stack(obs), [str(w.message) for w in caught]
    finally:
        envs.close()


def test_the_envpool_dropin_steps_in_a_daemonic_process(no_leaks):
    """EnvPool's threads run in a DataLoader or SubprocVecEnv worker; the
    drop-in there steps its envs in that process (a warning says so) and
    gives what it gives anywhere else."""
    import multiprocessing as mp
    with mp.get_context("fork").Pool(1) as workers:
        (obs, messages), = workers.map(_envpool_dropin_here, [None])
    assert any("daemonic" in m and "in this process" in m for m in messages), messages
    np.testing.assert_array_equal(obs, _envpool_dropin_here(None)[0])


def test_timeout_is_validated_and_serial_accepts_it():
    for bad in (0, -1.0, np.float32(0), True, np.bool_(True), "5"):
        with pytest.raises(ValueError, match="timeout"):
            Serial("cartpole", 2, timeout=bad)
    for good in (0.1, 2, np.int64(5), np.float32(0.5)):   # numpy numbers too, as num_envs & co
        pool = Serial("cartpole", 2, timeout=good, seed=0)
        assert type(pool.timeout) is float and pool.timeout == float(good)
        pool.step(np.zeros(2, np.int32))
        pool.close()


def test_two_shutdowns_at_once_do_not_race(monkeypatch, no_leaks):
    """The pool's finalizer at interpreter exit and a daemon thread's
    close() (its step saw the workers go) once ran Workers.shutdown at the
    same time on the same processes: 'process object is closed' tracebacks
    at exit. Shutdowns now take turns; joins are slowed here to widen the
    window that raced."""
    pool = shoal.make("CartPole", 4, num_workers=2, parent_share=False, seed=0)
    join = multiprocessing.process.BaseProcess.join

    def slow_join(self, timeout=None):
        time.sleep(0.05)
        return join(self, timeout)

    monkeypatch.setattr(multiprocessing.process.BaseProcess, "join", slow_join)
    errors, start = [], threading.Barrier(4)

    def shut_down():
        start.wait()
        try:
            pool._workers.shutdown()
        except BaseException as e:   # noqa: BLE001 (what the race raised)
            errors.append(e)

    threads = [threading.Thread(target=shut_down) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert pool._workers.processes == []
    pool.close()


@pytest.mark.parametrize("kind", ["native", "python"])
def test_a_step_waiting_through_the_exit_shutdown_reports_the_pool_closed(kind, no_leaks):
    """The pool's finalizer at the interpreter's exit shuts the workers down
    while a daemon thread still waits on a step (here a stopped worker holds
    it): that step reports the pool closed, not a worker dead (exit code 0,
    as asked)."""
    if kind == "native":
        pool = shoal.make("CartPole", 4, num_workers=2, parent_share=False, seed=0)
        step, closed_error = (lambda: pool.step(np.zeros(4, np.int32))), PoolClosedError
    else:
        pool = AsyncVectorEnv([lambda: gymnasium.make("CartPole-v1")] * 2, num_workers=2)
        pool.reset(seed=0)
        step, closed_error = (lambda: pool.step(np.zeros(2, np.int64))), ClosedEnvironmentError
    stopped = pool._workers.processes[0].pid
    os.kill(stopped, signal.SIGSTOP)
    raised = []

    def waiting_step():
        try:
            step()
        except BaseException as e:   # noqa: BLE001 (what the step raised)
            raised.append(e)

    thread = threading.Thread(target=waiting_step, daemon=True)
    thread.start()
    time.sleep(0.3)
    assert thread.is_alive()   # waiting on the stopped worker
    pool._workers.shutdown()   # what the finalizer runs at exit (it kills the stopped worker)
    thread.join(10)
    assert not thread.is_alive()
    assert len(raised) == 1 and isinstance(raised[0], closed_error), raised
    assert not isinstance(raised[0], WorkerError)
    pool.close()


class _InterruptedOnce(collections.deque):
    """A pool's batch queue whose next append raises KeyboardInterrupt, as a
    Ctrl-C landing between a batch leaving one queue and entering the other."""
    fire = True

    def append(self, batch):
        if self.fire:
            self.fire = False
            raise KeyboardInterrupt
        super().append(batch)


@pytest.mark.parametrize("queue, call", [("_in_flight", "send"), ("_with_user", "recv")])
def test_ctrl_c_between_the_async_queues_closes_the_pool(queue, call, no_leaks):
    """An interrupt between send()'s (or recv()'s) two queue moves once
    left the pool open with a batch gone from both: its envs never stepped
    again, silently. The pool now closes, as for a Ctrl-C while waiting."""
    pool = shoal.make("CartPole", 8, batch_size=4, num_workers=2, seed=0)
    try:
        pool.async_reset()
        pool.recv()
        setattr(pool, queue, _InterruptedOnce(getattr(pool, queue)))
        with pytest.raises(KeyboardInterrupt):
            if call == "send":
                pool.send(np.zeros(4, np.int32))
            else:
                pool.send(np.zeros(4, np.int32))   # batch 0 in flight
                pool.recv()                          # batch 1 (sent by async_reset): interrupted
        assert pool.closed
        with pytest.raises(PoolClosedError):
            pool.recv()
    finally:
        pool.close()


def test_python_pool_step_wait_timeout_as_gymnasium(no_leaks):
    """gymnasium's semantics: step_wait(timeout) raises multiprocessing's
    TimeoutError and leaves the env usable once the worker is back."""
    import multiprocessing as mp
    envs = AsyncVectorEnv([lambda: gymnasium.make("CartPole-v1")] * 2, num_workers=2)
    envs.reset(seed=0)
    victim = envs._workers.processes[0]
    os.kill(victim.pid, signal.SIGSTOP)
    try:
        envs.step_async(np.zeros(2, np.int64))
        with pytest.raises(mp.TimeoutError):
            envs.step_wait(timeout=0.3)
    finally:
        os.kill(victim.pid, signal.SIGCONT)
    envs.step(np.zeros(2, np.int64))
    envs.close()


# ---- 8. one thread at a time -------------------------------------------------------------
def test_second_thread_in_a_call_is_refused(no_leaks):
    pool = Multiprocessing("cartpole", 8, num_workers=2, seed=0)
    victim = pool._workers.processes[0]
    os.kill(victim.pid, signal.SIGSTOP)  # holds the first thread inside step()
    results = []
    stepper = threading.Thread(target=lambda: results.append(pool.step(np.zeros(8, np.int32))))
    stepper.start()
    try:
        time.sleep(0.2)
        for call in (lambda: pool.step(np.zeros(8, np.int32)), lambda: pool.reset(),
                     lambda: pool.recv(), lambda: pool.send(np.zeros(8, np.int32))):
            with pytest.raises(RuntimeError, match="another thread"):
                call()
    finally:
        os.kill(victim.pid, signal.SIGCONT)
        stepper.join(timeout=10)
    assert len(results) == 1
    pool.step(np.zeros(8, np.int32))  # usable again once the call is over
    pool.close()


NATIVE_KINDS = {"serial": dict(backend="serial"), "workers": dict(num_workers=2),
                "parent_share": dict(num_workers=2, parent_share=True)}


def step_until_it_raises(step):
    """A thread calling step() until it raises: (the thread, its errors)."""
    errors = []

    def loop():
        try:
            while True:
                step()
        except Exception as error:
            errors.append(error)

    thread = threading.Thread(target=loop)
    thread.start()
    return thread, errors


def close_from_a_handler_inside_step(step, close, victim) -> None:
    """SIGUSR1 arrives while step() waits on the stopped worker `victim`;
    its handler calls close() and raises Stop, which must come through."""
    class Stop(Exception):
        pass

    def handler(signum, frame):
        close()
        raise Stop

    previous = signal.signal(signal.SIGUSR1, handler)
    os.kill(victim, signal.SIGSTOP)
    timer = threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGUSR1))
    try:
        timer.start()
        with pytest.raises(Stop):
            step()
    finally:
        timer.cancel()
        signal.signal(signal.SIGUSR1, previous)
        if alive(victim):
            os.kill(victim, signal.SIGCONT)


@pytest.mark.parametrize("kind", NATIVE_KINDS)
def test_close_from_another_thread_stops_the_call_in_progress(kind, no_leaks):
    """close() from another thread while a thread steps: the stepping
    thread gets PoolClosedError (never a crash on freed memory)."""
    pool = shoal.make("CartPole", 64, seed=0, **NATIVE_KINDS[kind])
    stepper, errors = step_until_it_raises(lambda: pool.step(np.zeros(64, np.int32)))
    time.sleep(0.3)
    pool.close()
    stepper.join(timeout=10)
    assert not stepper.is_alive() and pool.closed
    assert len(errors) == 1 and isinstance(errors[0], PoolClosedError), errors


def test_close_from_another_thread_while_a_worker_is_stopped(no_leaks):
    """The call waits on a stopped worker: close() stops the wait (the
    stepping thread gets PoolClosedError) and kills the workers."""
    pool = Multiprocessing("cartpole", 8, num_workers=2, seed=0)
    victim = pool._workers.processes[1].pid
    os.kill(victim, signal.SIGSTOP)
    try:
        stepper, errors = step_until_it_raises(lambda: pool.step(np.zeros(8, np.int32)))
        time.sleep(0.3)
        started = time.monotonic()
        pool.close()
        assert time.monotonic() - started < 8.0
        stepper.join(timeout=10)
        assert not stepper.is_alive() and pool.closed and not alive(victim)
        assert len(errors) == 1 and isinstance(errors[0], PoolClosedError), errors
    finally:
        if alive(victim):
            os.kill(victim, signal.SIGCONT)


def test_close_from_a_signal_handler_inside_a_call(no_leaks):
    """A handler that closes the pool while this thread is inside step():
    the call stops waiting, and the pool is closed as it returns; the
    handler's own exception goes through as raised."""
    pool = Multiprocessing("cartpole", 8, num_workers=2, seed=0)
    victim = pool._workers.processes[1].pid
    seen_open = []

    def close():
        pool.close()
        seen_open.append(not pool.closed)   # not yet: the call in progress closes it

    close_from_a_handler_inside_step(lambda: pool.step(np.zeros(8, np.int32)), close, victim)
    assert seen_open == [True] and pool.closed and not alive(victim)


def test_python_pool_close_from_another_thread_or_a_signal_handler(no_leaks):
    """shoal.pool.AsyncVectorEnv: close() from another thread stops the
    stepping thread's call (ClosedEnvironmentError), also while a worker is
    stopped; from a signal handler inside step(), the workers are killed as
    the call ends."""
    def make():
        envs = AsyncVectorEnv([lambda: gymnasium.make("CartPole-v1")] * 4, num_workers=2)
        envs.reset(seed=0)
        return envs, envs._workers.processes[1].pid

    for stop_a_worker in (False, True):
        envs, victim = make()
        if stop_a_worker:
            os.kill(victim, signal.SIGSTOP)
        stepper, errors = step_until_it_raises(lambda: envs.step(np.zeros(4, np.int64)))
        time.sleep(0.3)
        envs.close()
        stepper.join(timeout=10)
        if alive(victim):
            os.kill(victim, signal.SIGCONT)
        assert not stepper.is_alive() and envs.closed and not alive(victim)
        assert len(errors) == 1 and isinstance(errors[0], ClosedEnvironmentError), errors

    envs, victim = make()
    close_from_a_handler_inside_step(lambda: envs.step(np.zeros(4, np.int64)), envs.close, victim)
    assert envs.closed and not alive(victim)


@pytest.mark.parametrize("kind", ["native", "python"])
def test_ctrl_c_during_close_still_closes_the_pool(kind, no_leaks):
    """Ctrl-C while close() waits for a slow worker (here a stopped one) is
    raised once the pool is closed: workers gone, memory freed, `closed`
    set. It once cut the shutdown short: the pool stayed half-closed, its
    next step said a worker "died", and a second close() freed nothing."""
    if kind == "native":
        pool = Multiprocessing("cartpole", 8, num_workers=2, seed=0)
        pool.step(np.zeros(8, np.int32))
    else:
        pool = AsyncVectorEnv([lambda: gymnasium.make("CartPole-v1")] * 4, num_workers=2)
        pool.reset(seed=0)
    workers = [p.pid for p in pool._workers.processes]
    if kind == "native":   # its close() waits 1 s for a worker: 3 s here, so a late timer still lands inside
        pool._workers.shutdown = functools.partial(pool._workers.shutdown, join_timeout=3.0)
    os.kill(workers[0], signal.SIGSTOP)   # close() waits up to its join timeout for it
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)   # ignored under nohup
    timer = threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGINT))
    try:
        timer.start()
        with pytest.raises(KeyboardInterrupt):
            pool.close()
    finally:
        timer.cancel()
        signal.signal(signal.SIGINT, previous)
        if alive(workers[0]):
            os.kill(workers[0], signal.SIGCONT)
    assert pool.closed and not any(alive(w) for w in workers)
    with pytest.raises((PoolClosedError, ClosedEnvironmentError)):
        pool.step(np.zeros(8 if kind == "native" else 4, np.int32 if kind == "native" else np.int64))
    pool.close()   # still fine


def test_a_pool_that_cannot_map_its_memory_keeps_no_descriptor(no_leaks, monkeypatch):
    """A region mmap refuses (ulimit -v, ulimit -f: limits the MemAvailable
    check cannot see) is a MemoryError naming the size, and its memfd is
    closed (each failed pool once kept one)."""
    import errno

    from shoal.pool import layout

    def refuse(*args, **kwargs):
        raise OSError(errno.ENOMEM, os.strerror(errno.ENOMEM))

    monkeypatch.setattr(layout, "SharedMapping", refuse)
    for _ in range(3):
        with pytest.raises(MemoryError, match="cannot map .* bytes of shared memory"):
            shoal.make("CartPole", 64, num_workers=2)
    monkeypatch.undo()


def test_arrays_kept_from_closed_pools_hold_no_descriptor(no_leaks):
    """An array kept from a closed pool keeps its memory mapped, but no file
    descriptor: Python's mmap kept one per pool, so a program keeping one
    result of each evaluation pool ran out of descriptors (EMFILE)."""
    def open_descriptors():
        return len(os.listdir("/proc/self/fd"))

    kept, before = [], None
    for i in range(12):
        pool = shoal.make("CartPole", 4, num_workers=2, seed=i)
        kept.append(pool.step(np.zeros(4, np.int32))[1])   # rewards: a view of the pool's memory
        pool.close()
        if i == 1:
            before = open_descriptors()
    assert open_descriptors() - before <= 1   # not one per closed pool (10)
    assert all((rewards == 1.0).all() for rewards in kept)   # still readable
    kept[0][:] = 7.0                                          # and writable
    del kept, pool


# ---- 9. forked children cannot drive the parent's workers --------------------------------
def test_forked_child_cannot_use_or_close_the_parents_pool(no_leaks):
    actions = [np.random.default_rng(k).integers(0, 2, 8).astype(np.int32) for k in range(10)]
    reference = Serial("cartpole", 8, num_workers=2, seed=0)
    pool = Multiprocessing("cartpole", 8, num_workers=2, seed=0)
    for a in actions[:5]:
        ours, ref = pool.step(a)[0].copy(), reference.step(a)[0].copy()
    read, write = os.pipe()
    child = os.fork()
    if child == 0:  # the child: must be refused, and closing must not touch the workers
        code = 1
        try:
            try:
                pool.step(actions[5])
            except RuntimeError as error:
                code = 0 if "forked child" in str(error) else 2
            pool.close()
            os.write(write, str(code).encode())
        finally:
            os._exit(0)
    os.close(write)
    _, status = os.waitpid(child, 0)
    assert os.read(read, 8) == b"0"
    os.close(read)
    assert all(p.is_alive() for p in pool._workers.processes)
    for a in actions[5:]:
        ours, ref = pool.step(a)[0], reference.step(a)[0]
        np.testing.assert_array_equal(ours, ref)
    pool.close()
    reference.close()


def test_forked_child_cannot_use_the_parents_python_pool(no_leaks):
    """shoal.pool.AsyncVectorEnv in a forked child: a command is refused
    (it would drive the parent's workers, whose results the parent then
    reads as its own), before it writes anything to the memory it shares
    with them (its actions would reach a step of the parent's), close()
    leaves the workers to the parent, and the parent's results stay those
    of gymnasium's SyncVectorEnv."""
    make = [lambda: gymnasium.make("CartPole-v1")] * 4
    pool, reference = AsyncVectorEnv(make, num_workers=2), gymnasium.vector.SyncVectorEnv(make)
    pool.reset(seed=0)
    reference.reset(seed=0)
    actions = np.zeros(4, np.int64)
    np.testing.assert_array_equal(pool.step(actions)[0], reference.step(actions)[0])
    read, write = os.pipe()
    child = os.fork()
    if child == 0:
        code = b"1"
        try:
            try:
                pool.step(np.ones(4, np.int64))
            except RuntimeError as error:
                code = b"0" if "forked child" in str(error) else b"2"
            pool.close()
            os.write(write, code)
        finally:
            os._exit(0)
    os.close(write)
    os.waitpid(child, 0)
    assert os.read(read, 8) == b"0"
    os.close(read)
    np.testing.assert_array_equal(pool._memory.actions, actions)   # the parent's last, not the child's
    for _ in range(20):
        np.testing.assert_array_equal(pool.step(actions)[0], reference.step(actions)[0])
    pool.close()
    reference.close()


FORK_AND_EXIT = textwrap.dedent("""
    import os, sys
    import gymnasium, numpy as np, shoal
    from shoal.pool import AsyncVectorEnv
    if sys.argv[1] == "native":
        pool = shoal.make("CartPole", 8, num_workers=2, seed=0)
        actions = np.zeros(8, np.int32)
    else:
        pool = AsyncVectorEnv([lambda: gymnasium.make("CartPole-v1")] * 4, num_workers=2)
        actions = np.zeros(4, np.int64)
    pool.reset(seed=0)
    if os.fork() == 0:
        sys.exit(0)   # a normal exit: atexit and multiprocessing's exit handler run
    os.wait()
    pool.step(actions)
    pool.close()
    print("stepped after the child exited")
""")


@pytest.mark.parametrize("kind", ["native", "python"])
def test_forked_child_exiting_leaves_the_workers(kind, tmp_path):
    """A child of os.fork() that exits normally must not take the parent's
    workers with it (multiprocessing's exit handler terminates the processes
    it lists as children, and a forked child inherits that list)."""
    script = tmp_path / "fork_and_exit.py"
    script.write_text(FORK_AND_EXIT)
    done = subprocess.run([sys.executable, "-P", str(script), kind], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "stepped after the child exited" in done.stdout


# ---- 10. a closed pool's memory is not held by later pools' workers -------------------------
def _holds_inode(pid, inode):
    """Whether process pid maps or holds the memfd of inode `inode`. The
    memfd is named too: an inode number alone also matches a file of
    another filesystem (a library a worker maps), and once did in CI."""
    with open(f"/proc/{pid}/maps") as maps:
        for line in maps:
            fields = line.split()
            if len(fields) >= 6 and fields[4] == str(inode) and fields[5].startswith("/memfd:"):
                return True
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            if os.readlink(f"/proc/{pid}/fd/{fd}").startswith("/memfd:") \
                    and os.stat(f"/proc/{pid}/fd/{fd}").st_ino == inode:
                return True
        except OSError:
            pass
    return False


def test_later_pools_workers_do_not_hold_an_earlier_pools_memory(no_leaks):
    first = Multiprocessing("cartpole", 64, num_workers=2, seed=0, context="fork")
    inode = os.fstat(first._buffers.region.fd).st_ino
    later = Multiprocessing("cartpole", 8, num_workers=2, seed=0, context="fork")
    python = AsyncVectorEnv([lambda: gymnasium.make("CartPole-v1")] * 2, num_workers=2,
                            context="fork")
    workers = [p.pid for p in later._workers.processes] + [p.pid for p in python._workers.processes]
    assert not any(_holds_inode(pid, inode) for pid in workers)
    own = os.fstat(later._buffers.region.fd).st_ino
    assert all(_holds_inode(p.pid, own) for p in later._workers.processes)
    first.close()
    assert not _holds_inode(os.getpid(), inode)  # nobody holds it: the kernel frees it
    later.step(np.zeros(8, np.int32))
    python.reset(seed=0)
    python.step(np.zeros(2, np.int64))
    later.close()
    python.close()


# ---- 12. NativeVectorEnv is closed once its pool is ------------------------------------------
def test_native_vector_env_is_closed_after_a_worker_error(no_leaks):
    envs = NativeVectorEnv("cartpole", 4, num_workers=2, seed=0)
    envs.reset(seed=0)
    victim = envs.pool._workers.processes[0]
    os.kill(victim.pid, signal.SIGKILL)
    victim.join(timeout=5)
    with pytest.raises(WorkerError):
        envs.step(np.zeros(4, np.int64))
    assert envs.closed
    with pytest.raises(ClosedEnvironmentError):
        envs.step(np.zeros(4, np.int64))
    with pytest.raises(ClosedEnvironmentError):
        envs.reset()
    envs.close()  # still fine


# ---- 13. oversized pools, lazy batched spaces ----------------------------------------------
def test_huge_num_envs_is_refused_up_front():
    start = time.monotonic()
    with pytest.raises(MemoryError, match=r"needs .* GiB of buffers"):
        shoal.make("CartPole", int(1e9))
    with pytest.raises(MemoryError, match="needs"):
        shoal.make("CartPole", int(1e9), backend="serial")
    assert time.monotonic() - start < 5.0


def test_the_memory_check_counts_library_envs_and_cgroup_limits(tmp_path, monkeypatch):
    """Atari's emulators (and MuJoCo's mjData) are most of such a pool's
    memory: the check counts them (100k Pong envs needed ~85 GiB, the check
    saw 5 GiB of buffers, and the kernel's OOM killer came first); and a
    limit on the process's own cgroup, or one above it (v1 or v2: Docker,
    Slurm), caps what is available, not the root's alone."""
    pytest.importorskip("ale_py", reason="Atari envs need ale-py")
    from shoal.pool import layout
    monkeypatch.setattr(layout, "available_memory", lambda: 40 * 2**30)
    with pytest.raises(MemoryError, match=r"Pong with num_envs=100000 needs .* of buffers and about 122 GiB for "
                                          r"the envs' own state"):
        Serial("Pong", 100_000)
    # cgroups: v1's memory controller two levels down, v2's at the job's own folder
    (tmp_path / "memory" / "jobs" / "42").mkdir(parents=True)
    (tmp_path / "memory" / "memory.limit_in_bytes").write_text(str(2**63 - 4096))   # v1's "none"
    (tmp_path / "memory" / "memory.usage_in_bytes").write_text("100")
    (tmp_path / "memory" / "jobs" / "memory.limit_in_bytes").write_text(str(8 * 2**30))
    (tmp_path / "memory" / "jobs" / "memory.usage_in_bytes").write_text(str(2**30))
    (tmp_path / "memory" / "jobs" / "42" / "memory.limit_in_bytes").write_text(str(2 * 2**30))
    (tmp_path / "memory" / "jobs" / "42" / "memory.usage_in_bytes").write_text(str(2**29))
    (tmp_path / "user.slice" / "job").mkdir(parents=True)
    (tmp_path / "user.slice" / "job" / "memory.max").write_text(str(3 * 2**30))
    (tmp_path / "user.slice" / "job" / "memory.current").write_text(str(2**30))
    (tmp_path / "user.slice" / "job" / "memory.stat").write_text("anon 5\ninactive_file 536870912\n")   # reclaimable
    (tmp_path / "user.slice" / "memory.max").write_text("max\n")
    (tmp_path / "user.slice" / "memory.current").write_text("5")
    proc = tmp_path / "cgroup"
    proc.write_text("4:memory:/jobs/42\n3:cpu,cpuacct:/jobs/42\n0::/user.slice/job\n")
    headroom = layout._cgroup_headroom(str(proc), str(tmp_path))
    assert sorted(headroom) == [2**31 - 2**29, 2**31 + 2**29, 7 * 2**30], headroom


def test_a_closed_views_repr_says_so():
    """In a notebook an interrupt can close a pool unseen: every view's
    repr says closed, as the pools' own do."""
    from shoal.sb3 import ShoalVecEnv
    views = [gymnasium.make_vec("shoal/CartPole-v0", 2, vectorization_mode="vector_entry_point"),
             ShoalVecEnv("CartPole", 2, backend="serial"),
             AsyncVectorEnv([lambda: gymnasium.make("CartPole-v1")] * 2, num_workers=1)]
    for view in views:
        assert "closed" not in repr(view)
        view.close()
        assert repr(view).endswith(", closed)"), repr(view)


def test_batched_spaces_are_built_on_first_access():
    pool = Serial("cartpole", 16, seed=0)
    assert "observation_space" not in vars(pool) and "action_space" not in vars(pool)
    assert pool.observation_space == gymnasium.vector.utils.batch_space(pool.single_observation_space, 16)
    assert pool.action_space.shape == (16,)
    envs = NativeVectorEnv("cartpole", 4, backend="serial", seed=0)
    assert "observation_space" not in vars(envs.pool)
    assert envs.observation_space == gymnasium.vector.utils.batch_space(envs.single_observation_space, 4)
    assert envs.observation_space is envs.pool.observation_space
    envs.close()
    pool.close()


# ---- 14. clear errors ---------------------------------------------------------------------
def test_env_must_be_a_name_or_spec():
    with pytest.raises(TypeError, match="env name or an EnvSpec.*CartPole"):
        shoal.make(None, 4)


@pytest.mark.parametrize("backend", ["serial", "multiprocessing"])
def test_pools_cannot_be_pickled_and_are_unreadable_once_closed(backend, no_leaks):
    pool = shoal.make("CartPole", 4, backend=backend, num_workers=2, seed=0)
    obs = pool.obs
    buffers = pool.buffers
    with pytest.raises(TypeError, match="cannot be pickled"):
        pickle.dumps(pool)
    pool.close()
    for name in ("obs", "masks"):
        with pytest.raises(PoolClosedError, match="closed"):
            getattr(pool, name)
        with pytest.raises(PoolClosedError, match="closed with their pool"):
            getattr(buffers, name)
    with pytest.raises(RuntimeError, match="closed"):  # PoolClosedError is a RuntimeError too
        pool.step(np.zeros(4, np.int32))
    with pytest.raises(ClosedEnvironmentError):
        pool.reset()
    assert obs.shape == (4, 4)  # arrays handed out stay readable
    pool.close()


def test_python_pools_refuse_pickling_and_name_themselves_once_closed(no_leaks):
    """AsyncVectorEnv and ParallelEnvPool: pickling or copying is a clear
    TypeError (it was "cannot pickle '_thread.RLock' object", and a deep
    copy left a half-made object whose __del__ failed), and a closed
    ParallelEnvPool's error names it, not the AsyncVectorEnv inside."""
    import copy

    from mpe2 import simple_spread_v3
    from shoal.pool import ParallelEnvPool
    envs = AsyncVectorEnv([lambda: gymnasium.make("CartPole-v1")] * 2, num_workers=1)
    rows = ParallelEnvPool([simple_spread_v3.parallel_env] * 2, num_workers=1)
    try:
        for pool in (envs, rows):
            for copier in (pickle.dumps, copy.deepcopy):
                with pytest.raises(TypeError, match=f"{type(pool).__name__} cannot be pickled or copied"):
                    copier(pool)
    finally:
        envs.close()
        rows.close()
    for call in (lambda: rows.step(rows.action_space.sample()), rows.reset_wait, rows.step_wait):
        with pytest.raises(ClosedEnvironmentError, match="this ParallelEnvPool is closed"):
            call()


# ---- the native pool's kill / stop matrix, every start method --------------------
@pytest.mark.parametrize("context", ["fork", "spawn", "forkserver"])
@pytest.mark.parametrize("fault", ["kill", "stop"])
def test_native_kill_and_stop_matrix(context, fault, no_leaks):
    """A SIGKILLed worker is a WorkerError naming it within 2 s; a SIGSTOPped
    one a WorkerTimeoutError after the pool's timeout; both close the pool
    and leave no process behind, whatever the start method. (Native envs
    are C: they have no Python exception to raise.)"""
    pool = Multiprocessing("snake", 4, num_workers=2, seed=0, context=context, timeout=0.5)
    actions = np.zeros(pool.num_rows, np.int32)
    pool.step(actions)
    victim = pool._workers.processes[0].pid
    os.kill(victim, signal.SIGKILL if fault == "kill" else signal.SIGSTOP)
    try:
        start = time.monotonic()
        with pytest.raises(WorkerTimeoutError if fault == "stop" else WorkerError) as caught:
            for _ in range(100):   # a kill may land after a step already finished
                pool.step(actions)
        elapsed = time.monotonic() - start
    finally:
        if fault == "stop" and alive(victim):
            os.kill(victim, signal.SIGCONT)
    assert elapsed < 5.0
    assert "worker 0" in str(caught.value) and "envs 0..1" in str(caught.value)
    if fault == "kill":
        assert "signal 9" in str(caught.value) or "killed" in str(caught.value)
    assert pool.closed


SIGNAL_EDGES = textwrap.dedent("""
    import os, signal, sys, threading
    import gymnasium, numpy as np
    from gymnasium.error import ClosedEnvironmentError
    from shoal.pool import AsyncVectorEnv, Multiprocessing, Serial
    case = sys.argv[1]
    if case == "close_inside_close":   # a handler's close() while close() runs
        pool = Serial("CartPole", 4, seed=0)
        signal.signal(signal.SIGUSR1, lambda s, f: pool.close())
        free = pool._buffers.close
        def free_with_a_signal():
            os.kill(os.getpid(), signal.SIGUSR1)
            free()
        pool._buffers.close = free_with_a_signal
        pool.close()
        assert pool.closed
    elif case == "leaked_lock":   # a signal just after a call took the lock: it stays this thread's
        for heal in ("step", "close", "step_some", "step_send"):
            pool = Multiprocessing("CartPole", 4, num_workers=2, seed=0,
                                   batch_size=2 if heal == "step_send" else None)
            if heal == "step_send":   # step(actions, env_id) with a batch out: send, then recv
                pool.async_reset()
                ids = pool.recv()[4]["env_id"]
            assert pool._calls.enter()
            if heal == "step":
                pool.step(np.zeros(4, np.int32))
            elif heal == "step_some":   # step(actions, env_id) of some envs
                assert pool.step(np.zeros(2, np.int32), [3, 1])[4]["env_id"].tolist() == [3, 1]
            elif heal == "step_send":
                pool.step(np.zeros(2, np.int32), ids)
            assert pool._calls.owner == 0 or heal == "close"
            pool.close()
            assert pool.closed and pool._calls.owner == 0
        # ... but a handler inside a call of some envs is inside a call: refused
        pool = Serial("CartPole", 4, seed=0)
        run_all = pool._run_all
        def run_all_then_a_handler_steps(command):
            run_all(command)
            try:
                pool.step(np.zeros(4, np.int32))
                raise AssertionError("a handler stepped inside a call")
            except RuntimeError as e:
                assert "being used by another thread" in str(e), e
        pool._run_all = run_all_then_a_handler_steps
        pool.step(np.zeros(2, np.int32), [0, 2])
        pool.close()
    elif case == "python_close_before_the_command":   # a handler's close() just before a command
        env = AsyncVectorEnv([lambda: gymnasium.make("CartPole-v1")] * 2, num_workers=2)
        env.reset(seed=0)
        check = env._assert_is_running
        def check_then_a_handler_closes():
            check()
            env.close()
        env._assert_is_running = check_then_a_handler_closes
        try:
            env.step(np.zeros(2, np.int64))
            raise AssertionError("stepped a closed env")
        except ClosedEnvironmentError:
            pass
    elif case == "python_leaked_lock":
        env = AsyncVectorEnv([lambda: gymnasium.make("CartPole-v1")] * 2, num_workers=2)
        env.reset(seed=0)
        processes = list(env._workers.processes)
        env._calls.acquire()   # as a signal just after a command took it
        env.close()
        assert env._workers is None
    print("ok")
""")


@pytest.mark.parametrize("case", ["close_inside_close", "leaked_lock", "python_close_before_the_command",
                                  "python_leaked_lock"])
def test_signal_edges_of_the_call_lock(case, tmp_path):
    """Where a signal handler can land around a pool's call lock: a close()
    inside close() returns; a lock left held by an interrupted call is
    taken back by the next step() or close(); a Python-pool close() just
    before a command makes it raise ClosedEnvironmentError, not touch freed
    memory. In a child process: a hang or a crash must fail, not stop, the suite.
    step(actions, env_id) heals it too (it passes the call on before taking
    the lock: to send/recv, or to the step of some envs)."""
    script = tmp_path / "edges.py"
    script.write_text(SIGNAL_EDGES)
    done = subprocess.run([sys.executable, "-P", str(script), case], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0 and done.stdout.strip() == "ok", (done.returncode, done.stderr[-2000:])
