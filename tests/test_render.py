"""Rendering: frames and text views of every env that draws, through the
single env, the vector env, the pettingzoo view, and GIFs via `shoal play`."""
import os

import numpy as np
import pytest
from gymnasium.error import ResetNeeded

import shoal.envs
from shoal import render
from shoal.cli import main as cli
from shoal.pool import NativeVectorEnv, PoolClosedError, Serial
from shoal.single import SingleEnv

# Header envs that draw themselves from their C struct; library-backed envs
# render through their library and test it in their own files.
DRAWN = [name.lower() for name in shoal.envs.names("header") if render.supports_render(shoal.envs.spec(name))]


def test_cartpole_draws():
    assert "cartpole" in DRAWN


@pytest.mark.parametrize("env", DRAWN)
def test_frames_and_text_follow_the_env(env):
    pool = Serial(env, 2, seed=0)
    shape = (*pool.spec.load_binding().RENDER_SHAPE, 3)
    first, text0 = render.frame(pool, 0), render.text(pool, 0)
    assert first.shape == shape and first.dtype == np.uint8 and first.std() > 0
    assert isinstance(text0, str) and text0.strip()
    assert not np.array_equal(first, render.frame(pool, 1)), "two envs with other seeds look different"
    rng = np.random.default_rng(0)
    nvec = np.asarray(pool.spec.action_nvec)
    for _ in range(5):
        pool.step(rng.integers(0, nvec, size=(pool.num_rows, len(nvec))).reshape(pool.action_space.shape))
    assert not np.array_equal(first, render.frame(pool, 0)), "the frame follows the env"
    assert render.text(pool, 0) != text0
    pool.close()


def test_render_modes_through_gymnasium_and_pettingzoo():
    env = SingleEnv("cartpole", render_mode="rgb_array")
    env.reset(seed=0)
    assert env.render().shape == (400, 600, 3)
    assert env.metadata["render_modes"] == ["rgb_array", "ansi"]
    env.close()
    env = SingleEnv("cartpole", render_mode="ansi")
    env.reset(seed=0)
    assert env.render().startswith("x=")
    env.close()
    with pytest.raises(ValueError, match="not supported"):
        SingleEnv("cartpole", render_mode="human")

    vec = NativeVectorEnv("cartpole", 3, backend="serial", render_mode="rgb_array")
    with pytest.raises(ResetNeeded):   # as SyncVectorEnv's envs
        vec.render()
    vec.reset(seed=0)
    frames = vec.render()
    assert isinstance(frames, tuple) and len(frames) == 3 and frames[0].shape == (400, 600, 3)
    vec.close()

    from shoal.pettingzoo_env import ShoalParallelEnv
    penv = ShoalParallelEnv("cartpole", render_mode="ansi")
    penv.reset(seed=0)
    assert "theta=" in penv.render()
    penv.close()


@pytest.mark.parametrize("env", DRAWN)
def test_vector_frames_one_per_sub_env_with_a_frame_rate(env):
    """gymnasium's HumanRendering and RecordVideo take one frame per sub-env
    (num_envs counts agent rows) and need metadata["render_fps"]."""
    vec = NativeVectorEnv(env, 2, backend="serial", render_mode="rgb_array")
    try:
        assert vec.metadata["render_fps"] > 0
        vec.reset(seed=0)
        frames = vec.render()
        agents = vec.agents_per_env
        assert len(frames) == vec.num_envs == 2 * agents
        assert all(frames[row] is frames[row - row % agents] for row in range(vec.num_envs))
        assert not np.array_equal(frames[0], frames[agents])   # env 1 is drawn, not env 0 again
    finally:
        vec.close()


