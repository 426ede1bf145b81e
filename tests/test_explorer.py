"""Explorer (envs/explorer: Explore task, envs/explorer_pointgoal: PointGoal):
floorplans, ray casting against a numpy reference, determinism under the seed
rule, invariants under random play, agents leaving, time limit and autoreset,
the scripted policy against random play, rendering."""
import numpy as np
import pytest

from shoal.envs import spec
from shoal.pool import Multiprocessing, Serial

import helpers
from helpers import assert_same_arrays

TASKS = ["explorer", "explorer_pointgoal"]
AGENTS, RAYS, MAX_STEPS = 4, 32, 500
FOV, HEADINGS, RADIUS, MAP = np.pi / 2, 32, 0.25, 16


def binding(name):
    return spec(name).load_binding()


def random_actions(rows, steps, seed=0):
    return np.random.default_rng(seed).integers(0, 3, size=(steps, rows, 2)).astype(np.int32)


def rollout(pool, actions, seed=3):
    return helpers.rollout(pool, actions, seed)


def env_bytes(pool, i):
    size = binding(pool.spec.name).ENV_BYTES
    return pool._buffers.env_states[i * size:(i + 1) * size]


# ---- floorplans ---------------------------------------------------------------

def test_floorplans_tile_the_map_and_every_room_is_reachable():
    b = binding("explorer")
    plans = [b.floorplan(k) for k in range(b.NUM_PLANS)]
    assert len({w.tobytes() for w, _, _ in plans}) > b.NUM_PLANS // 2  # varied
    for walls, colours, rooms in plans:
        assert len(rooms) >= 2 and len(walls) >= 6
        assert np.all((walls[:, 0] == walls[:, 2]) | (walls[:, 1] == walls[:, 3]))  # axis-aligned
        assert np.all(walls == np.round(walls)) and walls.min() >= 0 and walls.max() <= MAP
        assert np.all((colours >= 0) & (colours < 8))
        assert np.all(rooms[:, 2] - rooms[:, 0] >= 3) and np.all(rooms[:, 3] - rooms[:, 1] >= 3)
        assert (np.prod(rooms[:, 2:] - rooms[:, :2], axis=1)).sum() == MAP * MAP  # rooms tile it
        # Flood fill over 1x1 cells; a wall on a cell edge blocks that edge.
        blocked_x = np.zeros((MAP + 1, MAP), bool)  # edge at x = i between y in [j, j+1]
        blocked_y = np.zeros((MAP, MAP + 1), bool)  # edge at y = j between x in [i, i+1]
        for x0, y0, x1, y1 in walls.astype(int):
            if x0 == x1:
                blocked_x[x0, min(y0, y1):max(y0, y1)] = True
            else:
                blocked_y[min(x0, x1):max(x0, x1), y0] = True
        seen, stack = {(0, 0)}, [(0, 0)]
        while stack:
            i, j = stack.pop()
            for ni, nj, wall in ((i + 1, j, blocked_x[i + 1, j]), (i - 1, j, blocked_x[i, j]),
                                 (i, j + 1, blocked_y[i, j + 1]), (i, j - 1, blocked_y[i, j])):
                if 0 <= ni < MAP and 0 <= nj < MAP and not wall and (ni, nj) not in seen:
                    seen.add((ni, nj))
                    stack.append((ni, nj))
        assert len(seen) == MAP * MAP


# ---- observations against a numpy ray caster ------------------------------------

