"""`shoal bench`: CartPole steps per second, shoal vs gymnasium vs EnvPool vs a
plain C loop, and the Python-env and first-party envs sections.

Every contender runs in the same process and the same run. The main
(CartPole) table and the first-party envs section run one config after
another, so on a shared machine a ratio between their rows moves with the
load from run to run; the Python-env, MuJoCo and Atari sections interleave
rounds (below), so that drift hits every contender alike. Absolute numbers
do not travel; repeat a run before trusting a ratio.

Contenders (each an opener of shoal.bench.steppers, planned in shoal.bench.cartpole):

  C loop             shoal's CartPole vector loop in one nogil C call
                     (`Block.run_steps`): the single-core limit. "C loop x
                     cores (computed)" is that rate times the available
                     cores; "C loop x cores (measured)" runs one C loop per
                     core at once, each over its share of the envs, with no
                     hand-off: what the machine gives with shared caches,
                     memory bandwidth, SMT siblings and all-core clocks (on
                     more than one core).
  shoal Serial       shoal.make(..., backend="serial"); pool.step in a Python loop.
  shoal processes sync / async
                     shoal.make(..., num_workers=w); step, or async_reset then
                     recv()/send() with batch_size = num_envs // 2. Where w is
                     the available cores, the pool is the default one (sync:
                     w - 1 processes plus the caller stepping a share,
                     parent_share), as shoal.make(...) with no num_workers.
  gymnasium Sync/AsyncVectorEnv
                     over gymnasium.make("CartPole-v1"); slow, so only small
                     num_envs and short runs (AsyncVectorEnv: one process per env).
  EnvPool sync / async
                     envpool.make("CartPole-v1", env_type="gymnasium", ...),
                     num_threads = workers; skipped with a note if not installed.

The Python-env section (contender group "python", its own table;
shoal.bench.python_envs) measures gymnasium's own CartPole-v1, a Python env,
under three vectorizers at the same num_envs (--python-num-envs, default 16 and 64): shoal.pool.AsyncVectorEnv
(one block of envs per worker process, at each --workers count and at the
available cores, its default), gymnasium SyncVectorEnv and gymnasium
AsyncVectorEnv (one process per env). For reference it also times one env in
a plain Python loop: the env's own step cost, one core. Targets, at >= 16 envs:
shoal (default workers) >= 8x gymnasium AsyncVectorEnv and >= 1.3x
SyncVectorEnv.

Method, identical for all contenders (the helpers of shoal.bench.timing):

  - actions are sampled before the timer: a table of K random action arrays,
    cycled (no RNG work and no allocation inside the timed loop);
  - each config is built and reset, then warmed up for --warmup seconds;
  - a measurement runs the step loop for a fixed duration (--seconds) and
    counts real env steps: num_envs per step, batch_size per async recv;
    rate = steps / elapsed wall time;
  - --repeats measurements per config; the table reports the median (and the
    spread, (max - min) / median);
  - ratios are to the single-core C loop at the same num_envs.

The Python-env section differs in one way, for fairness on a noisy machine:
all its vector envs at one num_envs are built together and measured in
interleaved rounds (A, B, C, A, B, C, ...; each round starts one contender
later), --python-rounds rounds of --python-seconds each, so that drift in the
machine's load hits every contender alike. It reports each contender's median
round and the ratio of medians.

Usage:
    python scripts/bench_pool.py                # full sweep (a few minutes)
    python -m shoal bench --quick               # smoke run, a few seconds
    python -m shoal bench --num-envs 4096 --workers 2 --contenders shoal,envpool
    python -m shoal bench --contenders python      # the Python-env section only
    python -m shoal bench --contenders envs        # agent-steps/s of every first-party env
    python -m shoal bench --contenders mujoco      # the MuJoCo section
    python -m shoal bench --contenders atari       # the Atari section (not in "all": ~5 minutes)

The "envs" section (shoal.bench.envs) measures agent-steps/s of every
first-party env: its C loop and Serial pool on one core, and processes on
all cores, against the per-core targets of the envs issue.

The MuJoCo section (contender group "mujoco", shoal.bench.mujoco; options
--mujoco-envs, --mujoco-num-envs, --mujoco-rounds, --mujoco-seconds) compares,
per locomotion env and num_envs in interleaved rounds, shoal's native MuJoCo
envs, EnvPool, gymnasium's vectorizers, shoal.pool.AsyncVectorEnv and the
native env's plain C loop, against the targets of the mujoco issue; it is
skipped with a note when mujoco is not installed.

The Atari section (contender group "atari", shoal.bench.atari; options
--atari-games, --atari-num-envs, --atari-rounds, --atari-seconds) compares,
per game (Pong, Breakout) and num_envs in interleaved rounds, shoal's native
Atari envs, EnvPool, ale-py's AtariVectorEnv, gymnasium's vectorizers and
shoal.pool.AsyncVectorEnv over gymnasium's wrapper stack, and a bare
ALEInterface.act loop (the emulation limit per core), all with the same
standard preprocessing, against the targets of the atari issue; it is
skipped with a note when ale-py or OpenCV is missing. It is not in the "all"
group (its full run takes minutes): ask for it with --contenders atari.

Progress: --progress auto|rich|plain|none (shoal.progress; default auto: a
rich progress bar when rich is installed and stderr is a terminal, else a
short line per measurement) goes to stderr; the report alone goes to stdout.

Layout: this module is the command line and the report's header; one module
per section (cartpole, python_envs, envs, mujoco, atari), all timed with
timing. What the sections share: steppers (the contenders' step loops: shoal
pools, gymnasium's vectorizers, EnvPool, the C loop) and sections (measuring
groups in interleaved rounds, their tables, targets and options). A section
imports these (and python_envs cartpole's env id), never this module.
"""
from __future__ import annotations

