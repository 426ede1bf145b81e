"""shoal's native MuJoCo envs: gymnasium v5's semantics step for step, the
reset-noise distribution, keyword arguments, the seed rule across pools,
Box actions, the gymnasium ids, and the errors around them."""
import importlib.util
import inspect
import os
import subprocess
import textwrap
import warnings
from pathlib import Path
import sys

import numpy as np
import pytest

pytest.importorskip("mujoco", reason="MuJoCo envs need the mujoco extra")
gymnasium = pytest.importorskip("gymnasium")
pytest.importorskip("imageio", reason="gymnasium's own MuJoCo envs (the reference) need imageio")

import shoal  # noqa: E402
from mujoco_alignment import compare_with_gymnasium  # noqa: E402
from shoal.envs.mujoco import SPECS as MUJOCO_SPECS  # noqa: E402
from shoal.pool.native import Multiprocessing, Serial  # noqa: E402

MUJOCO = [spec.name for spec in MUJOCO_SPECS]   # the other library-backed envs are Atari's
# Steps compared per env: several episodes each (Hopper and Walker2d fall
# quickly under random actions; HalfCheetah only truncates, at 1000).
STEPS = {"HalfCheetah": 2100, "Humanoid": 1200, "HumanoidStandup": 1100}
# One non-default keyword set per env, touching its observation options.
OTHER_KWARGS = {
    "HalfCheetah": dict(exclude_current_positions_from_observation=False, ctrl_cost_weight=0.3,
                        frame_skip=3),
    "Hopper": dict(exclude_current_positions_from_observation=False, healthy_reward=2.0,
                   healthy_angle_range=(-0.4, 0.4)),
    "Walker2d": dict(exclude_current_positions_from_observation=False, healthy_z_range=(0.7, 2.5)),
    "Ant": dict(include_cfrc_ext_in_observation=False, exclude_current_positions_from_observation=False,
                contact_cost_weight=1e-3),
    "Humanoid": dict(include_cinert_in_observation=False, include_cvel_in_observation=False,
                     exclude_current_positions_from_observation=False),
    "Swimmer": dict(exclude_current_positions_from_observation=False, ctrl_cost_weight=1e-3),
    "Reacher": dict(reward_dist_weight=2.0, reward_control_weight=0.5),
    "InvertedPendulum": dict(reset_noise_scale=0.05),
    "InvertedDoublePendulum": dict(healthy_reward=5.0, reset_noise_scale=0.2),
    "Pusher": dict(reward_near_weight=1.0, reward_control_weight=0.2),
    "HumanoidStandup": dict(include_cfrc_ext_in_observation=False, include_qfrc_actuator_in_observation=False),
}


@pytest.mark.parametrize("name", MUJOCO)
def test_matches_gymnasium_step_for_step(name):
    """Same qpos/qvel and float32 actions (20% beyond the bounds, which both
    clamp in the physics and charge in the control cost): obs, reward, flags
    and every info value within 1e-6 relative, over several episodes."""
    seen = compare_with_gymnasium(name, STEPS.get(name, 2000), seed=3)
    assert seen["episodes"] >= 1, f"{name}: no episode ended, termination/truncation untested"


@pytest.mark.parametrize("name", MUJOCO)
def test_matches_gymnasium_with_other_keyword_arguments(name):
    compare_with_gymnasium(name, 300, seed=4, env_kwargs=OTHER_KWARGS[name])


@pytest.mark.parametrize("name", MUJOCO)
def test_default_keyword_arguments_are_gymnasiums(name):
    gym_class = type(gymnasium.make(f"{name}-v5").unwrapped)
    gym_defaults = {k: p.default for k, p in inspect.signature(gym_class.__init__).parameters.items()
                    if p.default is not inspect.Parameter.empty and k != "default_camera_config"}
    ours = shoal.envs.spec(name).env_kwargs
    for key, default in gym_defaults.items():
        assert key in ours, f"{name}: gymnasium's {key} is missing"
        assert ours[key] == (tuple(default) if isinstance(default, tuple) else default), key
    assert ours["max_episode_steps"] == gymnasium.spec(f"{name}-v5").max_episode_steps


@pytest.mark.parametrize("name", MUJOCO)
def test_reset_distribution_matches_gymnasium(name):
    """Moments of the first obs over many resets: shoal's RNG is not numpy's,
    so the draws differ, but their distribution must be gymnasium's."""
    n = 600
    pool = Serial(name, n, seed=0)
    ours = pool.reset(seed=11)[0].copy()
    pool.close()
    env = gymnasium.make(f"{name}-v5")
    theirs = np.stack([env.reset(seed=1000 + k)[0] for k in range(n)])
    env.close()
    spread = np.sqrt((ours.var(0) + theirs.var(0)) / n)
    deterministic = (ours.std(0) == 0) & (theirs.std(0) == 0)
    np.testing.assert_allclose(ours.mean(0)[deterministic], theirs.mean(0)[deterministic], rtol=1e-9)
    gap = np.abs(ours.mean(0) - theirs.mean(0))[~deterministic]
    assert (gap <= 5 * spread[~deterministic] + 1e-12).all(), f"{name}: reset obs means differ"
    ratio = ours.std(0)[~deterministic] / theirs.std(0)[~deterministic]
    assert ((ratio > 0.8) & (ratio < 1.25)).all(), f"{name}: reset obs spreads differ: {ratio}"


