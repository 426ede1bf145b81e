"""A header env's SPEC is built from its C header, through what the binding
exports (sizes, dtype, obs bounds, action nvec, step limit); whatever a spec
adds or repeats in Python is checked against the header, so the two cannot
drift apart silently."""
import dataclasses
import importlib
import os
import shutil
from pathlib import Path

import gymnasium
import numpy as np
import pytest

import shoal
from shoal.bench.timing import action_table
from shoal.envs import (BindingNotBuiltError, SpecMismatchError, check_spec_against_binding,
                        header_spec)
from shoal.pool import Serial

ENVS_DIR = Path(shoal.envs.__file__).parent
HEADER_ENVS = sorted(p.name for p in ENVS_DIR.iterdir() if (p / f"{p.name}.h").is_file())


def header_env(folder):
    return (importlib.import_module(f"shoal.envs.{folder}").SPEC,
            importlib.import_module(f"shoal.envs.{folder}.binding"))


def per_element(bound, spec):
    return np.broadcast_to(np.asarray(bound, np.float64), (int(np.prod(spec.obs_shape)),))


def test_every_header_env_folder_is_found():
    assert {"cartpole", "corridor", "drive", "explorer", "explorer_pointgoal", "snake"} <= set(HEADER_ENVS)
    assert set(EXPECTED) <= set(HEADER_ENVS), "EXPECTED names a folder that is not a header env"


def test_every_header_env_follows_the_naming_rule():
    """docs/new_env.md's rule: a header env's folder and header file are one
    name. The layout and kernel tests find a header env by `<folder>/<folder>.h`;
    a folder whose header is named otherwise would drop out of them silently,
    so it fails here instead."""
    for spec in (shoal.envs.spec(name) for name in shoal.envs.names("header")):
        folder = spec.binding.split(".")[-2]
        assert (ENVS_DIR / folder / f"{folder}.h").is_file(), \
            f"envs/{folder}/ has no {folder}.h: its header must be named after the folder (docs/new_env.md)"


@pytest.mark.parametrize("folder", HEADER_ENVS)
def test_a_header_spec_is_what_its_header_says(folder):
    spec, binding = header_env(folder)
    assert spec.kind == "header" and spec.binding == binding.__name__
    assert spec.agents == binding.AGENTS_PER_ENV
    assert int(np.prod(spec.obs_shape)) == binding.OBS_ELEMENTS
    assert np.dtype(spec.obs_dtype) == binding.OBS_DTYPE
    np.testing.assert_array_equal(per_element(spec.obs_low, spec), per_element(binding.OBS_LOW, spec))
    np.testing.assert_array_equal(per_element(spec.obs_high, spec), per_element(binding.OBS_HIGH, spec))
    assert tuple(spec.action_nvec) == binding.ACT_NVEC and len(binding.ACT_NVEC) == binding.ACT_ELEMENTS
    assert spec.max_episode_steps == binding.MAX_EPISODE_STEPS
    obs_space, act_space = spec.single_observation_space, spec.single_action_space
    np.testing.assert_array_equal(obs_space.low, per_element(binding.OBS_LOW, spec))
    np.testing.assert_array_equal(obs_space.high, per_element(binding.OBS_HIGH, spec))
    if spec.continuous_action:   # Box: float actions, bounds from the env's __init__ (Python)
        assert np.dtype(binding.ACT_DTYPE) == np.float32 and not spec.discrete_action
        assert act_space == gymnasium.spaces.Box(np.float32(spec.action_low), np.float32(spec.action_high),
                                                 dtype=np.float32)
    elif len(binding.ACT_NVEC) == 1:
        assert act_space == gymnasium.spaces.Discrete(binding.ACT_NVEC[0])
    else:
        assert act_space == gymnasium.spaces.MultiDiscrete(binding.ACT_NVEC)
    check_spec_against_binding(spec, binding)


