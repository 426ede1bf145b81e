"""Faults, for the Python-env pool (AsyncVectorEnv, ParallelEnvPool) and the
native pool: env exceptions, killed workers, Ctrl-C, crashed parents.
Every test checks that no process and no shared-memory segment is left."""
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

import gymnasium
import numpy as np
import pytest
from gymnasium import spaces
from gymnasium.error import ClosedEnvironmentError

from shoal.pool import AsyncVectorEnv, Multiprocessing, WorkerError

from helpers import alive



class Faulty(gymnasium.Env):
    """Raises (or sleeps) on a chosen call, to exercise fault paths."""

    observation_space = spaces.Box(-1, 1, (2,), np.float32)
    action_space = spaces.Discrete(2)

    def __init__(self, fail_in=None, fail_at_step=3, sleep_s=0.0):
        self.fail_in, self.fail_at_step, self.sleep_s = fail_in, fail_at_step, sleep_s
        self.t = 0
        if fail_in == "init":
            raise OSError("cannot open the simulator")

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        if self.fail_in == "reset":
            raise KeyError("missing level file")
        return np.zeros(2, np.float32), {}

    def step(self, action):
        self.t += 1
        time.sleep(self.sleep_s)
        if self.fail_in == "step" and self.t == self.fail_at_step:
            self._explode()
        return np.zeros(2, np.float32), 1.0, False, False, {}

    def _explode(self):
        raise ZeroDivisionError("physics blew up")


def env_fns(num_envs, faulty_index=None, **faulty):
    return [(lambda k=k: Faulty(**faulty) if k == faulty_index else Faulty()) for k in range(num_envs)]


def test_env_exception_in_step_is_reraised_with_worker_traceback(no_leaks):
    envs = AsyncVectorEnv(env_fns(4, faulty_index=3, fail_in="step"), num_workers=2)
    envs.reset(seed=0)
    actions = np.zeros(4, np.int64)
    envs.step(actions)
    envs.step(actions)
    with pytest.raises(ZeroDivisionError, match="physics blew up") as caught:
        envs.step(actions)
    note = "\n".join(caught.value.__notes__)
    assert "shoal worker 1 (envs 2..3)" in note
    assert "in _explode" in note, "the worker's traceback travels with the exception"
    assert envs.closed
    with pytest.raises(ClosedEnvironmentError):
        envs.step(actions)
    envs.close()  # still fine


@pytest.mark.parametrize("where, error", [("reset", KeyError), ("init", OSError)])
def test_env_exception_in_reset_or_construction(where, error, no_leaks):
    if where == "init":  # the first env is built in the parent (spaces), so fail in a worker's
        with pytest.raises(error, match="simulator") as caught:
            AsyncVectorEnv(env_fns(3, faulty_index=2, fail_in="init"), num_workers=2)
        assert "while starting" in "\n".join(caught.value.__notes__)
        return
    envs = AsyncVectorEnv(env_fns(3, faulty_index=1, fail_in="reset"), num_workers=3)
    with pytest.raises(error, match="level file"):
        envs.reset(seed=0)
    assert envs.closed


def kill_worker_and_time_detection(step, victim_pid):
    os.kill(victim_pid, signal.SIGKILL)
    start = time.monotonic()
    with pytest.raises(WorkerError) as caught:
        step()
    return time.monotonic() - start, str(caught.value)


def test_killed_python_worker_is_detected_within_2s(no_leaks):
    envs = AsyncVectorEnv(env_fns(4), num_workers=2)
    envs.reset(seed=0)
    victim = envs._workers.processes[1]
    elapsed, message = kill_worker_and_time_detection(lambda: envs.step(np.zeros(4, np.int64)), victim.pid)
    assert elapsed < 2.0
    assert "worker 1" in message and "envs 2..3" in message and "signal 9" in message
    assert envs.closed