def reference_rays(walls, colours, states, a):
    """Distance and colour code per ray of agent a: generic segment and circle tests."""
    x, y, heading = states[a, 0], states[a, 1], states[a, 2]
    angles = heading * 2 * np.pi / HEADINGS + FOV * (0.5 - (np.arange(RAYS) + 0.5) / RAYS)
    d = np.stack([np.cos(angles), np.sin(angles)], 1)
    best, hit = np.full(RAYS, np.hypot(MAP, MAP)), np.zeros(RAYS, int)
    for (x0, y0, x1, y1), c in zip(walls, colours):
        e = np.array([x1 - x0, y1 - y0])
        q = np.array([x0 - x, y0 - y])
        den = d[:, 0] * e[1] - d[:, 1] * e[0]
        with np.errstate(divide="ignore", invalid="ignore"):
            t = (q[0] * e[1] - q[1] * e[0]) / den
            u = (q[0] * d[:, 1] - q[1] * d[:, 0]) / den
        ok = (t > 0) & (u >= 0) & (u <= 1) & (t < best)
        best[ok], hit[ok] = t[ok], c
    for j in range(AGENTS):
        if j == a or not states[j, 3]:
            continue
        p = states[j, :2] - (x, y)
        b = d @ p
        disc = b * b - (p @ p - RADIUS ** 2)
        t = b - np.sqrt(np.maximum(disc, 0))
        ok = (disc >= 0) & (t > 0) & (t < best)
        best[ok], hit[ok] = t[ok], 8
    return best, hit


@pytest.mark.parametrize("name", TASKS)
def test_obs_match_a_numpy_ray_caster(name):
    b, n = binding(name), 6
    rng_range = b.RAY_RANGE
    with Serial(name, n, num_workers=1) as pool:
        obs, _ = pool.reset(seed=11)
        actions = random_actions(n * AGENTS, 40, seed=5)
        for t in range(41):
            if t % 10 == 0:
                states, plans, _ = b.agent_states(pool._buffers.env_states, n)
                for i in range(n):
                    walls, colours, _ = b.floorplan(plans[i])
                    for a in range(AGENTS):
                        row = obs[i * AGENTS + a]
                        dist, hit = reference_rays(walls, colours, states[i], a)
                        np.testing.assert_allclose(row[:RAYS] * rng_range, dist, atol=2e-4)
                        np.testing.assert_allclose(row[RAYS:2 * RAYS], (hit + 1) / 9, atol=1e-6)
                        if name == "explorer_pointgoal":
                            h = states[i, a, 2] * 2 * np.pi / HEADINGS
                            g = states[i, a, 6:8] - states[i, a, :2]
                            ego = [g @ (np.cos(h), np.sin(h)), g @ (-np.sin(h), np.cos(h))]
                            np.testing.assert_allclose(row[66:68] * rng_range, ego, atol=1e-4)
            if t < 40:
                obs, *_ = pool.step(actions[t])


# ---- determinism -------------------------------------------------------------------

@pytest.mark.parametrize("name", TASKS)
def test_bit_identical_across_backends_and_worker_counts(name, no_leaks):
    n, steps = 6, 560  # past the 500-step limit: autoresets included
    actions = random_actions(n * AGENTS, steps)
    reference = rollout(Serial(name, n), actions)
    assert sum(tr.sum() for tr in reference[5::5]) > 0  # episodes did end
    assert_same_arrays(rollout(Serial(name, n, num_workers=3), actions), reference)
    for workers in (1, 2, 3):
        with Multiprocessing(name, n, num_workers=workers) as pool:
            assert_same_arrays(rollout(pool, actions), reference)


@pytest.mark.parametrize("name", TASKS)
def test_env_i_of_a_pool_is_a_single_env_seeded_s_plus_i(name):
    n, steps, seed = 5, 120, 40
    actions = random_actions(n * AGENTS, steps, seed=2)
    whole = rollout(Serial(name, n, num_workers=1), actions, seed=seed)
    for i in range(n):
        rows = slice(i * AGENTS, (i + 1) * AGENTS)
        single = rollout(Serial(name, 1, num_workers=1), actions[:, rows], seed=seed + i)
        assert_same_arrays(single, [x[rows] for x in whole])
    # different seeds give different floorplans / starts
    assert not np.array_equal(whole[0][:AGENTS], whole[0][AGENTS:2 * AGENTS])


# ---- invariants under random play -------------------------------------------------

