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

The section is skipped with a note when mujoco is not installed; an env
whose native version cannot be built yet is skipped with a note.
"""
from __future__ import annotations

import argparse
import contextlib
import gc
import importlib.util
import os
import sys
import warnings
from dataclasses import dataclass, field
from functools import partial
from typing import Callable

import numpy as np

from shoal.bench.timing import (ACTION_TABLE_ROWS, Result, _calibrate_chunk, cycling, format_rate,
                                interleaved)

ENVS = ("HalfCheetah", "Hopper", "Walker2d", "Ant", "Humanoid")
GYM_ENVS = ("HalfCheetah", "Ant", "Humanoid")   # also under gymnasium's and shoal's Python vectorizers
VERSION = "v5"

# Contenders (table labels), in table order.
C_LOOP = "C loop"
C_LOOP_CORES = "C loop x cores (computed)"
SERIAL = "shoal Serial"
NATIVE_SYNC = "shoal native sync"
NATIVE_ASYNC = "shoal native async"
ENVPOOL_SYNC = "EnvPool sync"
ENVPOOL_ASYNC = "EnvPool async"
GYM_SYNC = "gymnasium SyncVectorEnv"
GYM_ASYNC = "gymnasium AsyncVectorEnv"
PY_SHOAL = "shoal.pool.AsyncVectorEnv"
ORDER = [C_LOOP, C_LOOP_CORES, SERIAL, NATIVE_SYNC, NATIVE_ASYNC, ENVPOOL_SYNC, ENVPOOL_ASYNC,
         GYM_SYNC, GYM_ASYNC, PY_SHOAL]
NATIVE = (SERIAL, NATIVE_SYNC, NATIVE_ASYNC)
ENVPOOL = (ENVPOOL_SYNC, ENVPOOL_ASYNC)

# Targets: native best / (C loop x cores) >= TARGET_LIMIT for each env of TARGET_ENVPOOL;
# native best / EnvPool best >= TARGET_ENVPOOL[env]; from TARGET_MIN_ENVS envs up.
TARGET_LIMIT = 0.85
TARGET_ENVPOOL = {"HalfCheetah": 1.15, "Hopper": 1.15, "Walker2d": 1.0, "Ant": 1.0, "Humanoid": 1.0}
TARGET_MIN_ENVS = 16


@dataclass
class MujocoSettings:
    """The section's sweep (filled by `settings` from the command line)."""
    envs: list[str] = field(default_factory=lambda: list(ENVS))
    num_envs: list[int] = field(default_factory=lambda: [16, 64])
    rounds: int = 5
    seconds: float = 0.5
    warmup: float = 0.2
    workers: list[int] = field(default_factory=lambda: [1])   # EnvPool sync thread counts (+ cores)
    gym_max_envs: int = 64


@dataclass
class Row(Result):
    """A Result with the env and the batch size (envs per recv)."""
    env: str = ""
    batch: int = 0


# ---- command line (called by shoal.bench) ------------------------------------------------
def env_list(text: str) -> list[str]:
    from shoal.envs.mujoco import MODELS   # importable without mujoco

    known = {n.lower(): n for n in MODELS}
    names = []
    for key in (k.strip() for k in text.split(",") if k.strip()):
        if key.lower() not in known:
            raise argparse.ArgumentTypeError(f"unknown MuJoCo env {key!r}; choose from {', '.join(MODELS)}")
        names.append(known[key.lower()])
    if not names:
        raise argparse.ArgumentTypeError("expected comma-separated env names")
    return names


def add_arguments(p: argparse.ArgumentParser, int_list) -> None:
    p.add_argument("--mujoco-envs", type=env_list, default=None,
                   help=f"envs of the MuJoCo section (default {','.join(ENVS)}; quick: HalfCheetah)")
    p.add_argument("--mujoco-num-envs", type=int_list, default=None,
                   help="num_envs of the MuJoCo section (default 16,64; quick: 4)")
    p.add_argument("--mujoco-rounds", type=int, default=None,
                   help="interleaved rounds per contender in the MuJoCo section (default 5; quick: 1)")
    p.add_argument("--mujoco-seconds", type=float, default=None,
                   help="duration of one round in the MuJoCo section (default 0.5; quick: 0.05)")


def settings(args: argparse.Namespace, workers: list[int], warmup: float, gym_max_envs: int) -> MujocoSettings:
    quick = args.quick

    def pick(value, full, small):
        return value if value is not None else (small if quick else full)

    ms = MujocoSettings(envs=pick(args.mujoco_envs, list(ENVS), ["HalfCheetah"]),
                        num_envs=pick(args.mujoco_num_envs, [16, 64], [4]),
                        rounds=pick(args.mujoco_rounds, 5, 1),
                        seconds=pick(args.mujoco_seconds, 0.5, 0.05),
                        warmup=warmup, workers=list(workers), gym_max_envs=gym_max_envs)
    if ms.rounds < 1 or ms.seconds <= 0:
        raise SystemExit("shoal bench: --mujoco-rounds must be >= 1 and --mujoco-seconds > 0")
    return ms


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


