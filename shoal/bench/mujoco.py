"""The MuJoCo section: env-steps/s of gymnasium's MuJoCo v5 locomotion envs,
shoal native vs EnvPool vs gymnasium vs a plain C loop, in one run.

For each env (--mujoco-envs, default HalfCheetah, Hopper, Walker2d, Ant,
Humanoid) and num_envs (--mujoco-num-envs, default 16 and 64):

  C loop             shoal's native env stepped by `Block.run_steps`: the env's
                     own step (frame_skip mj_steps, reward, termination and
                     autoreset) over num_envs envs in nogil C calls on one
                     core, random actions: the limit per core. "C loop x
                     cores" (computed) is the limit for the machine.
  shoal Serial       shoal.pool.native.Serial: pool.step in this process.
  shoal native sync  shoal.pool.native.Multiprocessing, one worker per core.
  shoal native async the same with batch_size = num_envs // 2: recv() one
                     half while the other steps (an even worker count).
  EnvPool            envpool.make("<Env>-v5", env_type="gymnasium"): sync
                     (batch = num_envs) at each --workers thread count and at
                     the available cores, async (batch = num_envs // 2) at the
                     cores; the targets take its best configuration. Skipped
                     with a note if EnvPool is not installed.
  gymnasium Sync/AsyncVectorEnv, shoal.pool.AsyncVectorEnv
                     over gymnasium.make("<Env>-v5"): HalfCheetah, Ant and
                     Humanoid only (GYM_ENVS), num_envs <= --gym-max-envs.

Method: per env and num_envs every contender is built together (reset with
seed 0; forking ones first, EnvPool's threads last), warmed up, and measured
in interleaved rounds (shoal.bench.timing.interleaved), so that drift in the
machine's load hits every contender alike; the table gives each contender's
median round, and ratios are ratios of medians. Actions are uniform in the
action box, pre-sampled (a cycled table). One env-step is one step of the
env (frame_skip mj_steps).

Targets (issue: mujoco), from TARGET_MIN_ENVS envs up: shoal native best
(any shoal native row) >= 0.85 x (C loop x cores) for each of the five envs, and shoal
native best / EnvPool best >= 1.15x on HalfCheetah and Hopper, >= 1.0x on
Ant, Walker2d and Humanoid.

EnvPool links its own MuJoCo build, which is not exactly as fast as the
wheel's: with EnvPool installed, each env's XML is also stepped by both
builds alone (raw mj_step, interleaved rounds; physics_build_rates), and a
table gives "native best / EnvPool best" net of that build ratio.

The section is skipped with a note when mujoco is not installed; an env
whose native version cannot be built yet is skipped with a note.
"""
from __future__ import annotations

import argparse
import contextlib
import importlib.util
from dataclasses import dataclass
from functools import partial

from shoal.bench.sections import (ENVPOOL, ENVPOOL_ASYNC, ENVPOOL_SYNC, GYM_ASYNC, GYM_SYNC, NATIVE,  # noqa: F401
                                  NATIVE_ASYNC, NATIVE_SYNC, PY_SHOAL, SERIAL, GroupSettings, GroupTable, Options, Row,
                                  best, envpool_rows, groups, gym_rows, measure_groups, measured, name_list,
                                  native_rows)
from shoal.bench.steppers import gym_make
from shoal.bench.timing import ACTION_TABLE_ROWS

ENVS = ("HalfCheetah", "Hopper", "Walker2d", "Ant", "Humanoid")
GYM_ENVS = ("HalfCheetah", "Ant", "Humanoid")   # also under gymnasium's and shoal's Python vectorizers
VERSION = "v5"
HEADING = f"## MuJoCo: env-steps/s of the {VERSION} locomotion envs"

# Contenders (table labels), in table order; the others are shoal.bench.sections'.
C_LOOP = "C loop"
C_LOOP_CORES = "C loop x cores (computed)"
ORDER = [C_LOOP, C_LOOP_CORES, SERIAL, NATIVE_SYNC, NATIVE_ASYNC, ENVPOOL_SYNC, ENVPOOL_ASYNC,
         GYM_SYNC, GYM_ASYNC, PY_SHOAL]
TABLE = GroupTable(key="env", reference=C_LOOP, reference_name="C loop", computed=C_LOOP_CORES, order=ORDER,
                   threaded=ENVPOOL)

# Targets: native best / (C loop x cores) >= TARGET_LIMIT for each env of TARGET_ENVPOOL;
# native best / EnvPool best >= TARGET_ENVPOOL[env]; from TARGET_MIN_ENVS envs up.
TARGET_LIMIT = 0.85
TARGET_ENVPOOL = {"HalfCheetah": 1.15, "Hopper": 1.15, "Walker2d": 1.0, "Ant": 1.0, "Humanoid": 1.0}
TARGET_MIN_ENVS = 16


