"""Drive: multi-agent 2D driving on procedurally generated roads (see drive.h).

32 rows per env; Discrete(35) actions (7 steer x 5 accel); 120 float32 obs
per row in [-1, 1]; rows of absent, finished or traffic agents are masked.
"""
import numpy as np

from shoal.envs import EnvSpec

AGENTS = 32
OBS_SIZE = 120
STEER_BINS, ACCEL_BINS = 7, 5

SPEC = EnvSpec(
    name="Drive",
    binding="shoal.envs.drive.binding",
    agents=AGENTS,
    obs_shape=(OBS_SIZE,),
    obs_dtype=np.float32,
    obs_low=-1.0,
    obs_high=1.0,
    action_nvec=(STEER_BINS * ACCEL_BINS,),
    max_episode_steps=200,
    metadata={"render_fps": 10},
)