# What the headers say, written out once more here so that a slip in the
# export path (envs/vec_binding.pxi) shows: (low, high) per element where
# they vary, nvec, step limit. Every header env has an entry: a new env
# declares its values here (test_the_exports_are_the_headers_values fails
# without one, saying so).
EXPLORER_LOW = np.r_[np.zeros(64), -0.5, -1.0, 0.0, 0.0]
CARTPOLE_HIGH = np.array([4.8, np.inf, 2 * 12 * 2 * np.pi / 360, np.inf], np.float32)  # gymnasium's
EXPECTED = {
    "cartpole": (-CARTPOLE_HIGH, CARTPOLE_HIGH, (2,), 500),
    "corridor": (0.0, 1.0, (2,), 64),
    "snake": (0, 6, (4,), 1000),
    "drive": (-1.0, 1.0, (35,), 200),
    "explorer": (EXPLORER_LOW, 1.0, (3, 3), 500),
    "explorer_pointgoal": (np.r_[EXPLORER_LOW[:66], -1.0, -1.0], 1.0, (3, 3), 500),
}


@pytest.mark.parametrize("folder", HEADER_ENVS)
def test_the_exports_are_the_headers_values(folder):
    assert folder in EXPECTED, (
        f"envs/{folder}/ has no expected values in tests/test_spec.py's EXPECTED: add "
        f"\"{folder}\": (obs_low, obs_high, action nvec, max_episode_steps) as {folder}.h defines "
        f"them, e.g. \"{folder}\": (0.0, 1.0, (3,), 100)")
    spec, binding = header_env(folder)
    low, high, nvec, steps = EXPECTED[folder]
    np.testing.assert_array_equal(per_element(binding.OBS_LOW, spec), per_element(low, spec))
    np.testing.assert_array_equal(per_element(binding.OBS_HIGH, spec), per_element(high, spec))
    assert (binding.ACT_NVEC, binding.MAX_EPISODE_STEPS) == (nvec, steps)


def test_cartpole_spaces_are_gymnasiums():
    ours, theirs = shoal.env_spec("CartPole"), gymnasium.make("CartPole-v1")
    assert ours.single_observation_space == theirs.observation_space
    assert ours.single_action_space == theirs.action_space
    assert ours.max_episode_steps == theirs.spec.max_episode_steps
    assert ours.reward_threshold == theirs.spec.reward_threshold


@pytest.mark.parametrize("folder", HEADER_ENVS)
def test_observations_stay_within_the_header_bounds(folder):
    spec, binding = header_env(folder)
    pool = Serial(spec.name, 2, seed=0)
    table = action_table(2 * spec.agents, spec, table_rows=64, dtype=binding.ACT_DTYPE)
    low, high = per_element(spec.obs_low, spec), per_element(spec.obs_high, spec)
    obs, _ = pool.reset(seed=0)
    for t in range(150):
        rows = obs.reshape(len(obs), -1)
        assert ((rows >= low) & (rows <= high)).all(), f"step {t}: obs outside the header's bounds"
        obs = pool.step(table[t % len(table)])[0]
    pool.close()


@pytest.mark.parametrize("folder", HEADER_ENVS)
def test_a_step_returns_one_exactly_when_every_live_row_ended(folder):
    """The header contract: P_step returns 1 exactly when the episode is
    over (every row live before the step is terminated or truncated). The
    pool autoresets and counts episodes by that return alone, so a step
    that sets every flag and returns 0 (or the reverse) ran on silently:
    checked here over random play, per env and step, from the episodes the
    pool counted."""
    spec, binding = header_env(folder)
    num_envs = 8
    if not spec.max_episode_steps or spec.max_episode_steps > 200:   # (Snake's end only at the limit)
        spec = shoal.envs.spec(spec.name, max_episode_steps=200)
    pool = Serial(spec, num_envs, seed=0)
    table = action_table(num_envs * spec.agents, spec, table_rows=64, dtype=binding.ACT_DTYPE, seed=1)
    pool.reset(seed=0)
    ends = 0
    for t in range(600):
        live = pool.masks.reshape(num_envs, spec.agents).copy()
        before = pool._buffers.episodes["finished"].copy()
        _, _, term, trunc, _ = pool.step(table[t % len(table)])
        ended = (term | trunc).reshape(num_envs, spec.agents)
        over = live.any(axis=1) & (ended | ~live).all(axis=1)
        counted = pool._buffers.episodes["finished"] > before
        assert (over == counted).all(), (f"step {t}: envs {np.flatnonzero(over != counted).tolist()}: every "
                                         f"live row ended {over[over != counted].tolist()}, the step returned 1 "
                                         f"{counted[over != counted].tolist()}")
        ends += int(over.sum())
    pool.close()
    assert ends > 0, "no episode ended in 600 random steps: the check saw nothing"


