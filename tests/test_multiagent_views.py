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
    parallel_seed_test(lambda: ShoalParallelEnv(env), num_cycles=100)
