"""max_episode_steps on header envs: a step limit shorter than the header's.

The vector loop (envs/shoal_vec.h, slot_step) truncates an env whose episode
reaches shoal_episode.step_limit: every present row gets truncated, whether
it also terminated on that step or not, as gymnasium's TimeLimit does. The pool writes
the limit once (pool/layout.py, pool_step_limit); it is 0 (none) where the
header's own limit applies.
"""
import gymnasium
import numpy as np
import pytest
from gymnasium.vector import AutoresetMode

import shoal
from tests.helpers import assert_same


def random_actions(pool, rng):
    nvec = np.asarray(pool.spec.action_nvec)
    shape = (pool.num_rows,) if len(nvec) == 1 else (pool.num_rows, len(nvec))
    return rng.integers(0, nvec if len(nvec) > 1 else nvec[0], shape).astype(np.int32)


@pytest.mark.parametrize("name, limit, steps", [
    ("CartPole", 9, 60),           # random play also falls before the limit
    ("Snake", 13, 60),             # 8 snakes, deaths and respawns
    ("Drive", 17, 60),             # cars leave: absent rows are never truncated
    ("Explorer", 11, 40),
    ("ExplorerPointGoal", 7, 40),  # reaching the goal ends an agent's episode
])
def test_limit_equals_a_python_time_limit(name, limit, steps):
    """A pool with max_episode_steps=L equals, row for row, an unlimited pool
    (autoreset disabled) driven by Python as gymnasium's TimeLimit would be:
    after L steps of an episode the env's present, non-terminated rows are
    truncated, and the step after any end resets that env (its RNG goes on,
    no reseed) while the others step."""
    n = 5
    limited = shoal.make(name, n, backend="serial", max_episode_steps=limit)
    ref = shoal.make(name, n, backend="serial", autoreset_mode="disabled")
    try:
        assert limited.spec.max_episode_steps == limit
        A = limited.spec.agents
        rows = lambda i: slice(i * A, (i + 1) * A)   # noqa: E731
        got, want = limited.reset(seed=3), ref.reset(seed=3)
        np.testing.assert_array_equal(got[0], want[0])
        rng = np.random.default_rng(0)
        length = np.zeros(n, np.int64)
        ends_next = np.zeros(n, bool)
        limit_hits = 0
        for t in range(steps):
            actions = random_actions(limited, rng)
            obs, rew, term, trunc, _ = limited.step(actions)
            resets = np.flatnonzero(ends_next)
            stepped = np.flatnonzero(~ends_next)
            expected = [np.zeros_like(x) for x in (obs, rew, term, trunc)]
            if len(resets):
                reset_obs, _ = ref.reset(resets)
                for k, i in enumerate(resets):
                    expected[0][rows(i)] = reset_obs[k * A:(k + 1) * A]
            if len(stepped):
                step_rows = np.concatenate([np.arange(i * A, (i + 1) * A) for i in stepped])
                out = ref.step(actions[step_rows], stepped)
                for x, y in zip(expected, out[:4]):
                    x[step_rows] = y
            length[resets] = 0
            length[stepped] += 1
            over = ref.episodes["needs_reset"].astype(bool) & ~ends_next
            for i in stepped:
                if length[i] == limit:   # TimeLimit: every present row, terminated or not
                    expected[3][rows(i)] |= ref.masks[rows(i)]
                    over[i] = True
                    limit_hits += 1
            for what, x, y in zip(("obs", "reward", "terminated", "truncated"),
                                  (obs, rew, term, trunc), expected):
                np.testing.assert_array_equal(x, y, err_msg=f"{what} at step {t}")
            np.testing.assert_array_equal(limited.masks, ref.masks, err_msg=f"masks at step {t}")
            ends_next = over
        assert limit_hits > 0
        stats = limited.episode_stats()
        assert stats["episodes"] > 0 and stats["mean_length"] <= limit
    finally:
        limited.close()
        ref.close()


@pytest.mark.parametrize("mode", list(AutoresetMode))
def test_make_vec_max_episode_steps_equals_sync_with_time_limit(mode):
    """gymnasium.make_vec(id, max_episode_steps=L) natively equals "sync"
    mode, where gymnasium wraps each single env in a TimeLimit."""
    kwargs = dict(num_envs=3, max_episode_steps=12)
    native = gymnasium.make_vec("shoal/CartPole-v0", vectorization_mode="vector_entry_point",
                                autoreset_mode=mode, backend="serial", **kwargs)
    sync = gymnasium.make_vec("shoal/CartPole-v0", vectorization_mode="sync",
                              vector_kwargs={"autoreset_mode": mode}, **kwargs)
    try:
        assert native.unwrapped.pool.spec.max_episode_steps == 12
        assert_same(native.reset(seed=1), sync.reset(seed=1), "reset")
        truncations = 0
        for t in range(60):
            actions = np.ones(3, np.int64) * (t % 2)   # balanced: the limit ends the episodes
            result = native.step(actions)
            assert_same(result, sync.step(actions), f"step {t}")
            truncations += int(result[3].sum())
            if mode == AutoresetMode.DISABLED and (result[2] | result[3]).any():
                done = result[2] | result[3]
                options = {"reset_mask": done}
                assert_same(native.reset(options=options), sync.reset(options=options), f"reset {t}")
        assert truncations >= 3
    finally:
        native.close()
        sync.close()


