"""shoal's first-party environments, of two kinds (docs/design.md):

- header envs: one C header each, bound with Cython. Each env folder holds
  `<env>.h` (the whole env, its spaces and step limit included),
  `binding.pyx` (the vector loop over it, exporting what the header says)
  and an `__init__.py` whose `SPEC = header_spec(...)` is built from those
  exports, adding only what C cannot hold (name, reward threshold,
  metadata).
- library-backed envs (kind "worker"): envs over a C library whose state
  lives in the worker (envs/mujoco/: MuJoCo; envs/atari/: ale-py's Atari
  games). Such a folder declares several specs as `SPECS`, and its binding
  module builds a binding per spec (`binding_for(spec)`).

The registry is every such folder.
"""
from __future__ import annotations

import difflib
import hashlib
import importlib
import os
import pkgutil
import re
import sys
import warnings
from dataclasses import dataclass, field, fields, replace

import numpy as np


# EnvPool's arguments that shoal names or does otherwise.
_ENVPOOL_ARGUMENTS = {
    "num_threads": "shoal's workers are processes, set by num_workers",
    "thread_affinity_offset": "shoal does not pin workers to cores",
    "env_type": "shoal serves gymnasium's API (the 5-tuple step) only; for EnvPool's "
                "task ids, defaults and one-env observation_space / action_space, use "
                "shoal.envpool_compat.make_gymnasium(task_id, ...) (or wrap a pool in "
                "shoal.envpool_compat.EnvPoolCompat)",
    "frame_skip": "Atari envs take gymnasium's frameskip",
    "use_inter_area_resize": "Atari frames are always resized by OpenCV's INTER_AREA rule",
    "zero_discount_on_life_loss": "Atari's episodic_life=True ends the episode (terminated) at a lost life",
}


def unknown_kwargs_error(env_name: str, unknown, accepted) -> TypeError:
    """The TypeError for env keyword arguments `env_name` does not take, in
    Python's own wording ("got an unexpected keyword argument 'x'", which
    wrappers such as TorchRL's match on to retry without it), with what the
    env takes and, for EnvPool's arguments, shoal's way."""
    unknown = sorted(unknown)
    message = f"{env_name} got an unexpected keyword argument {unknown[0]!r}"
    if len(unknown) > 1:
        message += f" (and {', '.join(map(repr, unknown[1:]))})"
    message += f"; it takes {', '.join(accepted)}" if accepted else "; it takes no env keyword arguments"
    hints = [f"{key}: {_ENVPOOL_ARGUMENTS[key]}" for key in unknown if key in _ENVPOOL_ARGUMENTS]
    if hints:
        message += " (" + "; ".join(hints) + ")"
    return TypeError(message)


