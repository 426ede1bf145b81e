"""shoal.pool: vectorized env pools over shared memory.

Serial and Multiprocessing step shoal's first-party C envs (see
shoal.pool.native for the protocol and semantics).
"""
from gymnasium.vector import AutoresetMode

from shoal.pool.native import (
    Multiprocessing,
    NativePool,
    Serial,
    WorkerError,
    available_cores,
)

__all__ = ["AutoresetMode", "Multiprocessing", "NativePool", "Serial", "WorkerError",
           "available_cores"]