import argparse
import datetime
import os
import platform
import shlex
import sys

import numpy as np

from shoal import config, progress
from shoal.bench import atari, cartpole, envs, mujoco, python_envs
from shoal.bench.cartpole import ENV, ENVPOOL, envpool_version
from shoal.bench.sections import finite_float
from shoal.bench.timing import ACTION_TABLE_ROWS, Settings, cpu_line
# Re-exported for scripts (scripts/train_speed.py: cpu_model).
from shoal.bench.timing import cpu_model, format_rate  # noqa: F401

# Sections to come: one module each beside cartpole.py,
# with a run(...) -> (markdown lines, errors), a name below, a group in GROUPS
# and a call in main(); measured with shoal.bench.timing like the others.
PYTHON_SECTION = "Python-env section"  # a group of its own, reported in its own table
ENVS_SECTION = "first-party envs section"  # agent-steps/s of every env (shoal.bench.envs)
MUJOCO_SECTION = "MuJoCo section"  # native MuJoCo vs EnvPool vs gymnasium vs C loop (shoal.bench.mujoco)
ATARI_SECTION = "Atari section"  # native Atari vs EnvPool vs AtariVectorEnv vs gymnasium vs bare ALE
SECTIONS = (PYTHON_SECTION, ENVS_SECTION, MUJOCO_SECTION, ATARI_SECTION)
GROUPS = {
    "c_loop": [cartpole.C_LOOP],
    "serial": [cartpole.SERIAL],
    "sync": [cartpole.PROC_SYNC],
    "async": [cartpole.PROC_ASYNC],
    "shoal": list(cartpole.SHOAL),
    "gym_sync": [cartpole.GYM_SYNC],
    "gym_async": [cartpole.GYM_ASYNC],
    "gymnasium": [cartpole.GYM_SYNC, cartpole.GYM_ASYNC],
    "envpool_sync": [cartpole.ENVPOOL_SYNC],
    "envpool_async": [cartpole.ENVPOOL_ASYNC],
    "envpool": list(cartpole.ENVPOOL),
    "python": [PYTHON_SECTION],
    "envs": [ENVS_SECTION],
    "mujoco": [MUJOCO_SECTION],
    "atari": [ATARI_SECTION],   # not in "all": its full run takes minutes (shoal.bench.atari)
    "all": [cartpole.C_LOOP, *cartpole.SHOAL, cartpole.GYM_SYNC, cartpole.GYM_ASYNC, *cartpole.ENVPOOL,
            PYTHON_SECTION, ENVS_SECTION, MUJOCO_SECTION],
}


def main_sweep(s: Settings) -> bool:
    """Whether any contender of the main (native CartPole) table is selected."""
    return any(c not in SECTIONS for c in s.contenders)


