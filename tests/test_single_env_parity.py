"""SingleEnv against gymnasium's own envs where research code reaches past
step(): MuJoCo frames (gymnasium's camera, size and render keywords),
gymnasium's MujocoEnv attributes (dt, init_qpos, set_state, ...), the
errors for what shoal's envs cannot have (model, data, ale), and the action
types gymnasium's envs take."""
import os

import numpy as np
import pytest

gymnasium = pytest.importorskip("gymnasium")

import shoal  # noqa: E402,F401  (registers the shoal/ ids)
from shoal.single import SingleEnv  # noqa: E402

RENDERED = ["Hopper", "HalfCheetah", "Ant", "Humanoid", "InvertedPendulum"]


def needs_gymnasium_mujoco():
    pytest.importorskip("mujoco", reason="MuJoCo envs need the mujoco extra")
    pytest.importorskip("imageio", reason="gymnasium's own MuJoCo envs (the reference) need imageio")


@pytest.fixture
def headless_gl(monkeypatch):
    """gymnasium's renderer reads MUJOCO_GL when it starts and tries GLFW
    first, which has no display to open on a headless machine: EGL then."""
    if not (os.environ.get("DISPLAY") or os.environ.get("MUJOCO_GL")):
        monkeypatch.setenv("MUJOCO_GL", "egl")


def frame_or_skip(env) -> np.ndarray:
    try:
        return env.render()
    except RuntimeError as e:   # no OpenGL context on this machine (the error says MUJOCO_GL)
        if "MUJOCO_GL" not in str(e):
            raise
        pytest.skip(f"no OpenGL context here: {e}")


def gymnasium_frames(name: str, states, **render_kwargs) -> list[np.ndarray]:
    """gymnasium's frames of env `name` at each (qpos, qvel), set with its set_state."""
    env = gymnasium.make(f"{name}-v5", render_mode="rgb_array", **render_kwargs)
    env.reset(seed=0)
    frames = []
    for qpos, qvel in states:
        env.unwrapped.set_state(qpos, qvel)
        frames.append(env.render())
    env.close()
    return frames


def lockstep_frames(name: str, steps: int, render_mode: str = "rgb_array", **render_kwargs):
    """(shoal's frame, gymnasium's frame) pairs of env `name`: shoal's env is
    set to gymnasium's reset state, then both take the same random actions,
    and each pair is drawn after a reset or step of both."""
    theirs = gymnasium.make(f"{name}-v5", render_mode=render_mode, **render_kwargs)
    ours = gymnasium.make(f"shoal/{name}-v5", render_mode=render_mode, **render_kwargs)
    theirs.reset(seed=0)
    ours.reset(seed=0)
    ours.unwrapped.set_state(theirs.unwrapped.data.qpos, theirs.unwrapped.data.qvel)
    theirs.action_space.seed(1)
    pairs = []
    for t in range(steps + 1):
        if t:
            action = theirs.action_space.sample()
            ours.step(action)
            theirs.step(action)
        pairs.append((frame_or_skip(ours), theirs.render()))
    ours.close()
    theirs.close()
    return pairs


@pytest.mark.parametrize("name", RENDERED)
def test_frames_equal_gymnasiums_in_lockstep(name, headless_gl):
    """Same camera (gymnasium's free camera: the median of the geoms at the
    first frame, the model's extent, then the env's DEFAULT_CAMERA_CONFIG),
    same 480x480 size and scene, and the same data drawn: right after a
    step, gymnasium's data holds the positions its last substep started
    from (mj_step computes them before integrating), and shoal's frame is
    drawn from a copy of its C env's mjData, which holds the same. Measured:
    0 differing pixels for all five envs (EGL on the dev VM), so equality is
    asserted; when frames were drawn from the final qpos instead, 2-6% of
    HalfCheetah's and Ant's pixels differed after a step."""
    needs_gymnasium_mujoco()
    pairs = lockstep_frames(name, steps=3)
    assert pairs[0][0].shape == (480, 480, 3) and pairs[0][0].dtype == np.uint8
    for t, (ours, theirs) in enumerate(pairs):
        assert np.array_equal(ours, theirs), \
            f"{name} frame {t}: {np.count_nonzero((ours != theirs).any(-1))} pixels differ"