@pytest.mark.parametrize("folder", HEADER_ENVS)
def test_a_header_writes_only_its_own_rows(folder):
    """A header that writes past obs_size (or past its own env state or
    rows) would only overwrite the next env's row, which that env then
    rewrites, so nothing else sees it: the last env of a pool writes past the
    buffer. Here its block stops one env short of the buffers, and that
    guard env's every byte (state, episode, obs, final obs, rewards, flags,
    masks) must be untouched after resets and random play in every
    autoreset mode."""
    from shoal.pool import layout
    spec, binding = header_env(folder)
    num_envs, guard = 5, 5   # the block steps envs [0, 5); env 5 is the guard
    if not spec.max_episode_steps or spec.max_episode_steps > 200:
        spec = shoal.envs.spec(spec.name, max_episode_steps=200)   # episodes end, so autoresets run
    table = action_table(num_envs * spec.agents, spec, table_rows=64, dtype=binding.ACT_DTYPE, seed=1)
    rows = slice(guard * spec.agents, (guard + 1) * spec.agents)
    for mode in (0, 1, 2):
        buffers = layout.Buffers(spec, num_envs=num_envs + 1, num_workers=1, shared=False)
        try:
            guarded = {"env_states": buffers.env_states.reshape(num_envs + 1, -1)[guard],
                       "episodes": buffers.episodes[guard:].view(np.uint8)}
            guarded.update({name: getattr(buffers, name)[rows].view(np.uint8)
                            for name in ("obs", "final_obs", "rewards", "terminals", "truncations", "masks")})
            for view in guarded.values():
                view[...] = 0xA5
            before = {name: view.copy() for name, view in guarded.items()}
            block = binding.Block(buffers, 0, num_envs, mode, keep_final_obs=(mode == 1))
            buffers.reset_requests[:num_envs] = layout.RESEED
            buffers.seeds[:num_envs] = np.arange(num_envs)
            block.reset()
            for t in range(400):
                buffers.actions[:num_envs * spec.agents] = table[t % len(table)]
                block.step()
                if mode == 2 and t % 50 == 49:   # DISABLED: the pool resets ended envs itself
                    block.reset()
            for name, view in guarded.items():
                assert np.array_equal(view, before[name]), \
                    f"{spec.name} (autoreset mode {mode}) wrote past its rows into the next env's {name}"
        finally:
            buffers.close()


def test_every_shipped_spec_matches_its_header():
    for name in shoal.envs.names():
        spec = shoal.env_spec(name)
        try:
            binding = spec.load_binding()
        except ImportError:   # a library-backed env whose extra is not installed
            continue
        check_spec_against_binding(spec, binding)   # raises on a mismatch
        assert binding.MAX_EPISODE_STEPS == spec.max_episode_steps


