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
import gc
import importlib.util
import inspect
import os
import sys
import warnings
from dataclasses import dataclass, field
from functools import partial

import numpy as np

from shoal.bench.timing import (ACTION_TABLE_ROWS, Result, _calibrate_chunk, cycling, format_rate,
                                interleaved)

GAMES = ("Pong", "Breakout")
FRAMESKIP = 4   # emulator frames per env-step, every contender

# The standard preprocessing, in shoal's option names (shoal.envs.atari.DEFAULT_KWARGS);
# the other contenders' settings below are the same in their own names.
STANDARD = {
    "frameskip": FRAMESKIP, "repeat_action_probability": 0.25, "noop_max": 30, "stack_num": 4,
    "img_height": 84, "img_width": 84, "gray_scale": True, "episodic_life": False,
    "terminal_on_life_loss": False, "reward_clip": False, "use_fire_reset": False,
    "full_action_space": False, "max_num_frames_per_episode": 108_000,
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

# Contenders (table labels), in table order.
BARE_ALE = "bare ALE (ALEInterface.act)"
BARE_ALE_CORES = "bare ALE x cores (computed)"
C_LOOP = "shoal C loop"
SERIAL = "shoal Serial"
NATIVE_SYNC = "shoal native sync"
NATIVE_ASYNC = "shoal native async"
ENVPOOL_SYNC = "EnvPool sync"
ENVPOOL_ASYNC = "EnvPool async"
ALE_VEC_SYNC = "ale-py AtariVectorEnv sync"
ALE_VEC_ASYNC = "ale-py AtariVectorEnv async"
GYM_SYNC = "gymnasium SyncVectorEnv"
GYM_ASYNC = "gymnasium AsyncVectorEnv"
PY_SHOAL = "shoal.pool.AsyncVectorEnv"
ORDER = [BARE_ALE, BARE_ALE_CORES, C_LOOP, SERIAL, NATIVE_SYNC, NATIVE_ASYNC, ENVPOOL_SYNC, ENVPOOL_ASYNC,
         ALE_VEC_SYNC, ALE_VEC_ASYNC, GYM_SYNC, GYM_ASYNC, PY_SHOAL]
NATIVE = (SERIAL, NATIVE_SYNC, NATIVE_ASYNC)
ENVPOOL = (ENVPOOL_SYNC, ENVPOOL_ASYNC)
ALE_VEC = (ALE_VEC_SYNC, ALE_VEC_ASYNC)
EXTERNAL = ENVPOOL + ALE_VEC
THREADED = EXTERNAL   # "threads" in the workers column

# Targets, from TARGET_MIN_ENVS envs up: native best / best of EnvPool and AtariVectorEnv
# >= TARGET_EXTERNAL[game]; native best / (bare ALE x cores) >= TARGET_LIMIT;
# shoal.pool.AsyncVectorEnv / (gymnasium Sync x cores) >= TARGET_PYTHON.
TARGET_EXTERNAL = {"Pong": 1.3, "Breakout": 1.3}
TARGET_LIMIT = 0.75
TARGET_PYTHON = 0.85
TARGET_MIN_ENVS = 8


@dataclass
class AtariSettings:
    """The section's sweep (filled by `settings` from the command line)."""
    games: list[str] = field(default_factory=lambda: list(GAMES))
    num_envs: list[int] = field(default_factory=lambda: [8, 16])
    rounds: int = 5
    seconds: float = 0.5
    warmup: float = 0.2
    workers: list[int] = field(default_factory=lambda: [1])   # EnvPool / AtariVectorEnv sync threads (+ cores)
    gym_max_envs: int = 64


@dataclass
class Row(Result):
    """A Result with the game and the batch size (envs per recv)."""
    env: str = ""
    batch: int = 0


# ---- command line (called by shoal.bench) ------------------------------------------------
def game_list(text: str) -> list[str]:
    from shoal.envs.atari.games import GAMES as ALL   # importable without ale-py

    known = {name.lower(): name for name, _, _ in ALL}
    names = []
    for key in (k.strip() for k in text.split(",") if k.strip()):
        if key.lower() not in known:
            raise argparse.ArgumentTypeError(f"unknown Atari game {key!r}; e.g. {', '.join(GAMES)} "
                                             f"(any of shoal's {len(known)} Atari envs)")
        names.append(known[key.lower()])
    if not names:
        raise argparse.ArgumentTypeError("expected comma-separated game names")
    return names


def add_arguments(p: argparse.ArgumentParser, int_list) -> None:
    p.add_argument("--atari-games", type=game_list, default=None,
                   help=f"games of the Atari section (default {','.join(GAMES)}; quick: Pong)")
    p.add_argument("--atari-num-envs", type=int_list, default=None,
                   help="num_envs of the Atari section (default 8,16; quick: 2)")
    p.add_argument("--atari-rounds", type=int, default=None,
                   help="interleaved rounds per contender in the Atari section (default 5; quick: 1)")
    p.add_argument("--atari-seconds", type=float, default=None,
                   help="duration of one round in the Atari section (default 0.5; quick: 0.05)")


def settings(args: argparse.Namespace, workers: list[int], warmup: float, gym_max_envs: int) -> AtariSettings:
    quick = args.quick

    def pick(value, full, small):
        return value if value is not None else (small if quick else full)

    if quick and args.workers is None:
        workers = []   # smoke run: EnvPool / AtariVectorEnv at the cores only
    s = AtariSettings(games=pick(args.atari_games, list(GAMES), ["Pong"]),
                      num_envs=pick(args.atari_num_envs, [8, 16], [2]),
                      rounds=pick(args.atari_rounds, 5, 1),
                      seconds=pick(args.atari_seconds, 0.5, 0.05),
                      warmup=warmup, workers=list(workers), gym_max_envs=gym_max_envs)
    if s.rounds < 1 or s.seconds <= 0:
        raise SystemExit("shoal bench: --atari-rounds must be >= 1 and --atari-seconds > 0")
    return s


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
    return (f"{' and '.join(lacking)} {'is' if len(lacking) == 1 else 'are'} not installed "
            f"(`pip install \"shoal[atari]\"`).")


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


# ---- actions ------------------------------------------------------------------------------
def action_table(num_actions: int, n: int, dtype=np.int32, seed: int = 0) -> np.ndarray:
    """ACTION_TABLE_ROWS arrays of n random action indices in [0, num_actions):
    shape (ACTION_TABLE_ROWS, n); the same values for every dtype."""
    rng = np.random.default_rng(seed)
    return np.ascontiguousarray(rng.integers(0, num_actions, size=(ACTION_TABLE_ROWS, n)).astype(dtype))


# ---- contenders: context managers yielding a step function (returns env-steps run) --------
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
            for row in action_table(len(action_set), n).tolist()]
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