def _same_value(a, b) -> bool:
    """a == b, arrays by their values and dtypes (an EnvSpec field)."""
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        a, b = np.asarray(a), np.asarray(b)
        return a.dtype == b.dtype and np.array_equal(a, b)
    return a == b


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
    # True where an agent that terminates while its env goes on is replaced
    # at once in the same row (Snake's respawn): its terminal ends that
    # agent's episode, not the row's part in the env (see pettingzoo_env).
    agents_respawn: bool = False
    # A digest of the files the env reads when its binding is built (a
    # custom MuJoCo xml_file), so that a binding built for one version of
    # them is never reused for another; None: the env's own, fixed files.
    asset_digest: str | None = None

    def __eq__(self, other) -> bool:
        """Field by field, bounds by value: the dataclass's own __eq__ asks
        `==` of numpy bounds, which answers elementwise (Python 3.13 then
        raises; 3.11 compared the same array objects by identity)."""
        if other.__class__ is not self.__class__:
            return NotImplemented
        return all(_same_value(getattr(self, f.name), getattr(other, f.name)) for f in fields(self))

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
        other. Without kwargs, the spec itself. Every header env also
        takes max_episode_steps, a limit up to its header's own (the
        vector loop truncates there: shoal_episode.step_limit)."""
        if not kwargs:
            return self
        if self.kind == "header" and "max_episode_steps" in kwargs:
            limit = kwargs.pop("max_episode_steps")
            return self._with_step_limit(limit).configure(**kwargs)
        if self.configurator is None:
            accepted = ("max_episode_steps",) if self.kind == "header" else ()
            raise unknown_kwargs_error(self.name, kwargs, accepted)
        return self.configurator(self, **kwargs)

    def _with_step_limit(self, limit) -> "EnvSpec":
        """A header env's spec truncating episodes after `limit` steps (None:
        at the header's own limit). A pool can only shorten episodes: the
        header's limit is part of the env (ValueError beyond it)."""
        own = import_binding(self.binding, self.name).MAX_EPISODE_STEPS or None
        if limit is None:
            limit = own
        if isinstance(limit, bool) or not isinstance(limit, (int, np.integer)) or limit < 1 \
                or (own is not None and limit > own):
            bound = f"an int in [1, {own}] (its C header truncates at {own}; a pool " \
                    f"can shorten episodes, not lengthen them)" if own else "an int >= 1"
            raise ValueError(f"{self.name}'s max_episode_steps must be {bound}, got {limit!r}")
        env_kwargs = {key: value for key, value in self.env_kwargs.items() if key != "max_episode_steps"}
        if limit != own:
            env_kwargs["max_episode_steps"] = int(limit)
        return replace(self, max_episode_steps=int(limit) if limit else None, env_kwargs=env_kwargs)

    def load_binding(self):
        """The compiled binding, checked against this spec (once per spec
        object): every field the header also holds must be what the header
        says (SpecMismatchError); BindingNotBuiltError, saying how to build
        it, if it is not built. A module with `binding_for` (library-backed
        envs) gives one binding per spec."""
        module = import_binding(self.binding, self.name)
        if hasattr(module, "binding_for"):
            return module.binding_for(self)
        if getattr(module, "_SPEC_CHECKED", None) is not self:
            check_spec_against_binding(self, module)
            module._SPEC_CHECKED = self
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


class BindingNotBuiltError(ImportError):
    """An env's compiled binding is missing, older than the shared binding
    code (envs/vec_binding.pxi), or built from another version of its
    header (edited since, or the binding copied from another env)."""

    def __init__(self, env_name: str, message: str):
        super().__init__(message)
        self.env_name = env_name


_BUILD_HINT = ("build the extensions: `python setup.py build_ext --inplace` in the source "
               "checkout, or reinstall shoal (`pip install .`)")


def import_binding(module_name: str, env_name: str):
    """Import env `env_name`'s binding module; BindingNotBuiltError saying
    how to build it if it is not there."""
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as e:
        if e.name is None or not (module_name == e.name or module_name.startswith(e.name + ".")):
            raise   # something the binding itself imports is missing
        package = sys.modules.get(module_name.rpartition(".")[0])   # being imported: it calls us
        folder = os.path.dirname(getattr(package, "__file__", None) or "")
        if folder and not os.path.exists(os.path.join(folder, "binding.pyx")):
            raise BindingNotBuiltError(env_name, f"{env_name}'s folder {folder} has no binding.pyx, which "
                                                 f"setup.py compiles into its binding (docs/new_env.md)") from e
        raise BindingNotBuiltError(env_name, f"{env_name}'s binding {module_name} is not built: "
                                             f"{_BUILD_HINT}") from e


def header_digest(path) -> str:
    """The digest setup.py stamps into a header env's binding (its
    SHOAL_HEADER_DIGEST; the same sum, written there once more)."""
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()[:16]


def _check_built_from_header(name: str, package: str, binding) -> None:
    """BindingNotBuiltError if the binding was stamped with another digest
    than its folder's header has now (edited since the build; a binding
    copied from another env). Unstamped builds and installs without the
    header are not checked."""
    built_from = getattr(binding, "HEADER_DIGEST", "")
    folder = os.path.dirname(getattr(sys.modules.get(package), "__file__", None) or "")
    header = os.path.join(folder, package.rpartition(".")[2] + ".h")
    if built_from and folder and os.path.isfile(header) and header_digest(header) != built_from:
        raise BindingNotBuiltError(name, f"{name}'s binding {binding.__name__} was built from another "
                                         f"version of {header} (edited since the build, or the binding "
                                         f"was copied from another env's folder): {_BUILD_HINT}")


