"""Every multi-agent first-party env through gymnasium (make_vec: agent rows
as sub-envs) and pettingzoo (ShoalParallelEnv: the API and seed tests)."""
import gymnasium
import numpy as np
import pytest
from pettingzoo.test import parallel_api_test, parallel_seed_test

import shoal
import shoal.envs
from shoal.pettingzoo_env import ShoalParallelEnv
from shoal.pool import Serial

MULTI_AGENT = [n.lower() for n in shoal.envs.names() if shoal.envs.spec(n).agents > 1]


def test_there_are_multi_agent_envs_to_check():
    assert MULTI_AGENT, "the tests below need at least one multi-agent env"


@pytest.mark.parametrize("env", MULTI_AGENT)
def test_make_vec_rows_equal_the_pool(env):
    spec = shoal.envs.spec(env)
    vec = gymnasium.make_vec(f"shoal/{spec.name}-v0", num_envs=3, backend="serial")
    pool = Serial(env, 3)
    assert vec.num_envs == 3 * spec.agents
    obs, info = vec.reset(seed=5)
    pool_obs, _ = pool.reset(seed=5)
    np.testing.assert_array_equal(obs, pool_obs)
    np.testing.assert_array_equal(info["mask"], pool.masks)
    assert vec.np_random_seed[:spec.agents + 1] == (5,) * spec.agents + (6,)
    vec.action_space.seed(0)
    for _ in range(50):
        actions = vec.action_space.sample()
        obs, rew, term, trunc, info = vec.step(actions)
        p_obs, p_rew, p_term, p_trunc, _ = pool.step(actions.reshape(pool.action_space.shape))
        np.testing.assert_array_equal(obs, p_obs)
        np.testing.assert_array_equal(rew, p_rew.astype(np.float64))
        np.testing.assert_array_equal(term, p_term)
        np.testing.assert_array_equal(info["mask"], pool.masks)
    with pytest.raises(ValueError, match="reset together"):
        vec.reset(seed=list(range(vec.num_envs)))
    with pytest.raises(gymnasium.error.Error, match="multi-agent"):
        gymnasium.make(f"shoal/{spec.name}-v0")
    vec.close()
    pool.close()


@pytest.mark.parametrize("env", MULTI_AGENT)
def test_parallel_env_passes_pettingzoo_tests(env):
    parallel_api_test(ShoalParallelEnv(env), num_cycles=300)
    env_ = ShoalParallelEnv(env)   # ParallelEnv's declared dicts (skrl reads them), as the methods say
    assert list(env_.observation_spaces) == list(env_.action_spaces) == env_.possible_agents
    assert all(env_.observation_spaces[a] is env_.observation_space(a)
               and env_.action_spaces[a] is env_.action_space(a) for a in env_.possible_agents)
    # each agent's own space objects, as pettingzoo's envs: seeding agent by
    # agent gives each its own stream (one shared object took the last seed)
    first, second = env_.possible_agents[:2]
    env_.action_space(first).seed(1)
    env_.action_space(second).seed(2)
    draws = [env_.action_space(first).sample(), env_.action_space(second).sample()]
    env_.action_space(first).seed(1)
    assert np.array_equal(env_.action_space(first).sample(), draws[0])
    assert env_.action_space(first) is not env_.action_space(second)
    env_.close()
    parallel_seed_test(lambda: ShoalParallelEnv(env), num_cycles=100)


def test_parallel_env_has_pettingzoos_np_random_seeded_by_reset():
    """pettingzoo's envs carry np_random, which wrappers draw from
    (SuperSuit's parallel frame_skip_v0 failed without it): seeded by
    reset(seed=...), so a seeded run repeats its draws."""
    env = ShoalParallelEnv("snake")
    unseeded = env.np_random.integers(1 << 30, size=4)   # before any reset: from entropy
    draws = []
    for _ in range(2):
        env.reset(seed=7)
        draws.append(env.np_random.integers(1 << 30, size=4))
    np.testing.assert_array_equal(draws[0], draws[1])
    assert not np.array_equal(unseeded, draws[0])
    env.close()


