"""Drive: multi-agent 2D driving on procedurally generated roads (see drive.h).

32 rows per env; Discrete(35) actions (7 steer x 5 accel); 120 float32 obs
per row in [-1, 1]; rows of absent, finished or traffic agents are masked.
Spaces from drive.h.
"""
from shoal.envs import header_spec

SPEC = header_spec("Drive", __name__, metadata={"render_fps": 10})