# What a header env's binding exports for its spec (envs/vec_binding.pxi).
_HEADER_EXPORTS = ("AGENTS_PER_ENV", "OBS_ELEMENTS", "OBS_DTYPE", "OBS_LOW", "OBS_HIGH",
                   "ACT_NVEC", "MAX_EPISODE_STEPS")


def header_spec(name: str, package: str, **python_fields) -> EnvSpec:
    """The EnvSpec of the header env in `package` (its __init__ passes
    __name__), built from what its compiled binding (`package`.binding)
    exports from the header: agents, obs_shape (one flat row), obs_dtype,
    obs_low / obs_high, action_nvec, discrete_action (one component:
    Discrete) and max_episode_steps.

    `python_fields` are the rest, what C cannot hold: reward_threshold,
    metadata (render_fps), version, env_kwargs, configurator. A field the
    header holds may be given too (obs_shape=(11, 11), a documenting
    max_episode_steps): it is checked against the header here, a
    SpecMismatchError naming it if they disagree. BindingNotBuiltError,
    saying how to build it, if the binding is not built or is older than
    the header's exports."""
    for fixed in ("binding", "kind"):
        if fixed in python_fields:
            raise TypeError(f"header_spec sets {fixed!r} itself")
    module_name = f"{package}.binding"
    binding = import_binding(module_name, name)
    missing = [export for export in _HEADER_EXPORTS if not hasattr(binding, export)]
    if missing:
        raise BindingNotBuiltError(name, f"{name}'s binding {module_name} is older than "
                                         f"envs/vec_binding.pxi (no {', '.join(missing)}): {_BUILD_HINT}")
    _check_built_from_header(name, package, binding)
    nvec = tuple(binding.ACT_NVEC)
    _check_header_tables(name, binding)
    _check_box_bounds(name, python_fields, len(nvec))   # (P_act_nvec has P_act_size entries)
    fields = {"name": name,
              "binding": module_name,
              "agents": binding.AGENTS_PER_ENV,
              "obs_shape": (binding.OBS_ELEMENTS,),
              "obs_dtype": np.dtype(binding.OBS_DTYPE).type,
              "obs_low": binding.OBS_LOW,
              "obs_high": binding.OBS_HIGH,
              "action_nvec": nvec,
              "discrete_action": len(nvec) == 1 and "action_low" not in python_fields,
              "max_episode_steps": binding.MAX_EPISODE_STEPS,
              **python_fields}
    shape = tuple(fields["obs_shape"])
    for bound in ("obs_low", "obs_high"):   # per-element bounds take a Python obs_shape
        if bound not in python_fields and np.ndim(fields[bound]) and np.size(fields[bound]) == np.prod(shape):
            fields[bound] = fields[bound].reshape(shape)
    spec = EnvSpec(**fields)
    check_spec_against_binding(spec, binding)
    binding._SPEC_CHECKED = spec   # load_binding need not check it again
    return spec


def _check_box_bounds(name: str, python_fields: dict, components: int) -> None:
    """A Box env's action_low / action_high (given in Python): both, one
    number per action component, low <= high; SpecMismatchError naming
    what is wrong otherwise (gymnasium's Box would fail later, at make)."""
    given = [key for key in ("action_low", "action_high") if python_fields.get(key) is not None]
    if not given:
        return
    if len(given) == 1:
        other = "action_high" if given == ["action_low"] else "action_low"
        raise SpecMismatchError(f"{name}: {given[0]} is given without {other}: a Box env gives both, "
                                f"one number per action component ({components})")
    low = np.asarray(python_fields["action_low"], np.float64)
    high = np.asarray(python_fields["action_high"], np.float64)
    for key, bound in (("action_low", low), ("action_high", high)):
        if bound.shape != (components,):
            raise SpecMismatchError(f"{name}: {key} has shape {bound.shape}; the header's actions have "
                                    f"{components} component(s) (P_act_size): give one bound per component")
    if (low > high).any() or np.isnan(low).any() or np.isnan(high).any():
        k = int(np.flatnonzero(~(low <= high))[0])
        raise SpecMismatchError(f"{name}: action_low[{k}] = {low[k]} is not <= action_high[{k}] = {high[k]}")


