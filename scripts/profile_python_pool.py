"""Before/after measurement and profile of shoal.pool.AsyncVectorEnv (the
Python-env pool) against gymnasium's SyncVectorEnv.

    python -P scripts/profile_python_pool.py bench --env pong --num-envs 8 16
    python -P scripts/profile_python_pool.py profile --env pong --num-envs 8 --which before after
    python -P scripts/profile_python_pool.py bench --env cartpole halfcheetah --num-envs 16 64

"before" is pool/python_pool.py as it is at a git ref (--before-ref,
default HEAD), "after" the working tree's; both are loaded from source as
separate modules into this one process (they share the compiled
shoal.pool._native, so a change to _native.pyx / shoal_sync.h is in both),
so both, and gymnasium's SyncVectorEnv, are measured by the same script in
interleaved rounds: every round times each contender for --seconds, the
round's order rotated by one each round, so that drift in the machine's load
hits all alike. Workers are forked (the default start method on Linux).

bench reports per contender the median env-steps/s over the rounds, each
round's rate, the CPU time per env-step of the parent and of the workers
(from /proc; robust to other load, unlike rates), the median of the
per-round ratios after / before, and shoal / (Sync x cores): Sync's rate is
gymnasium's one process, one core, so Sync x cores is what a vectorizer
could reach with the machine to itself. It prints the load average before
and after: on a shared machine the rates say as much about the other work as
about the pool. In particular, with sched_autogroup_enabled (the default on
most distributions) every session gets a fair share of the CPUs as a group:
while another session keeps one of 2 cores busy, this whole process tree
(parent and workers) gets about one core, the workers run by turns, the
rate is about 1 / (CPU time per env-step), and shoal / (Sync x 2) cannot
exceed about 0.5 whatever the pool does.

profile times each hand-off of a run of steps (the parent's send, each
worker's wake-up and done, the parent's wake-up, and on which CPU each ran)
and prints medians: how long a worker takes to wake, how long it steps its
block, how far apart the workers finish (imbalance), how long the parent
takes to return from its wait once the last worker is done and then to send
the next step (its turnaround), how often the workers shared a CPU.
--cprofile adds cProfile tables of the parent and of worker 0.

Variants: --variant NAME:ATTR=VALUE[,ATTR=VALUE] adds a contender running
the working tree's module with module constants changed (e.g.
"parent-yields:LONG_STEP_YIELD_S=0.002" or
"worker-sleeps:WORKER_LONG_STEP_YIELD_S=20e-6").
"""
from __future__ import annotations

import argparse
import contextlib
import cProfile
import ctypes
import io
import json
import os
import pstats
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import types
from functools import partial
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
POOL_FILE = "pool/python_pool.py"
SYNC = "gymnasium Sync"


# ---- envs ------------------------------------------------------------------------
def make_pong():
    """The issue's Atari stack: ALE Pong v5 (frameskip 1) + AtariPreprocessing
    (frame_skip 4) + FrameStackObservation(4)."""
    import ale_py
    import gymnasium
    gymnasium.register_envs(ale_py)
    return gymnasium.wrappers.FrameStackObservation(
        gymnasium.wrappers.AtariPreprocessing(gymnasium.make("ALE/Pong-v5", frameskip=1), frame_skip=4),
        stack_size=4)


def make_gym(env_id: str):
    import gymnasium
    return gymnasium.make(env_id)


ENVS = {"pong": make_pong,
        "cartpole": partial(make_gym, "CartPole-v1"),
        "halfcheetah": partial(make_gym, "HalfCheetah-v5")}


# ---- the pool's module, at a git ref or from the working tree ------------------------
def load_pool_module(name: str, source: str, origin: str, constants: dict | None = None):
    """pool/python_pool.py's `source` as a fresh module `name` (its own
    globals, so constants can differ per contender)."""
    module = types.ModuleType(name)
    module.__file__ = origin
    sys.modules[name] = module
    exec(compile(source, origin, "exec"), module.__dict__)
    for attr, value in (constants or {}).items():
        if not hasattr(module, attr):
            raise SystemExit(f"{origin} has no attribute {attr}")
        setattr(module, attr, type(getattr(module, attr))(value))
    return module


def source_at(ref: str) -> str:
    return subprocess.run(["git", "-C", str(ROOT), "show", f"{ref}:{POOL_FILE}"],
                          check=True, capture_output=True, text=True).stdout


