"""Drive: determinism, invariants, learnability, rendering, autoreset / time limit."""
import numpy as np
import pytest
from gymnasium.vector import AutoresetMode

from shoal.envs import spec
from shoal.envs.drive import binding as B
from shoal.pool import Multiprocessing, Serial

import helpers
from helpers import assert_same_arrays

A = B.AGENTS_PER_ENV
E = B.ENV_BYTES
O = B.OBS_ELEMENTS
STATUS_ALIVE = 1
STOP = 3 * B.ACCEL_GRID + 0     # steer straight, brake hard
EGO, PARTNERS, PF, ROAD, RF = 8, 8, 6, 16, 4


def random_actions(num_envs, steps, seed=0):
    return np.random.default_rng(seed).integers(0, B.NUM_DISCRETE_ACTIONS, size=(steps, num_envs * A)).astype(np.int32)


def rollout(pool, actions, seed=11):
    return helpers.rollout(pool, actions, seed)


def states(pool):
    return pool._buffers.env_states


def test_spec_matches_binding():
    s = spec("drive")
    assert s.agents == A == 32
    assert s.obs_shape == (O,) and O == EGO + PARTNERS * PF + ROAD * RF == 120
    assert s.action_nvec == (B.NUM_DISCRETE_ACTIONS,) == (35,)
    assert s.max_episode_steps == B.MAX_EPISODE_STEPS == 200
    assert len(B.MAP_NAMES) == B.NUM_MAP_LAYOUTS >= 3


def test_bit_identical_across_backends_and_worker_counts(no_leaks):
    n, actions = 6, random_actions(6, 230)       # past the time limit: autoresets too
    reference = rollout(Serial("Drive", n), actions)
    assert sum(t.sum() for t in reference[5::5]) > 0         # truncations happened
    assert_same_arrays(rollout(Serial("Drive", n, num_workers=3), actions), reference)
    for workers in (1, 2, 3):
        with Multiprocessing("Drive", n, num_workers=workers) as pool:
            assert_same_arrays(rollout(pool, actions), reference)


def test_env_i_of_a_pool_equals_a_single_env_seeded_s_plus_i():
    n, seed, actions = 4, 500, random_actions(4, 220, seed=3)
    pooled = rollout(Serial("Drive", n), actions, seed=seed)
    for i in range(n):
        rows = slice(i * A, (i + 1) * A)
        single = rollout(Serial("Drive", 1), [a[rows] for a in actions], seed=seed + i)
        assert_same_arrays(single, [x[rows] for x in pooled])
    # and different seeds give different episodes
    assert not np.array_equal(pooled[0][:A], pooled[0][A:2 * A])


def check_rows(obs, rew, term, trunc, mask, table):
    """Row invariants of one step; table is agent_table() after that step."""
    assert np.isfinite(obs).all() and (obs >= -1).all() and (obs <= 1).all()
    dead = ~mask
    assert not obs[dead].any() and not rew[dead].any() and not term[dead].any() and not trunc[dead].any()
    status, controlled = table[..., 4].ravel(), table[..., 5].ravel()
    # a masked row is a controlled agent, alive or leaving this very step
    assert (controlled[mask] == 1).all()
    leaving = mask & (status != STATUS_ALIVE)
    np.testing.assert_array_equal(leaving, mask & term)
    # traffic and absent rows are never the learner's
    assert not mask[controlled == 0].any()
    # every agent still on the map is on the road and inside the world
    alive = (table[..., 4] == STATUS_ALIVE)
    assert (table[..., 6][alive] == 1).all()
    assert (np.abs(table[..., :2][alive]) <= 100).all()
    # live ego rows: speed >= 0, heading cos/sin on the unit circle
    live = obs[mask]
    assert (live[:, 0] >= 0).all()
    np.testing.assert_allclose(live[:, 5] ** 2 + live[:, 6] ** 2, 1, atol=1e-4)
    # partners: nearest first, padding only at the end
    part = live[:, EGO:EGO + PARTNERS * PF].reshape(-1, PARTNERS, PF)
    d = np.hypot(part[..., 0], part[..., 1])
    present = part[..., 5] > 0
    assert (present[:, :-1] | ~present[:, 1:]).all()
    assert (np.diff(np.where(present, d, 1e9), axis=1)[present[:, 1:]] >= -1e-5).all()
    # road points: unit direction or all-zero padding
    road = live[:, EGO + PARTNERS * PF:].reshape(-1, ROAD, RF)
    norm = road[..., 2] ** 2 + road[..., 3] ** 2
    real = norm > 0
    np.testing.assert_allclose(norm[real], 1, atol=1e-4)
    assert not road[~real].any()
    assert real[:, 0].all()                     # every agent on the road sees road


