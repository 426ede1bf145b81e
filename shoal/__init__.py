"""shoal: a fast, honest environment pool for reinforcement learning.

    import shoal
    pool = shoal.make("CartPole", num_envs=4096)          # processes on all cores
    obs, info = pool.reset(seed=0)
    obs, rewards, terminals, truncations, info = pool.step(actions)
    pool.close()

Importing shoal also registers gymnasium ids ("shoal/CartPole-v0") for
gymnasium.make / gymnasium.make_vec (see shoal.registration).
"""
__version__ = "0.1.0"

from shoal.envs import names as env_names  # noqa: E402
from shoal.envs import spec as env_spec  # noqa: E402
from shoal.registration import register_envs as _register_envs  # noqa: E402

_register_envs()


def make(env: str, num_envs: int = 1, backend: str = "multiprocessing", **kwargs):
    """A pool of `num_envs` copies of first-party env `env`.

    backend: "serial" (in this process) or "multiprocessing" (worker
    processes over shared memory). Keyword arguments go to the pool
    (num_workers, batch_size, autoreset_mode, seed, timeout, context: see
    shoal.pool.NativePool) or, any other, to the env: MuJoCo envs take
    gymnasium's (shoal.make("HalfCheetah", 16, ctrl_cost_weight=0.2)).
    """
    from shoal import pool
    from shoal.pool.native import split_env_kwargs

    backends = {"serial": pool.Serial, "multiprocessing": pool.Multiprocessing}
    if backend not in backends:
        raise ValueError(f"unknown backend {backend!r}; expected one of {sorted(backends)}")
    explicit = kwargs.pop("env_kwargs", None) or {}
    pool_kwargs, env_kwargs = split_env_kwargs(kwargs)
    return backends[backend](env, num_envs, env_kwargs={**explicit, **env_kwargs}, **pool_kwargs)


__all__ = ["make", "env_names", "env_spec", "__version__"]
