"""shoal's CartPole header against gymnasium's CartPole-v1."""
import gymnasium
import numpy as np

import shoal
from shoal.envs.cartpole import binding


def gymnasium_next(env, state, action):
    env.unwrapped.state = np.array(state, dtype=np.float64)
    obs, reward, terminated, truncated, _ = env.step(int(action))
    return obs, reward, terminated


def test_dynamics_match_gymnasium_over_random_states():
    rng = np.random.default_rng(0)
    n = 2000
    # States inside and around the termination region, both actions.
    states = rng.uniform([-2.6, -3, -0.25, -3.5], [2.6, 3, 0.25, 3.5], size=(n, 4)).astype(np.float32)
    actions = rng.integers(0, 2, size=n).astype(np.int32)
    ours = states.copy()
    terminated = binding.physics(ours, actions)

    env = gymnasium.make("CartPole-v1").unwrapped
    env.reset(seed=0)
    for i in range(n):
        obs, reward, term = gymnasium_next(env, states[i], actions[i])
        env.steps_beyond_terminated = None  # we drive it from arbitrary states
        np.testing.assert_allclose(ours[i], obs, rtol=1e-5, atol=1e-5)
        # Termination can only differ when a coordinate sits on a threshold.
        if bool(terminated[i]) != term:
            margin = min(abs(abs(obs[0]) - 2.4), abs(abs(obs[2]) - 12 * 2 * np.pi / 360))
            assert margin < 1e-5, (i, states[i], actions[i])
        assert reward == 1.0


def test_rewards_termination_and_500_step_truncation():
    pool = shoal.make("CartPole", 1, backend="serial")
    pool.reset(seed=1)
    # Balance with a simple controller until the time limit.
    obs = pool.obs
    for t in range(1, 501):
        action = np.array([1 if obs[0, 2] + 0.5 * obs[0, 3] > 0 else 0], dtype=np.int32)
        obs, rew, term, trunc, _ = pool.step(action)
        assert rew[0] == 1.0
        assert not term[0], f"controller should balance the pole (fell at step {t})"
        assert trunc[0] == (t == 500)
    # Always pushing right ends the episode by termination, well before 500.
    pool.reset(seed=2)
    for t in range(1, 200):
        obs, rew, term, trunc, _ = pool.step(np.ones(1, dtype=np.int32))
        if term[0]:
            break
    assert term[0] and not trunc[0] and rew[0] == 1.0
    assert abs(obs[0, 0]) > 2.4 or abs(obs[0, 2]) > 12 * 2 * np.pi / 360


def test_reset_state_range_and_spaces():
    pool = shoal.make("CartPole", 1000, backend="serial")
    obs, _ = pool.reset(seed=5)
    assert obs.dtype == np.float32 and obs.shape == (1000, 4)
    assert np.all(np.abs(obs) <= 0.05)
    assert pool.single_observation_space == gymnasium.make("CartPole-v1").observation_space
    assert pool.single_action_space == gymnasium.spaces.Discrete(2)
    assert pool.observation_space.contains(obs)