@contextlib.contextmanager
def c_loop(spec, n: int):
    """The native env's vector loop over n envs in one `Block.run_steps` call
    per chunk (NEXT_STEP autoreset); one core."""
    from shoal.pool.layout import RESEED, Buffers

    binding = spec.load_binding()
    buffers = Buffers(spec, n, 1, shared=False)
    block = None
    try:
        buffers.reset_requests[:] = RESEED
        buffers.seeds[:] = np.arange(n, dtype=np.uint64)
        block = binding.Block(buffers, 0, n, 0)   # mode 0: NEXT_STEP autoreset
        block.reset()
        table = action_table(spec.action_nvec[0], n)
        chunk = _calibrate_chunk(block, table)
        row = 0   # each call goes on from the table row where the last one stopped

        def step():
            nonlocal row
            block.run_steps(table, chunk, row)
            row = (row + chunk) % len(table)
            return chunk * n

        yield step
    finally:
        del block
        buffers.close()


@contextlib.contextmanager
def native_sync(spec, n: int, workers: int | None):
    """pool.step in a Python loop: Serial (workers None) or Multiprocessing."""
    from shoal.pool.native import Multiprocessing, Serial

    pool = Serial(spec, n, seed=0) if workers is None else Multiprocessing(spec, n, num_workers=workers, seed=0)
    try:
        next_actions = cycling(action_table(spec.action_nvec[0], n))

        def step():
            pool.step(next_actions())
            return n

        yield step
    finally:
        pool.close()


@contextlib.contextmanager
def native_async(spec, n: int, workers: int):
    """async_reset, then recv() one half of the envs while the other steps."""
    from shoal.pool.native import Multiprocessing

    batch = n // 2
    pool = Multiprocessing(spec, n, num_workers=workers, batch_size=batch, seed=0)
    try:
        pool.async_reset(seed=0)
        next_actions = cycling(action_table(spec.action_nvec[0], batch))

        def step():
            pool.recv()
            pool.send(next_actions())
            return batch

        yield step
    finally:
        pool.close()


