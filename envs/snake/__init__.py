"""Snake: 8 snakes on one 32 x 32 grid, one agent row each (see snake.h)."""
import numpy as np

from shoal.envs import EnvSpec

SPEC = EnvSpec(
    name="Snake",
    binding="shoal.envs.snake.binding",
    agents=8,
    obs_shape=(121,),   # 11 x 11 window round the head, row-major, north up
    obs_dtype=np.uint8,
    obs_low=0,
    obs_high=6,         # 0 empty 1 wall 2 food 3 own body 4 own head 5 other body 6 other head
    action_nvec=(4,),   # 0 up, 1 down, 2 left, 3 right (reverse = straight)
    max_episode_steps=1000,
)