def test_depth_modes_as_gymnasiums(headless_gl):
    """render_mode "depth_array" (the raw depth buffer, float32 in [0, 1]) and
    "rgbd_tuple" (RGB and depth) give gymnasium's arrays, in lockstep; a
    vector env's render gives each env's depth."""
    needs_gymnasium_mujoco()
    for ours, theirs in lockstep_frames("Hopper", steps=2, render_mode="depth_array", width=64, height=48):
        assert ours.shape == (48, 64) and ours.dtype == np.float32 and 0 < ours.min() < ours.max() <= 1
        assert np.array_equal(ours, theirs)
    for ours, theirs in lockstep_frames("Hopper", steps=1, render_mode="rgbd_tuple", width=64, height=48):
        assert isinstance(ours, tuple) and ours[0].shape == (48, 64, 3) and ours[1].shape == (48, 64)
        assert np.array_equal(ours[0], theirs[0]) and np.array_equal(ours[1], theirs[1])
    envs = gymnasium.make_vec("shoal/Hopper-v5", 2, render_mode="depth_array", backend="serial")
    envs.reset(seed=0)
    frames = envs.render()
    envs.close()
    assert [f.shape for f in frames] == [(480, 480)] * 2 and frames[0].dtype == np.float32
    assert gymnasium.make("shoal/Hopper-v5").metadata["render_modes"] == ["rgb_array", "depth_array", "rgbd_tuple"]


@pytest.mark.parametrize("render_kwargs", [
    dict(width=84, height=84),
    dict(width=100, height=60, camera_name="track"),   # the model's tracking camera, fixed
    dict(camera_id=0),
    dict(camera_id=-1, default_camera_config={"distance": 6.0, "elevation": -10.0, "azimuth": 30.0,
                                              "lookat": np.array([0.5, 0.0, 1.0])}),
    dict(default_camera_config=None),                  # no config: gymnasium's bare free camera
    dict(max_geom=500, visual_options={18: True}),     # mujoco.mjtVisFlag.mjVIS_TRANSPARENT
])
def test_render_keywords_as_gymnasiums(render_kwargs, headless_gl):
    needs_gymnasium_mujoco()
    pairs = lockstep_frames("Hopper", steps=1, **render_kwargs)
    size = (render_kwargs.get("height", 480), render_kwargs.get("width", 480), 3)
    assert pairs[0][0].shape == size
    for ours, theirs in pairs:
        assert np.array_equal(ours, theirs)
    env = gymnasium.make("shoal/Hopper-v5", **render_kwargs)   # kept as given, as gymnasium's
    reference = gymnasium.make("Hopper-v5", **render_kwargs)
    for key in ("width", "height", "camera_id", "camera_name"):
        assert getattr(env.unwrapped, key) == getattr(reference.unwrapped, key), key
    env.close()
    reference.close()


def test_a_pool_draws_each_env_as_gymnasiums_default_env(headless_gl):
    """A Serial pool's frames (NativeVectorEnv's render) come from gymnasium's
    default camera, one per env, fixed at that env's own first frame: env 0,
    moved 3 m ahead, does not move env 1's camera."""
    needs_gymnasium_mujoco()
    from shoal.pool import Serial
    from shoal.pool import render as pool_render
    with Serial("HalfCheetah", 2, seed=0, num_workers=1) as pool:   # one block: both envs
        pool.reset(seed=0)
        binding = pool.spec.load_binding()
        qpos, qvel = binding.state_of(pool, 0)
        binding.set_state_of(pool, 0, qpos + np.eye(len(qpos))[0] * 3.0, qvel)
        try:
            frames = [pool_render.frame(pool, i) for i in (0, 1)]
        except RuntimeError as e:
            if "MUJOCO_GL" not in str(e):
                raise
            pytest.skip(f"no OpenGL context here: {e}")
        states = [binding.state_of(pool, i) for i in (0, 1)]
    for frame, state in zip(frames, states):
        assert np.array_equal(frame, gymnasium_frames("HalfCheetah", [state])[0])


