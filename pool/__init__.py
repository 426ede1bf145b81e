"""shoal.pool: vectorized env pools over shared memory.

Serial and Multiprocessing step shoal's first-party C envs (see
shoal.pool.native for the protocol and semantics); NativeVectorEnv is the
same pool as an exact gymnasium VectorEnv (shoal.pool.gym_vector). AsyncVectorEnv is a drop-in for
gymnasium's, around any gymnasium env (shoal.pool.python_pool), and
ParallelEnvPool pools pettingzoo ParallelEnvs, one row per agent
(shoal.pool.pettingzoo_pool).
"""
from gymnasium.vector import AutoresetMode

from shoal.pool.native import (
    Multiprocessing,
    NativePool,
    PoolClosedError,
    Serial,
    WorkerError,
    WorkerTimeoutError,
    available_cores,
)
from shoal.pool.gym_vector import NativeVectorEnv
from shoal.pool.pettingzoo_pool import ParallelEnvPool
from shoal.pool.python_pool import AsyncVectorEnv

__all__ = ["AsyncVectorEnv", "AutoresetMode", "Multiprocessing", "NativePool", "NativeVectorEnv",
           "ParallelEnvPool", "PoolClosedError", "Serial", "WorkerError", "WorkerTimeoutError",
           "available_cores"]
