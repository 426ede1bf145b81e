"""Explorer's PointGoal task: envs/explorer/explorer.h compiled with
EXPLORER_TASK = PointGoal (see explorer_pointgoal.h)."""
from shoal.envs import header_spec

SPEC = header_spec("ExplorerPointGoal", __name__, metadata={"task": "PointGoal", "render_fps": 10})