def test_invariants_over_random_steps():
    n, steps = 16, 260
    pool = Serial("Drive", n, seed=5)
    obs, _ = pool.reset(seed=5)
    rng = np.random.default_rng(1)
    prev_mask = pool.masks.copy()
    prev_done = np.zeros(n * A, bool)
    maps_seen, terms, truncs, reset_seen = set(), 0, 0, 0
    for t in range(steps):
        act = rng.integers(0, B.NUM_DISCRETE_ACTIONS, n * A).astype(np.int32)
        obs, rew, term, trunc, _ = pool.step(act)
        mask = pool.masks
        table = B.agent_table(states(pool), n)
        check_rows(obs, rew, term, trunc, mask, table)
        maps, env_steps = B.env_info(states(pool), n)
        maps_seen.update(maps.tolist())
        fresh = np.repeat(env_steps == 0, A)          # this step reset the env
        reset_seen += int(fresh.sum() > 0)
        # no agent comes back or appears mid-episode; a row that left stays empty
        assert not (mask & ~fresh & ~prev_mask).any()
        assert not (mask & ~fresh & prev_done).any()
        # a reset step: reward and flags zero
        assert not rew[fresh].any() and not term[fresh].any() and not trunc[fresh].any()
        # each env with a masked row at step 200 truncated them all, the
        # ones that terminated on it too (gymnasium's TimeLimit)
        trunc_envs = np.repeat(env_steps == B.MAX_EPISODE_STEPS, A)
        np.testing.assert_array_equal(trunc, mask & trunc_envs)
        terms += int(term.sum())
        truncs += int(trunc.sum())
        prev_mask, prev_done = mask.copy(), (term | trunc)
    assert terms > 100 and truncs > 0 and reset_seen > 0
    assert len(maps_seen) >= 4
    pool.close()


def test_reset_spawns_agents_on_every_map():
    n = 60
    pool = Serial("Drive", n, seed=0)
    table = B.agent_table(states(pool), n)
    maps, steps = B.env_info(states(pool), n)
    assert set(maps.tolist()) == set(range(B.NUM_MAP_LAYOUTS)) and not steps.any()
    alive = table[..., 4] == STATUS_ALIVE
    controlled = alive & (table[..., 5] == 1)
    assert (controlled.sum(1) >= 1).all() and (alive.sum(1) >= 8).all()
    assert (table[..., 6][alive] == 1).all()
    # controlled rows come first, traffic after, and only controlled rows are masked
    np.testing.assert_array_equal(pool.masks.reshape(n, A), controlled)
    assert (alive & (table[..., 5] == 0)).any()          # some traffic exists
    # spawned agents do not overlap
    xy = table[..., :2]
    for i in range(n):
        p = xy[i][alive[i]]
        d = np.hypot(*(p[:, None] - p[None]).transpose(2, 0, 1)) + np.eye(len(p)) * 1e3
        assert d.min() >= 7.99
    pool.close()


def mean_return(policy, n=32, steps=300, seed=42):
    pool = Serial("Drive", n, seed=seed)
    pool.reset(seed=seed)
    rng = np.random.default_rng(0)
    act = np.zeros(n * A, np.int32)
    goals = 0
    for _ in range(steps):
        if policy == "heuristic":
            B.heuristic_actions(states(pool), n, act)
        else:
            act[:] = rng.integers(0, B.NUM_DISCRETE_ACTIONS, n * A)
        _, rew, term, _, _ = pool.step(act)
        goals += int((term & (rew > 0.5)).sum())
    stats = pool.episode_stats()
    pool.close()
    return stats["mean_return"], goals