@pytest.mark.parametrize("name", TASKS)
def test_invariants_under_random_play(name):
    b, n, steps = binding(name), 32, 1200
    sp = spec(name)
    low, high = sp.obs_low, sp.obs_high
    rng = np.random.default_rng(1)
    leaves = 0
    with Serial(name, n, num_workers=1) as pool:
        obs, _ = pool.reset(seed=9)
        for t in range(steps):
            if name == "explorer_pointgoal" and t % 7 == 0:
                # put some goals under their agents so agents reach goals and leave
                states, _, _ = b.agent_states(pool._buffers.env_states, n)
                for i, a in zip(rng.integers(0, n, 6), rng.integers(0, AGENTS, 6)):
                    b.set_goal(pool._buffers.env_states, i, a, *states[i, a, :2])
            obs, rew, term, trunc, _ = pool.step(rng.integers(0, 3, (n * AGENTS, 2)).astype(np.int32))
            mask = pool.masks
            assert np.all(obs >= low) and np.all(obs <= high)
            absent = ~mask
            assert np.all(obs[absent] == 0) and np.all(rew[absent] == 0)
            assert not term[absent].any() and not trunc[absent].any()
            # a row is present while its agent is, plus the step it leaves (with term)
            states, plans, _ = b.agent_states(pool._buffers.env_states, n)
            active = states[:, :, 3].reshape(-1).astype(bool)
            assert np.array_equal(mask, active | term)
            assert not (term & active).any()
            leaves += term.sum()
            if name == "explorer":
                assert not term.any()
            if t % 25 == 0:
                xy = states[:, :, :2]
                assert np.all(xy >= RADIUS - 1e-5) and np.all(xy <= MAP - RADIUS + 1e-5)
                for i in range(n):
                    walls, _, _ = b.floorplan(plans[i])
                    for a in range(AGENTS):
                        p = states[i, a, :2]
                        lo, hi = np.minimum(walls[:, :2], walls[:, 2:]), np.maximum(walls[:, :2], walls[:, 2:])
                        closest = np.clip(p, lo, hi)
                        assert np.hypot(*(closest - p).T).min() >= RADIUS - 1e-5
    if name == "explorer_pointgoal":
        assert leaves > 10


def test_pointgoal_agents_leave_after_three_goals_and_the_episode_ends():
    b = binding("explorer_pointgoal")
    with Serial("explorer_pointgoal", 1, num_workers=1) as pool:
        pool.reset(seed=4)
        stay = np.zeros((AGENTS, 2), np.int32)
        states = pool._buffers.env_states
        for agent in range(AGENTS):
            for goal in range(3):
                s, _, _ = b.agent_states(states, 1)
                b.set_goal(states, 0, agent, s[0, agent, 0] + 0.3, s[0, agent, 1])
                obs, rew, term, trunc, _ = pool.step(stay)
                assert rew[agent] == pytest.approx(5.0, abs=1e-5)  # bonus, no progress
                assert pool.masks[agent] and term[agent] == (goal == 2)
            if agent == AGENTS - 1:
                break
            for _ in range(2):  # gone: zero, masked rows; others go on
                obs, rew, term, trunc, _ = pool.step(stay)
                assert not pool.masks[:agent + 1].any() and np.all(obs[:agent + 1] == 0)
                assert np.all(rew[:agent + 1] == 0) and not term[:agent + 1].any()
                assert pool.masks[agent + 1:].all()
        # the last agent left: the episode is over, the next step resets everything
        assert pool.episode_stats()["episodes"] == 1
        obs, rew, term, trunc, _ = pool.step(stay)
        assert pool.masks.all() and not (term | trunc).any() and np.all(rew == 0)
        s, _, steps = b.agent_states(states, 1)
        assert steps[0] == 0 and s[0, :, 3].all() and not s[0, :, 4].any()


# ---- time limit and autoreset ------------------------------------------------------