def test_parallel_step_needs_every_live_agent_and_is_empty_after_the_end():
    """An action missing for a live agent is an error (pettingzoo's own envs
    raise a KeyError; shoal once drove such cars with action 0). Once every
    agent has left, step() returns empty dicts and steps nothing, as
    pettingzoo's own parallel envs do: SuperSuit's black_death_v3 steps once
    more after the last agent leaves before it resets."""
    penv = ShoalParallelEnv("Drive", max_episode_steps=5)
    try:
        with pytest.raises(RuntimeError, match="before reset"):
            penv.step({})
        penv.reset(seed=0)
        assert len(penv.agents) > 1
        with pytest.raises(ValueError, match=f"missing \\['{penv.agents[1]}'"):
            penv.step({penv.agents[0]: 17})
        first = dict(penv.reset(seed=0)[0])
        while penv.agents:
            gone = [a for a in penv.possible_agents if a not in penv.agents]
            penv.step({**{a: None for a in gone}, **{a: 17 for a in penv.agents}})   # None: pettingzoo's "no action"
        assert penv.step({}) == ({}, {}, {}, {}, {})
        assert penv.step({"agent_0": 3}) == ({}, {}, {}, {}, {})   # a left agent's action: ignored
        obs, _ = penv.reset(seed=0)
        assert obs.keys() == first.keys()
        for agent in obs:
            np.testing.assert_array_equal(obs[agent], first[agent])
    finally:
        penv.close()
    from shoal.pool import PoolClosedError
    for call in (lambda: penv.step({}), penv.reset):
        with pytest.raises(PoolClosedError, match="this ShoalParallelEnv is closed"):
            call()


def test_respawning_agents_stay_in_the_parallel_env_and_report_their_deaths():
    """Snake's dead snakes respawn at once in their rows: the pettingzoo
    view keeps their agents (a removed agent's snake would stay in the
    world, moving on actions no one sends), reports each death as
    infos[agent]["respawned"] with reward -1, and equals the pool row for
    row; agents leave only at the env's time limit."""
    assert shoal.envs.spec("Snake").agents_respawn and not shoal.envs.spec("Drive").agents_respawn
    penv = ShoalParallelEnv("Snake")
    with pytest.raises(KeyError, match="unknown agent 'agent_8'"):
        penv.observation_space("agent_8")
    pool = Serial("Snake", 1, autoreset_mode="disabled")
    try:
        obs, infos = penv.reset(seed=3)
        pool_obs, _ = pool.reset(seed=3)
        assert penv.agents == penv.possible_agents
        assert all(info == {"respawned": False} for info in infos.values())
        rng = np.random.default_rng(0)
        deaths = steps = 0
        while penv.agents:
            assert penv.agents == penv.possible_agents   # no one leaves before the time limit
            actions = rng.integers(0, 4, len(penv.agents))
            obs, rewards, terms, truncs, infos = penv.step(dict(zip(penv.agents, actions.tolist())))
            pool_obs, pool_rew, pool_term, pool_trunc, _ = pool.step(actions.astype(np.int32))
            steps += 1
            for k, agent in enumerate(penv.possible_agents):
                np.testing.assert_array_equal(obs[agent], pool_obs[k])
                assert rewards[agent] == pool_rew[k] and truncs[agent] == pool_trunc[k]
                assert infos[agent]["respawned"] == (pool_term[k] and not pool_trunc[k])
                assert not terms[agent] or truncs[agent]
                deaths += infos[agent]["respawned"]
                if infos[agent]["respawned"]:
                    assert rewards[agent] == -1.0
        assert steps == pool.spec.max_episode_steps and deaths > 0
    finally:
        penv.close()
        pool.close()