def test_gif_frames_follow_the_body(headless_gl):
    """shoal's GIFs (shoal.render.frame: `shoal play`, the trainer's) see a
    MuJoCo env from its model's tracking camera, gymnasium's
    camera_name="track": a HalfCheetah 20 m ahead is still in the frame."""
    needs_gymnasium_mujoco()
    from shoal import render as app_render
    from shoal.pool import Serial
    with Serial("HalfCheetah", 1, seed=0) as pool:
        pool.reset(seed=0)
        binding = pool.spec.load_binding()
        qpos, qvel = binding.state_of(pool, 0)
        try:
            app_render.frame(pool)
        except RuntimeError as e:
            if "MUJOCO_GL" not in str(e):
                raise
            pytest.skip(f"no OpenGL context here: {e}")
        binding.set_state_of(pool, 0, qpos + np.eye(len(qpos))[0] * 20.0, qvel)
        ahead = app_render.frame(pool)
        state = binding.state_of(pool, 0)
    assert np.array_equal(ahead, gymnasium_frames("HalfCheetah", [state], camera_name="track")[0])


def test_default_camera_configs_are_gymnasiums():
    needs_gymnasium_mujoco()
    import inspect

    from shoal.envs.mujoco import DEFAULT_CAMERA_CONFIG
    for name, ours in DEFAULT_CAMERA_CONFIG.items():
        env_class = type(gymnasium.make(f"{name}-v5").unwrapped)
        theirs = inspect.signature(env_class.__init__).parameters["default_camera_config"].default
        assert (ours is None) == (theirs is None), name
        assert set(ours or {}) == set(theirs or {}), name
        for key, value in (ours or {}).items():
            np.testing.assert_array_equal(value, theirs[key], err_msg=f"{name} {key}")


def test_render_keywords_are_checked():
    needs_gymnasium_mujoco()
    with pytest.raises(ValueError, match="Both `camera_id` and `camera_name`"):   # gymnasium's words
        gymnasium.make("shoal/Hopper-v5", camera_id=0, camera_name="track")
    with pytest.raises(ValueError, match="camera_id 5 is not a camera of hopper.xml"):
        gymnasium.make("shoal/Hopper-v5", render_mode="rgb_array", camera_id=5)
    with pytest.raises(ValueError, match="width must be a positive int"):
        gymnasium.make("shoal/Hopper-v5", width=0)
    with pytest.raises(ValueError, match="not mujoco.MjvCamera fields"):
        gymnasium.make("shoal/Hopper-v5", default_camera_config={"zoom": 2.0})
    with pytest.warns(UserWarning, match="camera_name 'nope' is not a camera"):   # gymnasium: silently free
        gymnasium.make("shoal/Hopper-v5", render_mode="rgb_array", camera_name="nope").close()
    with pytest.raises(TypeError, match="unexpected keyword argument 'width'.*a render keyword of one env"):
        shoal.make("Hopper", 2, width=84)   # a pool renders with gymnasium's defaults
    with pytest.raises(TypeError, match="unexpected keyword argument 'width'"):
        SingleEnv("CartPole", width=84)     # not a MuJoCo env: not a keyword of it


def test_mujoco_env_attributes_as_gymnasiums():
    needs_gymnasium_mujoco()
    for name in ("Hopper", "Ant"):
        env = gymnasium.make(f"shoal/{name}-v5", frame_skip=3)
        reference = gymnasium.make(f"{name}-v5", frame_skip=3)
        ours, theirs = env.unwrapped, reference.unwrapped
        assert ours.dt == theirs.dt and ours.frame_skip == theirs.frame_skip == 3
        np.testing.assert_array_equal(ours.init_qpos, theirs.init_qpos)
        np.testing.assert_array_equal(ours.init_qvel, theirs.init_qvel)
        with pytest.raises(ValueError, match="read-only"):   # the C env resets from the model's own
            ours.init_qpos[0] = 1.0
        env.close()
        reference.close()