def test_reset_noise_moments_half_cheetah():
    """HalfCheetah: qpos = qpos0 + U(-0.1, 0.1), qvel = 0.1 N(0, 1)."""
    n = 3000
    with Serial("HalfCheetah", n, num_workers=1, seed=0) as pool:
        pool.reset(seed=5)
        block = pool._blocks[0][0]
        qpos, qvel = map(np.stack, zip(*(block.get_state(i) for i in range(n))))
        del block
    scale = 0.1
    assert np.abs(qpos.mean(0)).max() < 5 * scale / np.sqrt(3 * n)      # qpos0 is zero
    np.testing.assert_allclose(qpos.std(0), scale / np.sqrt(3), rtol=0.06)
    assert qpos.min() >= -scale and qpos.max() < scale
    assert np.abs(qvel.mean(0)).max() < 5 * scale / np.sqrt(n)
    np.testing.assert_allclose(qvel.std(0), scale, rtol=0.06)
    kurtosis = ((qvel - qvel.mean(0)) ** 4).mean(0) / qvel.var(0) ** 2
    np.testing.assert_allclose(kurtosis, 3.0, atol=0.4)                 # normal, not uniform


def test_seed_rule_and_pools_agree():
    """Env i of a pool reset with seed s is SingleEnv reset with seed s + i;
    Serial and Multiprocessing pools with any worker count step alike."""
    n, steps = 6, 150
    actions = np.random.default_rng(0).uniform(-1, 1, (steps, n, 8)).astype(np.float32)
    runs = []
    for make in (lambda: Serial("Ant", n, seed=0), lambda: Multiprocessing("Ant", n, num_workers=2, seed=0),
                 lambda: Multiprocessing("Ant", n, num_workers=3, seed=0)):
        with make() as pool:
            trace = [pool.reset(seed=7)[0].copy()]
            for t in range(steps):
                obs, rew, term, trunc, _ = pool.step(actions[t])
                trace.append(np.concatenate([obs.ravel(), rew, term, trunc]))
            runs.append(trace)
    for other in runs[1:]:
        for a, b in zip(runs[0], other):
            np.testing.assert_array_equal(a, b)
    single = gymnasium.make("shoal/Ant-v5")
    first, _ = single.reset(seed=7 + 4)
    np.testing.assert_array_equal(first, runs[0][0][4])
    single.close()


@pytest.mark.parametrize("name", MUJOCO)
def test_reset_info_is_gymnasiums(name):
    """A pool's reset info, and the step info after a NEXT_STEP autoreset,
    hold gymnasium's reset info (its _get_reset_info of the same state): the
    positions, and the Humanoids' tendon arrays; SingleEnv.reset returns it."""
    genv = gymnasium.make(f"{name}-v5").unwrapped
    genv.reset(seed=0)
    with Serial(name, 3, seed=0) as pool:
        def gymnasiums(i):
            block = next(b for batch in pool._blocks for b in batch if b._start <= i < b._start + b.count)
            genv.set_state(*block.get_state(i - block._start))
            return genv._get_reset_info()

        _, views = pool.reset(seed=4)
        info = {key: values.copy() for key, values in views.items()}   # views: later steps rewrite them
        np.testing.assert_array_equal(info.pop("env_id"), np.arange(3))   # the pool's own, as EnvPool's
        np.testing.assert_array_equal(info.pop("elapsed_step"), np.zeros(3))
        assert set(info) == set(pool.spec.load_binding().RESET_INFO_KEYS)
        for i in range(3):
            expected = gymnasiums(i)
            assert set(info) == set(expected), (sorted(info), sorted(expected))
            for key, value in expected.items():
                np.testing.assert_allclose(info[key][i], value, rtol=1e-12, atol=1e-15, err_msg=f"{key} {i}")
        # NEXT_STEP: after an episode ends, the next step resets the env and
        # reports the reset state's positions (the other keys are the step's)
        truncate_or_fall = np.ones((3, *pool.spec.single_action_space.shape), np.float32)
        for _ in range(pool.spec.max_episode_steps + 1):
            _, _, term, trunc, _ = pool.step(truncate_or_fall)
            if (term | trunc)[0]:
                break
        assert (term | trunc)[0]
        _, _, term, trunc, step_info = pool.step(truncate_or_fall)
        assert not (term | trunc)[0]
        for key, value in gymnasiums(0).items():
            np.testing.assert_allclose(step_info[key][0], value, rtol=1e-12, atol=1e-15, err_msg=key)
    # SingleEnv: gymnasium's keys, in its order, as numpy float64 (its type)
    gym_env = gymnasium.make(f"{name}-v5")
    _, gym_reset_info = gym_env.reset(seed=4)
    single = gymnasium.make(f"shoal/{name}-v5")
    _, reset_info = single.reset(seed=4)
    assert list(reset_info) == list(gym_reset_info)
    assert {k: type(v) for k, v in reset_info.items()} == {k: type(v) for k, v in gym_reset_info.items()}
    assert all(v.dtype == np.float64 for v in reset_info.values())
    for key, values in info.items():
        np.testing.assert_array_equal(reset_info[key], values[0], err_msg=key)
    action = gym_env.action_space.sample()
    gym_step_info, step_info = gym_env.step(action)[4], single.step(action)[4]
    assert list(step_info) == list(gym_step_info)
    # gymnasium's types: np.float32 reward_ctrl where it comes from the float32
    # action, InvertedPendulum's int reward_survive; a Python float is np.float64 here
    assert {k: type(v) for k, v in step_info.items()} == \
        {k: np.float64 if type(v) is float else type(v) for k, v in gym_step_info.items() if k in step_info}
    single.close()
    gym_env.close()
    genv.close()