@contextlib.contextmanager
def envpool_env(spec, n: int, batch: int, threads: int):
    """EnvPool's <Game>-v5 (gymnasium API, ENVPOOL_KWARGS): sync step when
    batch == n, else recv / send of `batch` envs."""
    import envpool

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        env = envpool.make(f"{spec.name}-v5", env_type="gymnasium", num_envs=n, batch_size=batch,
                           num_threads=threads, seed=0, **ENVPOOL_KWARGS)
    try:
        next_actions = cycling(action_table(spec.action_nvec[0], batch, dtype=env.action_space.dtype))
        if batch == n:
            env.reset()

            def step():
                env.step(next_actions())
                return n
        else:
            env.async_reset()

            def step():
                info = env.recv()[4]
                env.send(next_actions(), info["env_id"])
                return batch

        yield step
    finally:
        env.close()
        del env
        gc.collect()   # EnvPool's threads end with the object: none may outlive it into a fork


@contextlib.contextmanager
def ale_vector_env(spec, n: int, batch: int, threads: int):
    """ale_py.vector_env.AtariVectorEnv (ALE_VECTOR_KWARGS): step when batch ==
    n, else send / recv of `batch` envs (it remembers which envs the last
    recv returned)."""
    from ale_py.vector_env import AtariVectorEnv

    from shoal.envs.atari import ROM_IDS

    env = AtariVectorEnv(ROM_IDS[spec.name], n, batch_size=0 if batch == n else batch, num_threads=threads,
                         **ALE_VECTOR_KWARGS)
    try:
        env.reset(seed=0)
        next_actions = cycling(action_table(spec.action_nvec[0], batch))
        if batch == n:
            def step():
                env.step(next_actions())
                return n
        else:
            def step():
                env.send(next_actions())
                env.recv()
                return batch

        yield step
    finally:
        env.close()
        del env
        gc.collect()   # its threads end with the object: none may outlive it into a fork


def gym_atari(game: str):
    """gymnasium's wrapper stack for `game`: ALE v5 without frame skip, then
    AtariPreprocessing and FrameStackObservation (module level: picklable)."""
    import ale_py
    import gymnasium
    from gymnasium.wrappers import AtariPreprocessing, FrameStackObservation

    gymnasium.register_envs(ale_py)
    env = gymnasium.make(f"ALE/{game}-v5", **GYM_MAKE_KWARGS)
    return FrameStackObservation(AtariPreprocessing(env, **GYM_PREPROCESSING_KWARGS), stack_size=GYM_STACK)


@contextlib.contextmanager
def gym_vector(spec, n: int, kind: str, workers: int | None = None):
    """A gymnasium-API vector env of n `gym_atari` envs: gymnasium's Sync /
    AsyncVectorEnv or shoal.pool.AsyncVectorEnv."""
    import gymnasium

    fns = [partial(gym_atari, spec.name)] * n
    if kind == "sync":
        envs = gymnasium.vector.SyncVectorEnv(fns)
    elif kind == "async":
        envs = gymnasium.vector.AsyncVectorEnv(fns)
    else:
        from shoal.pool import AsyncVectorEnv

        envs = AsyncVectorEnv(fns, num_workers=workers)
    try:
        envs.reset(seed=0)
        next_actions = cycling(action_table(spec.action_nvec[0], n, dtype=np.int64))

        def step():
            envs.step(next_actions())
            return n

        yield step
    finally:
        envs.close()