@pytest.mark.parametrize("name", ["Hopper", "Ant"])
def test_set_state_then_steps_as_gymnasiums(name):
    """set_state (from gymnasium's state after a reset, and again mid-run
    from a state of our own), then the same actions: obs, rewards, flags,
    info and state_vector() as gymnasium's, step for step (within the
    alignment tests' 1e-6 relative: the solvers' warm starts differ)."""
    needs_gymnasium_mujoco()
    env = gymnasium.make(f"shoal/{name}-v5")
    reference = gymnasium.make(f"{name}-v5")
    env.reset(seed=0)
    reference.reset(seed=0)
    ours, theirs = env.unwrapped, reference.unwrapped
    rng = np.random.default_rng(0)
    ours.set_state(theirs.data.qpos.copy(), theirs.data.qvel.copy())
    for t in range(60):
        if t == 30:
            qpos = ours.init_qpos + rng.uniform(-0.1, 0.1, len(ours.init_qpos))
            qvel = ours.init_qvel + rng.uniform(-0.1, 0.1, len(ours.init_qvel))
            ours.set_state(qpos, qvel)
            theirs.set_state(qpos, qvel)
        np.testing.assert_allclose(ours.state_vector(), theirs.state_vector(), rtol=1e-6, atol=1e-9)
        action = rng.uniform(-1, 1, env.action_space.shape).astype(np.float32)
        obs, reward, terminated, truncated, info = env.step(action)
        gym_obs, gym_reward, gym_terminated, gym_truncated, gym_info = reference.step(action)
        np.testing.assert_allclose(obs, gym_obs, rtol=1e-6, atol=1e-9, err_msg=f"step {t}")
        assert reward == pytest.approx(gym_reward, rel=1e-6, abs=1e-6)
        assert (terminated, truncated) == (gym_terminated, gym_truncated), f"step {t}"
        for key, value in info.items():
            assert value == pytest.approx(gym_info[key], rel=1e-6, abs=1e-9), (t, key)
        if terminated:
            break
    with pytest.raises(ValueError, match=r"set_state needs qpos of shape \(\d+,\) and qvel"):
        ours.set_state(np.zeros(3), np.zeros(3))
    env.close()
    reference.close()


def test_mujoco_model_and_data_say_what_shoal_offers():
    needs_gymnasium_mujoco()
    env = gymnasium.make("shoal/Hopper-v5").unwrapped
    for name in ("model", "data", "is_healthy", "get_body_com", "do_simulation"):   # gymnasium's MujocoEnv's
        with pytest.raises(AttributeError, match=f"no attribute '{name}': shoal's MuJoCo state lives in "
                                                 f"C structs.*set_state"):
            getattr(env, name)
        assert not hasattr(env, name) and getattr(env, name, "default") == "default"
    with pytest.raises(AttributeError) as unknown:
        env.no_such_attribute
    assert str(unknown.value) == "'MujocoSingleEnv' object has no attribute 'no_such_attribute'"
    with pytest.raises(AttributeError, match="no attribute 'ale'$"):   # an Atari name on a MuJoCo env
        env.ale
    env.close()


def test_atari_ale_and_snapshots_say_what_shoal_offers():
    pytest.importorskip("ale_py", reason="Atari envs need the atari extra")
    env = SingleEnv("Pong")
    with pytest.raises(AttributeError, match="no attribute 'ale'.*AtariPreprocessing.*episodic_life"
                                             ".*terminal_on_life_loss.*info\\['lives'\\]"):
        env.ale
    for name in ("ale", "clone_state", "restore_state"):
        assert not hasattr(env, name) and getattr(env, name, None) is None
    with pytest.raises(AttributeError, match="restore_state'.*reset\\(seed=s\\)"):
        env.restore_state
    with pytest.raises(AttributeError, match="get_keys_to_action'.*rgb_array"):   # gymnasium.utils.play's
        env.get_keys_to_action
    env.close()
    # gymnasium's AtariPreprocessing over a shoal id given frameskip=1 (as one
    # would give ALE's): its first check passes, and it stops at `ale` with
    # the hint, not at "disable frame-skipping"
    from gymnasium.wrappers import AtariPreprocessing
    wrapped = AtariPreprocessing(gymnasium.make("shoal/Pong-v5", frameskip=1))
    with pytest.raises(AttributeError, match="already preprocessed"):
        wrapped.reset(seed=0)
    wrapped.close()


