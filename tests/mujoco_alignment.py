"""Step-by-step comparison of a native MuJoCo env with gymnasium's (used by
tests/test_mujoco.py): the same qpos/qvel, the same float32 actions, then
obs, reward, terminated, truncated and every info value compared."""
from __future__ import annotations

import numpy as np

RTOL = 1e-6


def compare_with_gymnasium(name: str, steps: int, seed: int = 0, env_kwargs: dict | None = None,
                           action_scale: float = 1.2) -> dict:
    """Run env `name` in shoal (Serial, 1 env, NEXT_STEP) and gymnasium side
    by side for `steps` steps; raise AssertionError at the first difference
    beyond RTOL. Actions are uniform over action_scale x the bounds (out of
    bounds included). Returns counts of episodes ended and steps compared."""
    import gymnasium

    import shoal
    from shoal.pool.native import Serial

    env_kwargs = env_kwargs or {}
    genv = gymnasium.make(f"{name}-v5", **env_kwargs)
    spec = shoal.envs.spec(name, **env_kwargs)
    pool = Serial(spec, 1, seed=seed)
    block = pool._blocks[0][0]
    binding = spec.load_binding()
    rng = np.random.default_rng(seed)
    low, high = spec.action_low * action_scale, spec.action_high * action_scale
    ended = 0

    def sync_from_gymnasium(gym_obs):
        data = genv.unwrapped.data
        block.set_state(0, data.qpos.copy(), data.qvel.copy())
        np.testing.assert_allclose(pool.obs[0], gym_obs, rtol=RTOL, atol=1e-12,
                                   err_msg=f"{name}: obs after set_state")

    gym_obs, _ = genv.reset(seed=seed)
    pool.reset(seed=seed)
    sync_from_gymnasium(gym_obs)
    for t in range(steps):
        action = rng.uniform(low, high).astype(np.float32)
        gym_obs, gym_rew, gym_term, gym_trunc, gym_info = genv.step(action)
        obs, rew, term, trunc, _ = pool.step(action[None])
        where = f"{name}: step {t}"
        np.testing.assert_allclose(obs[0], gym_obs, rtol=RTOL, atol=1e-9, err_msg=f"{where} obs")
        np.testing.assert_allclose(rew[0], gym_rew, rtol=RTOL, atol=1e-6, err_msg=f"{where} reward")
        assert bool(term[0]) == bool(gym_term), f"{where}: terminated {term[0]} vs {gym_term}"
        assert bool(trunc[0]) == bool(gym_trunc), f"{where}: truncated {trunc[0]} vs {gym_trunc}"
        info = binding.info(pool.env_states)
        for key, values in info.items():
            np.testing.assert_allclose(values[0], gym_info[key], rtol=RTOL, atol=1e-9,
                                       err_msg=f"{where} info[{key!r}]")
        if gym_term or gym_trunc:
            ended += 1
            gym_obs, _ = genv.reset()
            pool.step(np.zeros_like(action)[None])   # NEXT_STEP: this step resets shoal's env
            sync_from_gymnasium(gym_obs)
    pool.close()
    genv.close()
    return {"episodes": ended, "steps": steps}