@dataclass
class MujocoSettings(GroupSettings):
    """The section's sweep (filled by `settings` from the command line)."""
    envs: list[str]


# ---- command line (called by shoal.bench) ------------------------------------------------
def env_list(text: str) -> list[str]:
    from shoal.envs.mujoco import MODELS   # importable without mujoco

    return name_list(text, MODELS, lambda key: f"unknown MuJoCo env {key!r}; choose from {', '.join(MODELS)}", "env")


OPTIONS = Options("mujoco", "MuJoCo", "envs", env_list,
                  {"envs": (ENVS, ["HalfCheetah"]), "num_envs": ([16, 64], [4]), "rounds": (5, 1),
                   "seconds": (0.5, 0.05)})
add_arguments = OPTIONS.add_arguments   # --mujoco-envs, --mujoco-num-envs, --mujoco-rounds, --mujoco-seconds


def settings(args: argparse.Namespace, workers: list[int], warmup: float, gym_max_envs: int) -> MujocoSettings:
    return OPTIONS.settings(MujocoSettings, args, workers, warmup, gym_max_envs)


# ---- versions --------------------------------------------------------------------------
def mujoco_version() -> str | None:
    """The installed mujoco's version (shoal's native envs and gymnasium's), or None."""
    if importlib.util.find_spec("mujoco") is None:
        return None
    try:
        import mujoco
    except Exception:
        return None
    return mujoco.mj_versionString()


def envpool_mujoco_version() -> str:
    """The MuJoCo that EnvPool's MuJoCo envs are linked with (statically, in
    envpool/mujoco/mujoco_gym_envpool.so), from its own mj_versionString."""
    import ctypes
    import os

    try:
        import envpool

        path = os.path.join(os.path.dirname(envpool.__file__), "mujoco", "mujoco_gym_envpool.so")
        lib = ctypes.CDLL(path)
        lib.mj_versionString.restype = ctypes.c_char_p
        return lib.mj_versionString().decode()
    except Exception as e:  # an EnvPool without MuJoCo, or built differently
        return f"unknown ({type(e).__name__})"


# ---- the physics builds alone ---------------------------------------------------------------
PHYSICS_CALLS = 500   # mj_steps per timed call


@contextlib.contextmanager
def wheel_clock_off():
    """The wheel's mjcb_time unset for the block: `import mujoco` sets it
    (mjData.timer's clock, read at every stage mj_step times: ~19% of a
    Hopper step), and shoal's envs step with it off (envs/mujoco/library.c);
    EnvPool's own MuJoCo has none set."""
    import ctypes

    from shoal.envs.mujoco.build import mujoco_dirs

    _, libdir, libname = mujoco_dirs()
    clock = ctypes.c_void_p.in_dll(ctypes.CDLL(str(libdir / libname)), "mjcb_time")
    saved, clock.value = clock.value, None
    try:
        yield
    finally:
        clock.value = saved


def physics_build_rates(name: str, rounds: int, seconds: float, warmup: float) -> tuple[float, float]:
    """mj_steps/s of env `name`'s gymnasium XML in EnvPool's statically
    linked MuJoCo (through ctypes, its per-call cost measured on a no-op
    and taken out) and in the mujoco wheel shoal uses (mj_step's nstep, no
    per-call cost), in interleaved rounds: (EnvPool's, the wheel's), the
    median rounds. The two builds are not equally fast, so part of "native
    best / EnvPool best" is theirs, not the pools'. The wheel steps with
    MuJoCo's profiling clock off, as shoal's envs do (`wheel_clock_off`)."""
    import ctypes
    import os
    import statistics

    import envpool
    import gymnasium
    import mujoco

    from shoal.bench.timing import interleaved
    from shoal.envs.mujoco import MODELS

    xml = os.path.join(os.path.dirname(gymnasium.__file__), "envs", "mujoco", "assets", MODELS[name].xml_file)
    lib = ctypes.CDLL(os.path.join(os.path.dirname(envpool.__file__), "mujoco", "mujoco_gym_envpool.so"))
    lib.mj_loadXML.restype = ctypes.c_void_p
    lib.mj_loadXML.argtypes = [ctypes.c_char_p, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int]
    lib.mj_makeData.restype = ctypes.c_void_p
    lib.mj_makeData.argtypes = [ctypes.c_void_p]
    lib.mj_step.argtypes, lib.mj_step.restype = [ctypes.c_void_p, ctypes.c_void_p], None
    lib.mj_deleteData.argtypes = lib.mj_deleteModel.argtypes = [ctypes.c_void_p]
    lib.mj_version.restype = ctypes.c_int
    error = ctypes.create_string_buffer(1000)
    model = lib.mj_loadXML(xml.encode(), None, error, len(error))
    if not model:
        raise RuntimeError(f"EnvPool's MuJoCo cannot load {xml}: {error.value.decode()}")
    data = lib.mj_makeData(model)
    wheel_model = mujoco.MjModel.from_xml_path(xml)
    wheel_data = mujoco.MjData(wheel_model)
    step, noop = lib.mj_step, lib.mj_version

    def envpool_steps():
        for _ in range(PHYSICS_CALLS):
            step(model, data)
        return PHYSICS_CALLS

    def ctypes_calls():
        for _ in range(PHYSICS_CALLS):
            noop()
        return PHYSICS_CALLS

    def wheel_steps():
        mujoco.mj_step(wheel_model, wheel_data, nstep=PHYSICS_CALLS)
        return PHYSICS_CALLS

    try:
        with wheel_clock_off():
            ours, calls, wheel = (statistics.median(rates) for rates in
                                  interleaved([envpool_steps, ctypes_calls, wheel_steps], rounds, seconds, warmup))
    finally:
        lib.mj_deleteData(data)
        lib.mj_deleteModel(model)
    return 1.0 / (1.0 / ours - 1.0 / calls), wheel