def header(cores: int, envpool_ver: str | None, s: Settings, argv: list[str] | None = None) -> list[str]:
    """Title, date, machine, versions, the command and (for the main table)
    the method."""
    import gymnasium

    import shoal

    return [
        f"# shoal benchmark: {ENV} steps/s" if main_sweep(s) else
        f"# shoal benchmark: {', '.join(c for c in SECTIONS if c in s.contenders)} steps/s",
        "",
        f"- date: {datetime.datetime.now().astimezone().isoformat(timespec='seconds')}",
        f"- {cpu_line(cores)} (os.cpu_count() = {os.cpu_count()})",
        f"- Python {platform.python_version()}, numpy {np.__version__}, gymnasium "
        f"{gymnasium.__version__}, EnvPool {envpool_ver or 'not installed (skipped)'}, "
        f"shoal {shoal.__version__}",
        "- command: `" + " ".join(["shoal bench", *(shlex.quote(a) for a in
                                                     (sys.argv[1:] if argv is None else argv))]) + "`",
    ] + ([
        f"- method: {s.seconds:g} s per run ({s.gym_seconds:g} s for gymnasium), "
        f"{s.warmup:g} s warm-up, median of {s.repeats}; actions pre-sampled "
        f"({ACTION_TABLE_ROWS} arrays cycled); ratio = rate / single-core C loop at the same num_envs",
    ] if main_sweep(s) else [])


# ---- command line -------------------------------------------------------------------------
def int_list(text: str) -> list[int]:
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated ints, got {text!r}") from None
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"expected positive ints, got {text!r}")
    return values


def contender_list(text: str) -> list[str]:
    names = []
    for key in (k.strip().lower() for k in text.split(",") if k.strip()):
        if key not in GROUPS:
            raise argparse.ArgumentTypeError(f"unknown contender {key!r}; choose from {', '.join(GROUPS)}")
        names += GROUPS[key]
    if not names:
        raise argparse.ArgumentTypeError(f"expected at least one of {', '.join(GROUPS)}")
    return names


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="shoal bench",
        description=f"{ENV} steps/s of shoal vs gymnasium vs EnvPool vs a plain C loop, then the "
                    f"Python-env, first-party-env and MuJoCo sections, in one run (--contenders picks; "
                    f"all,atari adds the Atari section).")
    p.add_argument("--num-envs", type=int_list, default=None,
                   help="comma-separated num_envs sweep (default 64,1024,4096,16384,65536; quick: 64,1024)")
    p.add_argument("--workers", type=int_list, default=None,
                   help="comma-separated worker / thread counts (default: 1 and the available cores)")
    p.add_argument("--seconds", type=finite_float, default=None, help="duration of one run (default 1.0; quick: 0.2)")
    p.add_argument("--gym-seconds", type=finite_float, default=None,
                   help="duration of one gymnasium run (default: min(seconds, 0.5))")
    p.add_argument("--warmup", type=finite_float, default=None, help="warm-up per config (default 0.2; quick: 0.05)")
    p.add_argument("--repeats", type=int, default=None, help="runs per config, median reported (default 3; quick: 1)")
    p.add_argument("--gym-max-envs", type=int, default=None,
                   help="largest num_envs for gymnasium's slow vector envs (default 64; quick: 8)")
    p.add_argument("--contenders", type=contender_list, default=GROUPS["all"],
                   help=f"comma-separated subset of: {', '.join(GROUPS)} (default all; the C loop, "
                        f"the reference of every ratio, always runs with the main table; "
                        f"\"python\" is the Python-env section and \"envs\" the first-party envs section, "
                        f"each with a table of its own; \"atari\", the Atari section, is not in \"all\")")
    p.add_argument("--python-num-envs", type=int_list, default=None,
                   help="num_envs of the Python-env section (default 16,64; quick: 16)")
    p.add_argument("--python-rounds", type=int, default=None,
                   help="interleaved rounds per contender in the Python-env section (default 7; quick: 2)")
    p.add_argument("--python-seconds", type=finite_float, default=None,
                   help="duration of one round in the Python-env section (default 0.5; quick: 0.1)")
    mujoco.add_arguments(p, int_list)  # --mujoco-envs, --mujoco-num-envs, --mujoco-rounds, --mujoco-seconds
    atari.add_arguments(p, int_list)   # --atari-games, --atari-num-envs, --atari-rounds, --atari-seconds
    p.add_argument("--quick", action="store_true", help="smoke mode: tiny sweep, short runs, one repeat")
    p.add_argument("--out", help="also write the markdown report to this file")
    progress.add_argument(p, "the measurements")
    return p