@pytest.mark.parametrize("field, value, named", [
    ("max_episode_steps", 499, "max_episode_steps: 499 in the spec, 500 in the header"),
    ("agents", 2, "agents: 2 in the spec, 1 in the header"),
    ("obs_shape", (5,), r"obs elements \(prod\(obs_shape\)\): 5 in the spec, 4 in the header \(OBS_ELEMENTS\)$"),
    ("action_nvec", (2, 2), "action components"),
    ("action_nvec", (3,), r"action_nvec: \(3,\) in the spec, \(2,\) in the header \(ACT_NVEC\)"),
    ("obs_dtype", np.float64, "obs_dtype"),
    ("obs_low", -1.0, r"obs_low: element 0 is .*-1\.0.* in the spec, .*-4\.8.* in the header \(4 elements differ\)"),
    ("obs_high", np.array([4.8, np.inf, 0.5, np.inf], np.float32), r"obs_high: element 2 is .*0\.5.* in the spec"),
    ("obs_high", np.ones(3, np.float32), "obs_high: shape"),
])
def test_a_spec_that_disagrees_with_its_header_is_refused(field, value, named):
    spec = dataclasses.replace(shoal.env_spec("CartPole"), **{field: value})
    with pytest.raises(SpecMismatchError, match=named):
        check_spec_against_binding(spec, spec.load_binding())
    with pytest.raises(SpecMismatchError, match=named):   # load_binding checks every spec it is given
        spec.load_binding()


def test_per_element_bounds_name_the_element():
    spec = dataclasses.replace(shoal.env_spec("Explorer"), obs_low=0.0)
    with pytest.raises(SpecMismatchError, match=r"obs_low: element 64 is .*0\.0.* in the spec, "
                                                r".*-0\.5.* in the header \(2 elements differ\)"):
        spec.load_binding()


def test_fields_given_in_python_are_checked_when_the_spec_is_built():
    with pytest.raises(SpecMismatchError, match="max_episode_steps: 499"):
        header_spec("CartPole", "shoal.envs.cartpole", max_episode_steps=499)
    with pytest.raises(SpecMismatchError, match="action_nvec"):
        header_spec("CartPole", "shoal.envs.cartpole", action_nvec=(3,))
    spec = header_spec("CartPole", "shoal.envs.cartpole", obs_shape=(2, 2), max_episode_steps=500)
    assert spec.obs_shape == (2, 2) and spec.single_observation_space.shape == (2, 2)
    np.testing.assert_array_equal(spec.single_observation_space.high.reshape(4),
                                  shoal.env_spec("CartPole").single_observation_space.high)
    with pytest.raises(TypeError, match="binding"):
        header_spec("CartPole", "shoal.envs.cartpole", binding="elsewhere")


def test_an_unbuilt_binding_says_how_to_build_it(tmp_path, monkeypatch):
    package = tmp_path / "shoal_spec_test_envs"
    (package / "unbuilt").mkdir(parents=True)
    (package / "stale").mkdir()
    (package / "__init__.py").write_text("")
    init = "from shoal.envs import header_spec\nSPEC = header_spec({!r}, __name__)\n"
    (package / "unbuilt" / "__init__.py").write_text(init.format("Unbuilt"))
    (package / "unbuilt" / "binding.pyx").write_text("")   # its source, not yet compiled
    (package / "stale" / "__init__.py").write_text(init.format("Stale"))
    (package / "stale" / "binding.py").write_text("AGENTS_PER_ENV, OBS_ELEMENTS, ACT_ELEMENTS = 1, 2, 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(BindingNotBuiltError, match=r"Unbuilt's binding shoal_spec_test_envs\.unbuilt\.binding "
                                                   r"is not built: .*build_ext --inplace"):
        importlib.import_module("shoal_spec_test_envs.unbuilt")
    with pytest.raises(ImportError, match=r"older than envs/vec_binding\.pxi \(no OBS_DTYPE, OBS_LOW"):
        importlib.import_module("shoal_spec_test_envs.stale")
    # In the registry: left out of names() with one warning (gymnasium.make's
    # "doesn't exist" would not say why), the other envs unaffected, and
    # asking for it explains.
    packages = shoal.envs._PACKAGES + ["shoal_spec_test_envs.unbuilt"]
    monkeypatch.setattr(shoal.envs, "_PACKAGES", packages)
    monkeypatch.setattr(shoal.envs, "_broken_warned", set())
    with pytest.warns(UserWarning, match=r"envs/unbuilt is not built \(Unbuilt's binding .*build_ext --inplace"):
        assert "Unbuilt" not in shoal.envs.names()
    assert "CartPole" in shoal.envs.names()
    for name in ("Unbuilt", "unbuilt"):
        with pytest.raises(BindingNotBuiltError, match="build_ext --inplace"):
            shoal.envs.spec(name)


