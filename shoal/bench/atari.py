"""The Atari section: env-steps/s of Atari 2600 games under the standard
preprocessing, shoal native vs EnvPool vs ale-py's AtariVectorEnv vs
gymnasium vs the bare emulator, in one run.

For each game (--atari-games, default Pong and Breakout) and num_envs
(--atari-num-envs, default 8 and 16):

  bare ALE           ale_py.ALEInterface.act in a Python loop on one core: one
                     emulator per env, random actions of the game's minimal
                     action set (pre-sampled), 4 act calls per env-step,
                     reset_game on game over, no screen grabs and no
                     preprocessing: the emulation limit per core. "bare ALE x
                     cores" (computed) is the limit for the machine.
  shoal C loop       shoal's native env stepped by `Block.run_steps` over
                     num_envs envs on one core: emulation plus the
                     preprocessing (max-pool, resize, frame stack).
  shoal Serial       shoal.pool.native.Serial: pool.step in this process.
  shoal native sync  shoal.pool.native.Multiprocessing, one worker per core.
  shoal native async the same with batch_size = num_envs // 2 (an even
                     worker count): recv() one half while the other steps.
  EnvPool            envpool.make("<Game>-v5", env_type="gymnasium"): sync at
                     each --workers thread count and at the available cores,
                     async (batch num_envs // 2) at the cores. Skipped with a
                     note if EnvPool is not installed.
  ale-py AtariVectorEnv
                     ale_py.vector_env.AtariVectorEnv, ale-py's own C++-threaded
                     vector env: the same configurations as EnvPool. Skipped
                     with a note if it cannot be imported.
  gymnasium Sync/AsyncVectorEnv, shoal.pool.AsyncVectorEnv
                     over gymnasium.make("ALE/<Game>-v5", frameskip=1) +
                     AtariPreprocessing(frame_skip=4) + FrameStackObservation(4),
                     num_envs <= --gym-max-envs (AsyncVectorEnv: one process
                     per env; shoal's: one worker per core).

Every contender is configured to the same standard preprocessing (STANDARD):
frameskip 4 with a max-pool over the last two frames, 84x84 grayscale
(INTER_AREA), a 4-frame stack, 1..30 no-op frames on reset, sticky actions
with probability 0.25 (gymnasium's v5 value; EnvPool's and AtariVectorEnv's
default is 0), no fire reset, no episodic life, no reward clipping, and the
108000-frame episode limit; the report lists each contender's settings and
where they differ from its defaults.

Method: per game and num_envs every contender is built together (seed 0;
forking ones first, EnvPool's and AtariVectorEnv's threads last), warmed up,
and measured in interleaved rounds (shoal.bench.timing.interleaved), so that
drift in the machine's load hits every contender alike; the table gives each
contender's median round and ratios are ratios of medians. One env-step is 4
emulator frames.

Targets (issue: atari), from TARGET_MIN_ENVS envs up, per game and num_envs:
shoal native best (any shoal native row) >= 1.3x the best of EnvPool and
AtariVectorEnv (on Pong and on Breakout: TARGET_EXTERNAL); shoal native best
>= 0.75 x (bare ALE x cores); shoal.pool.AsyncVectorEnv >= 0.85 x (gymnasium
SyncVectorEnv x cores), gymnasium Sync being the wrapper stack's one-core rate.

The section is skipped with a note when ale-py or OpenCV (cv2) is missing.
--quick: Pong at 2 envs, one round of 0.05 s, EnvPool and AtariVectorEnv at
the cores only (unless --workers is given); a few seconds, mostly building.

Not in the "all" contender group: with the default sweep (2 games x 2
num_envs, 14 contenders each, 5 rounds of 0.5 s) it took 4.5 minutes on two
busy cores (load average ~4), about 2.5 of them measuring and the rest
building and closing the contenders (gymnasium's AsyncVectorEnv: a process
per env), longer than the rest of `shoal bench` together; run it with
`python -m shoal bench --contenders atari` (--atari-rounds 3 for a shorter one).
"""
from __future__ import annotations

