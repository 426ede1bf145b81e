"""Old name of shoal.pool.gym_vector (NativeVectorEnv), kept so existing
imports work; new code imports shoal.pool.gym_vector or shoal.pool."""
from shoal.pool.gym_vector import NativeVectorEnv  # noqa: F401

__all__ = ["NativeVectorEnv"]
