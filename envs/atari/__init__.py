"""Atari 2600 games, native: ale-py's emulator with the preprocessing done in
place in the pool's rows (no gymnasium wrapper stack).

    shoal.make("Pong", 16)                              # gymnasium's v5 settings
    shoal.make("Breakout", 16, episodic_life=True, reward_clip=True, use_fire_reset=True)
    gymnasium.make_vec("shoal/Pong-v5", num_envs=16, vectorization_mode="vector_entry_point")

Every game of ale-py's ROM set that gymnasium registers as "ALE/<Game>-v5"
(games.py), as "shoal/<Game>-v5". These are library-backed envs (kind
"worker", docs/design.md): each worker holds one ALEInterface per env; the
pool, the seed rule, autoreset and episode statistics are shoal's own
(envs/shoal_vec.h, through binding.pyx). With the defaults, an env is
exactly gymnasium's

    FrameStackObservation(AtariPreprocessing(
        gymnasium.make("ALE/<Game>-v5", frameskip=1), frame_skip=4, noop_max=30), 4)

(tests/test_atari.py compares them frame for frame, sticky actions on and off).

Observation: uint8 (stack_num, img_height, img_width), or with
    gray_scale=False (stack_num, img_height, img_width, 3) RGB; the oldest
    frame first. A frame is the pixel-wise max of the last two emulator frames
    of a step (ALE's grayscale or RGB screen), resized with OpenCV's
    INTER_AREA (as AtariPreprocessing). A reset fills the stack with its
    frame. When an episode ends inside a step's frame skip, the frames after
    the end are not grabbed and the max-pool keeps what it held, exactly as
    AtariPreprocessing does.
Actions: Discrete: the game's minimal action set (ale-py's order), all 18
    with full_action_space=True. Each is repeated for `frameskip` frames;
    with repeat_action_probability p the emulator repeats the previous frame's
    action instead with probability p, per frame (sticky actions).
Rewards: the sum over the step's frames (float32); its sign with
    reward_clip=True (episode statistics then sum clipped rewards).
Episode end: terminated when the game is over; with terminal_on_life_loss
    (gymnasium's AtariPreprocessing), also on the frame a life is lost (the
    step stops there); with episodic_life (EnvPool's), also on a step that
    lost a life, after all its frames. truncated when the game reaches
    max_num_frames_per_episode frames (108000, 30 minutes; 0 or None: no
    limit), counting reset frames, or max_episode_steps steps (none by
    default; with episodic_life, counted over the game's lives in a pool;
    gymnasium.make and make_vec's sync mode apply gymnasium's TimeLimit
    instead, which counts from each reset: each life).
Resets: the game restarts (ALE reset_game), then takes 1..noop_max no-op
    frames (uniform; none with noop_max=0). With use_fire_reset=True and FIRE
    in the action set, the last of them is FIRE instead (EnvPool's fire start:
    max(noops - 1, 0) no-ops, then one FIRE frame). A game that ends during
    these frames restarts (gymnasium's wrapper would also reseed it with the
    reset's seed; no game ends that early). episodic_life=True (EnvPool's
    semantics): the autoreset after a lost life continues the game instead
    of restarting it (the no-op / fire start still applies; the frame stack
    goes on, the frame after them joining it; the step count,
    info["elapsed_step"] and the limits count the whole game), while a
    reset the pool's user asks for starts a new game, as EnvPool's
    reset(env_ids); in a pool with autoreset DISABLED (SingleEnv,
    pettingzoo) the user's reset is the autoreset and continues the game;
    terminal_on_life_loss=True (gymnasium's
    AtariPreprocessing semantics) restarts it.
Seeds: as gymnasium's AtariEnv: a seed s gives (numpy seed, ALE seed) =
    SeedSequence(s).generate_state(2); the ALE seed drives the emulator's
    randomness (sticky actions) and the ROM is reloaded with it, the numpy
    seed draws the no-op counts. Env i of a pool seeded s is gymnasium's env
    reset with seed s + i.
Info (gymnasium's keys): lives, episode_frame_number, frame_number: in
    SingleEnv's step info, and per env in a pool's step / recv info, which
    gymnasium.make_vec and shoal.sb3 pass on. A pool's info also holds
    EnvPool's "reward" (the step's reward before reward_clip) and
    "terminated" (1 when the game ends: game over, so with episodic_life
    only after the last life; with terminal_on_life_loss also on a lost
    life, as the next reset restarts the game), so that whole games' real scores can be summed in training
    (CleanRL's EnvPool scripts do so). The console's RAM after each step
    or reset is kept too, for shoal.envpool_compat's info["ram"] (EnvPool's).

Options (keyword arguments; gymnasium's v5 defaults, EnvPool's names where
gymnasium has none): frameskip=4, repeat_action_probability=0.25,
noop_max=30, stack_num=4, img_height=84, img_width=84, gray_scale=True,
channels_first=False (RGB stacks (stack_num, H, W, 3), gymnasium's; True:
(3 * stack_num, H, W), EnvPool's), episodic_life=False, terminal_on_life_loss=False, reward_clip=False,
use_fire_reset=False, full_action_space=False,
max_num_frames_per_episode=108000, max_episode_steps=None (a step limit, as
gymnasium's TimeLimit; EnvPool's default is 27000), mode=None and
difficulty=None (the game's mode and difficulty, as gymnasium's: None is
the ROM's default; another must be one the ROM has).

use_fire_reset defaults to False, unlike EnvPool (True): the default env is
then gymnasium's v5 stack, which has no fire start. EnvPool's v5 defaults
also differ in repeat_action_probability (0 there).

The specs import without ale-py; making an env needs it
(`pip install "shoal[atari]"`: ale-py, which ships the emulator and the ROMs;
the resize is shoal's own, byte-equal to OpenCV's INTER_AREA).
"""
from __future__ import annotations