@pytest.mark.parametrize("mode", ["next_step", "same_step"])
def test_time_limit_truncates_and_autoreset_follows(mode):
    b, n = binding("explorer"), 3
    actions = random_actions(n * AGENTS, MAX_STEPS + 2, seed=8)
    with Serial("explorer", n, num_workers=1, autoreset_mode=mode) as pool:
        pool.reset(seed=21)
        for t in range(MAX_STEPS - 1):
            obs, rew, term, trunc, info = pool.step(actions[t])
            assert not trunc.any() and not term.any()
        plans_before = b.agent_states(pool._buffers.env_states, n)[1]
        obs, rew, term, trunc, info = pool.step(actions[MAX_STEPS - 1])
        assert trunc.all() and not term.any()
        _, plans, steps = b.agent_states(pool._buffers.env_states, n)
        if mode == "next_step":
            assert np.all(steps == MAX_STEPS)
            np.testing.assert_allclose(obs[:, 67], 1.0)  # elapsed fraction of the last obs
            obs, rew, term, trunc, info = pool.step(actions[MAX_STEPS])
            assert np.all(rew == 0) and not (term | trunc).any()
        else:
            assert info["_final_obs"].all()
            np.testing.assert_allclose(info["final_obs"][:, 67], 1.0)
        _, plans, steps = b.agent_states(pool._buffers.env_states, n)
        assert np.all(steps == 0) and np.all(obs[:, 67] == 0)  # a fresh episode
        assert pool.masks.all()
        assert pool.episode_stats()["episodes"] == n


# ---- learnability ------------------------------------------------------------------

def mean_return(name, policy, n=48, seed=123):
    b = binding(name)
    rng = np.random.default_rng(0)
    with Serial(name, n, num_workers=1) as pool:
        obs, _ = pool.reset(seed=seed)
        act = np.zeros((n * AGENTS, 2), np.int32)
        total = 0.0
        for _ in range(MAX_STEPS):
            if policy == "heuristic":
                b.heuristic_actions(obs, act)
            else:
                act = rng.integers(0, 3, (n * AGENTS, 2)).astype(np.int32)
            obs, rew, *_ = pool.step(act)
            total += rew.sum()
        return total / (n * AGENTS)


@pytest.mark.parametrize("name,margin", [("explorer", 1.6), ("explorer_pointgoal", None)])
def test_heuristic_beats_random(name, margin):
    heuristic, random = mean_return(name, "heuristic"), mean_return(name, "random")
    if name == "explorer":
        assert random > 0.3  # random play sees something
        assert heuristic > margin * random, (heuristic, random)
    else:
        assert abs(random) < 0.5  # random progress averages out
        assert heuristic > random + 1.0, (heuristic, random)


# ---- rendering ---------------------------------------------------------------------

@pytest.mark.parametrize("name", TASKS)
def test_render_rgb_and_text_show_the_env_and_change_as_it_moves(name):
    b = binding(name)
    assert b.RENDER_SHAPE == (256, 256)
    with Serial(name, 2, num_workers=1) as pool:
        pool.reset(seed=6)
        frames, texts = [], []
        fwd = np.tile(np.array([[1, 1]], np.int32), (2 * AGENTS, 1))
        for _ in range(2):
            img = np.zeros((*b.RENDER_SHAPE, 3), np.uint8)
            b.render_rgb(env_bytes(pool, 0), img)
            frames.append(img)
            texts.append(b.render_text(env_bytes(pool, 0)))
            for _ in range(8):
                pool.step(fwd)
        img = frames[0]
        assert len(np.unique(img.reshape(-1, 3), axis=0)) > 5  # floor, walls, agents
        assert not np.array_equal(frames[0], frames[1])
        assert texts[0] != texts[1]
        lines = texts[0].splitlines()
        assert lines[0].startswith(f"Explorer/{b.TASK} plan")
        grid = lines[1 + AGENTS:]
        assert len(grid) == 33 and all(len(line) == 65 for line in grid)
        assert grid[0] == "#" * 65 and grid[-1] == "#" * 65
        for a in range(AGENTS):
            assert str(a) in "".join(grid)
        if name == "explorer_pointgoal":
            assert "a" in "".join(grid)
        with pytest.raises(ValueError):
            b.render_rgb(env_bytes(pool, 0), np.zeros((10, 10, 3), np.uint8))
