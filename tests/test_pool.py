"""The native pool: determinism, the seed rule, autoreset, async, bad input, cleanup."""
import copy
import importlib.util
import os
import signal
import time

import gymnasium
import numpy as np
import pytest
from gymnasium.vector import AutoresetMode, SyncVectorEnv

import shoal
from shoal.pool import Multiprocessing, Serial, WorkerError
from shoal.single import SingleEnv

from helpers import assert_same, assert_same_arrays, rollout


def action_table(num_envs, steps, seed=0):
    return np.random.default_rng(seed).integers(0, 2, size=(steps, num_envs)).astype(np.int32)


def async_rollout(pool, actions, seed=7):
    """Same, driven by async_reset / recv / send; reassembled per step."""
    n, b = pool.num_envs, pool.batch_size
    pool.async_reset(seed=seed)
    obs = np.zeros((n, 4), np.float32)
    for _ in range(n // b):
        o, *_ , info = pool.recv()
        obs[info["env_id"]] = o
    out = [obs.copy(), pool.masks.copy()]
    # answer every batch, then collect a full step's worth of batches
    ids = [np.arange(k * b, (k + 1) * b) for k in range(n // b)]
    for a in actions:
        for env_id in ids:
            pool.send(a[env_id], env_id)
        step = [np.zeros((n, 4), np.float32), np.zeros(n, np.float32), np.zeros(n, bool), np.zeros(n, bool),
                np.zeros(n, bool)]
        for _ in ids:
            o, r, t, tr, info = pool.recv()
            for buf, val in zip(step, (o, r, t, tr, pool.masks[info["env_id"]])):
                buf[info["env_id"]] = val
        out += step
    for env_id in ids:  # leave nothing in flight
        pool.send(np.zeros(b, np.int32), env_id)
    for _ in ids:
        pool.recv()
    return out


def test_bit_identical_across_backends_and_worker_counts(no_leaks):
    n, steps = 24, 600  # long enough for many autoresets
    actions = action_table(n, steps)
    reference = rollout(Serial("CartPole", n), actions)
    assert sum(t.sum() for t in reference[3::4]) > 10  # episodes did end
    assert_same_arrays(rollout(Serial("CartPole", n, num_workers=3), actions), reference)
    for workers in (1, 2, 3):
        with Multiprocessing("CartPole", n, num_workers=workers) as pool:
            assert_same_arrays(rollout(pool, actions), reference)
    for workers in (2, 3):   # this process steps the last block itself
        with Multiprocessing("CartPole", n, num_workers=workers, parent_share=True) as pool:
            assert pool.parent_share and len(pool.worker_busy_seconds()) == workers - 1
            assert_same_arrays(rollout(pool, actions), reference)
    with Multiprocessing("CartPole", n, num_workers=2, batch_size=12) as pool:
        assert_same_arrays(async_rollout(pool, actions), reference)
    with Serial("CartPole", n, batch_size=6) as pool:
        assert_same_arrays(async_rollout(pool, actions), reference)


@pytest.mark.parametrize("context", ["spawn", "forkserver"])
def test_other_start_methods_match_fork(context, no_leaks):
    n, actions = 8, action_table(8, 50)
    reference = rollout(Serial("CartPole", n), actions)
    with Multiprocessing("CartPole", n, num_workers=2, context=context) as pool:
        assert_same_arrays(rollout(pool, actions), reference)


def test_autoreset_mode_accepts_enum_and_names():
    for name in ("next_step", "NextStep", "NEXT_STEP"):
        assert Serial("CartPole", 1, autoreset_mode=name).autoreset_mode == AutoresetMode.NEXT_STEP
    assert Serial("CartPole", 1, autoreset_mode="same_step").metadata["autoreset_mode"] == AutoresetMode.SAME_STEP
    assert Serial("CartPole", 1, autoreset_mode=AutoresetMode.DISABLED).autoreset_mode == AutoresetMode.DISABLED


def test_disabled_mode_counts_an_episode_once_when_stepped_past_its_end():
    pool = Serial("CartPole", 2, autoreset_mode="disabled", seed=0)
    for _ in range(60):
        pool.step(np.zeros(2, np.int32))  # always left: both fall within ~10 steps
    stats = pool.episode_stats()
    assert stats["episodes"] == 2 and stats["mean_length"] < 30


@pytest.mark.parametrize("mode", [AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP])
def test_seed_rule_pool_equals_sync_vector_env_of_single_envs(mode):
    n, steps = 6, 400
    actions = action_table(n, steps, seed=1)
    pool = Serial("CartPole", n, autoreset_mode=mode)
    ref = SyncVectorEnv([lambda: SingleEnv("CartPole") for _ in range(n)], autoreset_mode=mode)
    obs, _ = pool.reset(seed=123)
    ref_obs, _ = ref.reset(seed=123)
    np.testing.assert_array_equal(obs, ref_obs)
    finals = 0
    for a in actions:
        obs, rew, term, trunc, info = pool.step(a)
        r_obs, r_rew, r_term, r_trunc, r_info = ref.step(a)
        np.testing.assert_array_equal(obs, r_obs)
        np.testing.assert_array_equal(rew, r_rew.astype(np.float32))
        np.testing.assert_array_equal(term, r_term)
        np.testing.assert_array_equal(trunc, r_trunc)
        if mode == AutoresetMode.SAME_STEP and "_final_obs" in r_info:
            np.testing.assert_array_equal(info["_final_obs"], r_info["_final_obs"])
            for i in np.flatnonzero(r_info["_final_obs"]):
                np.testing.assert_array_equal(info["final_obs"][i], r_info["final_obs"][i])
                finals += 1
    assert mode != AutoresetMode.SAME_STEP or finals > 5
    ref.close()


def test_next_step_autoreset_semantics():
    pool = Serial("CartPole", 1)
    pool.reset(seed=0)
    right = np.ones(1, np.int32)
    for _ in range(300):
        obs, rew, term, trunc, _ = pool.step(right)
        if term[0]:
            break
    assert term[0]
    stats = pool.episode_stats()
    assert stats["episodes"] == 1
    obs, rew, term, trunc, _ = pool.step(right)  # the reset step: action ignored
    assert rew[0] == 0 and not term[0] and not trunc[0]
    assert np.all(np.abs(obs[0]) <= 0.05)


def test_reset_mask_resets_only_masked_envs():
    pool = Serial("CartPole", 4)
    pool.reset(seed=0)
    for _ in range(5):
        pool.step(np.ones(4, np.int32))
    before = pool.obs.copy()
    obs, _ = pool.reset(seed=0, options={"reset_mask": np.array([True, False, True, False])})
    fresh, _ = Serial("CartPole", 4).reset(seed=0)
    np.testing.assert_array_equal(obs[[0, 2]], fresh[[0, 2]])
    np.testing.assert_array_equal(obs[[1, 3]], before[[1, 3]])


def test_reset_without_seed_continues_rng_and_seed_at_construction_is_reproducible():
    a, b = Serial("CartPole", 3, seed=11), Serial("CartPole", 3, seed=11)
    # Construction with seed=11 is a reset(seed=11).
    np.testing.assert_array_equal(a.obs, Serial("CartPole", 3).reset(seed=11)[0])
    first = a.obs.copy()
    # The first reset() without a seed is the construction's seeded reset (EnvPool's make(seed=s)).
    np.testing.assert_array_equal(a.reset()[0], first)
    b.reset()
    np.testing.assert_array_equal(a.reset()[0], b.reset()[0])   # both second resets go on alike
    assert not np.array_equal(a.obs, first)  # the second one: the RNG went on
    # Without a seed, pools differ.
    assert not np.array_equal(Serial("CartPole", 3).obs, Serial("CartPole", 3).obs)


def test_seeds_wrap_modulo_2_64_as_a_single_envs_do():
    """Env i takes (seed + i) mod 2**64, the C env's 64-bit seed, as a single
    env takes any int >= 0 mod 2**64: int seeds, sequence entries and the
    construction seed alike."""
    reference = Serial("CartPole", 3).reset(seed=[2**64 - 1, 0, 1])[0]
    with Serial("CartPole", 3, seed=2**64 - 1) as pool:
        np.testing.assert_array_equal(pool.obs, reference)
        np.testing.assert_array_equal(pool.reset(seed=2**65 - 1)[0], reference)
        np.testing.assert_array_equal(pool.reset(seed=[2**128 - 1, 2**64, 1])[0], reference)
        with pytest.raises(ValueError, match=">= 0"):
            pool.reset(seed=-1)
        with pytest.raises(ValueError, match=r"seed\[1\]"):
            pool.reset(seed=[0, -1, 0])
    with Serial("CartPole", 3, seed=[2**65 - 1, 2**64, 1]) as pool:
        np.testing.assert_array_equal(pool.obs, reference)
        np.testing.assert_array_equal(pool.reset()[0], reference)   # the construction's seeds again


def test_episode_stats_match_a_manual_count():
    pool = Serial("CartPole", 16)
    pool.reset(seed=3)
    returns, lengths = np.zeros(16), np.zeros(16, int)
    finished = []
    for a in action_table(16, 500, seed=4):
        _, rew, term, trunc, _ = pool.step(a)
        returns += rew
        lengths += rew > 0  # reset steps give reward 0 and are not episode steps
        done = term | trunc
        finished += [(returns[i], lengths[i]) for i in np.flatnonzero(done)]
        returns[done], lengths[done] = 0, 0
    stats = pool.episode_stats()
    assert stats["episodes"] == len(finished) > 0
    assert stats["mean_return"] == pytest.approx(np.mean([r for r, _ in finished]))
    assert stats["mean_length"] == pytest.approx(np.mean([n for _, n in finished]))
    assert pool.episode_stats()["episodes"] == 0  # counted once


@pytest.mark.parametrize("backend", [Serial, Multiprocessing])
def test_episode_stats_in_the_async_loop_count_every_episode_received(backend, no_leaks):
    """EnvPool's loop calls episode_stats() after send(), when every batch
    is in flight: each call counts the episodes of the batches received so
    far (those in flight as of their send), none twice, none lost."""
    kwargs = {"num_workers": 2} if backend is Multiprocessing else {}
    with backend("CartPole", 8, batch_size=4, **kwargs) as pool:
        pool.async_reset(seed=0)
        assert pool.episode_stats()["episodes"] == 0             # everything in flight
        rng = np.random.default_rng(0)
        returns = np.zeros(8)
        finished, counted, counted_return = [], 0, 0.0
        for t in range(600):
            _, rew, term, trunc, info = pool.recv()
            ids = info["env_id"]
            returns[ids] += rew
            done = term | trunc
            finished += returns[ids[done]].tolist()
            returns[ids[done]] = 0
            pool.send(np.zeros(4, np.int32) if t % 3 else rng.integers(0, 2, 4).astype(np.int32))
            stats = pool.episode_stats()
            counted += stats["episodes"]
            if stats["episodes"]:
                counted_return += stats["mean_return"] * stats["episodes"]
            assert counted == len(finished), t
        assert counted > 100
        assert counted_return == pytest.approx(sum(finished))


def test_async_protocol_errors_and_env_ids(no_leaks):
    with Multiprocessing("CartPole", 8, num_workers=2, batch_size=4) as pool:
        with pytest.raises(RuntimeError, match="nothing in flight"):
            pool.recv()
        with pytest.raises(RuntimeError, match="without a batch"):
            pool.send(np.zeros(4, np.int32))
        pool.async_reset(seed=0)
        _, _, _, _, info = pool.recv()
        np.testing.assert_array_equal(info["env_id"], np.arange(4))
        with pytest.raises(RuntimeError, match="async"):
            pool.step(np.zeros(8, np.int32))
        with pytest.raises(ValueError, match="env_ids"):
            pool.send(np.zeros(4, np.int32), env_ids=np.arange(4, 8))
        pool.send(np.zeros(4, np.int32), env_ids=np.arange(4))
        _, _, _, _, info = pool.recv()
        np.testing.assert_array_equal(info["env_id"], np.arange(4, 8))


@pytest.mark.parametrize("backend", ["serial", "multiprocessing"])
def test_reset_drops_async_batches(backend, no_leaks):
    """reset() and async_reset() start the async protocol over, whatever
    batches are in flight or awaiting send(): the result is a fresh pool's
    (a bad seed drops nothing)."""
    def fresh_first_batches(seed):
        with shoal.make("CartPole", 8, backend=backend, num_workers=2, batch_size=4) as fresh:
            fresh.async_reset(seed=seed)
            return [fresh.recv()[0].copy() for _ in range(2)]

    with shoal.make("CartPole", 8, backend=backend, num_workers=2, batch_size=4) as pool:
        pool.async_reset(seed=0)
        pool.recv()
        pool.send(np.ones(4, np.int32))   # batch 0 in flight, batch 1 not yet received
        with pytest.raises(ValueError, match="seed"):
            pool.reset(seed=-1)
        obs, _ = pool.reset(seed=3)        # waits for batch 0, drops both
        with shoal.make("CartPole", 8, backend=backend, num_workers=2) as sync:
            np.testing.assert_array_equal(obs, sync.reset(seed=3)[0])
        pool.async_reset(seed=5)
        pool.recv()                        # batch 0 with the user
        pool.async_reset(seed=7)           # dropped again
        np.testing.assert_array_equal(pool.recv()[0], fresh_first_batches(7)[0])
        np.testing.assert_array_equal(pool.recv()[0], fresh_first_batches(7)[1])
        with pytest.raises(RuntimeError, match="reset"):
            pool.step(np.zeros(8, np.int32))   # names the way out


def test_envpool_style_surface(no_leaks):
    """What EnvPool clients call: len(), is_async, reset(env_id=) (a partial
    reset returning those envs' rows), step(actions, env_id) and
    send(actions, env_id=); info["env_id"] from every call, as EnvPool's
    (Tianshou's collector turns the info dict into one dict per env)."""
    with shoal.make("Snake", 3, backend="serial", seed=0) as pool, \
            shoal.make("Snake", 3, backend="serial", seed=0) as reference:
        assert len(pool) == 3 and not pool.is_async
        actions = np.ones(pool.num_rows, np.int64)
        np.testing.assert_array_equal(pool.step(actions)[4]["env_id"], np.arange(3))
        reference.step(actions)
        obs, info = pool.reset(seed=5, env_id=[2, 0])
        ref_obs, _ = reference.reset(seed=5, options={"reset_mask": np.array([True, False, True])})
        np.testing.assert_array_equal(obs, np.concatenate([ref_obs[16:24], ref_obs[0:8]]))
        np.testing.assert_array_equal(info["env_id"], [2, 0])
        out = pool.step(actions, np.arange(3))
        ref = reference.step(actions)
        for ours, theirs in zip(out[:4], ref[:4]):
            np.testing.assert_array_equal(ours, theirs)
        np.testing.assert_array_equal(out[4]["env_id"], np.arange(3))
        with pytest.raises(ValueError, match=r"shape \(8,\)"):
            pool.step(actions, [1])   # the actions of env 1's 8 rows
        with pytest.raises(ValueError, match="env_id must be distinct"):
            pool.reset(env_id=[0, 0])
        with pytest.raises(ValueError, match="env_id must be distinct"):
            pool.step(actions[:16], [3, 0])
        np.testing.assert_array_equal(pool.reset()[1]["env_id"], np.arange(3))
        with pytest.raises(ValueError):   # read-only: shared by every call
            pool.reset()[1]["env_id"][0] = 5
        # EnvPool's reset(env_id) is positional (Tianshou's VectorEnvNormObs calls it so)
        np.testing.assert_array_equal(pool.reset(np.array([1]))[1]["env_id"], [1])
        with pytest.raises(ValueError, match="pass seed=42 by name"):
            pool.reset(42)
        # no env at all: nothing steps, empty rows
        obs, rew, _, _, info = pool.step(np.zeros(0, np.int64), [])
        assert obs.shape == (0, *pool.single_observation_space.shape) and rew.shape == (0,)
        assert info["env_id"].tolist() == []
        with pytest.raises(ValueError, match="must have no rows"):
            pool.step(actions[:8], [])
    with shoal.make("CartPole", 4, backend="serial", seed=0, batch_size=2) as pool:
        assert pool.is_async
        pool.async_reset()
        ids = pool.recv()[4]["env_id"]
        np.testing.assert_array_equal(pool.step(np.zeros(2, np.int64), ids)[4]["env_id"], [2, 3])
        pool.send(np.zeros(2, np.int64), env_id=[2, 3])
        np.testing.assert_array_equal(pool.recv()[4]["env_id"], [0, 1])


@pytest.mark.parametrize("kwargs", [dict(backend="serial"), dict(num_workers=2), dict(num_workers=2,
                                                                                   parent_share=True)])
def test_one_batch_pool_mixes_step_with_send_and_recv(kwargs, no_leaks):
    """EnvPool's step is send + recv and its reset async_reset + recv, so
    EnvPool code mixes them on a one-batch pool: send() after reset() or
    step() answers the envs they returned, and step() after recv() answers
    the received batch. Each equals plain stepping; a step with a batch in
    flight is still an error."""
    actions = np.array([0, 1, 1, 0], np.int32)
    with shoal.make("CartPole", 4, seed=0, **kwargs) as pool, \
            shoal.make("CartPole", 4, seed=0, backend="serial") as reference:
        def same(ours):
            np.testing.assert_array_equal(ours[0], reference.step(actions)[0])

        pool.reset()
        reference.reset()
        pool.send(actions)                 # after reset()
        same(pool.recv())
        same(pool.step(actions))           # after recv()
        pool.send(actions)                 # after step()
        same(pool.recv())
        obs, _, _, _, info = pool.step(actions[[1, 3]], [1, 3])   # a partial step after recv()
        ref = reference.step(actions[[1, 3]], [1, 3])
        np.testing.assert_array_equal(obs, ref[0])
        pool.send(actions)
        with pytest.raises(RuntimeError, match="in flight|async batches are out"):
            pool.step(actions)
        same(pool.recv())


def test_envpool_compat_refuses_a_multi_agent_pool(no_leaks):
    """EnvPoolCompat counts envs in num_envs while a multi-agent pool's
    arrays hold a row per agent, so gymnasium's vector wrappers over it
    would index rows with env-sized masks: it refuses such a pool, naming
    what to use instead."""
    from shoal.envpool_compat import EnvPoolCompat
    with shoal.make("Explorer", 2, backend="serial", seed=0) as pool:
        with pytest.raises(ValueError, match="single-agent pools; Explorer has 4 agents.*make_vec"):
            EnvPoolCompat(pool)
        assert not pool.closed   # the caller's pool, still usable
        pool.reset()


def test_envpool_compat_gives_one_envs_spaces_and_the_pools_calls(no_leaks):
    """EnvPoolCompat: EnvPool's spaces (one env's), so that code sampling
    them per env (Tianshou's random warm-up) gets independent actions of
    the right shape; everything else is the pool's."""
    from shoal.envpool_compat import EnvPoolCompat
    with EnvPoolCompat(shoal.make("CartPole", 4, backend="serial", seed=0)) as envs, \
            shoal.make("CartPole", 4, backend="serial", seed=0) as reference:
        assert envs.action_space == gymnasium.spaces.Discrete(2) == reference.single_action_space
        assert envs.observation_space == reference.single_observation_space
        assert len(envs) == 4 and not envs.is_async and envs.num_envs == 4
        envs.action_space.seed(0)
        samples = [envs.action_space.sample() for _ in range(64)]
        assert 0 < sum(samples) < 64   # not one action repeated (the batch space's indexing does that)
        actions = np.array(samples[:4])
        for ours, theirs in zip(envs.step(actions)[:4], reference.step(actions)[:4]):
            np.testing.assert_array_equal(ours, theirs)
        np.testing.assert_array_equal(envs.reset(np.array([2]))[0], reference.reset(env_id=[2])[0])
        # EnvPool takes a discrete task's actions as (n, 1) too
        for ours, theirs in zip(envs.step(actions[:, None])[:4], reference.step(actions)[:4]):
            np.testing.assert_array_equal(ours, theirs)
        assert copy.copy(envs).pool is envs.pool   # a shallow copy shares the pool (no recursion)
    assert envs.pool.closed
    with EnvPoolCompat(shoal.make("CartPole", 4, backend="serial", seed=0, batch_size=2)) as envs:
        envs.async_reset()
        ids = envs.recv()[4]["env_id"]
        envs.send(np.zeros((2, 1), np.int64), ids)   # EnvPool's env_id, positional, and (n, 1) actions
        ids = envs.recv()[4]["env_id"]
        envs.send(np.zeros(2, np.int64), env_ids=ids)   # the pool's name
        np.testing.assert_array_equal(envs.recv()[4]["env_id"], [0, 1])
    with pytest.raises(TypeError, match="EnvPoolCompat"):   # EnvPool's env_type names the way
        shoal.make("CartPole", 2, env_type="gymnasium")


@pytest.mark.parametrize("shape", [(4, 1, 3), (4, 3, 1), (1, 4, 3), (12,)])
def test_envpool_compat_takes_box_actions_in_the_shapes_envpool_reshapes(no_leaks, shape):
    """EnvPool reshapes Box actions of the right size ((n, 1, A) from a
    policy with an extra axis, flat n * A); the drop-in takes those too,
    each as the (n, A) array. A transposed (A, n) is still an error."""
    pytest.importorskip("mujoco", reason="the Box-action envs are MuJoCo's (the mujoco extra)")
    from shoal.envpool_compat import EnvPoolCompat
    actions = np.random.default_rng(0).uniform(-1, 1, (4, 3)).astype(np.float32)   # Hopper: 3 actions
    with EnvPoolCompat(shoal.make("Hopper", 4, backend="serial", seed=0)) as envs, \
            shoal.make("Hopper", 4, backend="serial", seed=0) as reference:
        for ours, theirs in zip(envs.step(actions.reshape(shape))[:4], reference.step(actions)[:4]):
            np.testing.assert_array_equal(ours, theirs)
        with pytest.raises(ValueError, match="actions must have shape"):
            envs.step(np.ascontiguousarray(actions.T))


def test_envpool_compat_make_takes_envpools_task_ids_and_defaults(no_leaks):
    """shoal.envpool_compat.make_gymnasium: EnvPool's task ids, argument
    names and defaults (seed 42; CartPole-v0's 200 steps; Atari v5's fire
    start, no sticky actions, 27,000 steps, channel-first RGB), one env's
    spaces; what shoal cannot do is an error naming the task."""
    import shoal.envpool_compat as envpool
    ids = envpool.list_all_envs()
    assert {"CartPole-v0", "CartPole-v1", "Pong-v5", "HalfCheetah-v5"} <= set(ids)
    assert "TicTacToe3d-v5" in ids and "TicTacToe3D-v5" not in ids   # EnvPool's spelling
    assert not any(i.startswith(("Snake", "Drive", "Corridor")) for i in ids)
    assert envpool.__version__ == shoal.__version__   # logged by EnvPool code: says which library ran
    with envpool.make_gymnasium("CartPole-v1", num_envs=4, batch_size=2, num_threads=2) as envs:
        assert envs.config == {"num_envs": 4, "batch_size": 2, "num_threads": 2, "seed": 42,
                               "max_episode_steps": 500, "reward_threshold": 475.0, **ENVPOOL_FIXED_CONFIG}
        assert envs.is_async and envs.action_space == gymnasium.spaces.Discrete(2)
        obs, info = envs.reset()   # async, as EnvPool's: every env resets, the first batch comes back
        assert obs.shape == (2, 4) and info["env_id"].tolist() == [0, 1]
        assert envs.step(np.zeros(2, np.int64), info["env_id"])[4]["env_id"].tolist() == [2, 3]
    with envpool.make("CartPole-v0", "gym", num_envs=2, seed=3) as envs:   # "gym": EnvPool 1.x's alias
        assert envs.config["max_episode_steps"] == 200 and envs.config["seed"] == 3
        assert envs.spec.config.reward_threshold == 195.0 and envs.spec.id == "CartPole-v0"
    with pytest.warns(UserWarning, match="num_threads=3 runs as 4 worker processes"):
        envs = envpool.make_gymnasium("CartPole-v1", num_envs=8, batch_size=4, num_threads=3)
    assert envs.config["num_threads"] == 4
    envs.close()
    pytest.importorskip("ale_py", reason="Atari envs need ale-py")
    with envpool.make_gymnasium("Breakout-v5", num_envs=2, gray_scale=False, frame_skip=2,
                                mode=-1, gym_reset_return_info=True) as envs:
        obs, info = envs.reset()
        config = envs.config
        assert obs.shape == (2, 12, 84, 84) and envs.observation_space.shape == (12, 84, 84)
        assert (config["use_fire_reset"], config["repeat_action_probability"], config["frame_skip"],
                config["max_episode_steps"], config["mode"]) == (True, 0.0, 2, 27000, -1)   # -1: EnvPool's "the ROM's default"
        # EnvPool has no emulator frame limit: its step limit alone ends a
        # long game (gymnasium's 108,000 frames cut frame_skip=8 games at 13,499 steps)
        assert envs.pool.spec.env_kwargs["max_num_frames_per_episode"] == 0
    assert envpool.make_spec("Pong-v5").config.max_episode_steps == 27000
    assert envpool.make_spec("CartPole-v1", num_envs=8, batch_size=4).config[:2] == (8, 4)   # the asked-for
    for task, kwargs, message in [
            ("CartPole-v1", {"num_threads": 1.5}, "num_threads must be an int"),
            ("CartPole-v01", {}, "not one shoal has"),
            ("HalfCheetah-v4", {}, "HalfCheetah-v5 only"), ("Snake-v0", {}, "not one shoal has"),
            ("Pong-v5", {"zero_discount_on_life_loss": "yes"}, "must be a bool"),
            ("Pong-v5", {"use_inter_area_resize": False}, "can only be True"),
            ("CartPole-v1", {"env_seed": [1, 2]}, "a seed per env"),
            ("CartPole-v1", {"env_type": "dm"}, "gymnasium's API only")]:
        with pytest.raises(ValueError, match=message):
            envpool.make(task, **kwargs)


def test_envpool_compat_make_takes_envpools_mujoco_option_names(no_leaks):
    """EnvPool's MuJoCo options become gymnasium v5's keywords where the env
    has one: a _min / _max pair a _range (the other end the default), a
    plain rename renamed; the rest is the env's error naming gymnasium's."""
    pytest.importorskip("mujoco", reason="MuJoCo envs need the mujoco extra")
    import shoal.envpool_compat as envpool
    with envpool.make_gymnasium("Hopper-v5", healthy_z_min=0.5) as envs:
        assert envs.config["healthy_z_range"] == (0.5, float("inf"))
    with envpool.make_gymnasium("Ant-v5", use_contact_force=True, contact_force_max=2.0) as envs:
        assert envs.config["include_cfrc_ext_in_observation"] is True
        assert envs.config["contact_force_range"] == (-1.0, 2.0)
    with envpool.make_gymnasium("Reacher-v5", ctrl_cost_weight=0.5) as envs:
        assert envs.config["reward_control_weight"] == 0.5
    with pytest.raises(TypeError, match="reset_qpos_scale: EnvPool's"):
        envpool.make_gymnasium("Hopper-v5", reset_qpos_scale=0.1)
    with pytest.raises(ValueError, match="healthy_z_min .* and healthy_z_range .* both given"):
        envpool.make_gymnasium("Hopper-v5", healthy_z_range=(0.1, 5.0), healthy_z_min=0.5)


def test_envpool_compat_use_contact_force_false_is_envpools_v4_style(no_leaks):
    """EnvPool's use_contact_force=False drops the contact cost from the
    reward, and for Ant the contact forces from the observation (its
    Humanoid observes them either way): rewards then differ from the
    default's by exactly Ant's reward_contact, or Humanoid's."""
    pytest.importorskip("mujoco", reason="MuJoCo envs need the mujoco extra")
    import shoal.envpool_compat as envpool
    for task, obs_size in [("Ant-v5", 27), ("Humanoid-v5", 348)]:
        runs = {}
        for on in (True, False):
            with envpool.make_gymnasium(task, num_envs=2, seed=3, use_contact_force=on) as envs:
                obs, _ = envs.reset()
                actions = np.random.default_rng(0).uniform(-0.4, 0.4, (40, 2, *envs.action_space.shape))
                steps = [envs.step(a.astype(np.float32)) for a in actions]
            runs[on] = (obs.shape[1], np.array([s[1] for s in steps]),
                        np.array([s[4]["reward_contact"] for s in steps]))
        assert runs[False][0] == obs_size
        assert np.all(runs[False][2] == 0)
        assert np.any(runs[True][2] != 0)   # the default's contact cost is there to drop
        np.testing.assert_allclose(runs[True][1] - runs[False][1], runs[True][2], atol=1e-5)


def test_envpool_compat_takes_envpools_v5_values_of_options_gymnasium_fixes(no_leaks):
    """EnvPool's v5 options with no gymnasium keyword (legacy_healthy_reward,
    velocity_min, reward_if_not_terminated, ...) are taken at EnvPool's v5
    values, which are gymnasium v5's; another value is an error saying why."""
    pytest.importorskip("mujoco", reason="MuJoCo envs need the mujoco extra")
    import shoal.envpool_compat as envpool
    for task, kwargs in [("Hopper-v5", {"legacy_healthy_reward": False, "velocity_max": 10.0}),
                         ("InvertedPendulum-v5", {"reward_if_not_terminated": True}),
                         ("HumanoidStandup-v5", {"forward_reward_weight": 1.0, "healthy_reward": 1.0}),
                         ("Reacher-v5", {"reset_qpos_scale": 0.1, "reset_goal_scale": 0.2}),
                         ("InvertedPendulum-v5", {"healthy_z_min": -0.2, "healthy_reward": 1.0}),
                         ("Pusher-v5", {"cylinder_dist_min": 0.17}),
                         ("Ant-v5", {"legacy_healthy_reward": np.False_})]:   # numpy's bools too
        envpool.make_gymnasium(task, **kwargs).close()
    with envpool.make_gymnasium("HumanoidStandup-v5", contact_cost_max=5.0) as envs:   # its impact cost
        assert envs.config["impact_cost_range"] == (-float("inf"), 5.0)
    with pytest.raises(ValueError, match="use_contact_force must be True or False, got 'False'"):
        envpool.make_gymnasium("Ant-v5", use_contact_force="False")
    with pytest.raises(ValueError, match="forward_reward_weight can only be 1.0 .*does not weight its uph term"):
        envpool.make_gymnasium("HumanoidStandup-v5", forward_reward_weight=2.0)
    with pytest.raises(ValueError, match="legacy_healthy_reward can only be False"):
        envpool.make_gymnasium("Walker2d-v5", legacy_healthy_reward=True)


def test_envpool_compat_is_a_gymnasium_env_and_vector_env_for_wrappers(no_leaks):
    """As EnvPool's envs: a gymnasium.Wrapper subclass (CleanRL's
    RecordEpisodeStatistics over EnvPool) and gymnasium's vector wrappers
    take it; closed / metadata / spec are the pool's, and dropping the view
    leaves the pool open (the pool is closed by its owner or when dropped)."""
    from gymnasium.wrappers import vector as vector_wrappers
    import shoal.envpool_compat as envpool
    from shoal.envpool_compat import EnvPoolCompat

    class EpisodeStats(gymnasium.Wrapper):   # CleanRL's shape of it
        def __init__(self, env):
            super().__init__(env)
            self.num_envs = getattr(env, "num_envs", 1)

    envs = envpool.make_gymnasium("CartPole-v1", num_envs=4)
    assert isinstance(envs, gymnasium.Env) and isinstance(envs, gymnasium.vector.VectorEnv)
    assert isinstance(envs, envpool.python.envpool.EnvPoolMixin)   # TorchRL's MultiThreadedEnvWrapper checks it
    assert EpisodeStats(envs).reset()[0].shape == (4, 4)
    wrapped = vector_wrappers.NormalizeObservation(vector_wrappers.RecordEpisodeStatistics(envs))
    wrapped.reset(seed=0)
    wrapped.step(np.zeros(4, np.int64))
    assert envs.metadata["render_modes"] == ["rgb_array"] and not envs.closed   # CartPole draws
    wrapped.close()
    assert envs.closed and envs.pool.closed
    pool = shoal.make("CartPole", 2, backend="serial")
    view = EnvPoolCompat(pool)
    del view
    assert not pool.closed
    pool.close()


# EnvPool's config entries that are the same for every shoal pool
ENVPOOL_FIXED_CONFIG = {"max_num_players": 1, "thread_affinity_offset": -1, "gym_reset_return_info": True,
                        "env_seed": []}


def test_envpool_compat_make_has_envpools_spaces_and_config_keys():
    """Side by side with EnvPool itself (where installed): the same one-env
    spaces and obs shapes, and config names EnvPool's pool settings alike."""
    envpool = pytest.importorskip("envpool", reason="the comparison needs EnvPool (the bench extra)")
    pytest.importorskip("ale_py", reason="Atari envs need ale-py")
    import shoal.envpool_compat as compat
    for task, kwargs in [("CartPole-v0", {}), ("CartPole-v1", {}), ("Pong-v5", {}),
                         ("Pong-v5", {"gray_scale": False, "stack_num": 2, "zero_discount_on_life_loss": True}),
                         ("HalfCheetah-v5", {}), ("Hopper-v5", {"healthy_z_min": 0.5}), ("Walker2d-v5", {}),
                         ("Reacher-v5", {"ctrl_cost_weight": 0.5}), ("Ant-v5", {}), ("HumanoidStandup-v5", {}),
                         ("InvertedDoublePendulum-v5", {}), ("Pusher-v5", {})]:
        theirs = envpool.make_gymnasium(task, num_envs=2, **kwargs)
        with compat.make_gymnasium(task, num_envs=2, **kwargs) as ours:
            assert ours.observation_space == theirs.observation_space, task
            assert ours.action_space == theirs.action_space, task
            assert ours.reset()[0].shape == theirs.reset()[0].shape
            for key in set(theirs.config) - {"base_path", "num_threads"}:   # (its assets; workers differ)
                assert ours.config.get(key) == theirs.config[key], (task, key)
            assert ours.config.get("reward_threshold") == theirs.config.get("reward_threshold"), task
            assert ours.spec.reward_threshold == theirs.spec.reward_threshold, task
        theirs.close()


def test_envpool_compat_mujoco_actions_and_thresholds_are_envpools(no_leaks):
    """EnvPool's MuJoCo action space is a float64 Box; the drop-in's too,
    and its samples step (rounded to float32 in the pool, as gymnasium's
    own MuJoCo envs' float32 actions are). Its reward_threshold is
    EnvPool's, which for Hopper-v5 is not gymnasium's 3800."""
    pytest.importorskip("mujoco", reason="MuJoCo envs need the mujoco extra")
    import shoal.envpool_compat as compat
    with compat.make_gymnasium("HalfCheetah-v5", num_envs=2) as envs, \
            shoal.make("HalfCheetah", 2, backend="serial", seed=42) as pool:
        assert envs.action_space == gymnasium.spaces.Box(-1.0, 1.0, (6,), np.float64)
        assert envs.config["reward_threshold"] == 4800.0   # EnvPool's, gymnasium's
        envs.action_space.seed(0)
        actions = np.stack([envs.action_space.sample() for _ in range(2)])
        assert actions.dtype == np.float64
        obs, *_ = envs.step(actions)
        np.testing.assert_array_equal(obs, pool.step(actions.astype(np.float32))[0])
    with compat.make_gymnasium("Hopper-v5", num_envs=1) as hopper:
        assert hopper.config["reward_threshold"] == hopper.spec.reward_threshold == 6000.0   # EnvPool's own
    with compat.make_gymnasium("Humanoid-v5", num_envs=1) as humanoid:   # ctrlrange 0.4, as EnvPool's bounds
        assert (humanoid.action_space.low == -0.4).all() and (humanoid.action_space.high == 0.4).all()


def test_envpool_compat_config_has_envpools_option_names(no_leaks):
    """EnvPool's config names a MuJoCo task's options its own way (a range's
    ends as <x>_min / <x>_max, Reacher's ctrl_cost_weight) and holds the
    options fixed in the drop-in; code reading them by those names reads
    what the env does. Atari's zero_discount_on_life_loss, which only
    EnvPool's dm_env API uses, is taken either way."""
    pytest.importorskip("mujoco", reason="MuJoCo envs need the mujoco extra")
    import shoal.envpool_compat as compat
    with compat.make_gymnasium("Hopper-v5", num_envs=1, healthy_z_min=0.5) as hopper:
        config = hopper.config
        assert config["healthy_z_min"] == 0.5 and "healthy_z_max" not in config   # (0.5, inf)
        assert (config["healthy_angle_min"], config["healthy_angle_max"]) == (-0.2, 0.2)
        assert hopper.spec.config.velocity_max == 10.0 and config["post_constraint"] is True
        assert config["env_seed"] == [] and config["frame_stack"] == 1
    with compat.make_gymnasium("Reacher-v5", num_envs=1, ctrl_cost_weight=0.5) as reacher:
        assert reacher.config["ctrl_cost_weight"] == reacher.config["reward_control_weight"] == 0.5
    with compat.make_gymnasium("Ant-v5", num_envs=1, use_contact_force=False) as ant:
        assert ant.config["use_contact_force"] is False and ant.config["contact_force_max"] == 1.0
    pytest.importorskip("ale_py", reason="Atari envs need ale-py")
    with compat.make_gymnasium("Pong-v5", num_envs=1, zero_discount_on_life_loss=True) as pong:
        assert pong.config["zero_discount_on_life_loss"] is True and pong.config["use_inter_area_resize"] is True


def test_envpool_compat_takes_envpools_call_forms(no_leaks):
    """EnvPool 1.2.5's signatures, as its clients call them: step/send's
    `action=` keyword and dict form, send() of any subset on a sync pool
    with recv() returning it, recv(reset, return_info), seed() (abandoned
    there: a no-op with a warning), 0 / 1 for Atari's bool options, the
    game's ROM id as config["task"], and a wrong version's error naming the
    family."""
    import shoal.envpool_compat as compat
    with compat.make("CartPole-v1", env_type="gymnasium", num_envs=4, seed=0) as envs, \
            compat.make("CartPole-v1", env_type="gymnasium", num_envs=4, seed=0) as twin:
        envs.reset()
        twin.reset()
        zeros = np.zeros(4, np.int32)
        assert_same(envs.step(action=zeros), twin.step(zeros))
        pair = np.array([2, 0])
        assert_same(envs.step({"action": zeros[:2], "env_id": pair}), twin.step(zeros[:2], pair))
        envs.send(np.ones(2, np.int32), env_id=np.array([3, 1]))   # a subset, sync
        ours = envs.recv()
        assert_same(ours, twin.step(np.ones(2, np.int32), np.array([3, 1])))
        np.testing.assert_array_equal(ours[-1]["env_id"], [3, 1])
        envs.send(action=zeros)                                     # every env, then
        assert_same(envs.recv(), twin.step(zeros))
        envs.send(np.ones(1, np.int32), env_id=np.array([2]))
        with pytest.raises(RuntimeError, match="await recv"):       # one subset at a time
            envs.send(np.ones(1, np.int32), env_id=np.array([0]))
        with pytest.raises(RuntimeError, match="await recv"):
            envs.step(zeros)
        envs.reset()                                                # drops it
        with pytest.raises(RuntimeError, match="nothing in flight"):
            envs.recv()
        twin.reset()
        assert_same(envs.step({"action": zeros[:2], "env_id": None}, env_id=pair), twin.step(zeros[:2], pair))
        with pytest.warns(UserWarning, match="seed\\(\\) does nothing"):
            assert envs.seed(3) is None
        with pytest.raises(TypeError, match="once"):
            envs.step(zeros, actions=zeros)
    pytest.importorskip("ale_py", reason="Atari envs need ale-py")
    with compat.make("Pong-v5", env_type="gymnasium", num_envs=4, batch_size=2, seed=0, gray_scale=0,
                     episodic_life=1) as envs:
        assert envs.config["task"] == "pong" and envs.config["gray_scale"] is False
        assert envs.observation_space.shape == (12, 84, 84)
        envs.async_reset()
        obs, info = envs.recv(reset=True)
        assert obs.shape == (2, 12, 84, 84) and "lives" in info
        envs.send(np.zeros(2, np.int32), env_id=info["env_id"])
        obs, info = envs.recv(reset=True, return_info=False)   # EnvPool 1.2.5 returns the info anyway
        assert obs.shape == (2, 12, 84, 84) and "lives" in info
    with pytest.raises(ValueError, match=r"Pong as Pong-v5 only \(EnvPool's Atari ids are all v5\)"):
        compat.make("Pong-v4", env_type="gymnasium", num_envs=1)



def test_envpool_compat_atari_info_has_the_rams_of_the_rows_envs(no_leaks):
    """EnvPool's info["ram"]: each returned row's console RAM after its step
    or reset, a copy of its own, in async batches the same as the sync
    pool's for that env at that step (that it is the emulator's, step for
    step, is checked against gymnasium's env in tests/test_atari.py)."""
    pytest.importorskip("ale_py", reason="Atari envs need ale-py")
    import shoal.envpool_compat as compat
    fire = 1
    with compat.make("Breakout-v5", env_type="gymnasium", num_envs=4, seed=0) as sync:
        _, info = sync.reset()
        history = [info["ram"]]   # [step][env]
        for _ in range(25):
            history.append(sync.step(np.full(4, fire, np.int32))[4]["ram"])
    assert any((history[-1][e] != history[-1][0]).any() for e in range(1, 4))   # the envs differ
    with compat.make("Breakout-v5", env_type="gymnasium", num_envs=4, batch_size=2, seed=0) as envs:
        envs.async_reset()
        steps = np.zeros(4, int)   # each env's steps so far
        for _ in range(40):
            obs, rew, term, trunc, info = envs.recv()
            assert info["ram"].shape == (2, 128) and info["ram"].dtype == np.uint8
            for row, env in enumerate(info["env_id"]):
                np.testing.assert_array_equal(info["ram"][row], history[steps[env]][env])
            info["ram"][:] = 0   # the caller's copy
            envs.send(np.full(2, fire, np.int32), env_id=info["env_id"])
            steps[info["env_id"]] += 1

def test_envpool_compat_renders_as_envpool_does(no_leaks, monkeypatch):
    """EnvPool's render: make(..., render_mode="rgb_array"), then
    render(env_ids=None) stacks env 0's frame, render(env_ids=[...]) those
    envs' (it once raised "EnvPool's envs do not render", which EnvPool's
    do). Atari and MuJoCo tasks then step in this process (their state must
    be here to be drawn). Small pieces EnvPool code reads: is_vector_env,
    config's mode / difficulty -1, missing attributes named as this view's."""
    import shoal.envpool_compat as envpool
    from shoal.pool import render as pool_render
    envs = envpool.make_gymnasium("CartPole-v1", num_envs=3, render_mode="rgb_array")
    try:
        envs.reset()
        frames = envs.render(env_ids=[2, 0])
        # EnvPool's SB3 adapter draws every env: render(env_ids=envs.all_env_ids)
        assert envs.all_env_ids.dtype == np.int32 and envs.all_env_ids.tolist() == [0, 1, 2]
        assert envs.render(env_ids=envs.all_env_ids).shape[0] == 3
        assert frames.shape == (2, *pool_render.frame(envs.pool, 0).shape) and frames.dtype == np.uint8
        np.testing.assert_array_equal(frames[0], pool_render.frame(envs.pool, 2))
        assert envs.render().shape == (1, *frames.shape[1:])
        assert envs.render_mode == "rgb_array" and envs.metadata["render_modes"] == ["rgb_array"]
        assert envs.is_vector_env
        with pytest.raises(ValueError, match="env ids are 0..2"):
            envs.render(env_ids=[3])
        with pytest.raises(AttributeError, match="'EnvPoolCompat' object has no attribute 'nosuch'"):
            envs.nosuch
    finally:
        envs.close()
    with envpool.make_gymnasium("CartPole-v1", num_envs=2) as plain, \
            pytest.raises(ValueError, match="render_mode='rgb_array'"):
        plain.render()
    with pytest.raises(ValueError, match="'rgb_array' frames only"):
        envpool.make_gymnasium("CartPole-v1", num_envs=2, render_mode="human")
    with pytest.raises(ValueError, match="render_width, render_height: EnvPool's render options"):
        envpool.make_gymnasium("CartPole-v1", render_mode="rgb_array", render_width=64, render_height=48)
    if importlib.util.find_spec("ale_py") is not None:
        with pytest.warns(UserWarning, match="steps the envs in this process"):
            pong = envpool.make_gymnasium("Pong-v5", num_envs=2, num_threads=2, render_mode="rgb_array")
        with pong:
            pong.reset()
            assert pong.render(env_ids=[0, 1]).shape == (2, 210, 160, 3)
            assert pong.config["mode"] == -1 and pong.config["difficulty"] == -1
        # the screen's own size, as EnvPool's render tests ask: no resize, so either rule is fine
        with envpool.make_gymnasium("Pong-v5", num_envs=1, img_height=210, img_width=160,
                                    use_inter_area_resize=False) as full:
            assert full.reset()[0].shape == (1, 4, 210, 160)
        with pytest.raises(ValueError, match="use_inter_area_resize can only be True"):
            envpool.make_gymnasium("Pong-v5", num_envs=1, use_inter_area_resize=False)   # an 84 x 84 resize
        with pytest.raises(ValueError, match="screen has 214 rows, which shoal resizes"):   # a tall screen
            envpool.make_gymnasium("Carnival-v5", num_envs=1, img_height=210, img_width=160,
                                   use_inter_area_resize=False)


def test_envpool_compat_returns_arrays_of_the_callers_own(no_leaks):
    """EnvPool returns new arrays every call, and code written for it keeps
    them: through EnvPoolCompat the kept steps stay what they were (the
    pool's own results are views its next call overwrites), for step, recv
    and reset; copy=False gives the views. A reset_mask resets and returns
    the masked envs' rows only, as EnvPool's."""
    from shoal.envpool_compat import EnvPoolCompat
    with EnvPoolCompat(shoal.make("CartPole", 4, backend="serial", seed=0)) as envs, \
            shoal.make("CartPole", 4, backend="serial", seed=0) as reference:
        kept, expected = [envs.reset()], [tuple(_copied(reference.reset()))]
        for _ in range(30):
            kept.append(envs.step(np.ones(4, np.int64)))
            expected.append(tuple(_copied(reference.step(np.ones(4, np.int64)))))
        for ours, theirs in zip(kept, expected):
            *arrays, info = ours   # EnvPool's info: env_id int32, and players' env_id
            assert info["env_id"].dtype == np.int32
            np.testing.assert_array_equal(info.pop("players")["env_id"], info["env_id"])
            for a, b in zip((*arrays, info), theirs):
                _assert_equal_nested(a, b)
        assert not np.shares_memory(kept[-1][0], envs.pool.step(np.zeros(4, np.int64))[0])
        mask = np.array([False, True, False, True])
        obs, info = envs.reset(options={"reset_mask": mask})
        np.testing.assert_array_equal(info["env_id"], [1, 3])
        np.testing.assert_array_equal(obs, reference.reset(env_id=[1, 3])[0])
        obs, info = envs.reset(options={"reset_mask": [0, 0, 1, 0]})   # EnvPool casts 0/1 to bool
        np.testing.assert_array_equal(info["env_id"], [2])
        assert len(envs.reset(options={"reset_mask": None})[0]) == 4     # None: every env, as there
        for bad in ({"reset_mask": np.zeros(4, bool)}, {"reset_mask": mask, "seed": 1}, {"other": 1}):
            with pytest.raises(ValueError, match="reset_mask|selects no env"):
                envs.reset(options=bad)
    with EnvPoolCompat(shoal.make("CartPole", 4, num_workers=2, batch_size=2, seed=0)) as envs:
        envs.async_reset()
        first = envs.recv()   # envs 0 and 1
        was = first[0].copy()
        envs.send(np.zeros(2, np.int64), first[4]["env_id"])
        for _ in range(3):    # envs 2 and 3, 0 and 1, 2 and 3
            envs.send(np.zeros(2, np.int64), envs.recv()[4]["env_id"])
        again = envs.recv()   # envs 0 and 1, in the buffer rows `first` was
        assert again[4]["env_id"].tolist() == first[4]["env_id"].tolist() == [0, 1]
        assert not np.shares_memory(first[0], again[0])
        np.testing.assert_array_equal(first[0], was)
    with EnvPoolCompat(shoal.make("CartPole", 4, backend="serial"), copy=False) as envs:
        obs, _ = envs.reset()
        assert np.shares_memory(obs, envs.step(np.zeros(4, np.int64))[0])
        assert envs.config["num_threads"] == 0, "a Serial pool has no worker processes"
        assert "blocks in this process" in repr(envs.pool)
    with EnvPoolCompat(shoal.make("CartPole", 4, num_workers=2, batch_size=2, seed=5,
                                  max_episode_steps=100)) as envs:
        assert envs.config == {"num_envs": 4, "batch_size": 2, "num_threads": 2, "seed": 5,
                               "max_episode_steps": 100, **ENVPOOL_FIXED_CONFIG}


def _copied(result):
    return [{k: _copied([v])[0] for k, v in x.items()} if isinstance(x, dict) else np.copy(x) for x in result]


def _assert_equal_nested(a, b):
    if isinstance(a, dict):
        assert a.keys() == b.keys()
        for key in a:
            _assert_equal_nested(a[key], b[key])
    else:
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("name, mode", [("CartPole", "next_step"), ("Snake", "same_step"),
                                        ("Hopper", "same_step")])
@pytest.mark.parametrize("backend", ["serial", "multiprocessing", "parent_share"])
def test_step_of_some_env_ids_steps_those_envs_alone(name, mode, backend, no_leaks):
    """step(actions, env_id) with some envs (EnvPool's sync step of ready
    envs; Tianshou collecting n episodes): those envs step as they would
    alone (env i as a one-env pool seeded s + i), through episode ends and
    autoresets; the others do not move; rows come back in env_id's order."""
    if shoal.env_spec(name).kind == "worker":
        pytest.importorskip("mujoco", reason="MuJoCo envs need the mujoco extra")
    num_envs, seed = 4, 7
    if backend == "parent_share":   # this process steps one block itself
        pool = Multiprocessing(name, num_envs, num_workers=2, parent_share=True, autoreset_mode=mode)
    else:
        pool = shoal.make(name, num_envs, backend=backend, num_workers=2, autoreset_mode=mode)
    with pool:
        alone = [shoal.make(name, 1, backend="serial", autoreset_mode=mode) for _ in range(num_envs)]
        try:
            obs, _ = pool.reset(seed=seed)
            last = [ref.reset(seed=seed + i)[0].copy() for i, ref in enumerate(alone)]
            rng = np.random.default_rng(0)
            agents = pool.spec.agents
            ended = 0
            for t in range(300):
                ids = rng.permutation(num_envs)[:rng.integers(1, num_envs)]   # never all of them
                actions = np.stack([ref.action_space.sample() for i in ids for ref in [alone[i]]])
                actions = actions.reshape(len(ids) * agents, *pool.action_space.shape[1:])
                obs, rew, term, trunc, info = pool.step(actions, ids)
                np.testing.assert_array_equal(info["env_id"], ids)
                for k, i in enumerate(ids):
                    rows = slice(k * agents, (k + 1) * agents)
                    ref_obs, ref_rew, ref_term, ref_trunc, ref_info = alone[i].step(actions[rows])
                    where = f"step {t}, env {i}"
                    np.testing.assert_array_equal(obs[rows], ref_obs, err_msg=where)
                    np.testing.assert_array_equal(rew[rows], ref_rew, err_msg=where)
                    np.testing.assert_array_equal(term[rows], ref_term, err_msg=where)
                    np.testing.assert_array_equal(trunc[rows], ref_trunc, err_msg=where)
                    if mode == "same_step":
                        np.testing.assert_array_equal(info["_final_obs"][rows], ref_info["_final_obs"])
                        done = ref_info["_final_obs"]
                        np.testing.assert_array_equal(info["final_obs"][rows][done],
                                                      ref_info["final_obs"][done], err_msg=where)
                    for key in set(ref_info) - {"env_id", "final_obs", "_final_obs", "final_info"}:
                        assert info[key][k] == ref_info[key][0], (key, where)
                    last[i] = ref_obs.copy()
                    ended += bool((ref_term | ref_trunc).any())
                for i in set(range(num_envs)) - set(ids.tolist()):   # unmoved
                    np.testing.assert_array_equal(pool.obs[i * agents:(i + 1) * agents], last[i])
            assert ended > 0, "the run should cross episode ends"
            # no env at all: nothing moves, and the info has the same keys
            before = pool.obs.copy()
            empty = pool.step(np.zeros((0, *pool.action_space.shape[1:]), pool.buffers.actions.dtype), [])
            assert set(empty[4]) == set(info) and all(len(x) == 0 for x in empty[:4])
            np.testing.assert_array_equal(pool.obs, before)
        finally:
            for ref in alone:
                ref.close()


@pytest.mark.parametrize("backend", ["serial", "multiprocessing"])
def test_bad_actions_raise_and_step_nothing(backend, no_leaks):
    with shoal.make("CartPole", 4, backend=backend, num_workers=2) as pool:
        pool.reset(seed=0)
        before = pool.obs.copy()
        bad = [
            (np.zeros(3, np.int32), "shape"),
            (np.zeros((4, 1), np.int32), "shape"),
            (np.zeros(4, np.float32), "integers"),
            (np.array([0, 1, 2, 0], np.int32), r"action 2 at row 2 is out of range: expected an integer in \[0, 2\)"),
            (np.array([0, -1, 0, 0], np.int64), "out of range"),
            (np.array([0, 2**32, 0, 0], np.int64), "out of range"),  # would wrap to 0 in int32
            (np.array([0, 2**64 - 1, 0, 0], np.uint64), "out of range"),
        ]
        for actions, message in bad:
            with pytest.raises(ValueError, match=message):
                pool.step(actions)
        np.testing.assert_array_equal(pool.obs, before)
        assert pool.episode_stats()["episodes"] == 0
        pool.step([0, 1, 1, 0])  # lists of ints are fine
        after_list = pool.obs.copy()
        pool.reset(seed=0)
        pool.step(np.array([0, 1, 1, 0], ">i8"))   # big-endian data (from a file, a network)
        np.testing.assert_array_equal(pool.obs, after_list)


def test_multidiscrete_range_error_names_the_component():
    with shoal.make("Explorer", 2, backend="serial") as pool:   # MultiDiscrete([3, 3]), 4 rows per env
        actions = np.zeros((8, 2), np.int32)
        actions[5, 1] = 3
        with pytest.raises(ValueError, match=r"action \[0, 3\] at row 5 is out of range: component 1 is 3, "
                                             r"expected \[0, 3\)"):
            pool.step(actions)


def test_inconsistent_sizes_are_rejected_clearly():
    with pytest.raises(ValueError, match="batch_size must divide"):
        Serial("CartPole", 10, batch_size=4)
    with pytest.raises(ValueError, match="batch_size must divide"):
        Serial("CartPole", 1, batch_size=True)
    with pytest.raises(ValueError, match="num_workers must be a positive int"):
        Serial("CartPole", 1, num_workers=True)
    with pytest.raises(ValueError, match="multiple of the number of batches"):
        Serial("CartPole", 8, batch_size=4, num_workers=3)
    with pytest.raises(ValueError, match="exceeds num_envs"):
        Serial("CartPole", 2, num_workers=3)
    with pytest.raises(ValueError, match="num_envs"):
        Serial("CartPole", 0)
    with pytest.raises(ValueError, match="unknown env") as e:
        Serial("NoSuchEnv", 2)
    assert "did you mean" not in str(e.value)
    # a near miss, or a gymnasium id, names the env meant
    for name in ("CartPol", "CartPole-v1", "shoal/CartPole-v0"):
        with pytest.raises(ValueError, match=f"unknown env '{name}'; did you mean 'CartPole'"):
            Serial(name, 2)
    with pytest.raises(ValueError, match="autoreset_mode"):
        Serial("CartPole", 2, autoreset_mode="sometimes")
    for bad_seed in (-1, True, 1.5, [0, "x"], [0]):
        with pytest.raises(ValueError, match="seed"):
            Serial("CartPole", 2).reset(seed=bad_seed)
    # Defaults adapt: one env still works; 4 batches on any machine get >= 4 workers.
    assert Serial("CartPole", 1).num_workers == 1
    assert Serial("CartPole", 8, batch_size=2).num_workers % 4 == 0


def test_more_workers_than_cores(no_leaks):
    workers = os.cpu_count() * 2 + 1
    with Multiprocessing("CartPole", 64, num_workers=workers) as pool:
        obs, _ = pool.reset(seed=0)
        np.testing.assert_array_equal(obs, Serial("CartPole", 64).reset(seed=0)[0])
        pool.step(np.zeros(64, np.int32))


def test_worker_busy_seconds_count_each_workers_stepping(no_leaks):
    with Multiprocessing("CartPole", 4096, num_workers=2) as pool:
        pool.reset(seed=0)
        before = pool.worker_busy_seconds()
        assert before.shape == (2,) and (before >= 0).all()
        start = time.perf_counter()
        for _ in range(50):
            pool.step(np.zeros(4096, np.int32))
        wall = time.perf_counter() - start
        busy = pool.worker_busy_seconds() - before
        # every worker stepped (its 2,048 envs, 50 times: well over a microsecond),
        # and no worker is busy longer than the wall time that contained it
        assert (busy > 1e-6).all() and (busy <= wall).all(), (busy, wall)
    with pytest.raises(RuntimeError, match="closed"):
        pool.worker_busy_seconds()


def test_close_is_idempotent_and_releases_everything(no_leaks):
    fds_before = len(os.listdir("/proc/self/fd"))
    pool = Multiprocessing("CartPole", 16, num_workers=2)
    obs, info = pool.reset(seed=0)
    pool.close()
    pool.close()
    assert obs.shape == (16, 4) and np.all(np.abs(obs) <= 0.05)  # views stay readable
    assert (info["elapsed_step"] == 0).all()
    with pytest.raises(RuntimeError, match="closed"):
        pool.step(np.zeros(16, np.int32))
    del obs, info  # the last views: the mapping and its descriptor go with them
    assert len(os.listdir("/proc/self/fd")) <= fds_before


def test_dropped_pool_leaks_nothing(no_leaks):
    pool = Multiprocessing("CartPole", 16, num_workers=2)
    pool.reset(seed=0)
    pids = [p.pid for p in pool._workers.processes]
    del pool  # no close()
    import gc
    gc.collect()
    for pid in pids:
        assert not os.path.exists(f"/proc/{pid}") or open(f"/proc/{pid}/stat").read().split()[2] == "Z"


@pytest.mark.parametrize("mode", ["next_step", "same_step", "disabled"])
def test_parent_share_equals_serial_in_every_autoreset_mode(mode, no_leaks):
    n, steps = 12, 300
    with Serial("Snake", n, autoreset_mode=mode) as serial, \
            Multiprocessing("Snake", n, num_workers=3, parent_share=True, autoreset_mode=mode) as pool:
        serial.reset(seed=5), pool.reset(seed=5)
        rng = np.random.default_rng(0)
        for _ in range(steps):
            a = rng.integers(0, serial.single_action_space.n, serial.num_rows).astype(np.int32)
            ours, ref = pool.step(a), serial.step(a)
            for x, y in zip(ours[:4], ref[:4]):
                np.testing.assert_array_equal(x, y)
            assert_same(ours[4], ref[4])
        np.testing.assert_equal(pool.episode_stats(), serial.episode_stats())   # NaN == NaN here


def test_parent_share_default_and_refusals(no_leaks):
    with Multiprocessing("CartPole", 16) as pool:   # default workers, one batch
        assert pool.parent_share == (pool.num_workers >= 2)
        assert len(pool.worker_busy_seconds()) == pool.num_workers - pool.parent_share
        assert "this process" in repr(pool) or not pool.parent_share
    with Multiprocessing("CartPole", 16, num_workers=2) as pool:   # asked for 2 processes: 2
        assert not pool.parent_share and len(pool.worker_busy_seconds()) == 2
    with Multiprocessing("CartPole", 16, batch_size=8) as pool:    # async batches: all on workers
        assert not pool.parent_share
    with pytest.raises(ValueError, match="one batch"):
        Multiprocessing("CartPole", 16, num_workers=2, batch_size=8, parent_share=True)
    with pytest.raises(ValueError, match="num_workers >= 2"):
        Multiprocessing("CartPole", 16, num_workers=1, parent_share=True)
    with pytest.raises(ValueError, match="parent_share"):
        Multiprocessing("CartPole", 16, parent_share="yes")
    with shoal.make("CartPole", 16, parent_share=False) as pool:   # a pool option, not an env one
        assert not pool.parent_share
    with pytest.raises(ValueError, match="parent_share: options of backend='multiprocessing'"):
        shoal.make("CartPole", 16, backend="serial", parent_share=True)
    with shoal.make("CartPole", 4, backend="serial", context=None, parent_share=None):   # their defaults
        pass


def test_killed_worker_is_reported_with_a_parent_share(no_leaks):
    pool = Multiprocessing("CartPole", 12, num_workers=3, parent_share=True)
    pool.reset(seed=0)
    victim = pool._workers.processes[1]
    os.kill(victim.pid, signal.SIGKILL)
    victim.join(2)
    with pytest.raises(WorkerError, match=r"worker 1 .*envs 4\.\.7.*signal 9"):
        pool.step(np.zeros(12, np.int32))
    assert pool.closed


def test_killed_worker_is_reported_quickly(no_leaks):
    pool = Multiprocessing("CartPole", 8, num_workers=2)
    pool.reset(seed=0)
    victim = pool._workers.processes[1]
    os.kill(victim.pid, signal.SIGKILL)
    victim.join(2)
    start = time.monotonic()
    with pytest.raises(WorkerError, match=r"worker 1 .*envs 4\.\.7.*signal 9"):
        pool.step(np.zeros(8, np.int32))
    assert time.monotonic() - start < 2.0
    assert pool.closed


def test_idle_workers_sleep(no_leaks):
    with Multiprocessing("CartPole", 8, num_workers=2) as pool:
        pool.reset(seed=0)
        pool.step(np.zeros(8, np.int32))
        time.sleep(0.1)  # past the yield window
        ticks = os.sysconf("SC_CLK_TCK")

        def cpu_seconds():
            total = 0
            for p in pool._workers.processes:
                fields = open(f"/proc/{p.pid}/stat").read().rsplit(")", 1)[1].split()
                total += int(fields[11]) + int(fields[12])
            return total / ticks

        before = cpu_seconds()
        time.sleep(1.0)
        assert cpu_seconds() - before < 0.1, "idle workers are burning CPU"
        # and they still answer after sleeping
        obs, *_ = pool.step(np.zeros(8, np.int32))
        assert obs.shape == (8, 4)


@pytest.mark.parametrize("backend", ["serial", "multiprocessing"])
def test_pools_keep_their_attributes_in_slots(backend, no_leaks):
    """A pool's own attributes are __slots__ (pool/native.py says why: an
    instance dict past ~30 keys slowed every call by 0.4 us); one added to
    __init__ without a slot would land in the instance dict (where only
    the batch spaces go, cached at a first read, off the step path)."""
    with shoal.make("CartPole", 4, backend=backend, num_workers=2) as pool:
        pool.reset(seed=0)
        pool.step(np.zeros(4, np.int32))
        assert vars(pool) == {}


def test_reset_options_are_ignored_unless_gymnasiums_env_honours_them(no_leaks):
    """Options an env does not take are ignored, as gymnasium's and
    pettingzoo's envs ignore theirs (pettingzoo's api_test passes one), but
    gymnasium CartPole-v1's low / high (its initial-state range) are refused
    by every front end: ignored, they would give a wrong result."""
    from shoal.pettingzoo_env import ShoalParallelEnv

    fronts = [lambda: shoal.make("CartPole", 2, backend="serial"),
              lambda: gymnasium.make("shoal/CartPole-v0"),
              lambda: gymnasium.make_vec("shoal/CartPole-v0", 2, vectorization_mode="vector_entry_point"),
              lambda: ShoalParallelEnv("CartPole")]
    if importlib.util.find_spec("torch") is not None:   # the CUDA backend's CPU face needs torch
        from shoal.cuda import CudaVecEnv
        fronts.append(lambda: CudaVecEnv("CartPole", 2, device="cpu"))
    for make in fronts:
        env = make()
        try:
            env.reset(seed=0, options={})
            env.reset(options={"some_option": 1})
            with pytest.raises(ValueError, match=r"reset options \['high', 'low'\]: gymnasium's CartPole"):
                env.reset(seed=0, options={"low": -0.5, "high": 0.5})
            env.reset(seed=1)   # still usable
        finally:
            env.close()
    with shoal.make("Snake", 2, backend="serial") as pool:   # no gymnasium counterpart: nothing refused
        pool.reset(seed=0, options={"low": -0.5})
    with shoal.make("CartPole", 3, backend="serial") as pool:   # the pool's own option stays
        pool.reset(seed=0)
        pool.reset(options={"reset_mask": np.array([True, False, True])})
        with pytest.raises(TypeError, match="must be a dict"):
            pool.reset(options=[("reset_mask", None)])