def pool_modules(args) -> dict[str, types.ModuleType]:
    """{label: module} for before, after and each --variant."""
    work = (ROOT / POOL_FILE).read_text()
    modules = {}
    if "before" in args.which:
        modules[f"before ({args.before_ref})"] = load_pool_module(
            "shoal.pool._python_pool_before", source_at(args.before_ref), f"{args.before_ref}:{POOL_FILE}")
    if "after" in args.which:
        modules["after (working tree)"] = load_pool_module(
            "shoal.pool._python_pool_after", work, str(ROOT / POOL_FILE))
    for k, spec in enumerate(args.variant):
        label, _, assigns = spec.partition(":")
        constants = dict(a.split("=", 1) for a in assigns.split(",") if a)
        constants = {key: float(value) for key, value in constants.items()}
        modules[f"after+{label}"] = load_pool_module(f"shoal.pool._python_pool_variant{k}", work,
                                                     str(ROOT / POOL_FILE), constants)
    return modules


# ---- CPU time of processes ---------------------------------------------------------
_TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pids) -> float:
    """utime + stime of these processes (from /proc; 10 ms resolution)."""
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])
        except OSError:
            pass
    return total / _TICK


def worker_pids(envs) -> list[int]:
    workers = getattr(envs, "_workers", None)
    return [p.pid for p in workers.processes] if workers is not None else []


# ---- bench -------------------------------------------------------------------------
def action_table(envs, rows: int = 16) -> list:
    envs.action_space.seed(0)
    return [envs.action_space.sample() for _ in range(rows)]


def open_contenders(stack: contextlib.ExitStack, env: str, n: int, workers: int, modules: dict,
                    with_sync: bool = True) -> dict:
    """{label: vector env}, all reset with seed 0."""
    import gymnasium
    fns = [ENVS[env]] * n
    contenders = {}
    if with_sync:
        contenders[SYNC] = gymnasium.vector.SyncVectorEnv(fns)
    for label, module in modules.items():
        contenders[label] = module.AsyncVectorEnv(fns, num_workers=workers, context="fork")
    for envs in contenders.values():
        stack.callback(envs.close)
        envs.reset(seed=0)
    return contenders


def time_steps(envs, actions: list, seconds: float) -> tuple[int, float, float, float]:
    """Step for `seconds`: (steps, wall s, parent CPU s, workers' CPU s)."""
    pids = worker_pids(envs)
    clock = time.perf_counter
    steps, k = 0, len(actions)
    w0, c0 = cpu_seconds(pids), time.process_time()
    start = clock()
    deadline = start + seconds
    while clock() < deadline:
        envs.step(actions[steps % k])
        steps += 1
    wall = clock() - start
    return steps, wall, time.process_time() - c0, cpu_seconds(pids) - w0


def bench(args) -> None:
    from shoal.pool import available_cores
    cores = available_cores()
    modules = pool_modules(args)
    print(f"# shoal.pool.AsyncVectorEnv before/after; {cores} cores, num_workers={args.workers}, "
          f"{args.rounds} interleaved rounds of {args.seconds:g} s after {args.warmup:g} s warm-up each")
    for env in args.env:
        for n in args.num_envs:
            load0 = os.getloadavg()
            with contextlib.ExitStack() as stack:
                contenders = open_contenders(stack, env, n, args.workers, modules)
                labels = list(contenders)
                actions = {label: action_table(envs) for label, envs in contenders.items()}
                for label, envs in contenders.items():
                    time_steps(envs, actions[label], args.warmup)
                rates = {label: [] for label in labels}
                parent_us = {label: [] for label in labels}
                worker_us = {label: [] for label in labels}
                loads = []
                for r in range(args.rounds):
                    for j in range(len(labels)):
                        label = labels[(r + j) % len(labels)]
                        steps, wall, parent, workers = time_steps(contenders[label], actions[label], args.seconds)
                        rates[label].append(steps * n / wall)
                        parent_us[label].append(parent / (steps * n) * 1e6)
                        worker_us[label].append(workers / (steps * n) * 1e6)
                    loads.append(os.getloadavg()[0])
            load1 = os.getloadavg()
            print(f"\n## {env}, num_envs={n}, num_workers={args.workers}")
            print(f"load average (1, 5, 15 min): before {fmt_load(load0)}, after {fmt_load(load1)}; "
                  f"1-min load after each round: {', '.join(f'{x:.1f}' for x in loads)}")
            sync = statistics.median(rates[SYNC])
            print(f"\n| contender | env-steps/s (median) | per round | parent CPU us/env-step "
                  f"| workers' CPU us/env-step | / (Sync x {cores}) |")
            print("|---|---:|---|---:|---:|---:|")
            for label in labels:
                med = statistics.median(rates[label])
                print(f"| {label} | {med:,.0f} | {', '.join(f'{x:,.0f}' for x in rates[label])} "
                      f"| {statistics.median(parent_us[label]):.1f} | {statistics.median(worker_us[label]):.1f} "
                      f"| {med / (sync * cores):.2f} |")
            before = [label for label in labels if label.startswith("before")]
            for label in labels:
                if before and label != SYNC and label != before[0]:
                    paired = [a / b for a, b in zip(rates[label], rates[before[0]])]
                    print(f"- {label} / {before[0]}: median of per-round ratios {statistics.median(paired):.3f} "
                          f"(rounds: {', '.join(f'{x:.2f}' for x in paired)}); ratio of medians "
                          f"{statistics.median(rates[label]) / statistics.median(rates[before[0]]):.3f}")
            for label in labels:
                if label != SYNC:
                    paired = [a / (b * cores) for a, b in zip(rates[label], rates[SYNC])]
                    print(f"- {label} / (Sync x {cores}): median of per-round ratios {statistics.median(paired):.3f}")
            sys.stdout.flush()


