"""shoal's first-party environments, of two kinds (docs/design.md):

- header envs: one C header each, bound with Cython. Each env folder holds
  `<env>.h` (the whole env), `binding.pyx` (the vector loop over it) and an
  `__init__.py` that declares its `EnvSpec` as `SPEC`.
- library-backed envs (kind "worker"): envs over a C library whose state
  lives in the worker (envs/mujoco/: MuJoCo; envs/atari/: ale-py's Atari
  games). Such a folder declares several specs as `SPECS`, and its binding
  module builds a binding per spec (`binding_for(spec)`).

The registry is every such folder.
"""
from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass, field

import numpy as np


@dataclass(frozen=True)
class EnvSpec:
    """What a pool needs to know about a first-party env.

    One env has `agents` rows; each row has an observation of `obs_shape`
    and an action: either len(action_nvec) discrete components (component j
    in [0, action_nvec[j])), or, where action_low / action_high are given,
    a float32 Box of that many components.

    kind: "header" (state in a pointer-free struct in shared memory, CPU and
    CUDA) or "worker" (state kept by the worker, CPU only). env_kwargs: the
    env's own keyword arguments (defaults or a pool's choice); configure(**kw)
    returns the spec with some of them changed.
    """

    name: str
    binding: str                     # module holding the Cython Block
    agents: int
    obs_shape: tuple
    obs_dtype: type
    obs_low: np.ndarray | float
    obs_high: np.ndarray | float
    action_nvec: tuple = ()
    discrete_action: bool = True     # one component: Discrete, else MultiDiscrete
    max_episode_steps: int | None = None
    reward_threshold: float | None = None
    metadata: dict = field(default_factory=dict)
    action_low: np.ndarray | None = None    # Box actions: per-component bounds
    action_high: np.ndarray | None = None
    kind: str = "header"
    version: int = 0                 # the gymnasium id's version: shoal/<name>-v<version>
    env_kwargs: dict = field(default_factory=dict)
    configurator: object = None      # f(spec, **kwargs) -> spec; None: the env takes no kwargs

    @property
    def continuous_action(self) -> bool:
        return self.action_low is not None

    @property
    def action_size(self) -> int:
        """Components per action row."""
        return len(self.action_low) if self.continuous_action else len(self.action_nvec)

    def configure(self, **kwargs) -> "EnvSpec":
        """This spec with env keyword arguments changed (e.g. HalfCheetah's
        ctrl_cost_weight=0.2); TypeError naming the accepted ones for any
        other. Without kwargs, the spec itself."""
        if not kwargs:
            return self
        if self.configurator is None:
            raise TypeError(f"{self.name} takes no env keyword arguments, got {sorted(kwargs)}")
        return self.configurator(self, **kwargs)

    def load_binding(self):
        """The compiled binding, checked once against this spec: what the
        spec repeats from the header (rows per env, obs and action sizes,
        obs dtype, step limit) must be what the header says. A module with
        `binding_for` (library-backed envs) gives one binding per spec."""
        module = importlib.import_module(self.binding)
        if hasattr(module, "binding_for"):
            return module.binding_for(self)
        if getattr(module, "_SPEC_CHECKED", None) != self.name:
            check_spec_against_binding(self, module)
            module._SPEC_CHECKED = self.name
        return module

    @property
    def single_observation_space(self):
        from gymnasium import spaces
        return spaces.Box(self.obs_low, self.obs_high, self.obs_shape, self.obs_dtype)

    @property
    def single_action_space(self):
        from gymnasium import spaces
        if self.continuous_action:
            return spaces.Box(np.asarray(self.action_low, np.float32),
                              np.asarray(self.action_high, np.float32), dtype=np.float32)
        if self.discrete_action and len(self.action_nvec) == 1:
            return spaces.Discrete(self.action_nvec[0])
        return spaces.MultiDiscrete(np.array(self.action_nvec, dtype=np.int64))


class SpecMismatchError(ValueError):
    """An env's EnvSpec disagrees with its C header (through the binding)."""


def check_spec_against_binding(spec: EnvSpec, binding) -> None:
    """Raise SpecMismatchError naming every field where `spec` and the
    binding's header exports (AGENTS_PER_ENV, OBS_ELEMENTS, ACT_ELEMENTS,
    OBS_DTYPE, MAX_EPISODE_STEPS where exported) disagree."""
    pairs = [("agents", spec.agents, "AGENTS_PER_ENV"),
             ("obs elements (prod(obs_shape))", int(np.prod(spec.obs_shape)), "OBS_ELEMENTS"),
             ("action components", spec.action_size, "ACT_ELEMENTS"),
             ("obs_dtype", np.dtype(spec.obs_dtype), "OBS_DTYPE"),
             ("max_episode_steps", spec.max_episode_steps, "MAX_EPISODE_STEPS")]
    wrong = []
    for what, in_spec, export in pairs:
        if not hasattr(binding, export):
            continue   # optional exports (a step limit) may be absent
        in_header = getattr(binding, export)
        if export == "OBS_DTYPE":
            in_header = np.dtype(in_header)
        if in_spec != in_header:
            wrong.append(f"{what}: {in_spec!r} in the spec, {in_header!r} in the header ({export})")
    if wrong:
        raise SpecMismatchError(f"{spec.name}'s SPEC disagrees with its C header "
                                f"({spec.binding}): " + "; ".join(wrong))


_PACKAGES = [f"{__name__}.{module.name}" for module in pkgutil.iter_modules(__path__) if module.ispkg]


def _specs() -> dict[str, EnvSpec]:
    """Every registered spec by lookup key: a folder's SPEC under its SPEC.name
    and its folder name, each of a folder's SPECS under its name."""
    found = {}
    for package in _PACKAGES:
        module = importlib.import_module(package)
        if hasattr(module, "SPEC"):
            found[_key(package.rsplit(".", 1)[1])] = module.SPEC
            found[_key(module.SPEC.name)] = module.SPEC
        for one in getattr(module, "SPECS", ()):
            found[_key(one.name)] = one
    return found


def names(kind: str | None = None) -> list[str]:
    """Names of the registered first-party envs (of `kind` "header" or
    "worker" only, if given)."""
    return sorted({s.name for s in _specs().values() if kind is None or s.kind == kind})


def _key(name: str) -> str:
    return name.lower().replace("_", "").replace("-", "")


def spec(name: str, **env_kwargs) -> EnvSpec:
    """The spec of env `name`: its name or folder name, ignoring case, "_"
    and "-" ("CartPole", "cartpole"; "ExplorerPointGoal", "explorer_pointgoal";
    "HalfCheetah", "half_cheetah"), configured with `env_kwargs`."""
    found = _specs()
    if _key(name) not in found:
        raise ValueError(f"unknown env {name!r}; shoal has: {', '.join(names())}")
    return found[_key(name)].configure(**env_kwargs)