def test_python_worker_killed_mid_step_is_detected_within_2s(no_leaks):
    envs = AsyncVectorEnv([lambda: Faulty(sleep_s=30)] * 2, num_workers=2)
    envs.reset(seed=0)
    envs.step_async(np.zeros(2, np.int64))
    time.sleep(0.2)  # both workers are now inside env.step
    victim = envs._workers.processes[0]
    elapsed, message = kill_worker_and_time_detection(envs.step_wait, victim.pid)
    assert elapsed < 2.0 and "worker 0" in message and "envs 0..0" in message


def test_killed_native_worker_is_detected_within_2s(no_leaks):
    pool = Multiprocessing("cartpole", 8, num_workers=2, seed=0)
    victim = pool._workers.processes[1]
    elapsed, message = kill_worker_and_time_detection(lambda: pool.step(np.zeros(8, np.int32)), victim.pid)
    assert elapsed < 2.0 and "worker 1" in message and "envs 4..7" in message
    assert pool.closed


@pytest.fixture
def sigint_raises():
    """SIGINT raises KeyboardInterrupt in this process for the test's
    duration, as in an interactive Python. A suite started as a background
    job of a non-interactive shell (or under nohup) inherits SIGINT ignored,
    and Python then leaves it ignored."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, signal.SIG_DFL if previous is None else previous)


def interrupt_soon(delay_s=0.3):
    """Deliver SIGINT to this process after delay_s, as Ctrl-C would."""
    timer = threading.Timer(delay_s, os.kill, (os.getpid(), signal.SIGINT))
    timer.start()
    return timer


def test_ctrl_c_while_waiting_closes_the_python_pool(no_leaks, sigint_raises):
    envs = AsyncVectorEnv([lambda: Faulty(sleep_s=30)] * 2, num_workers=2)
    envs.reset(seed=0)
    interrupt_soon()
    start = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        envs.step(np.zeros(2, np.int64))
    assert time.monotonic() - start < 2.0, "Ctrl-C is honoured while workers are busy"
    assert envs.closed


SCRIPT = textwrap.dedent("""
    import signal, sys, numpy as np, gymnasium
    # Ctrl-C raises KeyboardInterrupt even if this process inherited SIGINT
    # ignored (the suite run from a background job or under nohup)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    from shoal.pool import AsyncVectorEnv, Multiprocessing
    kind = sys.argv[1]
    if kind == "python":
        pool = AsyncVectorEnv([lambda: gymnasium.make("CartPole-v1")] * 4, num_workers=2)
        pool.reset(seed=0)
        actions = np.zeros(4, np.int64)
    else:
        pool = Multiprocessing("cartpole", 64, num_workers=2, seed=0)
        actions = np.zeros(64, np.int32)
    pids = [p.pid for p in pool._workers.processes]
    print(" ".join(map(str, pids)), flush=True)
    while True:
        pool.step(actions)
""")




@pytest.mark.parametrize("kind", ["python", "native"])
@pytest.mark.parametrize("how", ["ctrl-c", "crash"])
def test_interrupted_or_crashed_parent_leaves_nothing(kind, how, tmp_path):
    """A real parent process stepping a pool gets Ctrl-C (SIGINT to its
    process group, as a terminal sends it) or is SIGKILLed: its workers must
    be gone within 2 s and /dev/shm must be unchanged."""
    shm_before = set(os.listdir("/dev/shm"))
    script = tmp_path / "run_pool.py"
    script.write_text(SCRIPT)
    proc = subprocess.Popen([sys.executable, "-P", str(script), kind], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        pids = [int(p) for p in proc.stdout.readline().split()]
        assert len(pids) == 2, proc.stderr.read()
        time.sleep(0.3)  # stepping
        if how == "ctrl-c":
            os.killpg(proc.pid, signal.SIGINT)
            proc.wait(timeout=10)
            assert "KeyboardInterrupt" in proc.stderr.read()
        else:
            proc.kill()
            proc.wait(timeout=10)
        deadline = time.monotonic() + 2.0
        while any(alive(p) for p in pids) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert not any(alive(p) for p in pids), f"workers outlived the parent ({how})"
        assert set(os.listdir("/dev/shm")) - shm_before == set()
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
