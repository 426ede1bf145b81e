"""What the sections measured in interleaved groups share: the Python-env,
MuJoCo and Atari sections of `shoal bench`.

A group is every contender at one env and num_envs, built together and
measured in interleaved rounds (shoal.bench.timing.interleaved), so that
drift in the machine's load hits every contender alike.

  - `GroupSettings`, `Row`: a section's sweep; a Result with its env and batch size;
  - `measure_groups` / `measure_group`: open a group's contenders (openers
    from shoal.bench.steppers), measure them, record what fails, show progress;
  - `native_rows`, `gym_rows`, `threaded_rows`: the contenders every
    env family has (shoal's native pools, gymnasium's vectorizers and
    shoal.pool.AsyncVectorEnv, a threaded library at several configurations);
  - `GroupTable`: a section's table (a computed "x cores" row per one-core
    reference row, ratios to it) and its target lines;
  - `Options`, `name_list`: a section's --<name>-... command-line options and defaults;
  - `measured`: a section's report, with the machine's load around the run.

This module imports shoal.bench.timing and shoal.bench.steppers only (and shoal.progress).
"""
from __future__ import annotations

import argparse
import contextlib
import gc
import math
from dataclasses import dataclass, field
from functools import partial
from typing import Callable

from shoal.bench.steppers import c_loop, envpool_env, gym_vector, native_pool
from shoal.bench.timing import Result, format_rate, interleaved, load_average
from shoal.progress import Progress

# Contenders (table labels) that several sections have.
SERIAL = "shoal Serial"
NATIVE_SYNC = "shoal native sync"
NATIVE_ASYNC = "shoal native async"
NATIVE = (SERIAL, NATIVE_SYNC, NATIVE_ASYNC)
ENVPOOL_SYNC = "EnvPool sync"
ENVPOOL_ASYNC = "EnvPool async"
ENVPOOL = (ENVPOOL_SYNC, ENVPOOL_ASYNC)
GYM_SYNC = "gymnasium SyncVectorEnv"
GYM_ASYNC = "gymnasium AsyncVectorEnv"
PY_SHOAL = "shoal.pool.AsyncVectorEnv"


def finite_float(text: str) -> float:
    """An argparse type: a float that is a number (a NaN or infinite duration
    would never end a timing loop)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"expected a finite number, got {text!r}")
    return value


@dataclass
class GroupSettings:
    """A section's sweep (filled from the command line by `Options.settings`);
    a section's own class adds its envs (or games)."""
    num_envs: list[int]
    rounds: int
    seconds: float
    warmup: float
    workers: list[int]   # sync thread counts of the threaded contenders (and the cores)
    gym_max_envs: int


@dataclass
class Row(Result):
    """A Result with the env and the batch size (envs per step or recv)."""
    env: str = ""
    batch: int = 0