def test_parallel_env_over_box_actions_takes_env_keywords_and_reports_info():
    """A MuJoCo env as a one-agent ParallelEnv: float actions reach the
    physics as they are (they were once cast to int, i.e. zeros), env
    keywords apply, and the agent's info is gymnasium's, as SingleEnv's."""
    pytest.importorskip("mujoco", reason="MuJoCo envs need the mujoco extra")
    penv = ShoalParallelEnv("Hopper", ctrl_cost_weight=0.3)
    single = gymnasium.make("shoal/Hopper-v5", ctrl_cost_weight=0.3)
    try:
        obs, infos = penv.reset(seed=4)
        ref_obs, ref_info = single.reset(seed=4)
        np.testing.assert_array_equal(obs["agent_0"], ref_obs)
        assert infos["agent_0"] == ref_info and "x_position" in ref_info
        for action in ([0.5, -0.5, 0.3], np.array([0.9, 0.1, -0.7])):   # a list, float64
            obs, rewards, _, _, infos = penv.step({"agent_0": action})
            ref_obs, ref_reward, _, _, ref_info = single.step(np.asarray(action, np.float32))
            np.testing.assert_array_equal(obs["agent_0"], ref_obs)
            assert rewards["agent_0"] == ref_reward and infos["agent_0"] == ref_info
            assert ref_info["reward_ctrl"] != 0.0
            # and the same types (gymnasium's: reward_ctrl from the float32 action is np.float32)
            assert {k: type(v) for k, v in infos["agent_0"].items()} == {k: type(v) for k, v in ref_info.items()}
        with pytest.raises(ValueError, match="shape"):
            penv.step({"agent_0": [0.1, 0.2]})
    finally:
        penv.close()
        single.close()


@pytest.mark.parametrize("make", [lambda: ShoalParallelEnv("Snake"),
                                  lambda: gymnasium.make("shoal/CartPole-v0")])
def test_pickling_makes_a_fresh_env_of_the_same_arguments(make):
    """SuperSuit's vector envs and SubprocVecEnv cloudpickle the env:
    pickling rebuilds it from its arguments (seeded resets then agree)."""
    import copy
    import pickle

    env = make()
    twins = [pickle.loads(pickle.dumps(env)), copy.deepcopy(env)]
    try:
        first = env.reset(seed=3)[0]
        for twin in twins:
            assert type(twin.unwrapped) is type(env.unwrapped)
            if hasattr(env, "spec") and env.spec is not None:
                assert twin.spec.id == env.spec.id
            again = twin.reset(seed=3)[0]
            if isinstance(first, dict):
                assert first.keys() == again.keys()
                assert all(np.array_equal(first[a], again[a]) for a in first)
            else:
                np.testing.assert_array_equal(first, again)
    finally:
        for e in [env, *twins]:
            e.close()


@pytest.mark.parametrize("env", MULTI_AGENT)
def test_parallel_env_state_is_every_agent_row_in_order(env):
    """state() (centralised critics read it): every agent row's obs,
    flattened in agent order, within state_space; absent agents' rows are
    zeros; before reset it is ResetNeeded."""
    from gymnasium.error import ResetNeeded
    penv = ShoalParallelEnv(env)
    with pytest.raises(ResetNeeded):
        penv.state()
    obs, _ = penv.reset(seed=3)
    for _ in range(20):
        state = penv.state()
        assert state.shape == penv.state_space.shape and penv.state_space.contains(state)
        rows = state.reshape(len(penv.possible_agents), -1)
        for k, agent in enumerate(penv.possible_agents):
            expected = obs[agent].reshape(-1) if agent in obs else np.zeros_like(rows[k])
            np.testing.assert_array_equal(rows[k], expected, err_msg=agent)
        if not penv.agents:
            break
        obs, *_ = penv.step({a: penv.action_space(a).sample() for a in penv.agents})
    penv.close()