import argparse
import contextlib
import importlib.util
import inspect
import warnings
from dataclasses import dataclass
from functools import partial

import numpy as np

from shoal.bench.sections import (ENVPOOL, ENVPOOL_ASYNC, ENVPOOL_SYNC, GYM_ASYNC, GYM_SYNC, NATIVE,  # noqa: F401
                                  NATIVE_ASYNC, NATIVE_SYNC, PY_SHOAL, SERIAL, GroupSettings, GroupTable, Options, Row,
                                  best, envpool_rows, groups, gym_rows, measure_groups, measured, name_list,
                                  native_rows, threaded_rows)
from shoal.bench.steppers import step_all, stepping, table
from shoal.bench.timing import ACTION_TABLE_ROWS, cycling

GAMES = ("Pong", "Breakout")
FRAMESKIP = 4   # emulator frames per env-step, every contender

# The standard preprocessing, in shoal's option names (shoal.envs.atari.DEFAULT_KWARGS);
# the other contenders' settings below are the same in their own names.
STANDARD = {
    "frameskip": FRAMESKIP, "repeat_action_probability": 0.25, "noop_max": 30, "stack_num": 4,
    "img_height": 84, "img_width": 84, "gray_scale": True, "channels_first": False, "episodic_life": False,
    "terminal_on_life_loss": False, "reward_clip": False, "use_fire_reset": False,
    "full_action_space": False, "max_num_frames_per_episode": 108_000, "max_episode_steps": None,
    "mode": None, "difficulty": None,   # the ROM's default mode and difficulty, as every contender's
}
ENVPOOL_KWARGS = {
    "frame_skip": FRAMESKIP, "repeat_action_probability": 0.25, "noop_max": 30, "stack_num": 4,
    "img_height": 84, "img_width": 84, "gray_scale": True, "episodic_life": False,
    "reward_clip": False, "use_fire_reset": False, "full_action_space": False,
    "max_episode_steps": 108_000 // FRAMESKIP,   # EnvPool counts env-steps: 27000 = 108000 frames
}
ALE_VECTOR_KWARGS = {
    "frameskip": FRAMESKIP, "maxpool": True, "repeat_action_probability": 0.25, "noop_max": 30,
    "stack_num": 4, "img_height": 84, "img_width": 84, "grayscale": True, "episodic_life": False,
    "reward_clipping": False, "use_fire_reset": False, "full_action_space": False,
    "max_num_frames_per_episode": 108_000,
}
GYM_MAKE_KWARGS = {"frameskip": 1, "repeat_action_probability": 0.25, "full_action_space": False,
                   "max_num_frames_per_episode": 108_000}
GYM_PREPROCESSING_KWARGS = {"frame_skip": FRAMESKIP, "noop_max": 30, "screen_size": 84,
                            "grayscale_obs": True, "terminal_on_life_loss": False}
GYM_STACK = 4

# Contenders (table labels), in table order; the others are shoal.bench.sections'.
BARE_ALE = "bare ALE (ALEInterface.act)"
BARE_ALE_CORES = "bare ALE x cores (computed)"
C_LOOP = "shoal C loop"
ALE_VEC_SYNC = "ale-py AtariVectorEnv sync"
ALE_VEC_ASYNC = "ale-py AtariVectorEnv async"
ORDER = [BARE_ALE, BARE_ALE_CORES, C_LOOP, SERIAL, NATIVE_SYNC, NATIVE_ASYNC, ENVPOOL_SYNC, ENVPOOL_ASYNC,
         ALE_VEC_SYNC, ALE_VEC_ASYNC, GYM_SYNC, GYM_ASYNC, PY_SHOAL]