def physics_builds(names: list[str], ms: "MujocoSettings", progress) -> dict[str, tuple[float, float] | str]:
    """physics_build_rates for each env, or why it was not measured."""
    found = {}
    for name in names:
        progress.log(f"[mujoco] {name}: the physics builds alone (mj_step of the same XML)")
        try:
            found[name] = physics_build_rates(name, ms.rounds, ms.seconds, ms.warmup)
        except Exception as e:   # an EnvPool without MuJoCo, or built otherwise
            found[name] = f"not measured ({type(e).__name__}: {e})"
    return found


def physics_lines(rows: list[Row], builds: dict) -> list[str]:
    """The physics-build table: each build's mj_step time on the same XML,
    their ratio, and "native best / EnvPool best" at each num_envs from
    TARGET_MIN_ENVS up, as measured and divided by that ratio."""
    if not builds:
        return []
    lines = ["", "Physics builds alone (gymnasium's XML of the env, raw mj_step, interleaved rounds; EnvPool "
                 "links its own MuJoCo): how much of native best / EnvPool best is the builds' speed",
             "", "| env | EnvPool's MuJoCo us/mj_step | the wheel's us/mj_step | build ratio | "
                 "native best / EnvPool best (num_envs) | net of the build |", "|---|---:|---:|---:|---|---|"]
    for name, found in builds.items():
        if isinstance(found, str):
            lines.append(f"| {name} | {found} | | | | |")
            continue
        envpool_rate, wheel_rate = found
        build = wheel_rate / envpool_rate
        measured, net = [], []
        for env, n in groups(rows):
            native, theirs = best(rows, env, n, NATIVE), best(rows, env, n, ENVPOOL)
            if env == name and n >= TARGET_MIN_ENVS and native and theirs and theirs.median:
                ratio = native.median / theirs.median
                measured.append(f"{ratio:.2f} ({n})")
                net.append(f"{ratio / build:.2f} ({n})")
        lines.append(f"| {name} | {1e6 / envpool_rate:.2f} | {1e6 / wheel_rate:.2f} | {build:.2f} | "
                     f"{', '.join(measured) or '-'} | {', '.join(net) or '-'} |")
    return lines


# ---- the sweep: per env and num_envs, every contender built together ---------------------
def contenders(spec, n: int, ms: MujocoSettings, cores: int, have_envpool: bool) -> list[tuple]:
    """(label, workers, batch, opener) at env `spec` and n envs, in the order
    they are built: everything that forks comes before EnvPool's threads."""
    rows = native_rows(spec, n, cores, C_LOOP)
    if spec.name in GYM_ENVS and n <= ms.gym_max_envs and have_gymnasium_mujoco():
        rows += gym_rows(partial(gym_make, f"{spec.name}-{VERSION}"), spec, n, cores)
    if have_envpool:
        rows += envpool_rows(f"{spec.name}-{VERSION}", spec, n, sorted(set(ms.workers) | {cores}), cores)
    return rows


def have_gymnasium_mujoco() -> bool:
    """gymnasium's own MuJoCo envs (the gymnasium rows) import imageio, which
    the bench extra installs and the mujoco extra does not."""
    return importlib.util.find_spec("imageio") is not None


def available(name: str) -> str | None:
    """None if env `name`'s native version builds and resets; else why not."""
    import shoal.envs
    from shoal.pool.native import Serial

    try:
        Serial(shoal.envs.spec(name), 1, seed=0).close()
    except Exception as e:
        return f"{type(e).__name__}: {e}"
    return None


