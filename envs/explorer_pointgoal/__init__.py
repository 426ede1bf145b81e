"""Explorer's PointGoal task: envs/explorer/explorer.h compiled with
EXPLORER_TASK = PointGoal (see explorer_pointgoal.h)."""
from shoal.envs.explorer import make_spec

SPEC = make_spec("PointGoal", "ExplorerPointGoal", "shoal.envs.explorer_pointgoal.binding")
