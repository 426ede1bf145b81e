"""info["elapsed_step"]: EnvPool's per-env step count, on every native pool.

It is each env's steps into its episode in progress, read from the episode
counters the vector loop keeps (shoal_episode.episode_length): 0 after a
reset; on the step that ends an episode, that episode's length, except in
SAME_STEP, where that step also resets the env and the count is the new
episode's 0. It is the pool's own key, as "env_id": gymnasium's and SB3's
per-env infos leave it out.
"""
import gymnasium
import numpy as np
import pytest

import shoal

MODES = ["next_step", "same_step", "disabled"]


def expected_counts(mode, prev, prev_done, done):
    """The reference rule for one step, from the last step's counts and dones."""
    if mode == "next_step":
        return np.where(prev_done, 0, prev + 1)   # the step after a done is a reset
    if mode == "same_step":
        return np.where(done, 0, prev + 1)        # the done step resets at once
    return prev + 1                               # disabled: stepped on past a done


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("backend, batch_size", [("serial", None), ("multiprocessing", 3)])
def test_counts_follow_the_episodes(mode, backend, batch_size):
    """Step by step, and batch by batch with async batches, elapsed_step is
    the Python reference count; with a step limit of 12 the truncated steps
    read 12."""
    n = 6
    pool = shoal.make("CartPole", n, backend=backend, num_workers=2 if backend != "serial" else None,
                      batch_size=batch_size, autoreset_mode=mode, max_episode_steps=12, seed=1)
    try:
        _, info = pool.reset()
        np.testing.assert_array_equal(info["elapsed_step"], np.zeros(n))
        assert info["elapsed_step"].dtype == np.int32
        counts, dones = np.zeros(n, np.int64), np.zeros(n, bool)
        rng = np.random.default_rng(0)
        truncated_seen = 0
        if pool.is_async:
            pool.async_reset()
            for _ in range(pool.num_batches):   # the reset's rows
                info = pool.recv()[4]
                np.testing.assert_array_equal(info["elapsed_step"], 0)
                pool.send(rng.integers(0, 2, len(info["env_id"])), info["env_id"])
        for _ in range(60 if not pool.is_async else 120):
            if pool.is_async:
                _, _, term, trunc, info = pool.recv()
                ids = info["env_id"]
                done = np.zeros(n, bool)
                done[ids] = term | trunc
                want = expected_counts(mode, counts, dones, done)
                np.testing.assert_array_equal(info["elapsed_step"], want[ids])
                counts[ids], dones[ids] = want[ids], done[ids]
            else:
                _, _, term, trunc, info = pool.step(rng.integers(0, 2, n))
                done = term | trunc
                want = expected_counts(mode, counts, dones, done)
                np.testing.assert_array_equal(info["elapsed_step"], want)
                counts, dones = want, done
            if mode == "next_step" and trunc.any():   # (disabled: past the limit it counts on)
                np.testing.assert_array_equal(info["elapsed_step"][trunc], 12)
            truncated_seen += int(trunc.sum())
            if pool.is_async:   # last: the batch's rows are views its workers rewrite once sent
                pool.send(rng.integers(0, 2, len(ids)), ids)
        assert truncated_seen > 0
    finally:
        pool.close()


def test_partial_calls_select_their_envs_and_the_view_is_read_only():
    """reset(env_id) and step(actions, env_id) give the listed envs' counts,
    in env_id's order; the envs left out keep theirs. Writing into the
    returned array raises instead of changing the episodes."""
    pool = shoal.make("CartPole", 4, backend="serial", seed=0)
    try:
        pool.reset()
        for _ in range(3):
            pool.step(np.zeros(4, dtype=int))
        _, _, _, _, info = pool.step(np.zeros(2, dtype=int), env_id=[3, 1])
        np.testing.assert_array_equal(info["env_id"], [3, 1])
        np.testing.assert_array_equal(info["elapsed_step"], [4, 4])
        _, info = pool.reset(np.array([2]))
        np.testing.assert_array_equal(info["elapsed_step"], [0])
        _, _, _, _, info = pool.step(np.zeros(4, dtype=int))
        np.testing.assert_array_equal(info["elapsed_step"], [4, 5, 1, 5])
        with pytest.raises(ValueError, match="read-only"):
            info["elapsed_step"][0] = 0
    finally:
        pool.close()


def test_multi_agent_envs_count_per_env():
    """Snake (8 agent rows per env): one count per env, not per row, and it
    only grows by one a step or restarts at 0."""
    pool = shoal.make("Snake", 3, backend="serial", max_episode_steps=20, seed=0)
    try:
        _, info = pool.reset()
        assert info["elapsed_step"].shape == (3,)
        prev = info["elapsed_step"].copy()
        rng = np.random.default_rng(0)
        for _ in range(45):
            *_, info = pool.step(rng.integers(0, 4, pool.num_rows))
            now = info["elapsed_step"]
            assert ((now == prev + 1) | (now == 0)).all(), (prev, now)
            prev = now.copy()
        assert prev.max() <= 20
    finally:
        pool.close()


@pytest.mark.parametrize("name", ["CartPole", "Breakout", "Hopper"])
def test_not_in_gymnasium_or_sb3_infos(name):
    """The pool's key stays out of what gymnasium's and SB3's envs report
    (a single env's info, make_vec's infos and SB3's per-env dicts), for a
    header env and for library-backed envs, whose step info has keys of its
    own (Atari's binding even counts elapsed_step itself)."""
    pytest.importorskip({"Breakout": "ale_py", "Hopper": "mujoco"}.get(name, "numpy"))
    env_id = f"shoal/{name}-v{shoal.envs.spec(name).version}"
    env = gymnasium.make(env_id)
    action = env.action_space.sample()
    try:
        _, info = env.reset(seed=0)
        assert "elapsed_step" not in info
        assert "elapsed_step" not in env.step(action)[4]
    finally:
        env.close()
    envs = gymnasium.make_vec(env_id, 2, vectorization_mode="vector_entry_point", backend="serial")
    try:
        assert "elapsed_step" not in envs.reset(seed=0)[1]
        assert "elapsed_step" not in envs.step(np.stack([action] * 2))[4]
    finally:
        envs.close()
    sb3 = pytest.importorskip("shoal.sb3", reason="needs stable-baselines3")
    venv = sb3.ShoalVecEnv(name, 2, backend="serial")
    try:
        venv.reset()
        venv.step_async(np.stack([action] * 2))
        assert all("elapsed_step" not in i for i in venv.step_wait()[3])
    finally:
        venv.close()


def test_an_envs_own_count_is_read_only_too():
    """Atari counts elapsed_step itself (a whole game's, over its lives with
    episodic_life); the pool hands it out read-only, as its own."""
    pytest.importorskip("ale_py")
    for mode in ("next_step", "same_step"):
        with shoal.make("Breakout", 2, backend="serial", autoreset_mode=mode, seed=0) as pool:
            _, info = pool.reset()
            *_, info = pool.step(np.zeros(2, dtype=int))
            np.testing.assert_array_equal(info["elapsed_step"], [1, 1])
            for counts in (info["elapsed_step"], *([info["final_info"]["elapsed_step"]]
                                                   if "final_info" in info else [])):
                with pytest.raises(ValueError, match="read-only"):
                    counts[0] = 5