ALE_VEC = (ALE_VEC_SYNC, ALE_VEC_ASYNC)
EXTERNAL = ENVPOOL + ALE_VEC
THREADED = EXTERNAL   # "threads" in the workers column
TABLE = GroupTable(key="game", reference=BARE_ALE, reference_name="bare ALE", computed=BARE_ALE_CORES,
                   order=ORDER, threaded=THREADED)

# Targets, from TARGET_MIN_ENVS envs up: native best / best of EnvPool and AtariVectorEnv
# >= TARGET_EXTERNAL[game]; native best / (bare ALE x cores) >= TARGET_LIMIT;
# shoal.pool.AsyncVectorEnv / (gymnasium Sync x cores) >= TARGET_PYTHON.
TARGET_EXTERNAL = {"Pong": 1.3, "Breakout": 1.3}
TARGET_LIMIT = 0.75
TARGET_PYTHON = 0.85
TARGET_MIN_ENVS = 8


@dataclass
class AtariSettings(GroupSettings):
    """The section's sweep (filled by `settings` from the command line);
    workers: EnvPool's and AtariVectorEnv's sync thread counts (and the cores)."""
    games: list[str]


# ---- command line (called by shoal.bench) ------------------------------------------------
def game_list(text: str) -> list[str]:
    from shoal.envs.atari.games import GAMES as ALL   # importable without ale-py

    return name_list(text, [name for name, _, _ in ALL],
                     lambda key: f"unknown Atari game {key!r}; e.g. {', '.join(GAMES)} "
                                 f"(any of shoal's {len(ALL)} Atari envs)", "game")


OPTIONS = Options("atari", "Atari", "games", game_list,
                  {"games": (GAMES, ["Pong"]), "num_envs": ([8, 16], [2]), "rounds": (5, 1), "seconds": (0.5, 0.05)})
add_arguments = OPTIONS.add_arguments   # --atari-games, --atari-num-envs, --atari-rounds, --atari-seconds


def settings(args: argparse.Namespace, workers: list[int], warmup: float, gym_max_envs: int) -> AtariSettings:
    if args.quick and args.workers is None:
        workers = []   # smoke run: EnvPool / AtariVectorEnv at the cores only
    return OPTIONS.settings(AtariSettings, args, workers, warmup, gym_max_envs)


# ---- versions and availability ------------------------------------------------------------
def missing() -> str | None:
    """None if ale-py and OpenCV import; else what is missing."""
    lacking = [name for module, name in (("ale_py", "ale-py"), ("cv2", "OpenCV (cv2)"))
               if importlib.util.find_spec(module) is None]
    if not lacking:
        try:
            import ale_py  # noqa: F401
            import cv2  # noqa: F401
        except Exception as e:   # a broken binary wheel
            return f"ale-py / OpenCV cannot be imported ({type(e).__name__}: {e})"
        return None
    # (the section compares with gymnasium's AtariPreprocessing, which resizes with OpenCV;
    # shoal's own Atari envs, the atari extra, do not need it)
    return (f"{' and '.join(lacking)} {'is' if len(lacking) == 1 else 'are'} not installed "
            f"(`pip install \"shoal[atari]\" opencv-python-headless`).")


def versions() -> str:
    import ale_py
    import cv2
    import gymnasium

    return f"ale-py {ale_py.__version__}, OpenCV {cv2.__version__}, gymnasium {gymnasium.__version__}"


def ale_vector_available() -> str | None:
    """None if ale_py.vector_env.AtariVectorEnv imports; else why not."""
    try:
        from ale_py.vector_env import AtariVectorEnv  # noqa: F401
    except Exception as e:
        return f"{type(e).__name__}: {e}"
    return None


def differences(passed: dict, defaults: dict) -> str:
    """"key=value (default d)" for every passed option that differs from the default."""
    changed = [f"{k}={v!r} (default {defaults[k]!r})" for k, v in passed.items()
               if k in defaults and defaults[k] != v]
    return ", ".join(changed) if changed else "none"