# ---- the contenders of a group: (label, workers, batch, opener) ----------------------------
def native_rows(spec, n: int, cores: int, c_loop_label: str) -> list[tuple]:
    """The native env's C loop (one core), Serial, Multiprocessing sync with
    one worker per core (at most n) and async with batch n // 2 (an even
    worker count: two batches)."""
    w = min(cores, n)
    wa = w + w % 2
    rows = [(c_loop_label, 1, n, partial(c_loop, spec, n)),
            (SERIAL, 1, n, partial(native_pool, spec, n)),
            (NATIVE_SYNC, w, n, partial(native_pool, spec, n, w))]
    if n % 2 == 0 and wa <= n:
        rows.append((NATIVE_ASYNC, wa, n // 2, partial(native_pool, spec, n, wa, n // 2)))
    return rows


def gym_rows(make_env: Callable[[], object], spec, n: int, cores: int) -> list[tuple]:
    """gymnasium's Sync / AsyncVectorEnv (one process per env) and
    shoal.pool.AsyncVectorEnv (one worker per core) over n `make_env()`."""
    return [(GYM_SYNC, 1, n, partial(gym_vector, make_env, spec, n, "sync")),
            (GYM_ASYNC, n, n, partial(gym_vector, make_env, spec, n, "async")),
            (PY_SHOAL, min(cores, n), n, partial(gym_vector, make_env, spec, n, "shoal", min(cores, n)))]


def threaded_rows(labels: tuple[str, str], opener: Callable, n: int, threads: list[int], cores: int) -> list[tuple]:
    """A threaded vector env, opener(n, batch, threads): sync at each thread
    count, async (batch n // 2) at the cores."""
    rows = [(labels[0], t, n, partial(opener, n, n, t)) for t in threads]
    if n % 2 == 0:
        rows.append((labels[1], cores, n // 2, partial(opener, n, n // 2, cores)))
    return rows


def envpool_rows(task_id: str, spec, n: int, threads: list[int], cores: int, **kwargs) -> list[tuple]:
    """EnvPool's `task_id` as `threaded_rows` (kwargs: its env options)."""
    return threaded_rows(ENVPOOL, partial(envpool_env, task_id, spec, **kwargs), n, threads, cores)


# ---- measuring -----------------------------------------------------------------------------
def measure_group(plan: list[tuple], n: int, env: str, rounds: int, seconds: float, warmup: float,
                  title: str, progress) -> tuple[list[Row], list[str]]:
    """Every contender of `plan` (at env `env` and n envs), open together,
    measured in interleaved rounds; a contender that fails to build is an
    error (prefixed `title`), the rest are measured."""
    what = f"{env} num_envs={n}" if env else f"num_envs={n}"
    rows, errors, steps = [], [], []
    progress.start(f"{what}: {len(plan)} contenders x {rounds} rounds of {seconds:g} s")
    try:
        with contextlib.ExitStack() as stack:
            opened = []
            for label, w, batch, opener in plan:
                try:
                    steps.append(stack.enter_context(opener()))
                    opened.append((label, w, batch))
                except Exception as e:
                    errors.append(f"{title} {what} {label} (workers {w}): {type(e).__name__}: {e}")
            rates = interleaved(steps, rounds, seconds, warmup)
            rows = [Row(label, n, w, r, env=env, batch=batch) for (label, w, batch), r in zip(opened, rates)]
    except Exception as e:
        errors.append(f"{title} {what}: {type(e).__name__}: {e}")
        progress.done(f"FAILED: {e}")
        return [], errors
    finally:
        steps.clear()   # the step functions hold the envs: threads end with their last reference
        gc.collect()
    progress.done("done; rates per round:")
    for r in rows:
        progress.log(f"    {r.contender}, workers={r.workers}, batch={r.batch}: "
                     f"{', '.join(format_rate(rate) for rate in r.rates)}")
    return rows, errors


def measure_groups(name: str, title: str, groups: list[tuple[str, int, Callable[[], list[tuple]]]],
                   rounds: int, seconds: float, warmup: float, progress) -> tuple[list[Row], list[str]]:
    """`measure_group` of each (env, n, plan()) in turn, as progress task `name`."""
    rows, errors = [], []
    progress.task(name, len(groups))
    for env, n, plan in groups:
        group, group_errors = measure_group(plan(), n, env, rounds, seconds, warmup, title, progress)
        rows += group
        errors += group_errors
    return rows, errors


def measured(missing: str | None, heading: str, measure: Callable, report: Callable[..., list[str]],
             progress=None) -> tuple[list[str], list[str]]:
    """A section's (markdown lines, errors): `heading` and why it was
    skipped when what it needs is `missing`; else measure(progress) ->
    (rows, errors, *extra), then report(rows, *extra), with the load average
    around the measuring as the report's third line (under its heading).
    progress: a shoal.progress.Progress (default: plain lines on stderr)."""
    if missing is not None:
        return [heading, "", f"Skipped: {missing}"], []
    (rows, errors, *extra), load = load_average(partial(measure, progress or Progress("plain")))
    lines = report(rows, *extra)
    lines.insert(2, load)
    return lines, errors


# ---- the report ----------------------------------------------------------------------------
def groups(rows: list[Row]) -> list[tuple[str, int]]:
    """(env, num_envs) of every group, in the order of the rows."""
    return list(dict.fromkeys((r.env, r.num_envs) for r in rows))


def best(rows: list[Row], env: str, n: int, labels) -> Row | None:
    """The fastest row at env and n envs among contenders `labels`."""
    found = [r for r in rows if r.env == env and r.num_envs == n and r.contender in labels and r.rates]
    return max(found, key=lambda r: r.median) if found else None


@dataclass(frozen=True)
class GroupTable:
    """A section's table: a row per contender and group, ratios to the
    one-core reference row (`reference`, named `reference_name` in the
    columns) and to it times the cores (a computed row, `computed`)."""
    key: str                     # the first column: "env", "game"
    reference: str
    reference_name: str
    computed: str
    order: list[str]             # contender labels in table order
    threaded: tuple[str, ...] = field(default=ENVPOOL)   # labels whose workers are threads

    def with_computed_limit(self, rows: list[Row], cores: int) -> list[Row]:
        """Add a computed row (rate x cores) per reference row; sort into table order."""
        extra = [Row(self.computed, r.num_envs, cores, [rate * cores for rate in r.rates], env=r.env,
                     batch=r.batch) for r in rows if r.contender == self.reference]
        envs = list(dict.fromkeys(r.env for r in rows))
        return sorted(rows + extra, key=lambda r: (envs.index(r.env), r.num_envs, self.order.index(r.contender),
                                                   r.workers, r.batch))

    def describe(self, r: Row) -> str:
        config = f"{r.workers} {'thread' if r.contender in self.threaded else 'worker'}{'s' if r.workers != 1 else ''}"
        if r.batch != r.num_envs:
            config += f", batch {r.batch}"
        return f"{r.contender}, {config}"

    def table(self, rows: list[Row], cores: int) -> list[str]:
        lines = [f"| {self.key} | num_envs | contender | workers / threads | batch | env-steps/s (median) | spread "
                 f"| vs {self.reference_name} 1 core | vs {self.reference_name} x {cores} cores |",
                 "|---|---:|---|---:|---:|---:|---:|---:|---:|"]
        for r in rows:
            a = best(rows, r.env, r.num_envs, [self.reference])
            one = f"{r.median / a.median:.3f}" if a and a.median else "-"
            allc = f"{r.median / (a.median * cores):.3f}" if a and a.median else "-"
            lines.append(f"| {r.env} | {r.num_envs} | {r.contender} | {r.workers} | {r.batch} "
                         f"| {format_rate(r.median)} | {r.spread:.0%} | {one} | {allc} |")
        return lines

    def ratio(self, name: str, required: float, unit: str, num: Row | None, den: Row | None,
              cores: int | None = None) -> tuple | None:
        """A target check: num / den (den x cores when cores is given), or
        None when a row is missing or den is zero."""
        if num is None or den is None or not den.median:
            return None
        scale = cores or 1
        detail = f"{format_rate(num.median)} ({self.describe(num)}) / {format_rate(den.median * scale)}"
        if cores is None:
            detail += f" ({self.describe(den)})"
        return name, required, unit, num.median / (den.median * scale), detail

    def targets(self, checks: list[tuple[str, int, tuple | None]], min_envs: int) -> tuple[list[str], int, int]:
        """The target table of (env, n, `ratio`) checks, judged from min_envs
        envs up: (lines, targets met, targets judged)."""
        lines = [f"| {self.key} | num_envs | target | required | measured | met |", "|---|---:|---|---:|---:|---|"]
        met_count = judged = 0
        for env, n, check in checks:
            if check is None:
                continue
            name, required, unit, ratio, detail = check
            if n >= min_envs:
                judged += 1
                met_count += ratio >= required
                met = "yes" if ratio >= required else "**no**"
            else:
                met = f"n/a (< {min_envs} envs)"
            lines.append(f"| {env} | {n} | {name} | >= {required:g}{unit} | {ratio:.2f}{unit}: {detail} | {met} |")
        return lines, met_count, judged

    def body(self, rows: list[Row], cores: int, targets: Callable, intro: str) -> list[str]:
        """The table and the targets (of the rows with the computed ones),
        under a line "<intro>: M of N met"; targets(rows, cores) -> (lines,
        met, judged)."""
        if not rows:
            return ["", "Nothing measured."]
        rows = self.with_computed_limit(rows, cores)
        target_lines, met, judged = targets(rows, cores)
        return [""] + self.table(rows, cores) + ["", f"{intro}: {met} of {judged} met", ""] + target_lines


# ---- command line ----------------------------------------------------------------------------
def name_list(text: str, names, unknown: Callable[[str], str], noun: str) -> list[str]:
    """Comma-separated names, matched to `names` whatever their case (their
    own spelling kept); unknown(key): the error for a name not among them."""
    known = {n.lower(): n for n in names}
    found = []
    for key in (k.strip() for k in text.split(",") if k.strip()):
        if key.lower() not in known:
            raise argparse.ArgumentTypeError(unknown(key))
        found.append(known[key.lower()])
    if not found:
        raise argparse.ArgumentTypeError(f"expected comma-separated {noun} names")
    return found


@dataclass(frozen=True)
class Options:
    """A section's options --<name>-<items>, --<name>-num-envs, --<name>-rounds
    and --<name>-seconds; defaults: option -> (full, quick)."""
    name: str                    # "mujoco"
    title: str                   # "MuJoCo": "... of the MuJoCo section"
    items: str                   # "envs", "games"
    parse_items: Callable[[str], list[str]]
    defaults: dict

    def add_arguments(self, p: argparse.ArgumentParser, int_list) -> None:
        d, where = self.defaults, f"the {self.title} section"
        text = lambda values: ",".join(map(str, values))  # noqa: E731
        p.add_argument(f"--{self.name}-{self.items}", type=self.parse_items, default=None,
                       help=f"{self.items} of {where} (default {text(d[self.items][0])}; "
                            f"quick: {text(d[self.items][1])})")
        p.add_argument(f"--{self.name}-num-envs", type=int_list, default=None,
                       help=f"num_envs of {where} (default {text(d['num_envs'][0])}; "
                            f"quick: {text(d['num_envs'][1])})")
        p.add_argument(f"--{self.name}-rounds", type=int, default=None,
                       help=f"interleaved rounds per contender in {where} (default {d['rounds'][0]}; "
                            f"quick: {d['rounds'][1]})")
        p.add_argument(f"--{self.name}-seconds", type=finite_float, default=None,
                       help=f"duration of one round in {where} (default {d['seconds'][0]:g}; "
                            f"quick: {d['seconds'][1]:g})")

    def read(self, args: argparse.Namespace) -> dict:
        """The options' values, unset ones from the quick or full defaults."""
        values = {}
        for key, (full, quick) in self.defaults.items():
            value = getattr(args, f"{self.name}_{key}")
            if value is None:
                value = quick if args.quick else full
                value = list(value) if isinstance(value, (list, tuple)) else value
            values[key] = value
        if values["rounds"] < 1 or values["seconds"] <= 0:
            raise SystemExit(f"shoal bench: --{self.name}-rounds must be >= 1 and --{self.name}-seconds > 0")
        return values

    def settings(self, cls, args: argparse.Namespace, workers: list[int], warmup: float,
                 gym_max_envs: int) -> GroupSettings:
        """A `cls` (a GroupSettings) of the options and the shared ones."""
        return cls(**self.read(args), warmup=warmup, workers=list(workers), gym_max_envs=gym_max_envs)