# ---- actions ------------------------------------------------------------------------------
def action_table(spec, n: int, dtype=np.float32, seed: int = 0) -> np.ndarray:
    """ACTION_TABLE_ROWS arrays of n random actions, uniform in the env's
    action box: shape (ACTION_TABLE_ROWS, n, action_size)."""
    rng = np.random.default_rng(seed)
    low, high = np.asarray(spec.action_low, np.float64), np.asarray(spec.action_high, np.float64)
    table = rng.uniform(low, high, size=(ACTION_TABLE_ROWS, n, len(low)))
    return np.ascontiguousarray(table.astype(np.float32).astype(dtype))  # same values for every dtype


# ---- contenders: context managers yielding a step function (returns env-steps run) --------
@contextlib.contextmanager
def c_loop(spec, n: int):
    """The native env's vector loop over n envs in nogil C calls (NEXT_STEP
    autoreset), about timing.C_LOOP_CALL_SECONDS per call; one core."""
    from shoal.pool.layout import RESEED, Buffers

    binding = spec.load_binding()
    buffers = Buffers(spec, n, 1, shared=False)
    block = None
    try:
        buffers.reset_requests[:] = RESEED
        buffers.seeds[:] = np.arange(n, dtype=np.uint64)
        block = binding.Block(buffers, 0, n, 0)   # mode 0: NEXT_STEP autoreset
        block.reset()
        table = np.ascontiguousarray(action_table(spec, n).reshape(ACTION_TABLE_ROWS, -1))
        chunk = _calibrate_chunk(block, table)
        # A slow env's chunk is a step or two: each call goes on from the table
        # row where the last one stopped (step t uses row t % K, as the pools'
        # cycling does), not from row 0 again.
        row = 0

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

    pool = Serial(spec.name, n, seed=0) if workers is None else \
        Multiprocessing(spec.name, n, num_workers=workers, seed=0)
    try:
        next_actions = cycling(action_table(spec, n))

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
    pool = Multiprocessing(spec.name, n, num_workers=workers, batch_size=batch, seed=0)
    try:
        pool.async_reset(seed=0)
        next_actions = cycling(action_table(spec, batch))

        def step():
            pool.recv()
            pool.send(next_actions())
            return batch

        yield step
    finally:
        pool.close()


@contextlib.contextmanager
def envpool_env(spec, n: int, batch: int, threads: int):
    """EnvPool's <Env>-v5 (gymnasium API): sync step when batch == n, else
    recv / send of `batch` envs."""
    import envpool

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")   # gymnasium's Box precision warnings
        env = envpool.make(f"{spec.name}-{VERSION}", env_type="gymnasium", num_envs=n, batch_size=batch,
                           num_threads=threads, seed=0)
    try:
        dtype = env.action_space.dtype   # float64 in EnvPool
        next_actions = cycling(action_table(spec, batch, dtype=dtype))
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
def gym_vector(spec, n: int, kind: str, workers: int | None = None):
    """A gymnasium-API vector env of n gymnasium.make("<Env>-v5"): gymnasium's
    Sync / AsyncVectorEnv or shoal.pool.AsyncVectorEnv."""
    import gymnasium

    fns = [partial(gymnasium.make, f"{spec.name}-{VERSION}")] * n
    if kind == "sync":
        envs = gymnasium.vector.SyncVectorEnv(fns)
    elif kind == "async":
        envs = gymnasium.vector.AsyncVectorEnv(fns)
    else:
        from shoal.pool import AsyncVectorEnv

        envs = AsyncVectorEnv(fns, num_workers=workers)
    try:
        envs.reset(seed=0)
        next_actions = cycling(action_table(spec, n))

        def step():
            envs.step(next_actions())
            return n

        yield step
    finally:
        envs.close()