def test_async_pool_infos_are_each_envs_step_info(no_leaks):
    """recv()'s info holds, for the batch's envs, gymnasium's step-info keys
    (reward terms, positions): env i's values are SingleEnv i's (seed s + i)
    after the same actions."""
    n, steps = 4, 12
    actions = np.random.default_rng(1).uniform(-0.1, 0.1, (steps, n, 3)).astype(np.float32)
    singles = [gymnasium.make("shoal/Hopper-v5") for _ in range(n)]
    try:
        for i, single in enumerate(singles):
            single.reset(seed=3 + i)
        with Multiprocessing("Hopper", n, num_workers=2, batch_size=2, seed=3) as pool:
            pool.async_reset(seed=3)
            sent = np.zeros(n, dtype=int)   # actions sent to each env so far
            for _ in range((steps + 1) * pool.num_batches):
                _, _, term, trunc, info = pool.recv()
                envs = info["env_id"]
                assert not (term | trunc).any()
                for row, i in enumerate(envs):
                    if sent[i]:   # a step's result (the first recv of a batch is its reset)
                        expected = singles[i].step(actions[sent[i] - 1, i])[4]
                        assert expected and set(expected) < set(info), (sorted(expected), sorted(info))
                        for key, value in expected.items():
                            assert info[key].shape == (2,) and info[key][row] == value, (key, i, sent[i])
                if sent[envs[0]] < steps:
                    pool.send(actions[sent[envs], envs])
                    sent[envs] += 1
    finally:
        for single in singles:
            single.close()


def test_box_actions_nan_refused_and_bounds_clamped_by_physics():
    pool = Serial("HalfCheetah", 2, seed=0)
    pool.reset(seed=0)
    before = pool.obs.copy()
    bad = np.zeros((2, 6), np.float32)
    bad[1, 3] = np.nan
    with pytest.raises(ValueError, match="row 1 is not finite"):
        pool.step(bad)
    with pytest.raises(ValueError, match="not finite"):
        pool.step(np.full((2, 6), np.inf))
    with pytest.raises(ValueError, match="shape"):
        pool.step(np.zeros((2, 5), np.float32))
    np.testing.assert_array_equal(pool.obs, before)                      # nothing was stepped
    # Beyond the bounds: the physics sees the ctrlrange's edge, the control
    # cost the action as given (gymnasium's semantics).
    twin = Serial("HalfCheetah", 2, seed=0)
    twin.reset(seed=0)
    _, r_far, *_ = pool.step(np.full((2, 6), 3.0))
    r_far = r_far.copy()
    _, r_edge, *_ = twin.step(np.ones((2, 6), np.int64))                  # integers are accepted
    np.testing.assert_array_equal(pool.obs, twin.obs)
    np.testing.assert_allclose(r_edge - r_far, 0.1 * 6 * (9.0 - 1.0), rtol=1e-5)
    pool.close()
    twin.close()


def test_one_env_views_name_the_env_or_agent_of_a_non_finite_box_action():
    """gymnasium.make's env (so each of SyncVectorEnv's) and the pettingzoo
    view check a Box action themselves: the error names the env or agent,
    not their one-env pool's "row 0", and a finite double beyond float32
    (which would become inf) is called what it is."""
    env = gymnasium.make("shoal/HalfCheetah-v5")
    env.reset(seed=0)
    with pytest.raises(ValueError, match=r"\[0.0, nan, .*\] for HalfCheetah is not finite") as nan:
        env.step(np.array([0, np.nan, 0, 0, 0, 0]))
    assert "row" not in str(nan.value)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)   # numpy's cast overflow once came first
        with pytest.raises(ValueError, match=r"1e\+39.* beyond \+-3.403e\+38"):
            env.step(np.full(6, 1e39))
    with pytest.raises(ValueError, match="shape"):
        env.step(np.zeros(5))
    twin = gymnasium.make("shoal/HalfCheetah-v5")
    twin.reset(seed=0)
    for _ in range(2):                                                     # nothing was stepped
        np.testing.assert_array_equal(env.step(np.full(6, 3.0))[0], twin.step(np.full(6, 3.0))[0])
    env.close()
    twin.close()
    from shoal.pettingzoo_env import ShoalParallelEnv
    pz = ShoalParallelEnv("HalfCheetah")
    pz.reset(seed=0)
    agent = pz.agents[0]
    with pytest.raises(ValueError, match=f"for {agent} is not finite") as inf:
        pz.step({agent: np.full(6, np.inf)})
    assert "row" not in str(inf.value)
    # what gymnasium.make's env takes, the view takes: bools (0 / 1), numbers as objects
    pz.step({agent: np.array([True, False] * 3)})
    pz.step({agent: np.array([1, 0.5, np.float32(0), 0, 0, 0], dtype=object)})
    with pytest.raises(ValueError, match="real numbers"):
        pz.step({agent: np.array(["a"] * 6)})
    pz.close()


def test_gymnasium_ids_keyword_arguments_and_episode_statistics():
    env = gymnasium.make("shoal/Hopper-v5", healthy_reward=3.0)
    obs, _ = env.reset(seed=0)
    assert obs.shape == (11,) and obs.dtype == np.float64
    _, reward, _, _, info = env.step(np.zeros(3, np.float32))
    assert info["reward_survive"] == 3.0 and reward == pytest.approx(3.0 + info["reward_forward"], abs=1e-5)
    env.close()
    envs = gymnasium.make_vec("shoal/HalfCheetah-v5", num_envs=4, vectorization_mode="vector_entry_point",
                              exclude_current_positions_from_observation=False, max_episode_steps=20,
                              num_workers=2, autoreset_mode="same_step")
    assert envs.single_observation_space.shape == (18,)
    assert isinstance(envs.single_action_space, gymnasium.spaces.Box)
    envs.reset(seed=0)
    for t in range(20):
        _, _, term, trunc, infos = envs.step(envs.action_space.sample())
    assert trunc.all() and not term.any() and infos["_final_obs"].all()
    stats = envs.pool.episode_stats()
    assert stats["episodes"] == 4 and stats["mean_length"] == 20
    envs.close()
    with pytest.raises(TypeError, match="unexpected keyword argument .*it takes"):
        shoal.make("HalfCheetah", 2, healthy_reward=1.0)
    with pytest.raises(ValueError, match="pair"):
        shoal.envs.spec("Hopper", healthy_z_range=0.5)
    # the C env holds these in an int: a larger value would wrap around
    for key in ("max_episode_steps", "frame_skip", "main_body"):
        with pytest.raises(ValueError, match=f"{key} must be at most 2\\*\\*31 - 1"):
            shoal.envs.spec("Ant", **{key: 2**32 + 5})
    assert shoal.envs.spec("Ant", max_episode_steps=2**31 - 1).max_episode_steps == 2**31 - 1


