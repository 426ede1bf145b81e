"""pettingzoo: ParallelEnvPool (any ParallelEnv as rows) and ShoalParallelEnv."""
import functools

import numpy as np
import pytest
from gymnasium import spaces
from pettingzoo import ParallelEnv
from pettingzoo.test import parallel_api_test, parallel_seed_test

from shoal.pettingzoo_env import ShoalParallelEnv
from shoal.pool import Serial
from shoal.pool.pettingzoo_pool import ParallelEnvPool, padded_space


class Hunters(ParallelEnv):
    """A small multi-agent env that exercises everything rows must handle:
    agents with different observation shapes (hunters 5, scout 3), an agent
    that spawns late (the scout, at step 2), agents that leave at random
    (from the env's own RNG), a time limit, and sparse infos."""

    metadata = {"name": "hunters", "render_modes": [], "is_parallelizable": True}

    def __init__(self, max_steps=12):
        self.possible_agents = ["hunter_0", "hunter_1", "scout"]
        self.max_steps = max_steps
        self.render_mode = None
        self._obs = {a: spaces.Box(-10, 10, (5,), np.float32) for a in self.possible_agents[:2]}
        self._obs["scout"] = spaces.Box(-10, 10, (3,), np.float32)
        self._act = spaces.Discrete(3)
        self.rng = np.random.default_rng()

    def observation_space(self, agent):
        return self._obs[agent]

    def action_space(self, agent):
        return self._act

    def _observe(self, agent):
        size = self._obs[agent].shape[0]
        return (self.state[:size] + self.possible_agents.index(agent)).astype(np.float32)

    def reset(self, seed=None, options=None):
        if seed is not None:
            self.rng = np.random.default_rng(seed)
        self.t = 0
        self.state = self.rng.uniform(-1, 1, 5)
        self.agents = ["hunter_0", "hunter_1"]
        return {a: self._observe(a) for a in self.agents}, {a: {} for a in self.agents}

    def step(self, actions):
        self.t += 1
        self.state = np.clip(self.state + 0.1 * self.rng.standard_normal(5), -5, 5)
        acted = list(self.agents)
        if self.t == 2:
            self.agents.append("scout")  # spawns: first seen in this step's output
        rewards = {a: float(actions[a]) - float(self.state[0]) if a in actions else 0.0
                   for a in self.agents}
        terminations = {a: bool(self.rng.random() < 0.1) for a in self.agents}
        truncations = {a: self.t >= self.max_steps for a in self.agents}
        infos = {a: ({"hits": int(self.t)} if a == "hunter_1" and self.t % 3 == 0 else {})
                 for a in self.agents}
        observations = {a: self._observe(a) for a in self.agents}
        assert set(acted) <= set(actions), "every live agent gets an action"
        self.agents = [a for a in self.agents if not (terminations[a] or truncations[a])]
        return observations, rewards, terminations, truncations, infos


def expected_rows(env, observations, rewards=None, terminations=None, truncations=None):
    """What one env's rows must hold: padded obs, mask, reward, flags."""
    agents = env.possible_agents
    obs = np.zeros((len(agents), 5), np.float32)
    mask, rew = np.zeros(len(agents), bool), np.zeros(len(agents))
    term, trunc = np.zeros(len(agents), bool), np.zeros(len(agents), bool)
    for k, a in enumerate(agents):
        if a in observations:
            o = observations[a]
            obs[k, :len(o)] = o
            mask[k] = True
            if rewards is not None:
                rew[k], term[k], trunc[k] = rewards[a], terminations[a], truncations[a]
    return obs, mask, rew, term, trunc


def test_hunters_is_a_valid_parallel_env():
    parallel_api_test(Hunters(), num_cycles=200)


def test_pool_rows_equal_each_env_stepped_by_hand(no_leaks):
    """Rows, padding, masks of absent / late / departed agents, autoreset
    (NEXT_STEP: the step after an env has no agents left resets it)."""
    num_envs, seed = 3, 11
    pool = ParallelEnvPool([Hunters] * num_envs, num_workers=2)
    refs = [Hunters() for _ in range(num_envs)]
    try:
        assert (pool.num_agents, pool.num_rows) == (3, 9)
        assert pool.single_observation_space == spaces.Box(-10, 10, (5,), np.float32)
        obs, info = pool.reset(seed=seed)
        want = [expected_rows(r, r.reset(seed=seed + e)[0]) for e, r in enumerate(refs)]
        np.testing.assert_array_equal(obs, np.concatenate([w[0] for w in want]))
        np.testing.assert_array_equal(info["mask"], np.concatenate([w[1] for w in want]))
        assert not info["mask"][2], "the scout has not spawned yet"

        rng = np.random.default_rng(0)
        needs_reset = [False] * num_envs
        resets = 0
        for _ in range(60):
            actions = rng.integers(0, 3, pool.num_rows)
            actions[~pool.masks] = 99  # absent rows: ignored, even if invalid
            obs, rew, term, trunc, info = pool.step(actions)
            for e, ref in enumerate(refs):
                if needs_reset[e]:
                    got = expected_rows(ref, ref.reset()[0])
                    resets += 1
                else:
                    acts = {a: int(actions[e * 3 + k]) for k, a in enumerate(ref.possible_agents)
                            if a in ref.agents}
                    o, r, te, tr, infos = ref.step(acts)
                    got = expected_rows(ref, o, r, te, tr)
                needs_reset[e] = not ref.agents
                rows = slice(e * 3, e * 3 + 3)
                for value, expected in zip((obs, info["mask"], rew, term, trunc), got):
                    np.testing.assert_array_equal(value[rows], expected)
            assert not obs[~info["mask"]].any() and not rew[~info["mask"]].any()
        assert resets >= 3, "episodes must end and autoreset within the test"
    finally:
        pool.close()