def envpool_defaults(game: str) -> dict:
    import envpool

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        config = envpool.make_spec(f"{game}-v5").config
    return {k: getattr(config, k) for k in ENVPOOL_KWARGS if hasattr(config, k)}


def ale_vector_defaults() -> dict:
    from ale_py.vector_env import AtariVectorEnv

    params = inspect.signature(AtariVectorEnv.__init__).parameters
    return {k: p.default for k, p in params.items() if p.default is not inspect.Parameter.empty}


# ---- contenders of the Atari family (the others: shoal.bench.sections) ---------------------
def new_ale(rom: str, seed: int):
    """An ALEInterface with the standard emulator settings, the ROM loaded."""
    import ale_py
    from ale_py import roms

    ale_py.ALEInterface.setLoggerMode(ale_py.LoggerMode.Error)   # static: before the banner
    ale = ale_py.ALEInterface()
    ale.setInt("random_seed", seed)
    ale.setFloat("repeat_action_probability", STANDARD["repeat_action_probability"])
    ale.setInt("max_num_frames_per_episode", STANDARD["max_num_frames_per_episode"])
    ale.loadROM(str(roms.get_rom_path(rom)))
    return ale


@contextlib.contextmanager
def bare_ale(spec, n: int):
    """One ALEInterface per env, stepped by `act` in a Python loop: random
    minimal-set actions (pre-sampled), FRAMESKIP act calls per env-step,
    reset_game on game over; no screen grabs, one core."""
    from shoal.envs.atari import ROM_IDS

    ales = [new_ale(ROM_IDS[spec.name], i) for i in range(n)]
    action_set = ales[0].getMinimalActionSet()
    # Pre-sampled and pre-converted: per row, (act, game_over, reset_game, action) of every env.
    bound = [(a.act, a.game_over, a.reset_game) for a in ales]
    rows = [[(*bound[i], action_set[k]) for i, k in enumerate(row)]
            for row in np.random.default_rng(0).integers(0, len(action_set), (ACTION_TABLE_ROWS, n)).tolist()]
    next_row = cycling(rows)
    frames = range(FRAMESKIP)
    try:
        def step():
            for act, game_over, reset_game, action in next_row():
                for _ in frames:
                    act(action)
                if game_over():
                    reset_game()
            return n

        yield step
    finally:
        del bound, rows, next_row   # the emulators go with their bound methods
        ales.clear()




def ale_vector_env(spec, n: int, batch: int, threads: int):
    """ale_py.vector_env.AtariVectorEnv (ALE_VECTOR_KWARGS), reset with seed
    0: step when batch == n, else send / recv of `batch` envs (it remembers
    which envs the last recv returned)."""
    from ale_py.vector_env import AtariVectorEnv

    from shoal.envs.atari import ROM_IDS

    actions = table(spec, batch)
    env = AtariVectorEnv(ROM_IDS[spec.name], n, batch_size=0 if batch == n else batch, num_threads=threads,
                         **ALE_VECTOR_KWARGS)
    if batch == n:
        return stepping(env, step_all(env, n, actions), partial(env.reset, seed=0))
    next_actions = cycling(actions)

    def step():
        env.send(next_actions())
        env.recv()
        return batch

    return stepping(env, step, partial(env.reset, seed=0))


def gym_atari(game: str):
    """gymnasium's wrapper stack for `game`: ALE v5 without frame skip, then
    AtariPreprocessing and FrameStackObservation (module level: picklable)."""
    import ale_py
    import gymnasium
    from gymnasium.wrappers import AtariPreprocessing, FrameStackObservation

    gymnasium.register_envs(ale_py)
    env = gymnasium.make(f"ALE/{game}-v5", **GYM_MAKE_KWARGS)
    return FrameStackObservation(AtariPreprocessing(env, **GYM_PREPROCESSING_KWARGS), stack_size=GYM_STACK)