def contenders(spec, n: int, ms: MujocoSettings, cores: int, have_envpool: bool) -> list[tuple]:
    """(label, workers, batch, opener) at env `spec` and n envs, in the order
    they are built: everything that forks comes before EnvPool's threads."""
    w = min(cores, n)
    wa = w + w % 2   # async: two batches need an even worker count
    rows = [(C_LOOP, 1, n, partial(c_loop, spec, n)),
            (SERIAL, 1, n, partial(native_sync, spec, n, None)),
            (NATIVE_SYNC, w, n, partial(native_sync, spec, n, w))]
    if n % 2 == 0 and wa <= n:
        rows.append((NATIVE_ASYNC, wa, n // 2, partial(native_async, spec, n, wa)))
    if spec.name in GYM_ENVS and n <= ms.gym_max_envs:
        rows += [(GYM_SYNC, 1, n, partial(gym_vector, spec, n, "sync")),
                 (GYM_ASYNC, n, n, partial(gym_vector, spec, n, "async")),
                 (PY_SHOAL, w, n, partial(gym_vector, spec, n, "shoal", w))]
    if have_envpool:
        for t in sorted(set(ms.workers) | {cores}):
            rows.append((ENVPOOL_SYNC, t, n, partial(envpool_env, spec, n, n, t)))
        if n % 2 == 0:
            rows.append((ENVPOOL_ASYNC, cores, n // 2, partial(envpool_env, spec, n, n // 2, cores)))
    return rows


def available(name: str) -> str | None:
    """None if env `name`'s native version builds and resets; else why not."""
    import shoal.envs
    from shoal.pool.native import Serial

    try:
        Serial(shoal.envs.spec(name), 1, seed=0).close()
    except Exception as e:
        return f"{type(e).__name__}: {e}"
    return None


# ---- the sweep ----------------------------------------------------------------------------
def measure_group(spec, n: int, ms: MujocoSettings, cores: int, have_envpool: bool,
                  log=sys.stderr) -> tuple[list[Row], list[str]]:
    """Every contender at env `spec` and n envs, open together, measured in
    interleaved rounds; a contender that fails to build is an error, the rest
    are measured."""
    rows, errors, steps = [], [], []
    plan = contenders(spec, n, ms, cores, have_envpool)
    print(f"[mujoco] {spec.name} num_envs={n}: {len(plan)} contenders x {ms.rounds} rounds "
          f"of {ms.seconds:g} s ...", end=" ", file=log, flush=True)
    try:
        with contextlib.ExitStack() as stack:
            opened = []
            for label, w, batch, opener in plan:
                try:
                    steps.append(stack.enter_context(opener()))
                    opened.append((label, w, batch))
                except Exception as e:
                    errors.append(f"MuJoCo {spec.name} num_envs={n} {label} (workers {w}): "
                                  f"{type(e).__name__}: {e}")
            rates = interleaved(steps, ms.rounds, ms.seconds, ms.warmup)
            rows = [Row(label, n, w, r, env=spec.name, batch=batch)
                    for (label, w, batch), r in zip(opened, rates)]
    except Exception as e:
        errors.append(f"MuJoCo {spec.name} num_envs={n}: {type(e).__name__}: {e}")
        print(f"FAILED: {e}", file=log, flush=True)
        return [], errors
    finally:
        steps.clear()   # the step functions hold the envs: EnvPool's threads end with its last reference
        gc.collect()
    print("done; rates per round:", file=log, flush=True)
    for r in rows:
        print(f"    {r.contender}, workers={r.workers}, batch={r.batch}: "
              f"{', '.join(format_rate(rate) for rate in r.rates)}", file=log, flush=True)
    return rows, errors


def run_all(ms: MujocoSettings, cores: int, have_envpool: bool,
            log=sys.stderr) -> tuple[list[Row], list[str], list[str]]:
    """(rows, errors, skipped envs with the reason)."""
    import shoal.envs

    rows, errors, skipped = [], [], []
    for name in ms.envs:
        why = available(name)
        if why is not None:
            skipped.append(f"{name}: {why}")
            print(f"[mujoco] {name}: skipped ({why})", file=log, flush=True)
            continue
        spec = shoal.envs.spec(name)
        for n in ms.num_envs:
            group, group_errors = measure_group(spec, n, ms, cores, have_envpool, log=log)
            rows += group
            errors += group_errors
    return rows, errors, skipped


# ---- report -------------------------------------------------------------------------------
def with_computed_limit(rows: list[Row], cores: int) -> list[Row]:
    """Add a "C loop x cores" row per C loop row; sort into table order."""
    extra = [Row(C_LOOP_CORES, r.num_envs, cores, [rate * cores for rate in r.rates], env=r.env,
                 batch=r.batch) for r in rows if r.contender == C_LOOP]
    envs = list(dict.fromkeys(r.env for r in rows))
    return sorted(rows + extra, key=lambda r: (envs.index(r.env), r.num_envs, ORDER.index(r.contender),
                                               r.workers, r.batch))


def find(rows: list[Row], env: str, n: int, labels) -> list[Row]:
    return [r for r in rows if r.env == env and r.num_envs == n and r.contender in labels]


def best(rows: list[Row], env: str, n: int, labels) -> Row | None:
    found = [r for r in find(rows, env, n, labels) if r.rates]
    return max(found, key=lambda r: r.median) if found else None


def describe(r: Row) -> str:
    config = f"{r.workers} {'thread' if r.contender in ENVPOOL else 'worker'}{'s' if r.workers != 1 else ''}"
    if r.batch != r.num_envs:
        config += f", batch {r.batch}"
    return f"{r.contender}, {config}"


def table(rows: list[Row], cores: int) -> list[str]:
    lines = ["| env | num_envs | contender | workers / threads | batch | env-steps/s (median) | spread "
             f"| vs C loop 1 core | vs C loop x {cores} cores |",
             "|---|---:|---|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        c = best(rows, r.env, r.num_envs, [C_LOOP])
        one = f"{r.median / c.median:.3f}" if c and c.median else "-"
        allc = f"{r.median / (c.median * cores):.3f}" if c and c.median else "-"
        lines.append(f"| {r.env} | {r.num_envs} | {r.contender} | {r.workers} | {r.batch} "
                     f"| {format_rate(r.median)} | {r.spread:.0%} | {one} | {allc} |")
    return lines


def targets(rows: list[Row], cores: int) -> tuple[list[str], int, int]:
    """The target table: (lines, targets met, targets judged)."""
    lines = ["| env | num_envs | target | required | measured | met |", "|---|---:|---|---:|---:|---|"]
    met_count = judged = 0
    groups = list(dict.fromkeys((r.env, r.num_envs) for r in rows))
    for env, n in groups:
        native = best(rows, env, n, NATIVE)
        if native is None or env not in TARGET_ENVPOOL:   # targets: the five locomotion envs
            continue
        applies = n >= TARGET_MIN_ENVS
        checks = []
        c = best(rows, env, n, [C_LOOP])
        if c is not None and c.median:
            checks.append((f"native best / (C loop x {cores} cores)", TARGET_LIMIT, "",
                           native.median / (c.median * cores),
                           f"{format_rate(native.median)} ({describe(native)}) / "
                           f"{format_rate(c.median * cores)}"))
        ep = best(rows, env, n, ENVPOOL)
        if ep is not None and ep.median and env in TARGET_ENVPOOL:
            checks.append(("native best / EnvPool best", TARGET_ENVPOOL[env], "x", native.median / ep.median,
                           f"{format_rate(native.median)} ({describe(native)}) / "
                           f"{format_rate(ep.median)} ({describe(ep)})"))
        for name, required, unit, ratio, detail in checks:
            if applies:
                judged += 1
                met_count += ratio >= required
                met = "yes" if ratio >= required else "**no**"
            else:
                met = f"n/a (< {TARGET_MIN_ENVS} envs)"
            lines.append(f"| {env} | {n} | {name} | >= {required:g}{unit} | {ratio:.2f}{unit}: {detail} | {met} |")
    return lines, met_count, judged


def report(rows: list[Row], cores: int, ms: MujocoSettings, envpool_ver: str | None,
           skipped: list[str]) -> list[str]:
    """The section's heading, versions, method, table and targets."""
    import gymnasium

    rows = with_computed_limit(rows, cores)
    envpool_line = (f"EnvPool {envpool_ver} with its own MuJoCo {envpool_mujoco_version()} (statically "
                    f"linked) and its own model files" if envpool_ver else
                    "EnvPool not installed (`pip install envpool`, the `bench` extra): its rows are skipped")
    lines = [f"## MuJoCo: env-steps/s of the {VERSION} locomotion envs", "",
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
    if skipped:
        lines += [f"- skipped: {why}" for why in skipped]
    if not rows:
        return lines + ["", "Nothing measured."]
    lines += [""] + table(rows, cores)
    target_lines, met, judged = targets(rows, cores)
    lines += ["", f"Targets (from {TARGET_MIN_ENVS} envs up; native best = the best shoal native row, "
              f"EnvPool best = its best configuration at the same env and num_envs): {met} of {judged} met", ""]
    return lines + target_lines


def skipped_section(reason: str) -> list[str]:
    return [f"## MuJoCo: env-steps/s of the {VERSION} locomotion envs", "", f"Skipped: {reason}"]


def run(ms: MujocoSettings, cores: int, envpool_ver: str | None, log=sys.stderr) -> tuple[list[str], list[str]]:
    """The whole section: (markdown lines, errors)."""
    version = mujoco_version()
    if version is None:
        return skipped_section("mujoco is not installed (`pip install mujoco`)."), []
    load_before = os.getloadavg()
    rows, errors, skipped = run_all(ms, cores, envpool_ver is not None, log=log)
    load = ", ".join(f"{a:.1f}" for a in load_before), ", ".join(f"{a:.1f}" for a in os.getloadavg())
    lines = report(rows, cores, ms, envpool_ver, skipped)
    lines.insert(2, f"- load average (1, 5, 15 min) at the start: {load[0]}; at the end: {load[1]}")
    return lines, errors