def test_main_body_by_name_as_gymnasiums():
    """gymnasium's Ant takes main_body as a body's name or index: a name is
    its index in the model (the same spec); a name the model lacks is an
    error that lists its bodies."""
    assert shoal.envs.spec("Ant", main_body="torso") == shoal.envs.spec("Ant", main_body=1)
    assert shoal.envs.spec("Ant", main_body="aux_1").env_kwargs["main_body"] == 3
    with pytest.raises(ValueError, match="'nose' is not a body of ant.xml.*'torso'"):
        shoal.envs.spec("Ant", main_body="nose")
    env = gymnasium.make("shoal/Ant-v5", main_body="torso")
    env.reset(seed=0)
    assert np.isfinite(env.step(env.action_space.sample())[1])
    env.close()


def _hopper_xml(tmp_path, name="hopper.xml", **replace):
    """A copy of gymnasium's hopper.xml with some text replaced."""
    from shoal.envs.mujoco.binding import model_path
    text = model_path("hopper.xml").read_text()
    for old, new in replace.items():
        assert old in text
        text = text.replace(old, new)
    path = tmp_path / name
    path.write_text(text)
    return path


def _hopper_after_20_steps(xml_file) -> np.ndarray:
    env = gymnasium.make("shoal/Hopper-v5", xml_file=str(xml_file), reset_noise_scale=0.0)
    env.reset(seed=0)
    for _ in range(20):
        obs = env.step(np.full(3, 0.5, np.float32))[0]
    env.close()
    return obs


def _sweep_steps_the_new_file(tmp_path, model) -> None:
    """Hopper's torso density rewritten in tmp_path/hopper.xml from 1000 to
    20000 between two shoal envs of `model` (that file, or one including
    it): the second steps the new model, as gymnasium's Hopper-v5 does."""
    torso = 'name="torso_geom"'
    _hopper_xml(tmp_path, **{torso: f'{torso} density="1000"'})
    light = _hopper_after_20_steps(model)
    _hopper_xml(tmp_path, **{torso: f'{torso} density="20000"'})
    heavy = _hopper_after_20_steps(model)
    reference = gymnasium.make("Hopper-v5", xml_file=str(model), reset_noise_scale=0.0)
    reference.reset(seed=0)
    for _ in range(20):
        expected = reference.step(np.full(3, 0.5, np.float32))[0]
    reference.close()
    assert not np.allclose(light, heavy)
    np.testing.assert_allclose(heavy, expected, rtol=1e-6, atol=1e-9)


def test_a_model_file_rewritten_between_envs_is_loaded_again(tmp_path):
    """A mass sweep rewrites one xml_file between envs: each env steps the
    file as it is when the env is made (the models were cached by path, so
    the second env silently stepped the first file), as gymnasium's does."""
    xml = tmp_path / "hopper.xml"
    _sweep_steps_the_new_file(tmp_path, xml)
    xml.write_text("<mujoco")   # now unreadable: an error, not the cached model
    with pytest.raises(ValueError, match="could not load"):
        gymnasium.make("shoal/Hopper-v5", xml_file=str(xml))


def test_a_rewritten_included_file_is_loaded_again(tmp_path):
    """A model whose bodies are in a file it <include>s: a sweep that
    rewrites that file (not the main one) gets the new model, as gymnasium's
    env does, not the one cached for the unchanged main file."""
    main = tmp_path / "main.xml"
    main.write_text('<mujoco model="hopper"><include file="hopper.xml"/></mujoco>')
    _sweep_steps_the_new_file(tmp_path, main)
    from shoal.envs.mujoco.binding import model_files
    assert model_files(main) == [main, tmp_path / "hopper.xml"]


def test_a_sweep_over_model_files_frees_the_models_it_is_done_with(tmp_path):
    """Each file of a sweep is its own mjModel (~0.5 MB for Humanoid): once
    no env holds it, it is freed, but for the last few kept for reuse; an
    env still open keeps its own."""
    import gc

    from shoal.envs.mujoco import binding
    torso = 'name="torso_geom"'
    kept_xml = _hopper_xml(tmp_path, "kept.xml", **{torso: f'{torso} density="3000"'})
    kept = gymnasium.make("shoal/Hopper-v5", xml_file=str(kept_xml), reset_noise_scale=0.0)
    kept.reset(seed=0)
    gc.collect()
    before = len(binding._models)
    for k in range(12):
        _hopper_after_20_steps(_hopper_xml(tmp_path, **{torso: f'{torso} density="{1000 + k}"'}))
    gc.collect()
    assert len(binding._models) <= before + binding.RECENT_FILE_BINDINGS, len(binding._models)
    kept.reset(seed=0)   # the open env steps its own model still, as a fresh env of its file does
    for _ in range(20):
        obs = kept.step(np.full(3, 0.5, np.float32))[0]
    kept.close()
    np.testing.assert_array_equal(obs, _hopper_after_20_steps(kept_xml))