def fmt_load(load) -> str:
    return ", ".join(f"{x:.2f}" for x in load)


# ---- profile -----------------------------------------------------------------------
class _Timeline:
    """Stands in for a pool module's `_native`: logs (event, ns, cpu) around
    the hand-off calls, in the parent and (inherited by fork) in the workers."""

    def __init__(self, native):
        self.native, self.log = native, []
        self.clock = time.perf_counter_ns
        self.cpu = ctypes.CDLL(None).sched_getcpu

    def __getattr__(self, name):
        return getattr(self.native, name)

    def _mark(self, event):
        self.log.append((event, self.clock(), self.cpu()))

    def send(self, *a):
        self._mark("send")
        result = self.native.send(*a)
        self._mark("sent")
        return result

    def wait_done(self, *a):
        result = self.native.wait_done(*a)
        self._mark("parent_wake")
        return result

    def next_request(self, *a):
        result = self.native.next_request(*a)
        self._mark("wake")
        return result

    def report_done(self, *a):
        self._mark("done")
        return self.native.report_done(*a)


def profile(args) -> None:
    modules = pool_modules(args)
    for env in args.env:
        for n in args.num_envs:
            for label, module in modules.items():
                profile_one(args, env, n, label, module)


def profile_one(args, env: str, n: int, label: str, module) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="shoal_profile_"))
    timeline = _Timeline(module._native)
    module._native = timeline
    worker_main = module._worker_main

    def traced_worker_main(worker, *a):
        timeline.log.clear()
        profiler = cProfile.Profile(time.perf_counter) if args.cprofile and worker == 0 else None
        try:
            if profiler is not None:
                profiler.runcall(worker_main, worker, *a)
            else:
                worker_main(worker, *a)
        finally:
            (tmp / f"worker{worker}.json").write_text(json.dumps(timeline.log))
            if profiler is not None:
                profiler.dump_stats(tmp / f"worker{worker}.prof")

    module._worker_main = traced_worker_main
    try:
        with contextlib.ExitStack() as stack:
            envs = open_contenders(stack, env, n, args.workers, {label: module}, with_sync=False)[label]
            actions = action_table(envs)
            time_steps(envs, actions, args.warmup)
            pids = worker_pids(envs)
            profiler = cProfile.Profile(time.perf_counter) if args.cprofile else None
            timeline.log.clear()
            load = os.getloadavg()[0]
            if profiler is not None:
                profiler.enable()
            steps, wall, parent_cpu, workers_cpu = time_steps(envs, actions, args.seconds)
            if profiler is not None:
                profiler.disable()
            parent_log = list(timeline.log)
        worker_logs = [json.loads((tmp / f"worker{w}.json").read_text()) for w in range(len(pids))]
    finally:
        module._native, module._worker_main = timeline.native, worker_main
    print(f"\n## profile: {label}, {env}, num_envs={n}, num_workers={len(pids)}; load {load:.2f}")
    print(f"{steps * n / wall:,.0f} env-steps/s, {wall / steps * 1e3:.2f} ms per step; CPU per step: "
          f"parent {parent_cpu / steps * 1e6:.0f} us, workers {workers_cpu / steps * 1e6:.0f} us")
    print_timeline(parent_log, worker_logs)
    if args.cprofile:
        for what, stats in (("parent", profiler), ("worker 0", str(tmp / "worker0.prof"))):
            out = io.StringIO()
            pstats.Stats(stats, stream=out).sort_stats("tottime").print_stats(args.cprofile_lines)
            print(f"\n### cProfile, {what} (tottime)\n{out.getvalue()}")
    shutil.rmtree(tmp, ignore_errors=True)