def contenders(spec, n: int, s: AtariSettings, cores: int, have_envpool: bool,
               have_ale_vector: bool) -> list[tuple]:
    """(label, workers, batch, opener) at game `spec` and n envs, in the order
    they are built: everything that forks comes before EnvPool's and
    AtariVectorEnv's threads."""
    w = min(cores, n)
    wa = w + w % 2   # async: two batches need an even worker count
    rows = [(BARE_ALE, 1, n, partial(bare_ale, spec, n)),
            (C_LOOP, 1, n, partial(c_loop, spec, n)),
            (SERIAL, 1, n, partial(native_sync, spec, n, None)),
            (NATIVE_SYNC, w, n, partial(native_sync, spec, n, w))]
    if n % 2 == 0 and wa <= n:
        rows.append((NATIVE_ASYNC, wa, n // 2, partial(native_async, spec, n, wa)))
    if n <= s.gym_max_envs:
        rows += [(GYM_SYNC, 1, n, partial(gym_vector, spec, n, "sync")),
                 (GYM_ASYNC, n, n, partial(gym_vector, spec, n, "async")),
                 (PY_SHOAL, w, n, partial(gym_vector, spec, n, "shoal", w))]
    threads = sorted(set(s.workers) | {cores})
    for available, sync_label, async_label, opener in (
            (have_envpool, ENVPOOL_SYNC, ENVPOOL_ASYNC, envpool_env),
            (have_ale_vector, ALE_VEC_SYNC, ALE_VEC_ASYNC, ale_vector_env)):
        if not available:
            continue
        rows += [(sync_label, t, n, partial(opener, spec, n, n, t)) for t in threads]
        if n % 2 == 0:
            rows.append((async_label, cores, n // 2, partial(opener, spec, n, n // 2, cores)))
    return rows


# ---- the sweep ----------------------------------------------------------------------------
def measure_group(spec, n: int, s: AtariSettings, cores: int, have_envpool: bool, have_ale_vector: bool,
                  log=sys.stderr) -> tuple[list[Row], list[str]]:
    """Every contender at game `spec` and n envs, open together, measured in
    interleaved rounds; a contender that fails to build is an error, the rest
    are measured."""
    rows, errors, steps = [], [], []
    plan = contenders(spec, n, s, cores, have_envpool, have_ale_vector)
    print(f"[atari] {spec.name} num_envs={n}: {len(plan)} contenders x {s.rounds} rounds "
          f"of {s.seconds:g} s ...", end=" ", file=log, flush=True)
    try:
        with contextlib.ExitStack() as stack:
            opened = []
            for label, w, batch, opener in plan:
                try:
                    steps.append(stack.enter_context(opener()))
                    opened.append((label, w, batch))
                except Exception as e:
                    errors.append(f"Atari {spec.name} num_envs={n} {label} (workers {w}): "
                                  f"{type(e).__name__}: {e}")
            rates = interleaved(steps, s.rounds, s.seconds, s.warmup)
            rows = [Row(label, n, w, r, env=spec.name, batch=batch)
                    for (label, w, batch), r in zip(opened, rates)]
    except Exception as e:
        errors.append(f"Atari {spec.name} num_envs={n}: {type(e).__name__}: {e}")
        print(f"FAILED: {e}", file=log, flush=True)
        return [], errors
    finally:
        steps.clear()   # the step functions hold the envs: threads end with their last reference
        gc.collect()
    print("done; rates per round:", file=log, flush=True)
    for r in rows:
        print(f"    {r.contender}, workers={r.workers}, batch={r.batch}: "
              f"{', '.join(format_rate(rate) for rate in r.rates)}", file=log, flush=True)
    return rows, errors


def run_all(s: AtariSettings, cores: int, have_envpool: bool, have_ale_vector: bool,
            log=sys.stderr) -> tuple[list[Row], list[str]]:
    import shoal.envs

    rows, errors = [], []
    for game in s.games:
        spec = shoal.envs.spec(game, **STANDARD)
        for n in s.num_envs:
            group, group_errors = measure_group(spec, n, s, cores, have_envpool, have_ale_vector, log=log)
            rows += group
            errors += group_errors
    return rows, errors


# ---- report -------------------------------------------------------------------------------
def with_computed_limit(rows: list[Row], cores: int) -> list[Row]:
    """Add a "bare ALE x cores" row per bare ALE row; sort into table order."""
    extra = [Row(BARE_ALE_CORES, r.num_envs, cores, [rate * cores for rate in r.rates], env=r.env,
                 batch=r.batch) for r in rows if r.contender == BARE_ALE]
    games = list(dict.fromkeys(r.env for r in rows))
    return sorted(rows + extra, key=lambda r: (games.index(r.env), r.num_envs, ORDER.index(r.contender),
                                               r.workers, r.batch))


def find(rows: list[Row], env: str, n: int, labels) -> list[Row]:
    return [r for r in rows if r.env == env and r.num_envs == n and r.contender in labels]


def best(rows: list[Row], env: str, n: int, labels) -> Row | None:
    found = [r for r in find(rows, env, n, labels) if r.rates]
    return max(found, key=lambda r: r.median) if found else None


def describe(r: Row) -> str:
    config = f"{r.workers} {'thread' if r.contender in THREADED else 'worker'}{'s' if r.workers != 1 else ''}"
    if r.batch != r.num_envs:
        config += f", batch {r.batch}"
    return f"{r.contender}, {config}"


def table(rows: list[Row], cores: int) -> list[str]:
    lines = ["| game | num_envs | contender | workers / threads | batch | env-steps/s (median) | spread "
             f"| vs bare ALE 1 core | vs bare ALE x {cores} cores |",
             "|---|---:|---|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        a = best(rows, r.env, r.num_envs, [BARE_ALE])
        one = f"{r.median / a.median:.3f}" if a and a.median else "-"
        allc = f"{r.median / (a.median * cores):.3f}" if a and a.median else "-"
        lines.append(f"| {r.env} | {r.num_envs} | {r.contender} | {r.workers} | {r.batch} "
                     f"| {format_rate(r.median)} | {r.spread:.0%} | {one} | {allc} |")
    return lines


def targets(rows: list[Row], cores: int) -> tuple[list[str], int, int]:
    """The target table: (lines, targets met, targets judged)."""
    lines = ["| game | num_envs | target | required | measured | met |", "|---|---:|---|---:|---:|---|"]
    met_count = judged = 0
    for env, n in dict.fromkeys((r.env, r.num_envs) for r in rows):
        checks = []
        native = best(rows, env, n, NATIVE)
        ext = best(rows, env, n, EXTERNAL)
        if native is not None and ext is not None and ext.median and env in TARGET_EXTERNAL:
            checks.append(("native best / best of EnvPool and AtariVectorEnv", TARGET_EXTERNAL[env], "x",
                           native.median / ext.median,
                           f"{format_rate(native.median)} ({describe(native)}) / "
                           f"{format_rate(ext.median)} ({describe(ext)})"))
        a = best(rows, env, n, [BARE_ALE])
        if native is not None and a is not None and a.median:
            checks.append((f"native best / (bare ALE x {cores} cores)", TARGET_LIMIT, "",
                           native.median / (a.median * cores),
                           f"{format_rate(native.median)} ({describe(native)}) / "
                           f"{format_rate(a.median * cores)}"))
        py, gym = best(rows, env, n, [PY_SHOAL]), best(rows, env, n, [GYM_SYNC])
        if py is not None and gym is not None and gym.median:
            checks.append((f"shoal.pool.AsyncVectorEnv / (gymnasium Sync x {cores} cores)", TARGET_PYTHON, "",
                           py.median / (gym.median * cores),
                           f"{format_rate(py.median)} ({describe(py)}) / {format_rate(gym.median * cores)}"))
        for name, required, unit, ratio, detail in checks:
            if n >= TARGET_MIN_ENVS:
                judged += 1
                met_count += ratio >= required
                met = "yes" if ratio >= required else "**no**"
            else:
                met = f"n/a (< {TARGET_MIN_ENVS} envs)"
            lines.append(f"| {env} | {n} | {name} | >= {required:g}{unit} | {ratio:.2f}{unit}: {detail} | {met} |")
    return lines, met_count, judged


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
    rows = with_computed_limit(rows, cores)
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
    if not rows:
        return lines + ["", "Nothing measured."]
    lines += [""] + table(rows, cores)
    target_lines, met, judged = targets(rows, cores)
    lines += ["", f"Targets (from {TARGET_MIN_ENVS} envs up; native best = the best shoal native row: "
              f"Serial, sync or async; the best of EnvPool and AtariVectorEnv = the best configuration of "
              f"either at the same game and num_envs): {met} of {judged} met", ""]
    return lines + target_lines


def skipped_section(reason: str) -> list[str]:
    return [f"## Atari: env-steps/s ({FRAMESKIP} emulator frames each)", "", f"Skipped: {reason}"]


def run(s: AtariSettings, cores: int, envpool_ver: str | None, log=sys.stderr) -> tuple[list[str], list[str]]:
    """The whole section: (markdown lines, errors)."""
    why = missing()
    if why is not None:
        return skipped_section(why), []
    ale_vector_why = ale_vector_available()
    load_before = os.getloadavg()
    rows, errors = run_all(s, cores, envpool_ver is not None, ale_vector_why is None, log=log)
    load = ", ".join(f"{a:.1f}" for a in load_before), ", ".join(f"{a:.1f}" for a in os.getloadavg())
    lines = report(rows, cores, s, envpool_ver, ale_vector_why)
    lines.insert(2, f"- load average (1, 5, 15 min) at the start: {load[0]}; at the end: {load[1]}")
    return lines, errors
