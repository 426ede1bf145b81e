"""gymnasium ids for shoal's first-party envs.

`import shoal` registers, for each such env, "shoal/<Name>-v<version>":
"shoal/CartPole-v0" for header envs, gymnasium's own version for the MuJoCo
envs ("shoal/HalfCheetah-v5", ..., taking gymnasium's keyword arguments):

    env = gymnasium.make("shoal/CartPole-v0")              # one env: shoal.single.SingleEnv
    envs = gymnasium.make_vec("shoal/CartPole-v0", num_envs=64)
        # the native pool: shoal.pool.gym_vector.NativeVectorEnv; pool arguments as
        # keywords: backend="serial", num_workers=4, autoreset_mode="same_step", seed=0
    envs = gymnasium.make_vec("shoal/CartPole-v0", num_envs=8, vectorization_mode="sync")
        # gymnasium's SyncVectorEnv ("async": AsyncVectorEnv) over SingleEnvs; keywords
        # then go to SingleEnv (render_mode only), vector_kwargs to the vector env

Multi-agent envs (e.g. "shoal/Snake-v0") have make_vec only: the native pool
as a VectorEnv whose sub-envs are agent rows (num_envs x agents of them),
with infos["mask"]; gymnasium.make on them raises, pointing to make_vec and
the pettingzoo view.

Without `import shoal` first, gymnasium's module syntax imports it:
gymnasium.make("shoal:shoal/CartPole-v0") and make_vec("shoal:shoal/CartPole-v0").
The bare id alone fails (gymnasium 1.x has no entry-point plugin discovery).

Episode limits: a header env truncates its own episodes in C (CartPole at
500 steps, reported as truncated=True on that step). Its id is registered
with that limit, as CartPole-v1 is with its own, so env.spec reports it and
gymnasium.make adds a TimeLimit that ends episodes on the same step
(wrappers that need a TimeLimit, such as TimeAwareObservation, find one).
gymnasium.make(..., max_episode_steps=n) can only shorten episodes
(n < 500): the C limit still ends them at 500, and the entry point never
sees n to refuse it; the native vector env takes n <= 500 (its vector loop
truncates there) and refuses a longer one. The library-backed envs (MuJoCo, Atari) take
max_episode_steps as a keyword, so their ids are registered as gymnasium's
own are: with their default limit (HalfCheetah 1000, Atari none), which
gymnasium.make enforces with a TimeLimit over an env with no limit of its
own (any n works, longer ones too), and make_vec passes to the native pool.
"""
from __future__ import annotations

import dataclasses

import gymnasium
import numpy as np

from shoal.envs import names, spec

NAMESPACE = "shoal"


def gym_id(env_name: str) -> str:
    """The gymnasium id of first-party env `env_name`: "shoal/CartPole-v0",
    "shoal/HalfCheetah-v5" (MuJoCo envs carry gymnasium's version)."""
    env_spec = spec(env_name)
    return f"{NAMESPACE}/{env_spec.name}-v{env_spec.version}"


def sub_env_spec(env_spec) -> gymnasium.envs.registration.EnvSpec:
    """gymnasium's EnvSpec of one env of a pool of `env_spec` (shoal's
    EnvSpec, maybe configured): the registered id's, with the pool's
    changed env keyword arguments and its step limit, as
    gymnasium.make(id, **kwargs).spec reports them (a vector env's
    get_attr("spec")). None for a spec shoal has not registered (made by
    hand: header_spec, an out-of-tree env), as gymnasium's unregistered
    envs have no spec."""
    try:
        own = spec(env_spec.name)
    except ValueError:
        return None
    if own.binding != env_spec.binding:
        return None
    registered = gymnasium.spec(gym_id(env_spec.name))
    defaults = own.env_kwargs
    missing = object()

    def same(a, b) -> bool:
        try:
            return bool(np.all(a == b)) and np.shape(a) == np.shape(b)
        except (TypeError, ValueError):
            return False
    changed = {key: value for key, value in env_spec.env_kwargs.items()   # the limit: below
               if key != "max_episode_steps" and not same(defaults.get(key, missing), value)}
    if not changed and registered.max_episode_steps == env_spec.max_episode_steps:
        return registered
    return dataclasses.replace(registered, kwargs={**registered.kwargs, **changed},
                               max_episode_steps=env_spec.max_episode_steps)


def make_native_vector_env(num_envs: int = 1, env_name: str = "CartPole", **kwargs):
    """make_vec's vector_entry_point. The registered kwargs are shared by both
    entry points and named for SingleEnv (env_name); this maps them onto
    NativeVectorEnv(env, num_envs, **kwargs)."""
    from shoal.pool.gym_vector import NativeVectorEnv  # the pool loads only when used
    return NativeVectorEnv(env_name, num_envs, **kwargs)


def make_single_env(env_name: str = "CartPole", **kwargs):
    """gymnasium.make's entry point: shoal.single.SingleEnv. An env that
    takes max_episode_steps as a keyword (MuJoCo, Atari) is made without a
    limit of its own: gymnasium's TimeLimit, with the registered default or
    make's max_episode_steps, is its limit, as for gymnasium's own envs."""
    from shoal.single import SingleEnv
    if "max_episode_steps" in spec(env_name).env_kwargs:
        kwargs.setdefault("max_episode_steps", None)
    return SingleEnv(env_name, **kwargs)


def _multi_agent_make(env_name: str, **kwargs):
    # gymnasium.make, and make_vec's sync / async modes (one gymnasium.make per sub-env)
    raise gymnasium.error.Error(
        f"{env_name} is a multi-agent env, and a gymnasium.Env is single-agent: gymnasium.make "
        f"and make_vec's 'sync' / 'async' modes (which make one gymnasium.Env per sub-env) "
        f"cannot make it. Use gymnasium.make_vec({gym_id(env_name)!r}, num_envs, "
        f"vectorization_mode='vector_entry_point') (the default: agent rows as sub-envs, "
        f"infos['mask']), shoal.pettingzoo_env.ShoalParallelEnv({env_name!r}) (pettingzoo) "
        f"or shoal.make({env_name!r}, n)")


def register_envs() -> list[str]:
    """Register every first-party env; returns their ids.

    Idempotent: ids already registered are left alone (gymnasium would warn
    "Overriding environment" on a second register()).
    """
    ids = []
    for name in names():
        env_spec = spec(name)
        env_id = gym_id(name)
        ids.append(env_id)
        if env_id in gymnasium.registry:
            continue
        gymnasium.register(
            id=env_id,
            # A gymnasium.Env is single-agent: a multi-agent env has only the
            # vector entry point (its agent rows are the sub-envs) and, outside
            # gymnasium, the pettingzoo view (shoal.pettingzoo_env).
            entry_point=("shoal.registration:make_single_env" if env_spec.agents == 1
                         else "shoal.registration:_multi_agent_make"),   # strings: specs serialise to JSON
            vector_entry_point="shoal.registration:make_native_vector_env",
            kwargs={"env_name": env_spec.name},
            reward_threshold=env_spec.reward_threshold,
            # A header env's is its C limit; a library-backed env's its default (see module doc).
            max_episode_steps=env_spec.max_episode_steps,
        )
    return ids
