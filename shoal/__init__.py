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

import os as _os


def _mixed_checkouts(shoal_dir: str, parts: dict[str, str | None]) -> str | None:
    """Why the subpackage folders `parts` ({"envs": folder of shoal.envs,
    "pool": ...; None: not found}) do not belong with the shoal package in
    `shoal_dir`, or None if they do. setup.py's package_dir maps shoal.envs
    to envs/ and shoal.pool to pool/, so they sit either inside the package
    (an installed wheel: site-packages/shoal/envs) or beside it (a source
    tree, editable install or not: CHECKOUT/shoal and CHECKOUT/envs).
    Anything else is two copies of shoal mixed, e.g. shoal imported from a
    clone's root while shoal.envs comes from another checkout's editable
    install."""
    def same(a, b):
        return _os.path.normcase(_os.path.abspath(a)) == _os.path.normcase(_os.path.abspath(b))

    def fits(resolve):   # every part inside the package, or every part beside it
        base = _os.path.abspath(resolve(shoal_dir))
        return any(all(folder is None or same(resolve(folder), _os.path.join(where, name))
                       for name, folder in parts.items())
                   for where in (base, _os.path.dirname(base)))

    if fits(lambda p: p) or fits(_os.path.realpath):   # as imported, or with symlinks resolved
        return None
    stray = " and ".join(f"shoal.{name} from {folder}" for name, folder in parts.items()
                         if folder is not None)
    return (f"shoal is imported from {shoal_dir} but {stray}: two copies of shoal are mixed, so "
            f"not all the code that runs is the copy you edit. This happens when running from a "
            f"checkout's root (or with PYTHONPATH) while another shoal is installed: a checkout's "
            f"envs/ and pool/ are importable only once it is installed. Install the checkout you "
            f"run (pip install -e {_os.path.dirname(shoal_dir)}, in a venv of its own: see "
            f"docs/new_env.md), or run from outside it.")


def _check_layout() -> None:
    """Warn (RuntimeWarning) when shoal.envs or shoal.pool come from another
    copy of shoal than this package; finds them without importing them."""
    import importlib.util
    import warnings

    parts = {}
    for name in ("envs", "pool"):
        try:
            spec = importlib.util.find_spec(f"{__name__}.{name}")
        except (ImportError, ValueError):
            spec = None
        parts[name] = _os.path.dirname(spec.origin) if spec is not None and spec.origin else None
    if parts["envs"] is None:   # e.g. a checkout's shoal/ on sys.path, no shoal installed
        root = _os.path.dirname(_os.path.dirname(_os.path.abspath(__file__)))
        import importlib.metadata
        try:
            importlib.metadata.distribution("shoal")
            advice = (f"a shoal is installed, but this checkout's shoal/ comes first on sys.path "
                      f"(running from {root}, or PYTHONPATH): run from another directory, or with "
                      f"python -P; or install this checkout instead: pip install -e {root}")
        except importlib.metadata.PackageNotFoundError:
            advice = f"pip install -e {root}"
        raise ModuleNotFoundError(f"No module named 'shoal.envs': shoal was imported from {root}, "
                                  f"a checkout that is not installed (its envs/ and pool/ become "
                                  f"shoal.envs and shoal.pool once installed): {advice}",
                                  name=f"{__name__}.envs")
    problem = _mixed_checkouts(_os.path.dirname(_os.path.abspath(__file__)), parts)
    if problem:
        warnings.warn(problem, RuntimeWarning, stacklevel=2)


def _check_gymnasium() -> None:
    """shoal needs gymnasium >= 1.1 (its vector AutoresetMode). pip may
    leave an older one in place for a package that pins it (Sample Factory
    pins < 1.0); say so here, not as an ImportError deep in a later call."""
    import gymnasium.vector

    if not hasattr(gymnasium.vector, "AutoresetMode"):
        raise ImportError(f"shoal needs gymnasium >= 1.1, and gymnasium {gymnasium.__version__} is "
                          f"installed: pip install 'gymnasium>=1.1'")


_check_layout()
_check_gymnasium()

from shoal.envs import names as env_names  # noqa: E402
from shoal.envs import spec as env_spec  # noqa: E402
from shoal.registration import register_envs as _register_envs  # noqa: E402

_register_envs()


def make(env: str, num_envs: int = 1, backend: str = "multiprocessing", **kwargs):
    """A pool of `num_envs` copies of first-party env `env`.

    backend: "serial" (in this process) or "multiprocessing" (worker
    processes over shared memory). Keyword arguments go to the pool
    (num_workers, batch_size, autoreset_mode, seed, timeout: see
    shoal.pool.NativePool; context, parent_share: multiprocessing only, see
    shoal.pool.Multiprocessing) or, any other, to the env: MuJoCo envs take
    gymnasium's (shoal.make("HalfCheetah", 16, ctrl_cost_weight=0.2)).
    """
    from shoal import pool
    from shoal.pool.native import split_env_kwargs

    backends = {"serial": pool.Serial, "multiprocessing": pool.Multiprocessing}
    if backend not in backends:
        raise ValueError(f"unknown backend {backend!r}; expected one of {sorted(backends)}")
    explicit = kwargs.pop("env_kwargs", None) or {}
    pool_kwargs, env_kwargs = split_env_kwargs(kwargs)
    if backend == "serial":
        for key in ("context", "parent_share"):   # given as None, their default: nothing asked
            if key in pool_kwargs and pool_kwargs[key] is None:
                del pool_kwargs[key]
    processes_only = sorted({"context", "parent_share"} & set(pool_kwargs))
    if backend == "serial" and processes_only:
        raise ValueError(f"{', '.join(processes_only)}: options of backend='multiprocessing' "
                         f"(worker processes); backend='serial' steps every env in this process")
    return backends[backend](env, num_envs, env_kwargs={**explicit, **env_kwargs}, **pool_kwargs)


__all__ = ["make", "env_names", "env_spec", "__version__"]
