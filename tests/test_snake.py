"""Snake (envs/snake/snake.h): rules, invariants, seed rule and determinism
across backends, heuristic vs random, rendering, time limit and autoreset."""
import numpy as np
import pytest

from shoal.envs.snake import SPEC
from shoal.envs.snake import binding as B
from shoal.pool import Multiprocessing, Serial

import helpers
from helpers import assert_same_arrays

A = B.SNAKES
UP, DOWN, LEFT, RIGHT = 0, 1, 2, 3
HEAD0, BODY0 = 5, 4


def env_bytes(pool, i=0):
    return pool._buffers.env_states[i * B.ENV_BYTES:(i + 1) * B.ENV_BYTES]


def random_actions(num_rows, steps, seed=0):
    return np.random.default_rng(seed).integers(0, 4, size=(steps, num_rows)).astype(np.int32)


def reference_obs(state, i):
    """Snake i's 11 x 11 view computed from the decoded grid, in numpy."""
    r = B.VIEW // 2
    padded = np.pad(state["grid"], r, constant_values=1)
    x, y = state["bodies"][i][0]
    v = padded[y:y + B.VIEW, x:x + B.VIEW].astype(np.int32)
    own = (v | 1) == HEAD0 + 2 * i
    out = np.where(v < 4, v, np.where(own, 3, 5) + (v & 1))
    return out.astype(np.uint8).ravel()


def check_state(state, obs_rows):
    """Grid and bodies agree; bodies contiguous, on the map, disjoint; the
    food count is kept; every obs row is the window round its head."""
    grid = state["grid"]
    seen = np.zeros_like(grid, dtype=bool)
    for i, body in enumerate(state["bodies"]):
        assert 1 <= len(body) <= B.MAX_LEN
        for k, (x, y) in enumerate(body):
            assert 0 <= x < B.GRID_SIZE and 0 <= y < B.GRID_SIZE
            assert grid[y, x] == (HEAD0 if k == 0 else BODY0) + 2 * i
            assert not seen[y, x]
            seen[y, x] = True
        for (x0, y0), (x1, y1) in zip(body, body[1:]):
            assert abs(x0 - x1) + abs(y0 - y1) == 1
    assert (grid >= BODY0).sum() == seen.sum()
    assert (grid == 2).sum() == B.FOOD
    assert not np.isin(grid, [1, 3]).any()  # no wall or unused code inside
    for i in range(A):
        np.testing.assert_array_equal(obs_rows[i], reference_obs(state, i))


def rollout(pool, actions, seed=7):
    return helpers.rollout(pool, actions, seed)


def test_spec_matches_binding():
    assert SPEC.agents == A == 8
    assert SPEC.obs_shape == (B.VIEW * B.VIEW,) and B.OBS_DTYPE == np.uint8
    assert B.ACT_DTYPE == np.int32 and SPEC.action_nvec == (4,)
    assert SPEC.max_episode_steps == B.MAX_STEPS


def test_bit_identical_across_backends_and_worker_counts(no_leaks):
    n, steps = 6, 300
    actions = random_actions(n * A, steps)
    reference = rollout(Serial("snake", n), actions)
    assert sum(t.sum() for t in reference[4::5]) > 50  # plenty of deaths (respawns)
    assert sum((r > 0).sum() for r in reference[3::5]) > 5  # and some food eaten
    assert_same_arrays(rollout(Serial("snake", n, num_workers=3), actions), reference)
    for workers in (1, 2, 3):
        with Multiprocessing("snake", n, num_workers=workers) as pool:
            assert_same_arrays(rollout(pool, actions), reference)


def test_seed_rule_env_i_equals_single_env_with_seed_plus_i():
    n, steps, seed = 4, 200, 31
    actions = random_actions(n * A, steps, seed=2)
    pool_out = rollout(Serial("snake", n), actions, seed=seed)
    for i in range(n):
        rows = slice(i * A, (i + 1) * A)
        single = rollout(Serial("snake", 1), actions[:, rows], seed=seed + i)
        assert_same_arrays(single, [x[rows] for x in pool_out])
    assert not np.array_equal(pool_out[0][:A], pool_out[0][A:2 * A])  # envs differ