def test_np_random_seed_replays_an_unseeded_episode_as_gymnasiums():
    """Logging env.np_random_seed after an unseeded reset and resetting a new
    env with it replays the episode, on gymnasium's CartPole-v1 and on shoal's
    env alone or under SyncVectorEnv (shoal's C RNG, not gymnasium's
    np_random, draws the start: np_random_seed reports the C env's seed)."""
    for env_id in ("CartPole-v1", "shoal/CartPole-v0"):
        env = gymnasium.make(env_id)
        first, _ = env.reset()
        replay, _ = gymnasium.make(env_id).reset(seed=env.np_random_seed)
        np.testing.assert_array_equal(first, replay, err_msg=env_id)
    vector = gymnasium.make_vec("shoal/CartPole-v0", 3, vectorization_mode="sync")
    first, _ = vector.reset()
    again = gymnasium.make_vec("shoal/CartPole-v0", 3, vectorization_mode="sync")
    np.testing.assert_array_equal(again.reset(seed=list(vector.np_random_seed))[0], first)
    # a seeded reset then an unseeded one: np_random_seed stays the seeded one, as gymnasium's
    env = gymnasium.make("shoal/CartPole-v0")
    env.reset(seed=7)
    env.step(0)
    env.reset()
    assert env.np_random_seed == 7


def test_seeds_beyond_64_bits_are_taken_as_gymnasiums_envs_take_them():
    """gymnasium's envs take any int seed >= 0; the C env's seed is its value
    modulo 2**64, and SyncVectorEnv's seed + i may pass 2**64."""
    env = gymnasium.make("shoal/CartPole-v0")
    np.testing.assert_array_equal(env.reset(seed=2**64 + 5)[0], env.reset(seed=5)[0])
    assert env.np_random_seed == 5   # gymnasium's np_random seeded with the int given
    env.reset(seed=2**100)
    sync = gymnasium.make_vec("shoal/CartPole-v0", 3, vectorization_mode="sync")
    native = gymnasium.make_vec("shoal/CartPole-v0", 3, vectorization_mode="vector_entry_point")
    for seed in (2**64 - 1, 2**65 + 7):   # env i: (seed + i) mod 2**64 in both modes
        np.testing.assert_array_equal(native.reset(seed=seed)[0], sync.reset(seed=seed)[0])
    np.testing.assert_array_equal(native.reset(seed=2**64 - 1)[0][1], env.reset(seed=0)[0])
    sync.close()
    native.close()
    with pytest.raises(gymnasium.error.Error, match="greater or equal to zero"):   # gymnasium's own check
        env.reset(seed=-1)


def test_a_closed_env_resets_as_new_as_gymnasiums_do():
    """gymnasium's envs go on after close() (it frees the renderer), and
    SB3's check_env resets one after closing it: a closed shoal env's
    reset makes it anew (its state went with the close), and until then
    step() says so in the env's own words."""
    env, reference = gymnasium.make("shoal/CartPole-v0"), gymnasium.make("shoal/CartPole-v0")
    env.reset(seed=0)
    env.close()
    with pytest.raises(gymnasium.error.ClosedEnvironmentError, match="step\\(\\) on a closed CartPole env: "
                                                                     "its state went with env.close"):
        env.step(0)
    np.testing.assert_array_equal(env.reset(seed=5)[0], reference.reset(seed=5)[0])
    for t in range(30):
        np.testing.assert_array_equal(env.step(t % 2)[0], reference.step(t % 2)[0])
    env.close()
    env.close()   # twice is fine
    reference.close()
    # a seeded run stays reproducible through a close (the next seed comes from the env's generator)
    runs = []
    for _ in range(2):
        env = gymnasium.make("shoal/CartPole-v0")
        env.reset(seed=0)
        env.close()
        runs.append([env.reset()[0] for _ in range(2)])
        env.close()
    np.testing.assert_array_equal(runs[0], runs[1])