def test_stepping_past_a_done_keeps_truncating_as_time_limit():
    """Autoreset disabled, stepped on after a done without a reset: the
    limit keeps truncating once reached, as gymnasium's TimeLimit over the
    single env does, whether the episode ended by the limit or fell first;
    and after the fall the pool pays 0.0 as the single env does (gymnasium's
    CartPole-v1: the rule is in the C header, so every backend has it)."""
    for actions in ([1] * 40, [t % 2 for t in range(40)]):   # falls at ~9 steps; balanced: the limit
        pool = shoal.make("CartPole", 1, backend="serial", autoreset_mode="disabled", max_episode_steps=12)
        single = gymnasium.make("shoal/CartPole-v0", max_episode_steps=12, disable_env_checker=True)
        try:
            np.testing.assert_array_equal(pool.reset(seed=4)[0][0], single.reset(seed=4)[0])
            fell = False
            for t, a in enumerate(actions):
                obs, rew, term, trunc, _ = pool.step(np.array([a], np.int32))
                ref_obs, ref_rew, ref_term, ref_trunc, _ = single.step(a)
                np.testing.assert_array_equal(obs[0], ref_obs, err_msg=f"step {t}")
                assert (rew[0], term[0], trunc[0]) == (ref_rew, ref_term, ref_trunc), f"step {t}"
                if term[0] and fell:   # still down after the fall
                    assert rew[0] == 0.0, f"step {t}"
                fell = fell or bool(term[0])
        finally:
            pool.close()
            single.close()


def test_multiprocessing_and_cuda_cpu_face_apply_the_limit():
    """The limit is in the shared buffer every worker and the parent's
    share read, and in CudaVecEnv's episodes (device="cpu" here; the GPU
    test is in test_cuda_backend.py)."""
    torch = pytest.importorskip("torch", reason="the CUDA backend's CPU face needs torch")
    from shoal.cuda import CudaVecEnv
    pool = shoal.make("CartPole", 8, num_workers=2, max_episode_steps=5)
    cuda_face = CudaVecEnv("CartPole", 8, device="cpu", seed=0, env_kwargs={"max_episode_steps": 5})
    try:
        pool.reset(seed=0)
        cuda_face.reset(seed=0)
        for t in range(11):
            actions = np.full(8, t % 2, np.int32)
            _, _, _, trunc, _ = pool.step(actions)
            _, _, _, trunc_c, _ = cuda_face.step(torch.from_numpy(actions))
            assert trunc.all() == (t in (4, 10)) and trunc.any() == (t in (4, 10)), t
            assert torch.equal(trunc_c, torch.from_numpy(trunc))
        assert pool.episode_stats()["mean_length"] == 5.0
    finally:
        pool.close()
        cuda_face.close()


def test_limits_are_checked():
    spec = shoal.env_spec("CartPole")
    assert spec.configure(max_episode_steps=500) == spec   # the header's own: no pool limit
    assert spec.configure(max_episode_steps=None) == spec
    short = spec.configure(max_episode_steps=100)
    assert (short.max_episode_steps, short.env_kwargs) == (100, {"max_episode_steps": 100})
    assert short.configure(max_episode_steps=500) == spec
    for bad in (501, 0, -1, 2.5, True, "100"):
        with pytest.raises(ValueError, match=r"CartPole's max_episode_steps must be an int in \[1, 500\].*"
                                             r"can shorten episodes, not lengthen them"):
            spec.configure(max_episode_steps=bad)
    with pytest.raises(TypeError, match="CartPole got an unexpected keyword argument 'x'; "
                                        "it takes max_episode_steps"):
        spec.configure(x=1)
    with pytest.raises(ValueError, match=r"\[1, 500\]"):
        gymnasium.make_vec("shoal/CartPole-v0", num_envs=2, max_episode_steps=501)
    pool = shoal.make("Snake", 2, backend="serial", max_episode_steps=np.int64(30))
    try:
        assert pool.spec.max_episode_steps == 30
        assert list(pool.episodes["step_limit"]) == [30, 30]
    finally:
        pool.close()
    default = shoal.make("Snake", 2, backend="serial")
    try:
        assert list(default.episodes["step_limit"]) == [0, 0]
    finally:
        default.close()
