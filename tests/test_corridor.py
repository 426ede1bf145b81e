"""Corridor (envs/corridor/corridor.h), the template env: its rules, the
seed rule, identical outputs across backends, and that walking right beats
random. A new env's test file can start from this one."""
import re
from pathlib import Path

import gymnasium
import numpy as np
import pytest

from shoal.envs.corridor import SPEC
from shoal.pool import Multiprocessing, Serial

import helpers

LEN, MAX_STEPS = 16, 64
ROOT = Path(__file__).resolve().parent.parent


def test_spec_is_read_off_the_header():
    assert (SPEC.name, SPEC.agents, SPEC.max_episode_steps) == ("Corridor", 1, MAX_STEPS)
    assert SPEC.single_observation_space == gymnasium.spaces.Box(0.0, 1.0, (2,), np.float32)
    assert SPEC.single_action_space == gymnasium.spaces.Discrete(2)
    assert SPEC.load_binding().MAX_EPISODE_STEPS == MAX_STEPS


def test_the_guide_shows_the_template_files():
    """docs/new_env.md walks through envs/corridor/: each section titled
    with one of its files shows that file, verbatim, in its first code
    block, and every source file of the folder has its section."""
    guide = (ROOT / "docs" / "new_env.md").read_text()
    shown = dict(re.findall(r"^## \d+\. [^\n]*`(envs/corridor/[^`]+)`\n.*?^```\w*\n(.*?)^```$",
                            guide, re.M | re.S))
    sources = {f"envs/corridor/{p.name}" for p in (ROOT / "envs" / "corridor").iterdir()
               if p.suffix in (".h", ".pyx", ".pxi", ".cu", ".py")}
    assert set(shown) == sources
    for path, block in shown.items():
        assert block == (ROOT / path).read_text(), f"docs/new_env.md's {path} is not the file"


def test_rules():
    pool = Serial("Corridor", 1, seed=3)
    obs, _ = pool.reset(seed=3)
    pos = round(float(obs[0, 0]) * (LEN - 1))
    assert 0 <= pos < LEN // 2 and obs[0, 1] == 0
    obs, rew, term, trunc, _ = pool.step(np.zeros(1, np.int32))   # left: a wall at 0
    assert round(float(obs[0, 0]) * (LEN - 1)) == max(pos - 1, 0)
    assert rew[0] == pytest.approx(-0.01) and not term[0] and not trunc[0]
    steps = 1
    while True:   # right until the end
        obs, rew, term, trunc, _ = pool.step(np.ones(1, np.int32))
        steps += 1
        if term[0]:
            break
    assert rew[0] == 1.0 and obs[0, 0] == 1.0 and not trunc[0]
    assert obs[0, 1] == pytest.approx(steps / MAX_STEPS)
    pool.close()


def env_bytes(pool, i=0):
    """Env i's struct, a view of the pool's public env_states buffer."""
    size = SPEC.load_binding().ENV_BYTES
    return pool.env_states[i * size:(i + 1) * size]


def test_hand_built_states():
    """The binding's place / decode (set and read one env's struct) put an
    env where its rules are tested: one cell from the end, at the wall, one
    step before the time limit."""
    B = SPEC.load_binding()
    assert B.CELLS == LEN
    pool = Serial("Corridor", 3, seed=0)
    pool.reset(seed=0)
    B.place(env_bytes(pool, 0), LEN - 2, steps=5)
    B.place(env_bytes(pool, 1), 0)
    B.place(env_bytes(pool, 2), 3, steps=MAX_STEPS - 1)
    assert B.decode(env_bytes(pool, 0)) == {"pos": LEN - 2, "steps": 5}
    obs, rew, term, trunc, _ = pool.step(np.array([1, 0, 1], np.int32))
    np.testing.assert_allclose(obs[:, 0], np.array([LEN - 1, 0, 4]) / (LEN - 1))
    np.testing.assert_allclose(rew, [1.0, -0.01, -0.01])
    assert term.tolist() == [True, False, False] and trunc.tolist() == [False, False, True]
    assert B.decode(env_bytes(pool, 1)) == {"pos": 0, "steps": 1}   # the wall holds
    with pytest.raises(ValueError, match="pos must be in"):
        B.place(env_bytes(pool, 0), LEN)
    with pytest.raises(ValueError, match="bytes"):
        B.decode(pool.env_states[:3])
    pool.close()


def test_time_limit_truncates():
    pool = Serial("Corridor", 2, seed=0)
    pool.reset(seed=0)
    for t in range(MAX_STEPS):
        obs, rew, term, trunc, _ = pool.step(np.zeros(2, np.int32))   # always left: never arrives
    assert trunc.all() and not term.any()
    pool.close()


def test_seed_rule_and_backends_agree():
    actions = np.random.default_rng(0).integers(0, 2, size=(200, 6)).astype(np.int32)
    runs = []
    for pool in (Serial("Corridor", 6), Multiprocessing("Corridor", 6, num_workers=2),
                 Multiprocessing("Corridor", 6, num_workers=3)):
        runs.append(helpers.rollout(pool, actions, seed=5))
        pool.close()
    helpers.assert_same_arrays(runs[0], runs[1])
    helpers.assert_same_arrays(runs[0], runs[2])
    single = Serial("Corridor", 1)   # env 3 of a pool seeded 5 is a single env seeded 8
    one = helpers.rollout(single, actions[:, 3:4], seed=5 + 3)
    single.close()
    for k in range(len(one)):
        np.testing.assert_array_equal(one[k], runs[0][k][3:4])


def test_walking_right_beats_random():
    def mean_return(policy):
        pool = Serial("Corridor", 64, seed=1)
        pool.reset(seed=1)
        rng = np.random.default_rng(1)
        for _ in range(4 * MAX_STEPS):
            pool.step(policy(rng))
        stats = pool.episode_stats()
        pool.close()
        return stats["mean_return"]
    right = mean_return(lambda rng: np.ones(64, np.int32))
    random = mean_return(lambda rng: rng.integers(0, 2, 64).astype(np.int32))
    assert right > 0.8 > random


def test_arriving_on_the_last_step_is_terminated_and_truncated():
    """As gymnasium's TimeLimit (and sync make_vec, and a user's shorter
    max_episode_steps): the step limit truncates, terminated on that step
    too or not; the C limit used to leave truncated False there."""
    import gymnasium
    actions = [0] * (MAX_STEPS - 15) + [1] * 15   # to the wall at 0, then 15 cells right on the last step
    pool = Serial("Corridor", 1, seed=0)
    pool.reset(seed=0)
    for a in actions:
        obs, rew, term, trunc, _ = pool.step(np.array([a], np.int32))
    assert term[0] and trunc[0] and rew[0] == 1.0
    pool.close()
    sync = gymnasium.make_vec("shoal/Corridor-v0", 1, vectorization_mode="sync")
    sync.reset(seed=0)
    for a in actions:
        _, _, sync_term, sync_trunc, _ = sync.step(np.array([a]))
    assert sync_term[0] and sync_trunc[0]
    sync.close()