def test_discrete_actions_as_0d_arrays_and_tensors():
    """gymnasium's envs take a 0-d integer array or tensor as a Discrete action."""
    reference = gymnasium.make("CartPole-v1")
    env = gymnasium.make("shoal/CartPole-v0")
    reference.reset(seed=0)
    env.reset(seed=0)
    reference.step(np.array(1))
    env.step(np.array(1))
    env.step(np.array(0, dtype=np.int32))
    torch = pytest.importorskip("torch")
    env.step(torch.tensor(1))
    with pytest.raises(ValueError, match="not in Discrete"):
        env.step(torch.tensor(2))
    with pytest.raises(ValueError, match="not in Discrete"):
        env.step(np.array(1.0))
    env.close()
    reference.close()


def test_frames_copy_only_into_a_matching_model():
    """The renderer copies the C env's whole mjData (mj_copyData). Into the
    data of another model, or of the same model with other data sizes (here
    nuserdata, which leaves the model's own sizes and signature alike),
    mj_copyData would stop the process with an mjERROR: it is refused with
    a ValueError instead."""
    pytest.importorskip("mujoco", reason="MuJoCo envs need the mujoco extra")
    import mujoco
    from shoal.envs.mujoco.binding import model_path
    from shoal.pool import Serial
    xml = model_path("half_cheetah.xml").read_text()
    more_userdata = xml.replace('<mujoco model="cheetah">', '<mujoco model="cheetah"><size nuserdata="10"/>', 1)
    assert more_userdata != xml
    with Serial("HalfCheetah", 1, seed=0) as pool:
        block, i = pool.spec.load_binding().block_of(pool, 0)
        same = mujoco.MjModel.from_xml_string(xml)
        data = mujoco.MjData(same)
        block.copy_data_into(i, same, data)
        assert np.array_equal(data.qpos, block.get_state(i)[0])
        for other in (mujoco.MjModel.from_xml_path(str(model_path("hopper.xml"))),
                      mujoco.MjModel.from_xml_string(more_userdata)):
            with pytest.raises(ValueError, match="does not match"):
                block.copy_data_into(i, other, mujoco.MjData(other))


def test_frames_draw_the_model_the_env_steps_after_its_file_changed(tmp_path, headless_gl):
    """The renderer draws the env's own model (compiled when the env was
    made), not its XML file reread at the first frame: a file edited in
    between (its torso made 3x wider, then the file removed) changes neither
    the frame nor the model's constants."""
    needs_gymnasium_mujoco()
    import shutil

    from shoal.envs.mujoco.binding import model_path
    from shoal.pool import Serial
    from shoal.pool import render as pool_render
    xml = tmp_path / "hopper.xml"
    shutil.copy(model_path("hopper.xml"), xml)
    with Serial("Hopper", 1, seed=0, env_kwargs={"xml_file": str(xml)}) as pool, \
            Serial("Hopper", 1, seed=0) as reference:
        text = xml.read_text()
        torso = 'name="torso_geom" size="0.05 '
        assert torso in text
        xml.write_text(text.replace(torso, 'name="torso_geom" size="0.15 '))
        frames = []
        for p in (pool, reference):
            p.reset(seed=0)
            try:
                frames.append(pool_render.frame(p, 0))
            except RuntimeError as e:
                if "MUJOCO_GL" not in str(e):
                    raise
                pytest.skip(f"no OpenGL context here: {e}")
        assert np.array_equal(frames[0], frames[1])
        xml.unlink()
        np.testing.assert_array_equal(pool.spec.load_binding().init_qpos, reference.spec.load_binding().init_qpos)
