"""CartPole: gymnasium's CartPole-v1 dynamics in C (see cartpole.h)."""
import numpy as np

from shoal.envs import EnvSpec

_X_LIMIT = 2.4
_THETA_LIMIT = 12 * 2 * np.pi / 360
_HIGH = np.array([_X_LIMIT * 2, np.inf, _THETA_LIMIT * 2, np.inf], dtype=np.float32)

SPEC = EnvSpec(
    name="CartPole",
    binding="shoal.envs.cartpole.binding",
    agents=1,
    obs_shape=(4,),
    obs_dtype=np.float32,
    obs_low=-_HIGH,
    obs_high=_HIGH,
    action_nvec=(2,),
    max_episode_steps=500,
    reward_threshold=475.0,
    metadata={"render_fps": 50},
)