def test_pool_over_pettingzoo_envs(no_leaks):
    """Real pettingzoo envs: mpe2 simple_tag (obs 16 vs 14, padded) and
    classic rock-paper-scissors (Discrete observations)."""
    simple_tag_v3 = pytest.importorskip("mpe2.simple_tag_v3")
    rps_v2 = pytest.importorskip("pettingzoo.classic.rps_v2")

    make_tag = functools.partial(simple_tag_v3.parallel_env, max_cycles=25)
    with ParallelEnvPool([make_tag] * 2, num_workers=2) as pool:
        assert pool.single_observation_space.shape == (16,)
        obs, info = pool.reset(seed=3)
        ref = make_tag()
        ref_obs, _ = ref.reset(seed=3)
        prey = pool.possible_agents.index("agent_0")
        np.testing.assert_array_equal(obs[prey, :14], ref_obs["agent_0"])
        assert not obs[prey, 14:].any(), "padding is zero"
        for t in range(25):
            obs, rew, term, trunc, info = pool.step(np.zeros(pool.num_rows, np.int64))
        assert trunc.all() and info["mask"].all(), "max_cycles truncates every agent at once"
        obs, rew, term, trunc, info = pool.step(np.zeros(pool.num_rows, np.int64))
        assert not rew.any() and not trunc.any(), "the next step resets (NEXT_STEP)"
        ref.close()

    with ParallelEnvPool([rps_v2.parallel_env] * 2, num_workers=1) as pool:
        assert pool.single_observation_space == spaces.Discrete(4)
        pool.reset(seed=0)
        obs, rew, *_ = pool.step(np.array([0, 1, 2, 2]))  # rock/paper, scissors/scissors
        np.testing.assert_array_equal(rew, [-1, 1, 0, 0])
        np.testing.assert_array_equal(obs, [1, 0, 2, 2])  # each sees the other's move


def test_spaces_that_cannot_be_rows_are_rejected():
    box = spaces.Box(0, 1, (3,), np.float32)
    with pytest.raises(ValueError, match="observation spaces differ.*a: Box"):
        padded_space({"a": box, "b": spaces.Discrete(3)}, "observation")
    with pytest.raises(ValueError, match="action spaces differ"):
        padded_space({"a": spaces.Discrete(2), "b": spaces.Discrete(3)}, "action")
    with pytest.raises(ValueError, match="dtype and rank"):
        padded_space({"a": box, "b": spaces.Box(0, 1, (3,), np.float64)}, "observation")
    wide = padded_space({"a": box, "b": spaces.Box(-2, 0.5, (5,), np.float32)}, "observation")
    np.testing.assert_array_equal(wide.low, [-2, -2, -2, -2, -2])
    np.testing.assert_array_equal(wide.high, [1, 1, 1, 0.5, 0.5])


def test_actions_must_cover_every_row(no_leaks):
    with ParallelEnvPool([Hunters] * 2, num_workers=1) as pool:
        pool.reset(seed=0)
        with pytest.raises(ValueError, match="6 rows"):
            pool.step(np.zeros(5, np.int64))


class Renamed(Hunters):
    """Hunters whose agents are listed in another order."""

    def __init__(self):
        super().__init__()
        self.possible_agents = ["scout", "hunter_1", "hunter_0"]
        self._obs = {a: spaces.Box(-10, 10, (5,), np.float32) for a in self.possible_agents}


class Talkers(Hunters):
    """Text observations: no fixed layout to write as rows."""

    def observation_space(self, agent):
        return spaces.Text(8)


class WideScout(Hunters):
    """The scout's space says 3 features, its observations have 5."""

    def _observe(self, agent):
        return (self.state + self.possible_agents.index(agent)).astype(np.float32)


def test_an_agents_obs_must_have_its_own_spaces_shape(no_leaks):
    """Padded rows hold each agent's obs in their corner: one of another
    shape than the agent's space (here the scout's 5 for 3) is an error,
    not written over the padding."""
    with ParallelEnvPool([WideScout], num_workers=1) as pool:
        pool.reset(seed=0)
        with pytest.warns(UserWarning), pytest.raises(ValueError, match="'scout'.* shape \\(5,\\).* \\(3,\\)"):
            for _ in range(3):   # the scout spawns at step 2
                pool.step(np.zeros(3, np.int64))