import dataclasses

import numpy as np

from shoal.envs import EnvSpec, unknown_kwargs_error
from shoal.envs.atari.games import FULL_ACTION_COUNT, GAMES

ROM_IDS = {name: rom for name, rom, _ in GAMES}
MINIMAL_ACTIONS = {name: count for name, _, count in GAMES}

DEFAULT_KWARGS = {
    "frameskip": 4,
    "repeat_action_probability": 0.25,
    "noop_max": 30,
    "stack_num": 4,
    "img_height": 84,
    "img_width": 84,
    "gray_scale": True,
    # RGB frames stacked channel-first, (3 * stack_num, H, W), as EnvPool's
    # (and what SB3's CnnPolicy takes); False: (stack_num, H, W, 3), as
    # gymnasium's FrameStackObservation over RGB frames. Grayscale stacks
    # are (stack_num, H, W) either way.
    "channels_first": False,
    "episodic_life": False,
    "terminal_on_life_loss": False,
    "reward_clip": False,
    "use_fire_reset": False,
    "full_action_space": False,
    "max_num_frames_per_episode": 108_000,
    # A step limit as gymnasium's TimeLimit (and EnvPool's max_episode_steps):
    # None, gymnasium's v5 default, leaves only the frame limit above.
    "max_episode_steps": None,
    # The game's mode and difficulty (ALE's, as gymnasium's AtariEnv takes
    # them; None: the ROM's default). Checked against the ROM's own lists
    # when the env is made.
    "mode": None,
    "difficulty": None,
}

EMULATOR_FPS = 60
INSTALL_HINT = 'pip install "shoal[atari]"'