def test_lane_follower_beats_random_actions():
    heuristic, heuristic_goals = mean_return("heuristic")
    random, random_goals = mean_return("random")
    assert heuristic > 10 and random < 0
    assert heuristic > random + 20
    assert heuristic_goals > 10 * max(random_goals, 1)


def test_render_rgb_and_text_follow_the_env():
    pool = Serial("Drive", 2, seed=9)
    env0 = states(pool)[:E]
    h, w = B.RENDER_SHAPE
    first = B.render_rgb(env0, np.zeros((h, w, 3), np.uint8)).copy()
    text0 = B.render_text(env0)
    colors = {tuple(c) for c in first.reshape(-1, 3)}
    assert (105, 105, 105) in colors and (34, 52, 34) in colors and len(colors) > 4   # road, grass, cars
    lines = text0.splitlines()
    assert lines[0].startswith("drive map") and "step 0/200" in lines[0]
    assert len(lines) == 1 + B.TEXT_SHAPE[0] and all(len(l) == B.TEXT_SHAPE[1] for l in lines[1:])
    assert "." in text0 and "0" in "".join(lines[1:])
    act = np.zeros(2 * A, np.int32)
    for _ in range(10):
        B.heuristic_actions(states(pool), 2, act)
        pool.step(act)
    second = B.render_rgb(env0, np.zeros((h, w, 3), np.uint8))
    assert (second != first).any()
    assert B.render_text(env0) != text0 and "step 10/200" in B.render_text(env0)
    with pytest.raises(ValueError):
        B.render_rgb(env0, np.zeros((h, w), np.uint8))
    pool.close()


@pytest.mark.parametrize("mode", [AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP])
def test_time_limit_truncates_live_rows_then_autoresets(mode):
    n = 8
    pool = Serial("Drive", n, seed=21, autoreset_mode=mode)
    pool.reset(seed=21)
    stop = np.full(n * A, STOP, np.int32)        # everyone brakes and waits out the clock
    for t in range(B.MAX_EPISODE_STEPS - 1):
        _, _, term, trunc, _ = pool.step(stop)
        assert not trunc.any()
    live_before = pool.masks.copy()
    assert live_before.sum() > n * 8                # braking cars mostly survive
    obs, rew, term, trunc, info = pool.step(stop)
    np.testing.assert_array_equal(trunc, live_before & ~term)
    stats = pool.episode_stats()
    assert stats["episodes"] == n and stats["mean_length"] == B.MAX_EPISODE_STEPS
    if mode == AutoresetMode.SAME_STEP:
        # obs is already the next episode; the last obs is in final_obs
        assert (B.env_info(states(pool), n)[1] == 0).all()
        assert info["_final_obs"].any()
        ended = info["_final_obs"]
        assert (np.abs(info["final_obs"][ended]) <= 1).all()
    else:
        obs, rew, term, trunc, _ = pool.step(stop)    # action ignored: the reset step
        assert not rew.any() and not term.any() and not trunc.any()
        assert (B.env_info(states(pool), n)[1] == 0).all()
    assert pool.masks.any() and (obs[pool.masks][:, 7] == 1).all()   # full time left
    pool.close()


def test_episode_terminates_when_every_controlled_agent_is_gone():
    n = 32
    pool = Serial("Drive", n, seed=4, autoreset_mode="same_step")
    pool.reset(seed=4)
    throttle = np.full(n * A, 3 * B.ACCEL_GRID + 4, np.int32)   # straight, full throttle
    early = set()
    for t in range(B.MAX_EPISODE_STEPS - 1):
        before = pool._buffers.episodes["finished"].copy()
        _, _, term, trunc, info = pool.step(throttle)
        assert not trunc.any()
        ended = np.flatnonzero(pool._buffers.episodes["finished"] > before)
        for i in ended:    # an early end: every row still live this step left it
            rows = slice(i * A, (i + 1) * A)
            final = info["_final_obs"][rows]
            assert final.any() and (term[rows] == final).all()
        early.update(ended.tolist())
    assert len(early) == n    # every env ended before the time limit: goals, crashes, road ends
    pool.close()