def _check_header_tables(name: str, binding) -> None:
    """The header's own tables make sense (SpecMismatchError naming the
    table otherwise), before gymnasium's spaces or the pool meet them:
    obs_low <= obs_high per element, every act_nvec entry >= 1 (for a
    discrete env), and P_max_steps >= 0 (0: no limit)."""
    wrong = []
    low, high = np.asarray(binding.OBS_LOW, np.float64), np.asarray(binding.OBS_HIGH, np.float64)
    try:
        above = np.flatnonzero(low > high)   # (a scalar bound broadcasts)
    except ValueError:
        above = []
        wrong.append(f"obs_low has {low.size} entries and obs_high {high.size}")
    if len(above):
        k = above[0]
        wrong.append(f"obs_low[{k}] is above obs_high[{k}] ({len(above)} element(s)): swapped tables?")
    if np.dtype(getattr(binding, "ACT_DTYPE", np.int32)).kind in "iu":
        bad = [int(n) for n in binding.ACT_NVEC if int(n) < 1]
        if bad or not len(binding.ACT_NVEC):
            wrong.append(f"act_nvec {tuple(int(n) for n in binding.ACT_NVEC)}: every entry must be >= 1 "
                         f"(a component with n choices), and there must be one per action component")
    if binding.MAX_EPISODE_STEPS is not None and binding.MAX_EPISODE_STEPS < 0:
        wrong.append(f"max_steps {binding.MAX_EPISODE_STEPS}: must be >= 0 (0: no limit)")
    if wrong:
        raise SpecMismatchError(f"{name}'s C header ({binding.__name__}) has tables that cannot be: "
                                + "; ".join(wrong))


def _bound_mismatch(in_spec, in_header, size: int, dtype: np.dtype) -> str | None:
    """Where the obs bound `in_spec` (scalar or per element) differs from the
    header's, compared as obs elements of `dtype`; None if nowhere."""
    as_type = dtype if dtype.kind == "f" else np.float64   # no integer wrap-around
    def per_element(bound):
        array = np.asarray(bound).astype(as_type)
        return np.broadcast_to(array.reshape(size) if array.size == size else array, (size,))
    try:
        ours = per_element(in_spec)
    except ValueError:
        return f"shape {np.shape(in_spec)} in the spec, {np.shape(in_header) or 'a scalar'} in the header"
    theirs = per_element(in_header)
    differ = np.flatnonzero(ours != theirs)
    if not len(differ):
        return None
    k = differ[0]
    return (f"element {k} is {ours[k]!r} in the spec, {theirs[k]!r} in the header"
            + (f" ({len(differ)} elements differ)" if len(differ) > 1 else ""))


