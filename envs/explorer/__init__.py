"""Explorer: megastep-style navigation in generated floorplans (see explorer.h).

This folder is the Explore task; envs/explorer_pointgoal is the PointGoal
task built from the same header. Spaces (per-element obs bounds, actions
move x turn) from explorer.h.
"""
from shoal.envs import header_spec

# render_fps: a walking pace for a human watching (HumanRendering, RecordVideo).
SPEC = header_spec("Explorer", __name__, metadata={"task": "Explore", "render_fps": 10})
