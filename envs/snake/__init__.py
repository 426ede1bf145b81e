"""Snake: 8 snakes on one 32 x 32 grid, one agent row each (see snake.h).

Obs: the 11 x 11 window round the head, row-major, north up, of codes 0 empty
1 wall 2 food 3 own body 4 own head 5 other body 6 other head; actions 0 up,
1 down, 2 left, 3 right (reverse = straight). Spaces from snake.h."""
from shoal.envs import header_spec

# render_fps: a playable speed for a human watching (gymnasium's HumanRendering, RecordVideo).
# agents_respawn: a dead snake respawns at once in its row (snake.h).
SPEC = header_spec("Snake", __name__, metadata={"render_fps": 15}, agents_respawn=True)
