"""Drawing first-party envs from a native pool: RGB frames and text views.

Each env's binding draws one env from its raw C struct (a slice of a
pool's `env_states` buffer): `RENDER_SHAPE` (H, W), `render_rgb(env_bytes,
out)` into an (H, W, 3) uint8 array, and `render_text(env_bytes)`. This
module finds env i's bytes in a pool and calls them; nothing here knows an
env's internals. The pool's gymnasium / pettingzoo faces use it for
render_mode "rgb_array" / "ansi"; GIFs and `shoal play` live in shoal.render.
"""
from __future__ import annotations

import numpy as np

from shoal.pool.native import PoolClosedError

RENDER_MODES = ["rgb_array", "ansi"]


def supports_render(spec) -> bool:
    return bool(render_modes(spec))


def render_modes(spec) -> list[str]:
    """The render modes env `spec` can draw. Library-backed envs draw
    through their library (MuJoCo: its own renderer, with depth too)."""
    if spec.kind != "header":
        return list(getattr(spec.load_binding(), "RENDER_MODES", ["rgb_array"]))
    binding = spec.load_binding()
    drawn = all(hasattr(binding, name) for name in ("RENDER_SHAPE", "render_rgb", "render_text"))
    return RENDER_MODES if drawn else []


def env_metadata(spec) -> dict:
    """gymnasium-style metadata of a first-party env: its render modes (from
    what its binding can draw) plus the spec's own metadata (render_fps)."""
    return {"render_modes": render_modes(spec), **spec.metadata}


def check_render_mode(spec, render_mode: str | None, backend: str = "serial") -> None:
    """None, or a mode the env can draw from a pool of `backend`; a clear
    error otherwise. Library-backed envs (MuJoCo, Atari) draw from their
    library's state, which a multiprocessing pool keeps in its workers."""
    if render_mode is None:
        return
    modes = render_modes(spec)
    if render_mode not in modes:
        raise ValueError(f"render_mode {render_mode!r} is not supported by {spec.name} "
                         f"(render modes: {modes})")
    if spec.kind != "header" and backend != "serial":
        raise ValueError(f"render_mode {render_mode!r}: {spec.name} draws from its envs' state, "
                         f"which a {backend} pool keeps in its workers: use backend='serial' "
                         f"(gymnasium.make and SingleEnv do)")


def env_bytes(pool, index: int) -> np.ndarray:
    """The raw C struct of env `index` of a native pool (a view)."""
    size = pool.spec.load_binding().ENV_BYTES
    return pool.env_states[index * size:(index + 1) * size]


def library_frame(pool, index: int, mode: str = "rgb_array"):
    """What a library-backed env's own renderer draws of env `index` in
    `mode` (one of its binding's RENDER_MODES)."""
    if pool.closed:   # its envs' state is gone (a header env's bytes say so themselves)
        raise PoolClosedError(f"this {type(pool).__name__} pool is closed: its envs can no "
                              f"longer be drawn")
    return pool.spec.load_binding().render_pool(pool, index, mode=mode)


def frame(pool, index: int = 0) -> np.ndarray:
    """An RGB frame (H, W, 3) uint8 of env `index` of a native pool."""
    if pool.spec.kind != "header":
        return library_frame(pool, index)
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
    if render_mode == "ansi":
        return text(pool, index)
    if render_mode == "rgb_array":
        return frame(pool, index)
    return library_frame(pool, index, render_mode)   # a library's own mode (MuJoCo's depth)
