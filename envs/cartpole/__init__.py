"""CartPole: gymnasium's CartPole-v1 dynamics in C (see cartpole.h)."""
from shoal.envs import header_spec

SPEC = header_spec("CartPole", __name__, reward_threshold=475.0, metadata={"render_fps": 50})
