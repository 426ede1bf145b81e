"""Corridor: walk to the end of a corridor (see corridor.h)."""
import numpy as np

from shoal.envs import EnvSpec

SPEC = EnvSpec(
    name="Corridor",
    binding="shoal.envs.corridor.binding",
    agents=1,
    obs_shape=(2,),
    obs_dtype=np.float32,       # must be the header's P_obs_t (checked when a pool is made)
    obs_low=0.0,
    obs_high=1.0,
    action_nvec=(2,),           # one component: Discrete(2); more: MultiDiscrete
    max_episode_steps=64,       # the header's CORRIDOR_MAX_STEPS, written again
)