def test_a_binding_built_from_another_header_is_refused(tmp_path, monkeypatch):
    """setup.py stamps each binding with its header's digest: a header
    edited since the build, or a binding copied from another env's folder
    (which then silently *was* that env), is a BindingNotBuiltError saying
    to rebuild; the same header's binding loads."""
    binding = shoal.env_spec("Corridor").load_binding()
    assert len(binding.HEADER_DIGEST) == 16      # stamped by setup.py
    corridor_h = ENVS_DIR / "corridor" / "corridor.h"
    package = tmp_path / "shoal_stamp_envs"
    for folder, header in (("same", corridor_h.read_text()),
                           ("edited", corridor_h.read_text().replace("CORRIDOR_LEN 16", "CORRIDOR_LEN 17"))):
        (package / folder).mkdir(parents=True)
        (package / folder / f"{folder}.h").write_text(header)
        shutil.copy(binding.__file__, package / folder / os.path.basename(binding.__file__))
        (package / folder / "__init__.py").write_text(
            f"from shoal.envs import header_spec\nSPEC = header_spec({folder.title()!r}, __name__)\n")
    (package / "__init__.py").write_text("")
    assert "CORRIDOR_LEN 17" in (package / "edited" / "edited.h").read_text()
    monkeypatch.syspath_prepend(str(tmp_path))
    assert importlib.import_module("shoal_stamp_envs.same").SPEC.action_nvec == (2,)
    with pytest.raises(BindingNotBuiltError, match=r"Edited's binding shoal_stamp_envs\.edited\.binding was "
                                                   r"built from another version of .*edited\.h .*build_ext"):
        importlib.import_module("shoal_stamp_envs.edited")


def test_an_env_folder_being_written_breaks_only_that_env(tmp_path, monkeypatch):
    """A new env's folder that does not load (no binding.pyx; a binding that
    fails to import, e.g. an undefined symbol; a SPEC at odds with its
    header) is that env's error: the other envs, `import shoal` and
    names() go on (it once broke every env), with one warning, and asking
    for it raises its error."""
    package = tmp_path / "shoal_broken_envs"
    for folder in ("nopyx", "badlink", "mismatch", "typo", "nospec"):
        (package / folder).mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "nopyx" / "__init__.py").write_text(
        "from shoal.envs import header_spec\nSPEC = header_spec('NoPyx', __name__)\n")
    (package / "badlink" / "__init__.py").write_text(
        "raise ImportError('binding.so: undefined symbol: badlink_seed')\n")
    (package / "mismatch" / "__init__.py").write_text(
        "from shoal.envs import SpecMismatchError\nraise SpecMismatchError('max_episode_steps: 100 in the "
        "spec, 200 in the header')\n")
    (package / "typo" / "__init__.py").write_text("SPEC = header_spec('Typo', __name__)\n")   # NameError
    (package / "nospec" / "__init__.py").write_text("SPCE = None\n")   # loads, registers nothing
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(BindingNotBuiltError, match=r"nopyx has no binding\.pyx, which setup\.py compiles"):
        importlib.import_module("shoal_broken_envs.nopyx")
    packages = [f"shoal_broken_envs.{f}" for f in ("nopyx", "badlink", "mismatch", "typo", "nospec")]
    monkeypatch.setattr(shoal.envs, "_PACKAGES", shoal.envs._PACKAGES + packages)
    monkeypatch.setattr(shoal.envs, "_broken_warned", set())
    with pytest.warns(UserWarning) as warned:
        names = shoal.envs.names()
    said = sorted(str(w.message) for w in warned)
    assert len(said) == 5 and "envs/badlink does not load (ImportError: " in said[0], said
    assert "envs/mismatch does not load (SpecMismatchError: " in said[1], said
    assert "envs/nopyx is not built (NoPyx's folder " in said[2] and "has no binding.pyx" in said[2], said
    assert "envs/nospec defines no SPEC (nor SPECS)" in said[3], said
    assert "envs/typo does not load (NameError: " in said[4], said
    assert "CartPole" in names and shoal.envs.spec("CartPole").name == "CartPole"
    with pytest.raises(ImportError, match="badlink: its env folder does not load: .*undefined symbol"):
        shoal.envs.spec("badlink")
    with pytest.raises(shoal.envs.SpecMismatchError, match="mismatch: its env folder does not load"):
        shoal.envs.spec("mismatch")