def test_custom_models_as_gymnasium_takes_them_or_a_clear_error(tmp_path, monkeypatch):
    """xml_file: the action bounds are the model's ctrlrange (gymnasium's
    rule); "~" is the user's home; a model of other sizes, or without a
    body the env reads by name, is refused saying why (Reacher read the
    memory before mjData's body positions)."""
    wide = _hopper_xml(tmp_path, **{'ctrlrange="-1.0 1.0"': 'ctrlrange="-2.0 2.0"'})
    ours = gymnasium.make("shoal/Hopper-v5", xml_file=str(wide))
    theirs = gymnasium.make("Hopper-v5", xml_file=str(wide))
    assert ours.action_space == theirs.action_space == gymnasium.spaces.Box(-2.0, 2.0, (3,), np.float32)
    ours.close(), theirs.close()
    monkeypatch.setenv("HOME", str(tmp_path))
    assert shoal.envs.spec("Hopper", xml_file="~/" + wide.name).action_high.tolist() == [2.0] * 3
    with pytest.raises(ValueError, match="has sizes .*'nu': 2.*its own model's sizes"):
        shoal.envs.spec("Hopper", xml_file=str(_hopper_xml(
            tmp_path, "one_motor_less.xml", **{'<motor ctrllimited="true" ctrlrange="-1.0 1.0" gear="200.0" '
                                               'joint="foot_joint"/>': ""})))
    from shoal.envs.mujoco.binding import model_path
    reacher = tmp_path / "reacher.xml"
    reacher.write_text(model_path("reacher.xml").read_text().replace('name="fingertip"', 'name="tip"'))
    with pytest.raises(ValueError, match=r"no bodies named \['fingertip'\]"):
        shoal.make("Reacher", 1, backend="serial", xml_file=str(reacher))


def test_range_keywords_take_any_pair_and_reset_noise_is_not_negative():
    """A range keyword is any two numbers (a numpy array, a config list),
    as gymnasium takes them; a negative reset_noise_scale, which gymnasium
    fails on at reset, is refused at once."""
    assert shoal.envs.spec("Hopper", healthy_z_range=np.array([0.8, 2.0])).env_kwargs["healthy_z_range"] \
        == (0.8, 2.0)
    with pytest.raises(ValueError, match="pair of numbers"):
        shoal.envs.spec("Hopper", healthy_z_range=np.array([0.8, 2.0, 3.0]))
    with pytest.raises(ValueError, match="pair of numbers"):
        shoal.envs.spec("Hopper", healthy_z_range="08")
    with pytest.raises(ValueError, match="reset_noise_scale must be >= 0"):
        shoal.envs.spec("Hopper", reset_noise_scale=-0.1)


def test_envpool_option_names():
    """EnvPool's post_constraint=True is gymnasium v5's behaviour (its
    do_simulation calls mj_rnePostConstraint): taken, as a no-op; False is
    refused, saying why. EnvPool's other names get an error, in Python's
    wording, that names gymnasium's keyword where there is one."""
    assert shoal.envs.spec("HalfCheetah", post_constraint=True) == shoal.envs.spec("HalfCheetah")
    with shoal.make("HalfCheetah", 2, backend="serial", post_constraint=True) as pool:
        pool.reset(seed=0)
    env = gymnasium.make("shoal/Ant-v5", post_constraint=True)
    env.close()
    with pytest.raises(ValueError, match="post_constraint=False is EnvPool's pre-v5.*mj_rnePostConstraint"):
        shoal.make("HalfCheetah", 2, post_constraint=False)
    cases = {
        ("Hopper", "healthy_z_min"): "healthy_z_min: EnvPool's name; shoal uses gymnasium's "
                                     "healthy_z_range=(min, max)",
        ("Walker2d", "healthy_angle_max"): "gymnasium's healthy_angle_range=(min, max)",
        ("Hopper", "healthy_state_min"): "gymnasium's healthy_state_range=(min, max)",
        ("Ant", "contact_force_max"): "gymnasium's contact_force_range=(min, max)",
        ("Humanoid", "contact_cost_max"): "gymnasium's contact_cost_range=(-inf, max)",
        ("Ant", "use_contact_force"): "its False is gymnasium's include_cfrc_ext_in_observation=False, "
                                      "contact_cost_weight=0.0",
        ("Humanoid", "use_contact_force"): "its False is gymnasium's contact_cost_weight=0.0)",
        ("HumanoidStandup", "forward_reward_weight"): "does not weight its uph term",
        ("HumanoidStandup", "healthy_reward"): "adds a constant 1 per step",
        ("Reacher", "ctrl_cost_weight"): "gymnasium's reward_control_weight",
        ("InvertedPendulum", "healthy_z_max"): "gymnasium's InvertedPendulum-v5 has no keyword for it",
        ("Hopper", "velocity_min"): "clips the observed velocities to [-10, 10]",
        ("HalfCheetah", "frame_stack"): "FrameStackObservation",
        ("Ant", "legacy_healthy_reward"): "gymnasium v5's",
        ("Ant", "exclude_worldbody_contact_forces"): "always leaves the world body's contact forces out",
    }
    for (name, key), hint in cases.items():
        with pytest.raises(TypeError) as error:
            shoal.make(name, 1, **{key: 1.0})
        message = str(error.value)
        assert message.startswith(f"{name} got an unexpected keyword argument '{key}'; it takes"), message
        assert hint in message, message


