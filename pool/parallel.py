"""Old name of shoal.pool.pettingzoo_pool (ParallelEnvPool), kept so
existing imports work; new code imports shoal.pool.pettingzoo_pool or shoal.pool."""
from shoal.pool.pettingzoo_pool import AgentRows, ParallelEnvPool, padded_space  # noqa: F401

__all__ = ["AgentRows", "ParallelEnvPool", "padded_space"]
