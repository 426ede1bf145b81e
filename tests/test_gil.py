"""A short step keeps the GIL. Giving it up for microseconds of C gained
no other thread anything, and taking it back from a busy Python thread
waited out that thread's switch interval (5 ms by default): beside one,
Serial CartPole with 8 envs stepped ~60x slower, a Multiprocessing pool
~600x (issue: a probe of this session).

Checked without a clock: with a long switch interval, a busy thread gets
the GIL only when the stepping thread gives it up, so it counts how many
times it got to run while the steps went on."""
import sys
import threading

import numpy as np
import pytest

import shoal

SWITCH_INTERVAL_S = 1.0   # longer than the steps below take: no forced switch among them


def times_the_gil_was_given_up(pool, actions, steps: int) -> int:
    """Step `pool` `steps` times beside a busy thread; how many separate
    times that thread got to run among the steps. A step that gives the GIL
    up loses it to the waiting thread now and then (the thread wakes before
    the step takes it back), and then waits out the switch interval: the
    steps stop after 3 such times."""
    progress = {"steps": 0, "runs": 0, "stop": False}

    def busy():
        seen = 0
        while not progress["stop"]:
            if progress["steps"] != seen:   # the stepping thread went on since this one last ran
                seen = progress["steps"]
                progress["runs"] += 1

    previous = sys.getswitchinterval()
    sys.setswitchinterval(SWITCH_INTERVAL_S)
    thread = threading.Thread(target=busy, daemon=True)
    try:
        pool.step(actions)   # (a block times its calls from the first; the first one keeps the GIL)
        thread.start()       # (it runs until this thread asks for the GIL back: steps is 0 then)
        for k in range(steps):
            pool.step(actions)
            progress["steps"] = k + 1
            if progress["runs"] >= 3:
                break
    finally:
        progress["stop"] = True
        sys.setswitchinterval(previous)
        thread.join()
    return progress["runs"]


@pytest.mark.parametrize("env, num_envs, extra, steps", [
    ("CartPole", 8, None, 5000), ("Snake", 2, None, 5000),           # header envs (vec_binding.pxi)
    ("InvertedPendulum", 1, "mujoco", 5000),                       # MuJoCo's ctypes binding
    ("Pong", 1, "ale_py", 500),                                    # Atari's block (a step: ~0.3 ms)
])
def test_a_short_step_keeps_the_gil(env, num_envs, extra, steps):
    if extra is not None:
        pytest.importorskip(extra, reason=f"{env} needs the {extra} package (an extra)")
    pool = shoal.make(env, num_envs, backend="serial")
    try:
        pool.reset(seed=0)
        actions = np.zeros(pool.action_space.shape, pool.action_space.dtype)
        # (a preempted step may give it up once: the next call then keeps it again)
        assert times_the_gil_was_given_up(pool, actions, steps) <= 1
    finally:
        pool.close()