class Crowd(Hunters):
    """Hunters with a fourth agent."""

    def __init__(self):
        super().__init__()
        self.possible_agents = self.possible_agents + ["hunter_2"]
        self._obs["hunter_2"] = self._obs["hunter_0"]


def test_envs_must_share_agents_and_a_fixed_layout(no_leaks):
    """Rows are (env, agent) by position: an env listing its agents in
    another order would have its rows mislabelled, so it is refused; a
    space without a layout (Text) is refused by name, not by an internal
    error from the row writer."""
    with pytest.raises(ValueError, match=r"env 1's possible_agents \['scout', 'hunter_1', 'hunter_0'\] "
                                         r"differ from env 0's"):
        ParallelEnvPool([Hunters, Renamed], num_workers=1)
    with pytest.raises(ValueError, match="cannot be pooled as rows"):
        ParallelEnvPool([Talkers] * 2, num_workers=1)
    with pytest.raises(ValueError, match="needs the same possible_agents"):   # not observation_mode advice
        ParallelEnvPool([Hunters, Crowd], num_workers=2)


def test_async_halves_time_out_and_leave_the_pool_usable(no_leaks):
    """gymnasium's step_async / step_wait(timeout=): a stopped worker is a
    multiprocessing.TimeoutError, and once it is back the pool steps on."""
    import multiprocessing as mp
    import os
    import signal
    with ParallelEnvPool([Hunters] * 2, num_workers=2) as pool:
        pool.reset(seed=0)
        assert pool.render_mode is None
        victim = pool.vector_env._workers.processes[1].pid
        os.kill(victim, signal.SIGSTOP)
        try:
            pool.step_async(np.zeros(6, np.int64))
            with pytest.raises(mp.TimeoutError):
                pool.step_wait(timeout=0.3)
        finally:
            os.kill(victim, signal.SIGCONT)
        obs, *_ = pool.step(np.zeros(6, np.int64))
        assert obs.shape == (6, 5)
    from gymnasium.error import ClosedEnvironmentError
    with pytest.raises(ClosedEnvironmentError):
        pool.masks


class SilentLeaver(ParallelEnv):
    """Agent "b" leaves on the first step with reward 5 and terminated, but
    the env gives it no last observation (off pettingzoo's spec: its
    parallel_api_test only warns); rewards also name "c", which never played."""
    metadata = {"name": "silent_leaver_v0"}
    possible_agents = ["a", "b", "c"]

    def observation_space(self, agent):
        return spaces.Box(-1, 1, (1,), np.float32)

    def action_space(self, agent):
        return spaces.Discrete(2)

    def reset(self, seed=None, options=None):
        self.agents = ["a", "b"]
        return {a: np.ones(1, np.float32) for a in self.agents}, {a: {} for a in self.agents}

    def step(self, actions):
        self.agents = ["a"]
        return ({"a": np.ones(1, np.float32)}, {"a": 1.0, "b": 5.0, "c": 0.0},
                {"a": False, "b": True, "c": False}, {"a": False, "b": False, "c": False}, {})


def test_an_agent_left_out_of_the_observations_still_ends_in_its_row(no_leaks):
    """The row of an agent that stepped carries the step's reward and flags
    even when the env gives it no observation (a zero obs row): dropped, a
    learner would never see its episode end. "c", absent, stays absent."""
    pool = ParallelEnvPool([SilentLeaver], num_workers=1)
    try:
        pool.reset(seed=0)
        obs, rewards, terminated, truncated, info = pool.step(np.zeros(3, np.int64))
        assert rewards.tolist() == [1.0, 5.0, 0.0] and terminated.tolist() == [False, True, False]
        assert info["mask"].tolist() == [True, True, False] and obs[:, 0].tolist() == [1.0, 0.0, 0.0]
    finally:
        pool.close()


def test_shoal_env_passes_pettingzoo_api_and_seed_tests():
    parallel_api_test(ShoalParallelEnv("cartpole"), num_cycles=600)
    parallel_seed_test(lambda: ShoalParallelEnv("cartpole"), num_cycles=300)


def test_shoal_parallel_env_follows_the_seed_rule():
    """reset(seed=s) as a ParallelEnv is env i of a pool reset with s - i."""
    env = ShoalParallelEnv("cartpole")
    pool = Serial("cartpole", 4)
    obs, _ = env.reset(seed=10 + 3)
    pool_obs, _ = pool.reset(seed=10)
    np.testing.assert_array_equal(obs["agent_0"], pool_obs[3])
    for _ in range(20):
        o, r, te, tr, _ = env.step({"agent_0": 1})
        pool_obs, *_ = pool.step(np.ones(4, np.int32))
        np.testing.assert_array_equal(o["agent_0"], pool_obs[3])
        if te["agent_0"]:
            assert env.agents == []
            break
    env.close()
    pool.close()