def settings(args: argparse.Namespace, cores: int) -> Settings:
    """Fill unset arguments from the quick or full defaults."""
    quick = args.quick

    def pick(value, full, small):
        return value if value is not None else (small if quick else full)

    seconds = pick(args.seconds, 1.0, 0.2)
    s = Settings(
        num_envs=pick(args.num_envs, [64, 1024, 4096, 16384, 65536], [64, 1024]),
        workers=args.workers or sorted({1, cores}),
        seconds=seconds,
        gym_seconds=args.gym_seconds if args.gym_seconds is not None else min(seconds, 0.5),
        warmup=pick(args.warmup, 0.2, 0.05),
        repeats=pick(args.repeats, 3, 1),
        gym_max_envs=pick(args.gym_max_envs, 64, 8),
        contenders=args.contenders,
        python_num_envs=pick(args.python_num_envs, [16, 64], [16]),
        python_rounds=pick(args.python_rounds, 7, 2),
        python_seconds=pick(args.python_seconds, 0.5, 0.1),
    )
    if (s.seconds <= 0 or s.gym_seconds <= 0 or s.python_seconds <= 0 or s.warmup < 0
            or s.repeats < 1 or s.gym_max_envs < 1 or s.python_rounds < 1):
        raise SystemExit("shoal bench: --seconds/--gym-seconds/--python-seconds must be > 0, "
                         "--warmup >= 0, --repeats, --gym-max-envs and --python-rounds >= 1")
    return s


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    from shoal.pool import available_cores

    cores = available_cores()
    s = settings(args, cores)
    # Every value checked before anything runs (a bad section flag or --out
    # found after minutes of measuring loses them)
    ms = mujoco.settings(args, sorted(set(s.workers)), s.warmup, s.gym_max_envs) \
        if MUJOCO_SECTION in s.contenders else None
    atari_settings = atari.settings(args, sorted(set(s.workers)), s.warmup, s.gym_max_envs) \
        if ATARI_SECTION in s.contenders else None
    problem = config.output_file_problem(args.out, example="bench.md") if args.out else None
    if problem:
        raise SystemExit(f"shoal bench: --out {args.out}: {problem}")
    envpool_ver = envpool_version()
    notes = []
    if envpool_ver is None and set(s.contenders) & set(ENVPOOL):
        notes.append("EnvPool is not installed (`pip install envpool`): its rows are skipped.")

    report, errors = header(cores, envpool_ver, s, argv), []
    python_section, envs_section = PYTHON_SECTION in s.contenders, ENVS_SECTION in s.contenders
    with progress.Progress(args.progress) as shown:   # on stderr; ended before the report is printed
        if python_section:  # first: it forks, and must not while EnvPool's threads exist
            python_lines, errors = python_envs.run(s, cores, shown)
        if envs_section:  # also forks: before EnvPool too
            envs_lines, envs_errors = envs.run(s.seconds, s.warmup, s.repeats, cores, progress=shown)
            errors += envs_errors
        if MUJOCO_SECTION in s.contenders:  # forks too; builds its EnvPools after its forks, per group
            mujoco_lines, mujoco_errors = mujoco.run(ms, cores, envpool_ver, shown)
            errors += mujoco_errors
        if ATARI_SECTION in s.contenders:  # forks too; builds its threaded contenders after its forks, per group
            atari_lines, atari_errors = atari.run(atari_settings, cores, envpool_ver, shown)
            errors += atari_errors
        if main_sweep(s):
            main_lines, main_errors = cartpole.run(s, cores, envpool_ver, shown)
            errors += main_errors
    if main_sweep(s):
        report += [""] + main_lines
    if python_section:
        report += [""] + python_lines
    if envs_section:
        report += [""] + envs_lines
    if MUJOCO_SECTION in s.contenders:
        report += [""] + mujoco_lines
    if ATARI_SECTION in s.contenders:
        report += [""] + atari_lines
    if notes or errors:
        report += ["", "## Notes", ""] + [f"- {line}" for line in notes + errors]
    text = "\n".join(report) + "\n"
    # Neither output may cost the other: a stdout closed early (`| true`)
    # still gets --out written, a full disk still gets the report printed.
    out_error = write_whole(args.out, text) if args.out else None
    try:
        print(text, end="", flush=True)
    except BrokenPipeError:   # the reader left; the exit's own flush must not fail again
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    if out_error is not None:
        print(f"shoal bench: could not write --out {args.out} ({out_error.strerror or out_error}); "
              f"the report is on stdout", file=sys.stderr)
    return 1 if errors or out_error is not None else 0


def write_whole(path: str, text: str) -> OSError | None:
    """Write `text` to `path` whole or not at all (a file already there is
    kept if the write fails): None, or the OSError."""
    partial = f"{path}.tmp{os.getpid()}"
    try:
        with open(partial, "w") as f:
            f.write(text)
        os.replace(partial, path)
    except OSError as e:
        try:
            os.unlink(partial)
        except OSError:
            pass
        return e
    return None