def check_spec_against_binding(spec: EnvSpec, binding) -> None:
    """Raise SpecMismatchError naming every field where `spec` and the
    binding's header exports (AGENTS_PER_ENV, OBS_ELEMENTS, ACT_ELEMENTS,
    OBS_DTYPE, OBS_LOW, OBS_HIGH, ACT_NVEC, MAX_EPISODE_STEPS: each where
    exported) disagree."""
    size = int(np.prod(spec.obs_shape))
    pairs = [("agents", spec.agents, "AGENTS_PER_ENV"),
             ("obs elements (prod(obs_shape))", size, "OBS_ELEMENTS"),
             ("action components", spec.action_size, "ACT_ELEMENTS"),
             ("obs_dtype", np.dtype(spec.obs_dtype), "OBS_DTYPE"),
             ("max_episode_steps", spec.max_episode_steps, "MAX_EPISODE_STEPS")]
    if not spec.continuous_action:
        pairs.append(("action_nvec", tuple(int(n) for n in spec.action_nvec), "ACT_NVEC"))
    wrong = []
    for what, in_spec, export in pairs:
        if not hasattr(binding, export):
            continue   # optional exports (library-backed envs) may be absent
        in_header = getattr(binding, export)
        if export == "MAX_EPISODE_STEPS" and "max_episode_steps" in spec.env_kwargs:
            # configured shorter (EnvSpec._with_step_limit checked it)
            if in_spec is not None and (not in_header or 1 <= in_spec <= in_header):
                continue
        if export == "OBS_DTYPE":
            in_header = np.dtype(in_header)
        elif export == "ACT_NVEC":
            in_header = tuple(int(n) for n in in_header)
        if in_spec != in_header:
            wrong.append(f"{what}: {in_spec!r} in the spec, {in_header!r} in the header ({export})")
    if hasattr(binding, "ACT_DTYPE"):
        # the pool copies discrete actions as int32 and Box actions as float32
        wanted = np.dtype(np.float32 if spec.continuous_action else np.int32)
        if np.dtype(binding.ACT_DTYPE) != wanted:
            kind = "Box" if spec.continuous_action else "discrete"
            wrong.append(f"action dtype: the spec's {kind} actions are {wanted}, the header's "
                         f"{np.dtype(binding.ACT_DTYPE)} (ACT_DTYPE: a header's act_t is int32_t for "
                         f"discrete actions, float for Box actions with action_low / action_high)")
    dtype = np.dtype(getattr(binding, "OBS_DTYPE", spec.obs_dtype))
    for what, in_spec, export in (("obs_low", spec.obs_low, "OBS_LOW"),
                                  ("obs_high", spec.obs_high, "OBS_HIGH")):
        if hasattr(binding, export) and getattr(binding, "OBS_ELEMENTS", size) == size:
            # (of another obs size, the bounds' shapes differ too: said once, above)
            where = _bound_mismatch(in_spec, getattr(binding, export), size, dtype)
            if where:
                wrong.append(f"{what}: {where} ({export})")
    if wrong:
        raise SpecMismatchError(f"{spec.name}'s SPEC disagrees with its C header "
                                f"({spec.binding}): " + "; ".join(wrong))


_PACKAGES = [f"{__name__}.{module.name}" for module in pkgutil.iter_modules(__path__) if module.ispkg]


_broken_warned: set = set()   # env folders that did not load, (folder, name) collisions: warned of once


def _specs(unbuilt: dict | None = None) -> dict[str, EnvSpec]:
    """Every registered spec by lookup key: a folder's SPEC under its SPEC.name
    and its folder name, each of a folder's SPECS under its name. A header
    env whose binding is not built has no spec: it is left out with a
    warning (its error put in `unbuilt` under both keys), so the other envs
    still work."""
    found = {}
    for package in _PACKAGES:
        folder = package.rsplit(".", 1)[1]
        try:
            module = importlib.import_module(package)
        except BindingNotBuiltError as e:
            # (said once: gymnasium.make's "doesn't exist" would not say why)
            if folder not in _broken_warned:
                _broken_warned.add(folder)
                warnings.warn(f"shoal: env folder envs/{folder} is not built ({e}); the other envs work",
                              stacklevel=3)
            if unbuilt is not None:
                unbuilt[_key(folder)] = unbuilt[_key(e.env_name)] = e
            continue
        except Exception as e:   # ImportError, SpecMismatchError, a typo in its __init__.py
            # One broken env folder (a binding that does not load, a SPEC at
            # odds with its header: an env being written) is that env's
            # error, not every env's: said once, raised when it is asked for.
            if folder not in _broken_warned:
                _broken_warned.add(folder)
                warnings.warn(f"shoal: env folder envs/{folder} does not load ({type(e).__name__}: {e}); "
                              f"the other envs work", stacklevel=3)
            if unbuilt is not None:
                unbuilt[_key(folder)] = e
            continue
        specs = [(folder, module.SPEC), (module.SPEC.name, module.SPEC)] if hasattr(module, "SPEC") else []
        specs += [(one.name, one) for one in getattr(module, "SPECS", ())]
        initializing = getattr(getattr(module, "__spec__", None), "_initializing", False)
        if not specs and not initializing and folder not in _broken_warned:   # a misspelt SPEC, say
            _broken_warned.add(folder)
            warnings.warn(f"shoal: env folder envs/{folder} defines no SPEC (nor SPECS): it registers "
                          f"no env (docs/new_env.md)", stacklevel=3)
        for name, one in specs:
            taken = found.get(_key(name))
            if taken is not None and taken.binding != one.binding:
                # the env found first keeps the name (folders in sorted order):
                # a new env never silently replaces an existing one
                if (folder, name) not in _broken_warned:
                    _broken_warned.add((folder, name))
                    warnings.warn(f"shoal: env folder envs/{folder} registers {name!r}, a name "
                                  f"{taken.name} ({taken.binding}) already has; envs/{folder}'s env is left "
                                  f"out under it (its folder name, {folder!r}, still finds it): give it "
                                  f"another name", stacklevel=3)
                continue
            found[_key(name)] = one
    return found