@pytest.mark.parametrize("limit", [None, 30, 60])
def test_episode_limit_as_gymnasiums_through_make_sync_and_native(limit):
    """The ids carry gymnasium's episode limit (a TimeLimit over an env
    without one of its own, as gymnasium.make("Reacher-v5") builds), and
    max_episode_steps sets it, shorter or longer than the default (50), the
    same way in gymnasium.make, make_vec's sync mode and the native pool."""
    reference = gymnasium.make("Reacher-v5", max_episode_steps=limit)
    env = gymnasium.make("shoal/Reacher-v5", max_episode_steps=limit)
    assert env.spec.max_episode_steps == reference.spec.max_episode_steps == (limit or 50)
    assert "TimeLimit" in str(env)
    expected = limit or 50
    lengths = {}
    for mode in ("sync", "vector_entry_point"):
        envs = gymnasium.make_vec("shoal/Reacher-v5", num_envs=2, vectorization_mode=mode,
                                  max_episode_steps=limit, **({"backend": "serial"} if mode != "sync" else {}))
        envs.reset(seed=0)
        for t in range(1, 2 * expected + 2):
            _, _, term, trunc, _ = envs.step(np.zeros((2, 2), np.float32))
            if trunc.any():
                lengths.setdefault(mode, t)
        # NEXT_STEP: the step after the first episode resets; the second one ends here
        assert trunc.all() and not term.any(), mode
        envs.close()
    env.reset(seed=0)
    lengths["make"] = next(t for t in range(1, 1000) if env.step(np.zeros(2, np.float32))[3])
    assert lengths == {"sync": expected, "vector_entry_point": expected, "make": expected}
    env.close()
    reference.close()


def test_cuda_backend_refuses_library_envs():
    cuda = pytest.importorskip("shoal.cuda")
    with pytest.raises(ValueError, match="library-backed env.*no CUDA kernel"):
        cuda.CudaVecEnv("HalfCheetah", 4)


