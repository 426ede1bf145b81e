"""shoal's first-party environments: one C header each, bound with Cython.

Each env folder holds `<env>.h` (the whole env), `binding.pyx` (the vector
loop over it) and an `__init__.py` that declares its `EnvSpec` as `SPEC`.
The registry is every such folder (its name, lowercase, is the env's key).
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
    and an action of len(action_nvec) discrete components (component j in
    [0, action_nvec[j])).
    """

    name: str
    binding: str                     # module holding the Cython Block
    agents: int
    obs_shape: tuple
    obs_dtype: type
    obs_low: np.ndarray | float
    obs_high: np.ndarray | float
    action_nvec: tuple
    discrete_action: bool = True     # one component: Discrete, else MultiDiscrete
    max_episode_steps: int | None = None
    reward_threshold: float | None = None
    metadata: dict = field(default_factory=dict)

    def load_binding(self):
        """The compiled binding, checked once against this spec: what the
        spec repeats from the header (rows per env, obs and action sizes,
        obs dtype, step limit) must be what the header says."""
        module = importlib.import_module(self.binding)
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
             ("action components (len(action_nvec))", len(spec.action_nvec), "ACT_ELEMENTS"),
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


_REGISTRY: dict[str, str] = {
    module.name: f"{__name__}.{module.name}" for module in pkgutil.iter_modules(__path__) if module.ispkg
}


def names() -> list[str]:
    """Names of the registered first-party envs."""
    return sorted(importlib.import_module(m).SPEC.name for m in _REGISTRY.values())


def _key(name: str) -> str:
    return name.lower().replace("_", "").replace("-", "")


def spec(name: str) -> EnvSpec:
    """The spec of env `name`: its SPEC.name or folder name, ignoring case,
    "_" and "-" ("CartPole", "cartpole"; "ExplorerPointGoal", "explorer_pointgoal")."""
    by_key = {_key(folder): module for folder, module in _REGISTRY.items()}
    if _key(name) not in by_key:
        raise ValueError(f"unknown env {name!r}; shoal has: {', '.join(names())}")
    return importlib.import_module(by_key[_key(name)]).SPEC