def names(kind: str | None = None) -> list[str]:
    """Names of the registered first-party envs (of `kind` "header" or
    "worker" only, if given). Header envs whose binding is not built are
    left out; spec(name) says how to build them."""
    return sorted({s.name for s in _specs().values() if kind is None or s.kind == kind})


def _key(name: str) -> str:
    return name.lower().replace("_", "").replace("-", "")


def spec(name: str, **env_kwargs) -> EnvSpec:
    """The spec of env `name`: its name or folder name, ignoring case, "_"
    and "-" ("CartPole", "cartpole"; "ExplorerPointGoal", "explorer_pointgoal";
    "HalfCheetah", "half_cheetah"), configured with `env_kwargs`."""
    if isinstance(name, EnvSpec):   # a spec made by hand (header_spec, an out-of-tree env)
        return name.configure(**env_kwargs)
    if not isinstance(name, str):
        raise TypeError(f"an env is named by a str (or given as an EnvSpec), got {type(name).__name__}")
    unbuilt = {}
    found = _specs(unbuilt)
    if _key(name) not in found:
        if _key(name) in unbuilt:
            error = unbuilt[_key(name)]
            if isinstance(error, BindingNotBuiltError):
                raise BindingNotBuiltError(error.env_name, str(error))
            try:
                retold = type(error)(f"{name}: its env folder does not load: {error}")
            except Exception:   # an exception class with other arguments
                retold = ImportError(f"{name}: its env folder does not load: {error!r}")
            raise retold from error
        raise ValueError(_unknown_env_message(name, found))
    return found[_key(name)].configure(**env_kwargs)


def _names_a_gymnasium_env(name: str) -> bool:
    """Registered with gymnasium, or shaped as a gymnasium id ("Name-v3",
    "MiniGrid-Empty-5x5-v0", whose package may not be imported yet)."""
    import gymnasium
    return name in gymnasium.registry or re.search(r"-v\d+$", name) is not None


def _unknown_env_message(name: str, found: dict) -> str:
    """Why `name` names no env, with the likeliest meant one first: a
    gymnasium id ("CartPole-v1", "shoal/Pong-v5", "ALE/Pong-v5") names the
    env without its namespace and version; else the closest names."""
    bare = re.sub(r"-v\d+$", "", str(name).rsplit("/", 1)[-1])
    if _key(bare) in found:
        meant = [found[_key(bare)].name]
    else:
        by_key = {_key(n): n for n in names()}
        meant = [by_key[k] for k in difflib.get_close_matches(_key(bare), by_key, n=3, cutoff=0.6)]
    hint = f"did you mean {' or '.join(repr(m) for m in meant)}? " if meant else ""
    if not meant and _names_a_gymnasium_env(name):
        hint = (f"it names no env of shoal's, but a gymnasium id: a Python env steps in shoal's pool for "
                f"Python envs, shoal.pool.AsyncVectorEnv([lambda: gymnasium.make({str(name)!r})] * num_envs) "
                f"(README, 'gymnasium'). ")
    here = os.path.dirname(__file__)
    for folder in os.listdir(here):   # an env being written, its folder not a package yet
        if _key(folder) == _key(bare) and os.path.isdir(os.path.join(here, folder)) \
                and not os.path.exists(os.path.join(here, folder, "__init__.py")):
            hint += (f"(envs/{folder}/ has no __init__.py, so it is no env folder yet: see "
                     f"docs/new_env.md) ")
    return (f"unknown env {name!r}; {hint}shoal's envs go by name alone, with no namespace or version "
            f"('shoal/<name>-v<N>' is the gymnasium id, for gymnasium.make and make_vec). "
            f"shoal has: {', '.join(names())}")
