"""A native pool with EnvPool's space convention, for code written for EnvPool.

    from shoal.envpool_compat import EnvPoolCompat
    envs = EnvPoolCompat(shoal.make("CartPole", 8))   # for envpool.make_gymnasium("CartPole-v1", num_envs=8)

A shoal pool follows gymnasium's vector convention: `observation_space` and
`action_space` are the batch's, one env's are `single_observation_space` /
`single_action_space`. EnvPool's `observation_space` / `action_space` are one
env's. Code written for EnvPool reads them as such: Tianshou's collector
samples its random actions (the warm-up of DQN, SAC, TD3) from
`env.action_space` one env at a time, and over the batch space it draws the
same action for every env (gymnasium's MultiDiscrete indexing copies the RNG
state) or a batch per env (Box). This view gives EnvPool's spaces and passes
everything else to the pool: steps, resets, async calls, close.
"""
from __future__ import annotations


class EnvPoolCompat:
    """`pool` with EnvPool's spaces: observation_space / action_space are
    one env's; every other attribute and call is the pool's."""

    def __init__(self, pool):
        self.pool = pool
        self.observation_space = pool.single_observation_space
        self.action_space = pool.single_action_space

    def __getattr__(self, name: str):
        # only for what this class does not define: the pool's own (none
        # before __init__ ran, as in copy.copy)
        pool = self.__dict__.get("pool")
        if pool is None:
            raise AttributeError(name)
        return getattr(pool, name)

    def __len__(self) -> int:
        return len(self.pool)

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.pool.close()

    def __repr__(self) -> str:
        return f"EnvPoolCompat({self.pool!r})"
