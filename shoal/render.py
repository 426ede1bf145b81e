"""Drawing first-party envs: RGB frames, text views and GIFs of play.

Each env's binding draws one env from its raw C struct (a slice of a
pool's `env_states` buffer): `RENDER_SHAPE` (H, W), `render_rgb(env_bytes,
out)` into an (H, W, 3) uint8 array, and `render_text(env_bytes)`. This
module finds env i's bytes in a pool and calls them; nothing here knows an
env's internals.
"""
from __future__ import annotations

import numpy as np

RENDER_MODES = ["rgb_array", "ansi"]


def supports_render(spec) -> bool:
    binding = spec.load_binding()
    return all(hasattr(binding, name) for name in ("RENDER_SHAPE", "render_rgb", "render_text"))


def env_metadata(spec) -> dict:
    """gymnasium-style metadata of a first-party env: its render modes (from
    what its binding can draw) plus the spec's own metadata (render_fps)."""
    return {"render_modes": RENDER_MODES if supports_render(spec) else [], **spec.metadata}


def check_render_mode(spec, render_mode: str | None) -> None:
    """None, or a mode the env can draw; a clear error otherwise."""
    if render_mode is None:
        return
    modes = RENDER_MODES if supports_render(spec) else []
    if render_mode not in modes:
        raise ValueError(f"render_mode {render_mode!r} is not supported by {spec.name} "
                         f"(render modes: {modes})")


def env_bytes(pool, index: int) -> np.ndarray:
    """The raw C struct of env `index` of a native pool (a view)."""
    size = pool.spec.load_binding().ENV_BYTES
    return pool._buffers.env_states[index * size:(index + 1) * size]


def frame(pool, index: int = 0) -> np.ndarray:
    """An RGB frame (H, W, 3) uint8 of env `index` of a native pool."""
    binding = pool.spec.load_binding()
    out = np.zeros((*binding.RENDER_SHAPE, 3), dtype=np.uint8)
    binding.render_rgb(env_bytes(pool, index), out)
    return out


def text(pool, index: int = 0) -> str:
    """A text view of env `index` of a native pool."""
    return pool.spec.load_binding().render_text(env_bytes(pool, index))


def render(pool, render_mode: str | None, index: int = 0):
    """What env.render() returns for `render_mode`: a frame, a text view, or
    None without a render mode."""
    if render_mode is None:
        return None
    return frame(pool, index) if render_mode == "rgb_array" else text(pool, index)


def write_gif(frames: list[np.ndarray], path: str, fps: int = 20) -> None:
    """Write RGB frames as a looping GIF (pillow: a well-kept encoder; GIF's
    LZW and palette quantisation are not worth writing by hand)."""
    from PIL import Image

    images = [Image.fromarray(f) for f in frames]
    images[0].save(path, save_all=True, append_images=images[1:], duration=int(1000 / fps), loop=0)


def play(env: str, steps: int = 200, seed: int = 0, policy: str = "random", index: int = 0):
    """Frames of env `env` played for `steps` steps from `seed` by a random
    or (where the env's binding has one) heuristic policy."""
    from shoal.pool import Serial

    pool = Serial(env, 1, seed=seed)
    binding = pool.spec.load_binding()
    if not supports_render(pool.spec):
        pool.close()
        raise ValueError(f"{pool.spec.name} does not render")
    if policy == "heuristic" and not hasattr(binding, "heuristic_actions"):
        pool.close()
        raise ValueError(f"{pool.spec.name} has no heuristic policy; use policy='random'")
    rng = np.random.default_rng(seed)
    nvec = np.asarray(pool.spec.action_nvec)
    frames = []
    try:
        obs, _ = pool.reset(seed=seed)
        frames.append(frame(pool, index))
        actions = np.zeros(pool.action_space.shape, dtype=binding.ACT_DTYPE)
        from_obs = getattr(binding, "HEURISTIC_INPUT", "env_states") == "obs"
        for _ in range(steps):
            if policy == "heuristic" and from_obs:  # a policy over observations
                binding.heuristic_actions(obs, actions)
            elif policy == "heuristic":  # a scripted policy reading the env's state
                binding.heuristic_actions(pool._buffers.env_states, 1, actions)
            else:
                actions[...] = rng.integers(0, nvec, size=(pool.num_rows, len(nvec))).reshape(actions.shape)
            obs, *_ = pool.step(actions)
            frames.append(frame(pool, index))
    finally:
        pool.close()
    return frames
