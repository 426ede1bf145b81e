"""Rendering for applications: GIFs of play (`shoal play`) and training.

Frames and text views of one env of a pool come from shoal.pool.render
(re-exported here: text, render, supports_render, env_metadata,
check_render_mode, env_bytes, RENDER_MODES); this module adds what only
applications need: frames for GIFs, writing GIFs and playing an env with a
policy.
"""
from __future__ import annotations

import contextlib
import os

import numpy as np

# The pool-level helpers (re-exported: shoal.render keeps its names).
from shoal.pool.render import (  # noqa: E402,F401
    RENDER_MODES,
    check_render_mode,
    env_bytes,
    env_metadata,
    render,
    supports_render,
    text,
)
from shoal.pool.render import frame as pool_frame

__all__ = ["RENDER_MODES", "check_render_mode", "env_bytes", "env_metadata", "frame", "play",
           "random_actions", "render", "supports_render", "text", "write_gif"]


def frame(pool, index: int = 0) -> np.ndarray:
    """An RGB frame of env `index` of a native pool, for GIFs (`shoal play`,
    the trainer's): shoal.pool.render.frame's, but a MuJoCo env is seen
    from its model's camera "track", which follows the body, where it has
    one. gymnasium's default camera (render_mode="rgb_array") stays where
    the first frame was drawn, and a running body soon leaves it."""
    if pool.spec.binding == "shoal.envs.mujoco.binding" and not pool.closed:
        return pool.spec.load_binding().render_pool(pool, index, tracking=True)
    return pool_frame(pool, index)


def write_gif(frames: list[np.ndarray], path: str, fps: int = 20) -> None:
    """Write RGB frames as a looping GIF (pillow: a well-kept encoder; GIF's
    LZW and palette quantisation are not worth writing by hand)."""
    from PIL import Image

    images = [Image.fromarray(f) for f in frames]
    # Whole or not at all: a failed write (a full disk) leaves no truncated GIF
    # and keeps a GIF already at `path`
    partial = f"{path}.tmp{os.getpid()}"
    try:
        images[0].save(partial, format="GIF", save_all=True, append_images=images[1:],
                       duration=int(1000 / fps), loop=0)
        os.replace(partial, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(partial)
        raise


def random_actions(spec, rng: np.random.Generator, rows: int) -> np.ndarray:
    """`rows` random actions for env `spec`, shape (rows, action size): Box
    actions uniform within [action_low, action_high] (their action_nvec is
    empty), discrete ones uniform over each of action_nvec's choices."""
    if spec.continuous_action:
        low = np.asarray(spec.action_low, dtype=np.float64)
        high = np.asarray(spec.action_high, dtype=np.float64)
        if not (np.isfinite(low).all() and np.isfinite(high).all()):
            raise ValueError(f"{spec.name}'s Box actions are unbounded: no uniform random policy; "
                             f"use policy='heuristic' where it has one")
        return rng.uniform(low, high, size=(rows, len(low)))
    nvec = np.asarray(spec.action_nvec)
    return rng.integers(0, nvec, size=(rows, len(nvec)))


def play(env: str, steps: int = 200, seed: int = 0, policy: str = "random", index: int = 0,
         on_frame=None):
    """Frames of env `env` played for `steps` steps from `seed` by a random
    or (where the env's binding has one) heuristic policy: steps + 1 of
    them (the reset's, then one per step). on_frame(), when given, is
    called after each frame (progress displays)."""
    on_frame = on_frame or (lambda: None)
    from shoal.pool import Serial

    pool = Serial(env, 1, seed=seed)
    binding = pool.spec.load_binding()
    if not supports_render(pool.spec):
        pool.close()
        raise ValueError(f"{pool.spec.name} does not render")
    if policy == "heuristic" and not hasattr(binding, "heuristic_actions"):
        pool.close()
        raise ValueError(f"{pool.spec.name} has no heuristic policy (Snake, Drive, Explorer and "
                         f"ExplorerPointGoal have one); the random policy works for every env")
    rng = np.random.default_rng(seed)  # the random policy's: the same seed, the same GIF
    frames = []
    try:
        obs, _ = pool.reset(seed=seed)
        frames.append(frame(pool, index))
        on_frame()
        actions = np.zeros(pool.action_space.shape, dtype=binding.ACT_DTYPE)
        from_obs = getattr(binding, "HEURISTIC_INPUT", "env_states") == "obs"
        for _ in range(steps):
            if policy == "heuristic" and from_obs:  # a policy over observations
                binding.heuristic_actions(obs, actions)
            elif policy == "heuristic":  # a scripted policy reading the env's state
                binding.heuristic_actions(pool.env_states, 1, actions)
            else:
                actions[...] = random_actions(pool.spec, rng, pool.num_rows).reshape(actions.shape)
            obs, *_ = pool.step(actions)
            frames.append(frame(pool, index))
            on_frame()
    finally:
        pool.close()
    return frames