def test_invariants_over_random_steps():
    n = 16
    pool = Serial("snake", n, seed=3)
    space = pool.single_observation_space
    obs = pool.obs
    check_state(B.decode(env_bytes(pool, 0)), obs[:A])
    deaths = 0
    for t, a in enumerate(random_actions(n * A, 900, seed=5)):
        obs, rew, term, trunc, _ = pool.step(a)
        assert pool.masks.all()  # respawn is immediate: every row always live
        assert obs.max() <= 6 and space.contains(obs[t % (n * A)])
        assert (obs[:, B.VIEW * B.VIEW // 2] == 4).all()  # own head at the centre
        assert ((obs == 4).sum(axis=1) == 1).all()
        assert np.isin(rew, [-1, 0, 1]).all()
        np.testing.assert_array_equal(term, rew < 0)  # death <=> terminal <=> -1
        assert not trunc.any()
        deaths += term.sum()
        if t % 10 == 0 or term[:A].any():
            state = B.decode(env_bytes(pool, 0))
            check_state(state, obs[:A])
            assert state["steps"] == t + 1
            for i in np.flatnonzero(term[:A]):  # just respawned
                assert len(state["bodies"][i]) == 1 and state["grow"][i] == B.START_LEN - 1
    assert deaths > 500


def scenario(pool, bodies, dirs, food):
    B.place(env_bytes(pool), bodies, dirs, food)


def test_rules_collisions_growth_tails_and_reversal():
    pool = Serial("snake", 1, seed=0)
    bodies = [
        [(10, 10)], [(12, 10)],                          # 0, 1: head-to-head at (11, 10)
        [(0, 5), (1, 5)],                                # 2: into the west wall
        [(20, 20), (20, 21)],                            # 3: eats the food at (20, 19)
        [(5, 5), (6, 5), (6, 6), (5, 6)],                # 4: into its own tail cell (it moves on)
        [(25, 25), (26, 25)],                            # 5: asks to reverse: goes straight
        [(15, 15), (15, 16), (16, 16), (16, 15), (16, 14)],  # 6: into its own body
        [(21, 21)],                                      # 7: into 3's tail, which stays (3 grows)
    ]
    dirs = [RIGHT, LEFT, LEFT, UP, LEFT, LEFT, UP, LEFT]
    scenario(pool, bodies, dirs, food=[(20, 19)])
    act = np.array([RIGHT, LEFT, LEFT, UP, DOWN, RIGHT, RIGHT, LEFT], np.int32)
    obs, rew, term, trunc, _ = pool.step(act)
    np.testing.assert_array_equal(rew, [-1, -1, -1, 1, 0, 0, -1, -1])
    np.testing.assert_array_equal(term, [1, 1, 1, 0, 0, 0, 1, 1])
    assert not trunc.any() and pool.masks.all()
    state = B.decode(env_bytes(pool))
    assert state["bodies"][3] == [(20, 19), (20, 20), (20, 21)]
    assert state["bodies"][4] == [(5, 6), (5, 5), (6, 5), (6, 6)]
    assert state["bodies"][5] == [(24, 25), (25, 25)] and state["dirs"][5] == LEFT
    for i in (0, 1, 2, 6, 7):  # respawned at once, one cell long
        assert len(state["bodies"][i]) == 1 and state["grow"][i] == B.START_LEN - 1
    assert (state["grid"] == 2).sum() == 1  # the eaten food was replaced
    for i in range(A):
        np.testing.assert_array_equal(obs[i], reference_obs(state, i))


def test_head_on_swap_kills_both_and_growth_unrolls():
    pool = Serial("snake", 1, seed=0)
    bodies = [[(10, 10), (9, 10)], [(11, 10), (12, 10)]] + [[(2 + 4 * k, 20)] for k in range(6)]
    scenario(pool, bodies, [RIGHT, LEFT] + [UP] * 6, food=[])
    act = np.array([RIGHT, LEFT] + [UP] * 6, np.int32)
    _, rew, term, _, _ = pool.step(act)
    np.testing.assert_array_equal(term, [1, 1, 0, 0, 0, 0, 0, 0])
    np.testing.assert_array_equal(rew, [-1, -1, 0, 0, 0, 0, 0, 0])
    # A fresh snake grows to START_LEN over its first steps, then keeps it.
    # (No food on this grid, and the heuristic steers clear of walls.)
    lengths, heuristic = [], np.zeros(A, np.int32)
    for _ in range(4):
        B.heuristic_actions(pool._buffers.env_states, 1, heuristic)
        _, _, term, _, _ = pool.step(heuristic)
        assert not term.any()
        lengths.append([len(b) for b in B.decode(env_bytes(pool))["bodies"][:2]])
    assert lengths == [[2, 2], [3, 3], [3, 3], [3, 3]]


def mean_row_return(policy, n=8, steps=600, seed=11):
    pool = Serial("snake", n, seed=seed)
    total, food, deaths = 0.0, 0, 0
    actions = np.zeros(n * A, np.int32)
    rand = random_actions(n * A, steps, seed=seed)
    for t in range(steps):
        if policy == "heuristic":
            B.heuristic_actions(pool._buffers.env_states, n, actions)
        else:
            actions[:] = rand[t]
        _, rew, term, _, _ = pool.step(actions)
        total += rew.sum()
        food += (rew > 0).sum()
        deaths += term.sum()
    return total / (n * A), food, deaths


def test_heuristic_beats_random():
    h_return, h_food, h_deaths = mean_row_return("heuristic")
    r_return, r_food, r_deaths = mean_row_return("random")
    assert r_return < 0 < h_return
    assert h_return > r_return + 5
    assert h_food > 3 * r_food and h_deaths < r_deaths / 3


def test_render_rgb_and_text_show_the_grid_and_change_as_it_moves():
    pool = Serial("snake", 2, seed=4)
    frame = np.zeros(B.RENDER_SHAPE + (3,), np.uint8)
    B.render_rgb(env_bytes(pool), frame)
    text = B.render_text(env_bytes(pool))
    lines = text.splitlines()
    side = B.GRID_SIZE + 2
    assert len(lines) == side and all(len(line) == side for line in lines)
    assert lines[0] == "#" * side and all(line[0] == line[-1] == "#" for line in lines)
    assert text.count("*") == B.FOOD
    for i in range(A):
        assert text.count(chr(ord("A") + i)) == 1
    colours = {tuple(c) for c in frame.reshape(-1, 3)}
    assert len(colours) >= 3 + A  # empty, wall, food and every head colour
    assert frame[0, 0].tolist() == frame[-1, -1].tolist()  # wall corners
    for _ in range(5):
        pool.step(random_actions(2 * A, 1)[0])
    frame2 = np.zeros_like(frame)
    B.render_rgb(env_bytes(pool), frame2)
    assert not np.array_equal(frame, frame2)
    assert B.render_text(env_bytes(pool)) != text
    other = np.zeros_like(frame)
    B.render_rgb(env_bytes(pool, 1), other)
    assert not np.array_equal(other, frame2)  # env 1 is drawn, not env 0
    with pytest.raises(ValueError):
        B.render_rgb(env_bytes(pool), np.zeros((10, 10, 3), np.uint8))


def test_time_limit_truncates_all_rows_then_next_step_autoreset():
    pool = Serial("snake", 2, seed=9)
    actions = random_actions(2 * A, B.MAX_STEPS, seed=1)
    for t in range(B.MAX_STEPS - 1):
        _, _, _, trunc, _ = pool.step(actions[t])
        assert not trunc.any()
    _, _, _, trunc, _ = pool.step(actions[-1])
    assert trunc.all() and pool.masks.all()
    stats = pool.episode_stats()
    assert stats["episodes"] == 2 and stats["mean_length"] == B.MAX_STEPS
    obs, rew, term, trunc, _ = pool.step(actions[0])  # the reset step
    assert not rew.any() and not term.any() and not trunc.any() and pool.masks.all()
    state = B.decode(env_bytes(pool))
    assert state["steps"] == 0 and all(len(b) == 1 for b in state["bodies"])
    check_state(state, obs[:A])


def test_same_step_autoreset_keeps_final_obs():
    pool = Serial("snake", 1, seed=9, autoreset_mode="same_step")
    actions = random_actions(A, B.MAX_STEPS, seed=1)
    for t in range(B.MAX_STEPS):
        obs, _, _, trunc, info = pool.step(actions[t])
    assert trunc.all() and info["_final_obs"].all()
    state = B.decode(env_bytes(pool))
    assert state["steps"] == 0
    check_state(state, obs)  # obs is the new episode's first view
    assert not np.array_equal(info["final_obs"], obs)