@pytest.mark.parametrize("env_name", ["cartpole", "Hopper", "Pong"])
def test_render_on_a_closed_env_says_it_is_closed(env_name):
    """Not a hint about backends: the env, or its pool, is closed."""
    if env_name == "Hopper":
        pytest.importorskip("mujoco", reason="MuJoCo envs need the mujoco extra")
    if env_name == "Pong":
        pytest.importorskip("ale_py", reason="Atari envs need the atari extra")
    env = SingleEnv(env_name, render_mode="rgb_array")
    env.reset(seed=0)
    first = env.render()
    env.close()
    with pytest.raises(PoolClosedError, match=rf"render\(\) on a closed {shoal.envs.spec(env_name).name} "
                                              rf"env: its state went with env.close\(\); reset\(\) it first"):
        env.render()
    env.reset(seed=0)   # as gymnasium's envs: closed, then reset, it draws again
    np.testing.assert_array_equal(env.render(), first)
    env.close()
    pool = Serial(env_name, 1, seed=0)
    pool.close()
    with pytest.raises(PoolClosedError, match="pool is closed"):
        render.frame(pool, 0)


def test_a_gif_the_disk_refuses_leaves_the_old_one_and_no_partial_file(tmp_path, monkeypatch):
    """write_gif writes whole or not at all: a write that fails midway (a
    full disk) once left a truncated GIF in place of a good one."""
    pytest.importorskip("PIL", reason="GIFs need pillow (pip install 'shoal[render]')")
    from PIL import Image

    from shoal import render as app_render
    frames = [np.full((8, 8, 3), k * 40, np.uint8) for k in range(4)]
    out = tmp_path / "play.gif"
    app_render.write_gif(frames, str(out))
    good = out.read_bytes()
    real_save = Image.Image.save

    def disk_full_midway(self, fp, *args, **kwargs):
        real_save(self, fp, *args, **kwargs)
        with open(fp, "r+b") as f:
            f.truncate(30)
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(Image.Image, "save", disk_full_midway)
    with pytest.raises(OSError, match="No space left"):
        app_render.write_gif(frames[::-1], str(out))
    assert out.read_bytes() == good and os.listdir(tmp_path) == ["play.gif"]


def test_shoal_play_writes_a_gif(tmp_path, capsys):
    pytest.importorskip("PIL", reason="GIFs need pillow (pip install 'shoal[render]')")
    from PIL import Image

    out = tmp_path / "cartpole.gif"
    assert cli(["play", "cartpole", "--out", str(out), "--steps", "12", "--seed", "3"]) == 0
    assert "13 frames" in capsys.readouterr().out
    with Image.open(out) as gif:
        assert gif.n_frames > 1 and gif.size == (600, 400)
    with pytest.raises(SystemExit):
        cli(["play", "cartpole", "--policy", "heuristic", "--out", str(out)])  # CartPole has none


def test_cartpole_frame_is_gymnasiums_picture(monkeypatch):
    """CartPole draws gymnasium's CartPole-v1 frame (size, geometry, colours),
    so videos look alike; only gymnasium's anti-aliased edge pixels differ."""
    pytest.importorskip("pygame", reason="gymnasium's CartPole frame is drawn with pygame (mpe2 brings it)")
    import gymnasium
    monkeypatch.setenv("SDL_VIDEODRIVER", "dummy")   # pygame draws off-screen
    reference = gymnasium.make("CartPole-v1", render_mode="rgb_array")
    reference.reset(seed=0)
    pool = Serial("cartpole", 1, seed=0)
    rng = np.random.default_rng(0)
    states = [(0.0, 0.0, 0.0, 0.0), (1.0, 0.5, 0.2, -0.3), (-2.0, 0.0, -0.2, 0.0), (2.3, 0.0, 0.21, 0.0)]
    states += [tuple(rng.uniform([-2.4, -1, -0.21, -1], [2.4, 1, 0.21, 1])) for _ in range(10)]
    for state in states:
        reference.unwrapped.state = np.array(state)
        expected = reference.render()
        pool.env_states.view(np.uint8)[:16] = np.array(state, np.float32).view(np.uint8)   # x, x_dot, theta, theta_dot
        frame = render.frame(pool, 0)
        assert frame.shape == expected.shape == (400, 600, 3)
        drawn = np.any(expected != 255, axis=2).sum()   # track, cart, pole, axle
        differing = np.any(frame != expected, axis=2).sum()
        assert differing <= 0.1 * drawn, f"state {state}: {differing} of the {drawn} drawn pixels differ"
    reference.close()
    pool.close()