def contenders(spec, n: int, s: AtariSettings, cores: int, have_envpool: bool,
               have_ale_vector: bool) -> list[tuple]:
    """(label, workers, batch, opener) at game `spec` and n envs, in the order
    they are built: everything that forks comes before EnvPool's and
    AtariVectorEnv's threads."""
    rows = [(BARE_ALE, 1, n, partial(bare_ale, spec, n))] + native_rows(spec, n, cores, C_LOOP)
    if n <= s.gym_max_envs:
        rows += gym_rows(partial(gym_atari, spec.name), spec, n, cores)
    threads = sorted(set(s.workers) | {cores})
    if have_envpool:
        rows += envpool_rows(f"{spec.name}-v5", spec, n, threads, cores, **ENVPOOL_KWARGS)
    if have_ale_vector:
        rows += threaded_rows(ALE_VEC, partial(ale_vector_env, spec), n, threads, cores)
    return rows


def run_all(s: AtariSettings, cores: int, have_envpool: bool, have_ale_vector: bool,
            progress) -> tuple[list[Row], list[str]]:
    import shoal.envs

    specs = [shoal.envs.spec(game, **STANDARD) for game in s.games]
    plans = [(spec.name, n, partial(contenders, spec, n, s, cores, have_envpool, have_ale_vector))
             for spec in specs for n in s.num_envs]
    return measure_groups("atari", "Atari", plans, s.rounds, s.seconds, s.warmup, progress)


# ---- report -------------------------------------------------------------------------------
with_computed_limit = TABLE.with_computed_limit


def targets(rows: list[Row], cores: int) -> tuple[list[str], int, int]:
    """The target table: (lines, targets met, targets judged)."""
    checks = []
    for env, n in groups(rows):
        native = best(rows, env, n, NATIVE)
        if env in TARGET_EXTERNAL:
            checks.append((env, n, TABLE.ratio("native best / best of EnvPool and AtariVectorEnv",
                                               TARGET_EXTERNAL[env], "x", native, best(rows, env, n, EXTERNAL))))
        checks += [(env, n, TABLE.ratio(f"native best / (bare ALE x {cores} cores)", TARGET_LIMIT, "", native,
                                        best(rows, env, n, [BARE_ALE]), cores)),
                   (env, n, TABLE.ratio(f"shoal.pool.AsyncVectorEnv / (gymnasium Sync x {cores} cores)",
                                        TARGET_PYTHON, "", best(rows, env, n, [PY_SHOAL]),
                                        best(rows, env, n, [GYM_SYNC]), cores))]
    return TABLE.targets(checks, TARGET_MIN_ENVS)