def run_all(ms: MujocoSettings, cores: int, have_envpool: bool,
            progress) -> tuple[list[Row], list[str], list[str], dict]:
    """(rows, errors, skipped envs with the reason, physics_builds of the
    measured envs: {} without EnvPool)."""
    import shoal.envs

    specs, skipped = [], []
    for name in ms.envs:
        why = available(name)
        if why is not None:
            skipped.append(f"{name}: {why}")
            progress.log(f"[mujoco] {name}: skipped ({why})")
        else:
            specs.append(shoal.envs.spec(name))
    plans = [(spec.name, n, partial(contenders, spec, n, ms, cores, have_envpool))
             for spec in specs for n in ms.num_envs]
    rows, errors = measure_groups("mujoco", "MuJoCo", plans, ms.rounds, ms.seconds, ms.warmup, progress)
    builds = physics_builds([spec.name for spec in specs], ms, progress) if have_envpool else {}
    return rows, errors, skipped, builds


# ---- report -------------------------------------------------------------------------------
with_computed_limit = TABLE.with_computed_limit


def targets(rows: list[Row], cores: int) -> tuple[list[str], int, int]:
    """The target table: (lines, targets met, targets judged)."""
    checks = []
    for env, n in groups(rows):
        native = best(rows, env, n, NATIVE)
        if native is None or env not in TARGET_ENVPOOL:   # targets: the five locomotion envs
            continue
        checks += [(env, n, TABLE.ratio(f"native best / (C loop x {cores} cores)", TARGET_LIMIT, "", native,
                                        best(rows, env, n, [C_LOOP]), cores)),
                   (env, n, TABLE.ratio("native best / EnvPool best", TARGET_ENVPOOL[env], "x", native,
                                        best(rows, env, n, ENVPOOL)))]
    return TABLE.targets(checks, TARGET_MIN_ENVS)


def report(rows: list[Row], cores: int, ms: MujocoSettings, envpool_ver: str | None,
           skipped: list[str], builds: dict | None = None) -> list[str]:
    """The section's heading, versions, method, table and targets."""
    import gymnasium

    envpool_line = (f"EnvPool {envpool_ver} with its own MuJoCo {envpool_mujoco_version()} (statically "
                    f"linked) and its own model files" if envpool_ver else
                    "EnvPool not installed (`pip install envpool`, the `bench` extra): its rows are skipped")
    lines = [HEADING, "",
             f"- MuJoCo: shoal native and gymnasium {gymnasium.__version__} use mujoco {mujoco_version()} "
             f"(the installed wheel); {envpool_line}",
             f"- method: per env and num_envs, every contender built together (seed 0), {ms.warmup:g} s "
             f"warm-up each, then {ms.rounds} interleaved rounds of {ms.seconds:g} s (each round starts one "
             f"contender later); median round per contender, ratios of medians; actions uniform in the "
             f"action box, pre-sampled ({ACTION_TABLE_ROWS} arrays cycled); one env-step = frame_skip mj_steps",
             "- C loop: the native env's own step (frame_skip mj_steps, reward, termination, autoreset) "
             "over num_envs envs in nogil C calls (`Block.run_steps`), one core: the limit per core; "
             f"C loop x {cores} cores (computed) is the limit for the machine",
             "- shoal native: `shoal.pool.native` Serial (1 core), Multiprocessing sync (one worker per core) "
             "and async (batch num_envs/2); EnvPool: sync at each thread count, async at the cores; "
             f"gymnasium's vectorizers and shoal.pool.AsyncVectorEnv over `gymnasium.make(\"<Env>-{VERSION}\")` "
             f"for {', '.join(GYM_ENVS)} only, num_envs <= {ms.gym_max_envs}"]
    if not have_gymnasium_mujoco():
        skipped = [*skipped, "gymnasium's rows: its MuJoCo envs need imageio (`pip install imageio`, "
                             "in the `bench` extra)"]
    if skipped:
        lines += [f"- skipped: {why}" for why in skipped]
    return lines + TABLE.body(rows, cores, targets,
                              f"Targets (from {TARGET_MIN_ENVS} envs up; native best = the best shoal native "
                              f"row, EnvPool best = its best configuration at the same env and num_envs)") \
        + physics_lines(rows, builds or {})


def run(ms: MujocoSettings, cores: int, envpool_ver: str | None, progress=None) -> tuple[list[str], list[str]]:
    """The whole section: (markdown lines, errors); progress: a
    shoal.progress.Progress (default: plain lines on stderr)."""
    return measured(None if mujoco_version() else "mujoco is not installed (`pip install mujoco`).", HEADING,
                    partial(run_all, ms, cores, envpool_ver is not None),
                    lambda rows, skipped, builds: report(rows, cores, ms, envpool_ver, skipped, builds), progress)