def _int_at_least(name: str, key: str, value, low: int) -> int:
    """`value` as an int in [low, 2**31 - 1] (the binding and ale-py hold
    these options in C ints); ValueError naming `key` otherwise."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low:
        raise ValueError(f"{name}: {key} must be an int >= {low}, got {value!r}")
    if value > 2**31 - 1:
        raise ValueError(f"{name}: {key} must be at most 2**31 - 1 (a C int), got {value!r}; None is no "
                         f"limit where the option takes it")
    return int(value)


def configure(spec: EnvSpec, **kwargs) -> EnvSpec:
    """`spec` with some options changed (the configurator of every Atari
    spec: EnvSpec.configure): checked, normalised, and the observation and
    action spaces updated."""
    unknown = sorted(set(kwargs) - set(DEFAULT_KWARGS))
    if unknown:
        raise unknown_kwargs_error(spec.name, unknown, DEFAULT_KWARGS)
    merged = {**spec.env_kwargs, **kwargs}
    name = spec.name
    for key in ("frameskip", "stack_num", "img_height", "img_width"):
        merged[key] = _int_at_least(name, key, merged[key], 1)
    merged["noop_max"] = _int_at_least(name, "noop_max", merged["noop_max"], 0)
    # gymnasium's AtariEnv takes None for "no limit"; ALE's own value for it is 0.
    if merged["max_num_frames_per_episode"] is None:
        merged["max_num_frames_per_episode"] = 0
    merged["max_num_frames_per_episode"] = _int_at_least(
        name, "max_num_frames_per_episode", merged["max_num_frames_per_episode"], 0)
    if merged["max_episode_steps"] is not None:
        merged["max_episode_steps"] = _int_at_least(name, "max_episode_steps", merged["max_episode_steps"], 1)
    for key in ("mode", "difficulty"):
        if merged[key] is not None:
            merged[key] = _int_at_least(name, key, merged[key], 0)
    p = merged["repeat_action_probability"]
    if isinstance(p, bool) or not isinstance(p, (int, float, np.number)) or not 0.0 <= p <= 1.0:
        raise ValueError(f"{name}: repeat_action_probability must be in [0, 1], got {p!r}")
    merged["repeat_action_probability"] = float(p)
    for key in ("gray_scale", "channels_first", "episodic_life", "terminal_on_life_loss", "reward_clip",
                "use_fire_reset", "full_action_space"):
        if isinstance(merged[key], (int, np.integer)) and not isinstance(merged[key], bool) \
                and merged[key] in (0, 1):
            merged[key] = bool(merged[key])   # 0 / 1 as EnvPool and ale-py take them
        if not isinstance(merged[key], (bool, np.bool_)):
            raise ValueError(f"{name}: {key} must be a bool (or 0 / 1), got {merged[key]!r}")
        merged[key] = bool(merged[key])
    if merged["episodic_life"] and merged["terminal_on_life_loss"]:
        raise ValueError(f"{name}: episodic_life (a lost life ends the episode, the game goes on) and "
                         f"terminal_on_life_loss (a lost life ends the game) exclude each other")
    return _with_kwargs(spec, merged)


def _with_kwargs(spec: EnvSpec, kwargs: dict) -> EnvSpec:
    height, width, stack = kwargs["img_height"], kwargs["img_width"], kwargs["stack_num"]
    if kwargs["gray_scale"]:
        obs_shape = (stack, height, width)
    elif kwargs["channels_first"]:
        obs_shape = (3 * stack, height, width)    # frame k's R, G, B planes at 3k, 3k + 1, 3k + 2
    else:
        obs_shape = (stack, height, width, 3)
    actions = FULL_ACTION_COUNT if kwargs["full_action_space"] else MINIMAL_ACTIONS[spec.name]
    return dataclasses.replace(
        spec, env_kwargs=kwargs, obs_shape=obs_shape, action_nvec=(actions,),
        max_episode_steps=kwargs["max_episode_steps"],
        # One step shows `frameskip` emulator frames: real time is 60 / frameskip steps a second.
        metadata={"render_fps": max(1, round(EMULATOR_FPS / kwargs["frameskip"]))})


def _spec(name: str) -> EnvSpec:
    spec = EnvSpec(
        name=name,
        binding="shoal.envs.atari.binding",
        agents=1,
        obs_shape=(),                  # set by _with_kwargs
        obs_dtype=np.uint8,
        obs_low=0,
        obs_high=255,
        # Episodes are truncated by the emulator's frame limit
        # (max_num_frames_per_episode), as gymnasium's ALE v5 envs; a step
        # limit only if the max_episode_steps keyword asks (set by _with_kwargs).
        max_episode_steps=None,
        kind="worker",
        version=5,
        configurator=configure,
    )
    return _with_kwargs(spec, dict(DEFAULT_KWARGS))


SPECS = [_spec(name) for name, _, _ in GAMES]