def test_a_new_env_never_replaces_one_of_the_same_name(tmp_path, monkeypatch):
    """An env folder registering a name another env has (104 Atari games
    take many) is left out under that name with a warning naming both; the
    existing env keeps it (a new "Snake" silently replaced shoal's)."""
    package = tmp_path / "shoal_clash_envs"
    (package / "clash").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "clash" / "__init__.py").write_text(
        "import dataclasses, shoal\n"
        "SPEC = dataclasses.replace(shoal.env_spec('CartPole'), name='Snake', binding=__name__ + '.binding')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(shoal.envs, "_PACKAGES", shoal.envs._PACKAGES + ["shoal_clash_envs.clash"])
    monkeypatch.setattr(shoal.envs, "_broken_warned", set())
    with pytest.warns(UserWarning, match=r"envs/clash registers 'Snake', a name Snake \(shoal\.envs\.snake.*"
                                         r"folder name, 'clash', still finds it"):
        assert shoal.envs.spec("Snake").binding == "shoal.envs.snake.binding"
    assert shoal.envs.spec("clash").binding == "shoal_clash_envs.clash.binding"   # its folder name is free


def test_box_bounds_on_a_discrete_header_env_are_refused():
    """A header env's act_t says its actions' kind: Box bounds on an int32_t
    env (or a discrete spec over a float act_t) is a SpecMismatchError
    naming the dtypes, not a Cython buffer error at the first step."""
    with pytest.raises(SpecMismatchError, match=r"action dtype: the spec's Box actions are float32, the "
                                                r"header's int32"):
        header_spec("Corridor", "shoal.envs.corridor", action_low=np.array([-1.0], np.float32),
                    action_high=np.array([1.0], np.float32))


def test_a_hand_made_spec_works_through_every_view():
    """A spec shoal has not registered (header_spec, an out-of-tree env) is
    taken wherever an env name is: shoal.envs.spec, the pettingzoo view
    (it raised AttributeError: 'EnvSpec' has no 'lower'), SB3's VecEnv
    (unknown env), with no gymnasium spec to report."""
    from shoal.pettingzoo_env import ShoalParallelEnv
    mine = dataclasses.replace(header_spec("Corridor", "shoal.envs.corridor"), name="MyCorridor")
    assert shoal.envs.spec(mine) is mine
    assert shoal.envs.spec(mine, max_episode_steps=10).max_episode_steps == 10
    with pytest.raises(TypeError, match="named by a str"):
        shoal.envs.spec(3)
    env = ShoalParallelEnv(mine)
    assert set(env.reset(seed=0)[0]) == set(env.possible_agents)
    env.close()
    pytest.importorskip("stable_baselines3")
    from shoal.sb3 import ShoalVecEnv
    venv = ShoalVecEnv(mine, 2, backend="serial")
    try:
        assert venv.reset().shape[0] == 2 * mine.agents and venv.spec is None
    finally:
        venv.close()


def test_header_tables_that_cannot_be_are_named():
    """A header's tables are checked for sense before gymnasium's spaces or
    the pool meet them: swapped obs bounds, an act_nvec entry of 0 and a
    negative step limit (it meant "no limit") each name the table."""
    import types
    bad = types.SimpleNamespace(__name__="mine.binding", OBS_LOW=np.array([1.0, 0.0], np.float32),
                                OBS_HIGH=np.array([0.0, 1.0], np.float32), ACT_NVEC=(3, 0),
                                ACT_DTYPE=np.dtype(np.int32), MAX_EPISODE_STEPS=-1)
    with pytest.raises(SpecMismatchError, match=r"obs_low\[0\] is above obs_high\[0\].*act_nvec \(3, 0\).*"
                                                r"max_steps -1"):
        shoal.envs._check_header_tables("Mine", bad)
    for name in shoal.envs.names("header"):   # every shipped header's tables pass
        shoal.envs._check_header_tables(name, shoal.envs.spec(name).load_binding())


def test_specs_compare_their_bounds_by_value():
    """EnvSpec equality compares array bounds by value: equal copies are
    equal, other values or dtypes are not (a dataclass's own __eq__ raises
    on arrays that are not the same object, and on Python 3.13 always)."""
    spec = shoal.envs.spec("CartPole")
    copied = dataclasses.replace(spec, obs_low=spec.obs_low.copy(), obs_high=spec.obs_high.copy())
    assert copied == spec and not copied != spec
    assert dataclasses.replace(spec, obs_low=spec.obs_low * 2) != spec
    assert dataclasses.replace(spec, obs_low=spec.obs_low.astype(np.float64)) != spec
    assert spec != "CartPole"


def test_an_env_folder_without_its_init_is_named_in_the_unknown_env_error(tmp_path, monkeypatch):
    (tmp_path / "catch").mkdir()   # a header there, the spec not written yet
    (tmp_path / "catch" / "catch.h").write_text("")
    monkeypatch.setattr(shoal.envs, "__file__", str(tmp_path / "__init__.py"))
    with pytest.raises(ValueError, match=r"unknown env 'Catch'; \(envs/catch/ has no __init__.py"):
        shoal.envs.spec("Catch")


@pytest.mark.parametrize("name", ["LunarLander-v3", "MiniGrid-Empty-5x5-v0"])
def test_a_gymnasium_id_that_is_not_shoals_points_to_the_python_env_pool(name):
    with pytest.raises(ValueError, match=rf"unknown env '{name}'; it names no env of shoal's, but a gymnasium "
                                         rf"id: .*shoal.pool.AsyncVectorEnv\(\[lambda: gymnasium.make\('{name}'\)"):
        shoal.make(name, 2)
    with pytest.raises(ValueError) as shoals_own:   # shoal's, spelt as a gymnasium id: the name it meant
        shoal.make("CartPole-v1", 2)
    assert "did you mean 'CartPole'?" in str(shoals_own.value) and "AsyncVectorEnv" not in str(shoals_own.value)


@pytest.mark.parametrize("bounds, said", [
    ({"action_low": [-1.0]}, r"action_low is given without action_high"),
    ({"action_high": [1.0]}, r"action_high is given without action_low"),
    ({"action_low": [-1.0, -1.0], "action_high": [1.0, 1.0]}, r"action_low has shape \(2,\); the header's "
                                                                r"actions have 1 component"),
    ({"action_low": [1.0], "action_high": [-1.0]}, r"action_low\[0\] = 1.0 is not <= action_high\[0\] = -1.0"),
])
def test_box_bounds_that_cannot_be_are_named_when_the_spec_is_built(bounds, said):
    """A Box env's bounds come from its __init__.py: half of them, the
    wrong count or low above high is a SpecMismatchError there, not
    gymnasium's Box error at the first make()."""
    with pytest.raises(SpecMismatchError, match=said):
        header_spec("Corridor", "shoal.envs.corridor", **bounds)