def settings_lines(games: list[str], envpool_ver: str | None, ale_vector_why: str | None) -> list[str]:
    """What each contender runs, in its own option names, and where that
    differs from its defaults."""
    from shoal.envs.atari import DEFAULT_KWARGS

    shoal_kw = ", ".join(f"{k}={v!r}" for k, v in STANDARD.items())
    lines = [f"- shoal native (`shoal.envs.spec(game, ...)`; C loop, Serial, Multiprocessing): {shoal_kw}; "
             f"differs from its defaults: {differences(STANDARD, DEFAULT_KWARGS)}"]
    if envpool_ver:
        try:
            defaults = envpool_defaults(games[0]) if games else {}
            changed = differences(ENVPOOL_KWARGS, defaults)
        except Exception as e:
            changed = f"unknown ({type(e).__name__})"
        lines.append(f"- EnvPool {envpool_ver}: `envpool.make(\"<Game>-v5\", env_type=\"gymnasium\", "
                     f"{', '.join(f'{k}={v!r}' for k, v in ENVPOOL_KWARGS.items())})` (max-pool of the last two "
                     f"frames and INTER_AREA resize built in); differs from its defaults: {changed}")
    else:
        lines.append("- EnvPool: not installed (`pip install envpool`, the `bench` extra): its rows are skipped")
    if ale_vector_why is None:
        lines.append(f"- ale-py AtariVectorEnv: `AtariVectorEnv(rom, num_envs, "
                     f"{', '.join(f'{k}={v!r}' for k, v in ALE_VECTOR_KWARGS.items())})`; differs from its "
                     f"defaults: {differences(ALE_VECTOR_KWARGS, ale_vector_defaults())}")
    else:
        lines.append(f"- ale-py AtariVectorEnv: cannot be imported ({ale_vector_why}): its rows are skipped")
    lines += [
        f"- gymnasium (SyncVectorEnv, AsyncVectorEnv, shoal.pool.AsyncVectorEnv): "
        f"`FrameStackObservation(AtariPreprocessing(gymnasium.make(\"ALE/<Game>-v5\", "
        f"{', '.join(f'{k}={v!r}' for k, v in GYM_MAKE_KWARGS.items())}), "
        f"{', '.join(f'{k}={v!r}' for k, v in GYM_PREPROCESSING_KWARGS.items())}), stack_size={GYM_STACK})`",
        f"- bare ALE: `ALEInterface` per env (repeat_action_probability="
        f"{STANDARD['repeat_action_probability']}, max_num_frames_per_episode="
        f"{STANDARD['max_num_frames_per_episode']}), {FRAMESKIP} `act` calls per env-step with a random "
        f"minimal-set action, `reset_game` on game over; no screen grabs, no preprocessing, one core",
    ]
    return lines


def report(rows: list[Row], cores: int, s: AtariSettings, envpool_ver: str | None,
           ale_vector_why: str | None) -> list[str]:
    """The section's heading, versions, settings, method, table and targets."""
    lines = [f"## Atari: env-steps/s ({FRAMESKIP} emulator frames each) of {', '.join(s.games)}", "",
             f"- {versions()}",
             f"- method: per game and num_envs, every contender built together (seed 0), {s.warmup:g} s "
             f"warm-up each, then {s.rounds} interleaved rounds of {s.seconds:g} s (each round starts one "
             f"contender later); median round per contender, ratios of medians; random actions of the "
             f"minimal action set, pre-sampled ({ACTION_TABLE_ROWS} arrays cycled)",
             "- standard preprocessing for every contender but the bare ALE: frameskip 4 with a max-pool "
             "over the last two frames, 84x84 grayscale, 4-frame stack, 1..30 no-op frames on reset, sticky "
             "actions 0.25, no fire reset / episodic life / reward clipping, 108000-frame episode limit",
             "- workers: shoal native sync and shoal.pool.AsyncVectorEnv one worker per core (at most "
             "num_envs); native async an even worker count, batch num_envs/2; EnvPool and AtariVectorEnv "
             "sync at each thread count, async (batch num_envs/2) at the cores; gymnasium AsyncVectorEnv "
             f"one process per env; gymnasium's vectorizers for num_envs <= {s.gym_max_envs}",
             ] + settings_lines(s.games, envpool_ver, ale_vector_why)
    return lines + TABLE.body(rows, cores, targets,
                              f"Targets (from {TARGET_MIN_ENVS} envs up; native best = the best shoal native "
                              f"row: Serial, sync or async; the best of EnvPool and AtariVectorEnv = the best "
                              f"configuration of either at the same game and num_envs)")


def run(s: AtariSettings, cores: int, envpool_ver: str | None, progress=None) -> tuple[list[str], list[str]]:
    """The whole section: (markdown lines, errors); progress: a
    shoal.progress.Progress (default: plain lines on stderr)."""
    ale_vector_why = ale_vector_available()
    return measured(missing(), f"## Atari: env-steps/s ({FRAMESKIP} emulator frames each)",
                    partial(run_all, s, cores, envpool_ver is not None, ale_vector_why is None),
                    lambda rows: report(rows, cores, s, envpool_ver, ale_vector_why), progress)
