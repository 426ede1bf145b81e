"""Old name of shoal.pettingzoo_env (ShoalParallelEnv), kept so existing
imports work; new code imports shoal.pettingzoo_env."""
from shoal.pettingzoo_env import ShoalParallelEnv  # noqa: F401

__all__ = ["ShoalParallelEnv"]