def test_no_mujoco_log_file_in_the_working_directory(tmp_path):
    """MuJoCo's default warning handler appends to MUJOCO_LOG.TXT in the
    working directory; shoal's library sends warnings to stderr instead."""
    code = "import shoal; p = shoal.make('HalfCheetah', 1, backend='serial'); p.close()"
    out = subprocess.run([sys.executable, "-P", "-c", code], cwd=tmp_path, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert not os.listdir(tmp_path)


def test_a_models_warning_is_said_once_per_process(tmp_path):
    """mujoco 4 warns that gymnasium's half_cheetah.xml uses a deprecated
    attribute, once per model compiled: each env made (and each pool's)
    said it again, dozens of lines per pool. Said once per process now."""
    mujoco = pytest.importorskip("mujoco")
    pytest.importorskip("imageio", reason="gymnasium's own MuJoCo envs import imageio")
    # gymnasium's own envs compile the model again for each env: once shoal's
    # library is loaded, its handler (process-wide) says their warnings too
    code = ("import gymnasium, shoal\n"
            "shoal.make('HalfCheetah', 8, backend='serial').close()\n"
            "for _ in range(3):\n"
            "    gymnasium.make('HalfCheetah-v5').close()\n"
            "gymnasium.make('shoal/HalfCheetah-v5').close()\n")
    out = subprocess.run([sys.executable, "-P", "-c", code], cwd=tmp_path, capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    said = out.stderr.count("settotalmass")
    assert said <= 1, out.stderr[-2000:]
    if mujoco.__version__.startswith("4.0"):   # the version that warns about it
        assert said == 1, out.stderr[-2000:]


def test_out_of_memory_making_envs_is_a_memory_error_not_an_exit(tmp_path):
    """mj_makeData out of memory calls MuJoCo's error handler, whose default
    writes MUJOCO_LOG.TXT and exits the process (exit 1, no Python error):
    making the envs, shoal's handler jumps back and the pool raises
    MemoryError; the process lives on, what it made is freed (a smaller
    pool fits again), and no file is written."""
    code = textwrap.dedent("""
        import resource, shoal
        shoal.make("Humanoid", 1, backend="serial").close()   # the library built and loaded first
        resource.setrlimit(resource.RLIMIT_AS, (3 * 2**30, resource.getrlimit(resource.RLIMIT_AS)[1]))
        try:
            shoal.make("Humanoid", 2048, backend="serial")
        except MemoryError as e:
            print("MemoryError:", e)
        shoal.make("Humanoid", 64, backend="serial").close()   # what the failed one made was freed
        print("alive")
    """)
    out = subprocess.run([sys.executable, "-P", "-c", code], cwd=tmp_path, capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0 and "alive" in out.stdout, out.stdout + out.stderr[-2000:]
    assert "MemoryError: Humanoid: out of memory making" in out.stdout, out.stdout + out.stderr[-2000:]
    assert "of a pool of 2048" in out.stdout or "making 2048 MuJoCo envs" in out.stdout, out.stdout
    assert "MUJOCO_LOG.TXT" not in os.listdir(tmp_path)


def test_pools_made_in_two_threads_at_once_put_mujocos_error_handler_back():
    """The out-of-memory handler above is MuJoCo's one process-wide
    mju_user_error: two threads making pools at once each saved the other's
    and put it back, which left shoal's installed for good (every run of
    this test, before the fix). The first thread in installs it, the last
    out puts back what was there."""
    mujoco = pytest.importorskip("mujoco", reason="MuJoCo envs need the mujoco extra")
    import ctypes
    import threading
    shoal.make("Hopper", 1, backend="serial").close()   # the library built and loaded first
    libmujoco = ctypes.CDLL(str(min(Path(mujoco.__file__).parent.glob("libmujoco.so*"))))
    handler = ctypes.c_void_p.in_dll(libmujoco, "mju_user_error")
    before = handler.value

    def make_pools():
        for _ in range(10):
            shoal.make("Hopper", 256, backend="serial").close()

    threads = [threading.Thread(target=make_pools) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert handler.value == before


def test_the_build_links_the_libmujoco_of_the_mujoco_imported(tmp_path, monkeypatch):
    """`pip install mujoco==3.3.7` over 4.0 leaves 4.0's mujoco-core (and its
    libmujoco.so.4.0.0) beside 3.3.7's, with 3.3.7's headers: the build
    once took the last name in sorted order (4.0.0) and 4.0's version for
    its cache, so the envs ran another physics than gymnasium's, or failed
    on the headers' sizes. It takes the imported version's library, and by
    number when none matches (.so.10 after .so.9)."""
    import importlib.machinery
    from shoal.envs.mujoco import build
    (tmp_path / "include" / "mujoco").mkdir(parents=True)
    (tmp_path / "include" / "mujoco" / "mujoco.h").touch()
    for version in ("3.3.7", "4.0.0", "9.1.0", "10.0.0"):
        (tmp_path / f"libmujoco.so.{version}").touch()
    fake = importlib.machinery.ModuleSpec("mujoco", None, is_package=True)
    fake.submodule_search_locations = [str(tmp_path)]
    monkeypatch.setattr(build.importlib.util, "find_spec", lambda name: fake)
    versions = {"mujoco": "3.3.7", "mujoco-core": "4.0.0"}   # the downgrade's leftover
    monkeypatch.setattr(build.importlib.metadata, "version", lambda dist: versions[dist])
    assert build._mujoco_version() == "3.3.7"
    assert build.mujoco_dirs() == (tmp_path / "include", tmp_path, "libmujoco.so.3.3.7")
    versions["mujoco"] = "3.3.7.post1"   # no library of that name: the newest
    assert build.mujoco_dirs()[2] == "libmujoco.so.10.0.0"


def test_first_use_build_takes_cc_shares_its_library_and_leaves_no_partial_file(tmp_path, monkeypatch):
    """The library compiled on first use: built with $CC when set (as
    setuptools builds with it), readable by other users (a cache warmed by
    root while building an image serves an unprivileged user: mkstemp's 0600
    once stayed on it), no partial file after a failed build, and a cache
    folder that cannot be made is an error naming SHOAL_CACHE_DIR."""
    pytest.importorskip("mujoco", reason="MuJoCo envs need the mujoco extra")
    import shlex
    import stat
    import sysconfig

    from shoal.envs.mujoco import build
    log = tmp_path / "cc.log"
    cc = tmp_path / "my-cc"
    cc.write_text(f'#!/bin/sh\necho called >> {log}\nexec {sysconfig.get_config_var("CC") or "cc"} "$@"\n')
    cc.chmod(0o755)
    monkeypatch.setenv("CC", shlex.quote(str(cc)))
    monkeypatch.setenv("SHOAL_CACHE_DIR", str(tmp_path / "cache"))
    library = build.library_path()
    assert log.read_text() == "called\n"
    assert stat.S_IMODE(library.stat().st_mode) & 0o055 == 0o055   # group and others: read, execute
    assert os.listdir(library.parent) == [library.name]

    monkeypatch.setenv("SHOAL_CACHE_DIR", str(tmp_path / "cache2"))
    monkeypatch.setenv("CC", "false")
    with pytest.raises(RuntimeError, match="building shoal's MuJoCo library failed"):
        build.library_path()
    monkeypatch.setenv("CC", str(tmp_path / "no-such-cc"))
    with pytest.raises(build.MujocoUnavailable, match="no-such-cc: No such file or directory; set CC"):
        build.library_path()
    monkeypatch.setenv("CC", " ")   # blank: as unset
    monkeypatch.setenv("SHOAL_CACHE_DIR", str(tmp_path / "cache3"))
    assert build.library_path().is_file()
    monkeypatch.setenv("SHOAL_CACHE_DIR", str(tmp_path / "cache2"))
    monkeypatch.setenv("CC", str(tmp_path))   # a folder: not a compiler
    with pytest.raises(build.MujocoUnavailable, match="Permission denied; set CC"):
        build.library_path()
    assert [os.listdir(d) for d in (tmp_path / "cache2").iterdir()] == [[]]

    (tmp_path / "a-file").write_text("")
    monkeypatch.setenv("SHOAL_CACHE_DIR", str(tmp_path / "a-file" / "cache"))
    with pytest.raises(build.MujocoUnavailable, match="cannot be written .*set SHOAL_CACHE_DIR"):
        build.library_path()


def test_without_mujoco_everything_else_works_and_the_error_names_the_extra(tmp_path):
    code = """
import importlib.abc, sys
class NoMujoco(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "mujoco" or name.startswith("mujoco."):
            raise ModuleNotFoundError("No module named 'mujoco'", name="mujoco")
sys.meta_path.insert(0, NoMujoco())
import importlib.util
importlib.util.find_spec = lambda name, *a: None if name == "mujoco" else _find(name, *a)
import numpy as np, shoal, gymnasium
print(shoal.envs.spec("HalfCheetah").obs_shape)
with shoal.make("CartPole", 2, backend="serial") as pool:
    pool.step(np.zeros(2, np.int64))
try:
    shoal.make("HalfCheetah", 2)
except ImportError as e:
    print("ImportError:", e)
"""
    code = "import importlib.util as _u; _find = _u.find_spec\n" + code
    out = subprocess.run([sys.executable, "-P", "-c", code], cwd=tmp_path, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "(17,)" in out.stdout
    assert 'ImportError: shoal\'s MuJoCo envs need the mujoco package: pip install "shoal[mujoco]"' \
        in out.stdout


GL_FAILS_TWICE = """
import os, sys
os.environ["MUJOCO_GL"] = "glfw"; os.environ.pop("DISPLAY", None)   # a headless machine's default
import mujoco   # imported first: the env cannot pick EGL any more
import gymnasium, numpy as np, shoal
env = gymnasium.make("shoal/Hopper-v5", render_mode="rgb_array")
env.reset(seed=0)
for attempt in range(2):
    try:
        env.render()
        print("rendered")
    except RuntimeError as e:
        print("clear error" if "MUJOCO_GL" in str(e) else f"other error: {e}")
"""


def test_a_failed_opengl_start_is_a_clear_error_every_time():
    """With no OpenGL context to be had, every render raises the same clear
    error: a second try must not reach GLFW, whose second failed start
    aborts the process."""
    done = subprocess.run([sys.executable, "-P", "-c", GL_FAILS_TWICE], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.splitlines() in (["clear error", "clear error"], ["rendered", "rendered"]), done.stdout


def test_rgb_array_rendering_or_a_clear_error():
    env = gymnasium.make("shoal/Hopper-v5", render_mode="rgb_array")
    env.reset(seed=0)
    env.step(np.zeros(3, np.float32))
    assert env.metadata["render_fps"] == 125 and env.metadata["render_modes"] == ["rgb_array", "depth_array", "rgbd_tuple"]
    try:
        frame = env.render()
    except RuntimeError as e:   # no OpenGL here: the error must say what to do
        assert "MUJOCO_GL" in str(e)
    else:
        assert frame.shape == (480, 480, 3) and frame.dtype == np.uint8 and frame.std() > 10
    env.close()
    with pytest.raises(ValueError, match="not supported"):
        gymnasium.make("shoal/Hopper-v5", render_mode="ansi")
    with Multiprocessing("Hopper", 2, seed=0) as pool:
        from shoal.pool import render
        with pytest.raises(ValueError, match="backend='serial'"):
            render.frame(pool, 0)
    # ... and a vector env or SB3 VecEnv asked to render says so when made, not at render()
    from shoal.pool import NativeVectorEnv
    with pytest.raises(ValueError, match="backend='serial'"):
        NativeVectorEnv("Hopper", 2, render_mode="rgb_array")
    with pytest.raises(ValueError, match="backend='serial'"):
        gymnasium.make_vec("shoal/Hopper-v5", 2, vectorization_mode="vector_entry_point",
                           render_mode="rgb_array")
    NativeVectorEnv("Hopper", 2, backend="serial", render_mode="rgb_array").close()
    if importlib.util.find_spec("stable_baselines3") is not None and importlib.util.find_spec("torch") is not None:
        from shoal.sb3 import ShoalVecEnv
        with pytest.raises(ValueError, match="backend='serial'"):
            ShoalVecEnv("Hopper", 2, render_mode="rgb_array")


def test_mujocos_profiling_clock_is_off_while_shoal_steps(tmp_path):
    """`import mujoco` sets mjcb_time, the clock of mjData.timer, which
    mj_step then reads at each stage it times (19% of Hopper's step).
    shoal's envs step, reset and set state with it taken down, and put it
    back after: the clock is never called for them, and still is for the
    user's own mujoco code."""
    code = textwrap.dedent("""
        import ctypes, gymnasium, numpy as np, mujoco, shoal
        from shoal.envs.mujoco.build import mujoco_dirs
        _, libdir, libname = mujoco_dirs()
        lib = ctypes.CDLL(str(libdir / libname))
        clock = ctypes.c_void_p.in_dll(lib, "mjcb_time")
        assert clock.value, "import mujoco sets the clock"
        calls = []
        counting = ctypes.CFUNCTYPE(ctypes.c_double)(lambda: calls.append(1) or 0.0)
        clock.value = ctypes.cast(counting, ctypes.c_void_p).value
        pool = shoal.make("Hopper", 4, backend="serial")   # (loading the model may time its compile)
        single = gymnasium.make("shoal/Hopper-v5")
        calls.clear()
        pool.reset(seed=0)
        for _ in range(20):
            pool.step(np.zeros((4, 3), np.float32))
        single.reset(seed=0)
        single.unwrapped.set_state(np.array([0, 1.25, 0, 0, 0, 0]), np.zeros(6))
        ours = len(calls)
        same_clock = clock.value == ctypes.cast(counting, ctypes.c_void_p).value
        m = mujoco.MjModel.from_xml_string("<mujoco><worldbody><body><freejoint/><geom size='.1'/>"
                                           "</body></worldbody></mujoco>")
        mujoco.mj_step(m, mujoco.MjData(m))
        clock.value = None
        pool.close()
        single.close()
        print(ours, same_clock, len(calls) > ours)
    """)
    out = subprocess.run([sys.executable, "-P", "-c", code], cwd=tmp_path, capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["0", "True", "True"], out.stdout


def test_a_warning_handler_the_user_set_stays_theirs(tmp_path):
    """shoal sends MuJoCo's warnings to stderr (not MUJOCO_LOG.TXT) only
    where no handler is set: it replaced the user's own for good before."""
    code = textwrap.dedent("""
        import ctypes, shoal
        from shoal.envs.mujoco.build import mujoco_dirs
        _, libdir, libname = mujoco_dirs()
        handler = ctypes.c_void_p.in_dll(ctypes.CDLL(str(libdir / libname)), "mju_user_warning")
        said = []
        theirs = ctypes.CFUNCTYPE(None, ctypes.c_char_p)(lambda message: said.append(message))
        handler.value = ctypes.cast(theirs, ctypes.c_void_p).value
        shoal.make("HalfCheetah", 2, backend="serial").close()
        print(handler.value == ctypes.cast(theirs, ctypes.c_void_p).value)
        handler.value = None
    """)
    out = subprocess.run([sys.executable, "-P", "-c", code], cwd=tmp_path, capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["True"], out.stdout
