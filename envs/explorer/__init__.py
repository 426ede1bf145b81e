"""Explorer: megastep-style navigation in generated floorplans (see explorer.h).

This folder is the Explore task; envs/explorer_pointgoal is the PointGoal
task built from the same header.
"""
import numpy as np

from shoal.envs import EnvSpec

RAYS = 32
AGENTS = 4
MAX_STEPS = 500


def obs_bounds(task: str):
    """Per-element bounds of one obs row (see the layout in explorer.h)."""
    low = np.zeros(2 * RAYS + 4, np.float32)
    high = np.ones(2 * RAYS + 4, np.float32)
    low[2 * RAYS] = -0.5                  # last forward speed: back is half speed
    low[2 * RAYS + 1] = -1.0              # last turn
    if task == "PointGoal":
        low[2 * RAYS + 2:] = -1.0         # goal in the agent's frame
    return low, high


def make_spec(task: str, name: str, binding: str) -> EnvSpec:
    low, high = obs_bounds(task)
    return EnvSpec(
        name=name,
        binding=binding,
        agents=AGENTS,
        obs_shape=(2 * RAYS + 4,),
        obs_dtype=np.float32,
        obs_low=low,
        obs_high=high,
        action_nvec=(3, 3),               # move: stay/forward/back, turn: none/left/right
        discrete_action=False,
        max_episode_steps=MAX_STEPS,
        metadata={"task": task},
    )


SPEC = make_spec("Explore", "Explorer", "shoal.envs.explorer.binding")