def print_timeline(parent_log: list, worker_logs: list) -> None:
    """Per step: sends[k] .. sends[k+1] hold worker w's wake and done for step k."""
    sends = [(t, c) for e, t, c in parent_log if e == "send"]
    parent_wakes = [(t, c) for e, t, c in parent_log if e == "parent_wake"]
    rows = []   # per step: (send, [(wake, done, wake cpu, done cpu) per worker], last parent wake, next send)
    for k in range(len(sends) - 1):
        lo, hi = sends[k][0], sends[k + 1][0]
        per_worker = []
        for log in worker_logs:
            wakes = [(t, c) for e, t, c in log if e == "wake" and lo <= t < hi]
            dones = [(t, c) for e, t, c in log if e == "done" and lo <= t < hi]
            if not wakes or not dones:
                break
            per_worker.append((wakes[0][0], dones[0][0], wakes[0][1], dones[0][1]))
        pw = [t for t, _ in parent_wakes if lo <= t < hi]
        if len(per_worker) == len(worker_logs) and pw:
            last_done = max(done for _, done, _, _ in per_worker)
            first_after = min((t for t in pw if t >= last_done), default=pw[-1])
            rows.append((lo, per_worker, pw[-1], hi, sends[k][1], first_after))
    if not rows:
        print("(no complete steps in the timeline)")
        return

    def med(xs):
        return f"{statistics.median(xs) / 1e3:.0f}"

    def mean(xs):
        return f"{statistics.fmean(xs) / 1e3:.0f}"

    print(f"timeline of {len(rows)} steps (us; median / mean):")
    for w in range(len(worker_logs)):
        wake = [pw[w][0] - s for s, pw, _, _, _, _ in rows]
        busy = [pw[w][1] - pw[w][0] for _, pw, _, _, _, _ in rows]
        print(f"  worker {w}: wakes {med(wake)} / {mean(wake)} after the send, steps its block in "
              f"{med(busy)} / {mean(busy)}")
    last = [max(d for _, d, _, _ in pw) for _, pw, _, _, _, _ in rows]
    first = [min(d for _, d, _, _ in pw) for _, pw, _, _, _, _ in rows]
    imbalance = [a - b for a, b in zip(last, first)]
    parent_lag = [row[5] - l for row, l in zip(rows, last)]
    turnaround = [nxt - first_after for _, _, _, nxt, _, first_after in rows]
    step = [nxt - s for s, _, _, nxt, _, _ in rows]
    sent = [t for e, t, _ in parent_log if e == "sent"]
    send_cost = [b - a for a, b in zip([t for e, t, _ in parent_log if e == "send"], sent)]
    print(f"  imbalance (last worker done - first) {med(imbalance)} / {mean(imbalance)}")
    print(f"  parent returns from a wait after the last worker is done: {med(parent_lag)} / {mean(parent_lag)} "
          f"(its wake-up, or the earlier reply it was still reading)")
    print(f"  parent turnaround (that return -> next send: replies left to read, copies, step_async) "
          f"{med(turnaround)} / {mean(turnaround)}")
    print(f"  the send itself (futex wake-ups of sleeping workers) {med(send_cost)} / {mean(send_cost)}")
    print(f"  whole step {med(step)} / {mean(step)}")
    if len(worker_logs) >= 2:
        shared = statistics.fmean(len({pw[w][2] for w in range(len(pw))}) < len(pw)
                                  for _, pw, _, _, _, _ in rows)
        with_parent = statistics.fmean(any(pw[w][2] == cpu for w in range(len(pw)))
                                       for _, pw, _, _, cpu, _ in rows)
        print(f"  steps where two workers woke on the same CPU: {shared:.0%}; where a worker woke on "
              f"the parent's CPU: {with_parent:.0%}")


# ---- main --------------------------------------------------------------------------
def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("mode", choices=["bench", "profile"])
    parser.add_argument("--env", nargs="+", default=["pong"], choices=sorted(ENVS))
    parser.add_argument("--num-envs", nargs="+", type=int, default=[8, 16])
    parser.add_argument("--workers", type=int, default=None, help="num_workers (default: the cores)")
    parser.add_argument("--rounds", type=int, default=12)
    parser.add_argument("--seconds", type=float, default=2.0, help="per contender per round (profile: the run)")
    parser.add_argument("--warmup", type=float, default=1.0)
    parser.add_argument("--before-ref", default="HEAD")
    parser.add_argument("--which", nargs="+", default=["before", "after"], choices=["before", "after"])
    parser.add_argument("--variant", action="append", default=[], help="NAME:ATTR=VALUE[,ATTR=VALUE]")
    parser.add_argument("--cprofile", action="store_true", help="profile: add cProfile tables")
    parser.add_argument("--cprofile-lines", type=int, default=20)
    args = parser.parse_args(argv)
    if args.workers is None:
        from shoal.pool import available_cores
        args.workers = available_cores()
    bench(args) if args.mode == "bench" else profile(args)


if __name__ == "__main__":
    main()
