#!/usr/bin/env python
"""CPU pool vs CUDA backend on the same env headers: tables and plots.

    python scripts/compare_cpu_gpu.py --out results/ [--quick] [--envs CartPole Drive]

Three comparisons per env, written as markdown (results.md, also printed)
and PNG plots (when matplotlib is installed; markdown only otherwise):

1. raw agent-steps/s vs num_envs: the GPU backend at 2^10 .. 2^22 envs
   (capped by GPU memory), the CPU pool (shoal.pool.Multiprocessing) at
   1 .. all cores;
2. agent-steps/s with a policy forward pass every step (an MLP on the GPU):
   the CPU path copies obs into pinned host memory and on to the GPU
   (non_blocking) and the actions back; the GPU path copies nothing (GPU
   batches capped at 2^21 rows, for the MLP's activations);
3. a Waymax-style latency table: reset and step milliseconds at batch
   1, 16, 1024 and the largest, CPU vs GPU.

Method: actions pre-sampled outside the timer (8 arrays cycled), warm-up,
fixed-duration runs, median of the repeats; the GPU is synchronized every 32
steps and at both ends of a run. Agent-steps count every row (env x agent)
stepped, masked rows included. Without a CUDA GPU the GPU columns read "not
measured: no GPU" and the policy runs on the CPU (labelled as such). Every
output names the machine.
"""
from __future__ import annotations

import argparse
import datetime
import platform
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import torch

import shoal
from shoal.bench.steppers import pool_workers
from shoal.bench.timing import action_table, cpu_line, cpu_model, cycling, format_rate, median_rate
from shoal.cuda import CudaVecEnv
from shoal.envs import names as env_names, spec as env_spec
from shoal.pool import Multiprocessing, available_cores

TABLE = 8          # pre-sampled action arrays, cycled
GPU_SYNC_EVERY = 32
POLICY_MAX_ROWS = 1 << 21   # largest policy batch (rows) on the GPU
NO_GPU = "not measured: no GPU"
HAS_GPU = torch.cuda.is_available()


# ---- machine and helpers ------------------------------------------------------------
def machine_line() -> str:
    gpu = torch.cuda.get_device_name(0) if HAS_GPU else "none (no CUDA GPU on this machine)"
    return (f"{cpu_line(available_cores())}; GPU: {gpu}; "
            f"torch {torch.__version__}, shoal {shoal.__version__}, Python {platform.python_version()}")


def machine_short() -> str:
    gpu = torch.cuda.get_device_name(0) if HAS_GPU else "no GPU"
    return f"{cpu_model()} ({available_cores()} cores), {gpu}"


def sampled_actions(spec, rows: int) -> np.ndarray:
    """TABLE pre-sampled int32 action arrays for `rows` agent rows."""
    return action_table(rows, spec, table_rows=TABLE)


def gpu_bytes_per_env(spec) -> int:
    binding = spec.load_binding()
    obs = int(np.prod(spec.obs_shape)) * np.dtype(spec.obs_dtype).itemsize
    row = obs + 4 * len(spec.action_nvec) * (TABLE + 1) + 4 + 3 + 1
    return binding.ENV_BYTES + 40 + spec.agents * row


def gpu_sizes(spec, quick: bool) -> list[int]:
    if not HAS_GPU:
        return []
    free, _ = torch.cuda.mem_get_info()
    cap = int(0.6 * free) // gpu_bytes_per_env(spec)
    sizes = [1 << k for k in range(10, 23, 2 if not quick else 6)]
    return [n for n in sizes if n <= cap] or [1 << 10]


def cpu_sizes(spec, quick: bool) -> list[int]:
    top = 1 << (8 if quick else 18 if spec.agents == 1 else 12)
    return [n for n in (1 << 6, 1 << 8, 1 << 10, 1 << 12, 1 << 14, 1 << 16, 1 << 18) if n <= top]


WORKERS: list[int] | None = None   # --workers


def worker_counts() -> list[int]:
    if WORKERS:
        return WORKERS
    cores = available_cores()
    counts = [c for c in (1, 2, 4, 8, 16, 32, 64, 128) if c < cores]
    return counts + [cores]


# ---- 1. raw throughput ----------------------------------------------------------------
def gpu_env(spec, n: int, s) -> CudaVecEnv:
    return CudaVecEnv(spec, n, device="cuda", seed=0, check_actions=False,
                      step_kernel=s.step_kernel.get(spec.name, "auto"))


def gpu_throughput(spec, n: int, s) -> float:
    env = gpu_env(spec, n, s)
    table = torch.from_numpy(sampled_actions(spec, env.num_rows)).cuda()
    next_actions = cycling(table)

    def step():
        for _ in range(GPU_SYNC_EVERY):
            env.step(next_actions())
        return GPU_SYNC_EVERY * env.num_rows
    try:
        return median_rate(step, s.seconds, s.warmup, s.repeats, torch.cuda.synchronize)
    finally:
        env.close()
        del env, table, next_actions
        torch.cuda.empty_cache()


def cpu_throughput(spec, n: int, workers: int, s) -> float:
    pool = Multiprocessing(spec, n, num_workers=pool_workers(workers), seed=0)
    next_actions = cycling(sampled_actions(spec, pool.num_rows))

    def step():
        pool.step(next_actions())
        return pool.num_rows
    try:
        return median_rate(step, s.seconds, s.warmup, s.repeats)
    finally:
        pool.close()


# ---- 2. with a policy forward pass -------------------------------------------------------
def make_policy(spec, device):
    obs_dim = int(np.prod(spec.obs_shape))
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Linear(obs_dim, 256), torch.nn.ReLU(), torch.nn.Linear(256, 256), torch.nn.ReLU(),
        torch.nn.Linear(256, int(sum(spec.action_nvec)))).to(device)


def sample(spec, logits: torch.Tensor) -> torch.Tensor:
    """One action per component: argmax of logits + Gumbel noise, int32."""
    noise = -torch.log(-torch.log(torch.rand_like(logits).clamp_(1e-9, 1.0)))
    parts = torch.split(logits + noise, list(spec.action_nvec), dim=1)
    actions = torch.stack([p.argmax(dim=1) for p in parts], dim=1).to(torch.int32)
    return actions[:, 0] if len(spec.action_nvec) == 1 and spec.discrete_action else actions


def gpu_policy_rate(spec, n: int, s) -> float:
    env = gpu_env(spec, n, s)
    policy = make_policy(spec, "cuda")

    def step():
        with torch.no_grad():
            for _ in range(GPU_SYNC_EVERY):
                env.step(sample(spec, policy(env.obs.float())))
        return GPU_SYNC_EVERY * env.num_rows
    try:
        return median_rate(step, s.seconds, s.warmup, s.repeats, torch.cuda.synchronize)
    finally:
        env.close()


def cpu_policy_rate(spec, n: int, s, device: str, batches: int = 1) -> float:
    """CPU pool + policy on `device`: obs through pinned memory (non_blocking),
    actions back to the host every step. batches=1: pool.step, so the
    workers idle during the forward pass; batches=2: EnvPool-style double
    buffering (async send/recv of two halves), so one half steps on the
    workers while the policy acts on the other."""
    pool = Multiprocessing(spec, n, batch_size=n // batches, seed=0)   # default workers: all the cores
    policy = make_policy(spec, device)
    cuda = device == "cuda"
    rows = pool.num_rows // batches
    dtype = torch.from_numpy(pool.obs[:1]).dtype
    pinned = torch.empty((rows, *pool.obs.shape[1:]), dtype=dtype, pin_memory=cuda)
    host_actions = torch.empty((rows, *pool.action_space.shape[1:]), dtype=torch.int32, pin_memory=cuda)

    def act(obs_rows):
        pinned.numpy()[...] = obs_rows
        obs = pinned.to(device, non_blocking=True)
        host_actions.copy_(sample(spec, policy(obs.float())))   # waits for the GPU
        return host_actions.numpy()

    if batches == 1:
        def step():
            with torch.no_grad():
                pool.step(act(pool.obs))
            return pool.num_rows
    else:
        pool.async_reset(seed=0)

        def step():
            with torch.no_grad():
                pool.send(act(pool.recv()[0]))
            return rows
    try:
        return median_rate(step, s.seconds, s.warmup, s.repeats)
    finally:
        pool.close()


# ---- 3. latency ---------------------------------------------------------------------------
def latency_ms(make, s) -> tuple[float, float]:
    """Median reset and step milliseconds of the env returned by make()."""
    env, step, reset, sync = make()
    try:
        for _ in range(3):
            step()
        sync()
        resets, steps = [], []
        for r in range(max(5, 3 * s.repeats)):
            sync()
            t = time.perf_counter()
            reset(r)
            sync()
            resets.append(time.perf_counter() - t)
        for _ in range(max(10, 10 * s.repeats)):
            sync()
            t = time.perf_counter()
            step()
            sync()
            steps.append(time.perf_counter() - t)
        return 1e3 * statistics.median(resets), 1e3 * statistics.median(steps)
    finally:
        env.close()


def cpu_latency(spec, n: int, s):
    def make():
        pool = Multiprocessing(spec, n, seed=0)
        table = sampled_actions(spec, pool.num_rows)
        return pool, lambda: pool.step(table[0]), lambda r: pool.reset(seed=r), lambda: None
    return latency_ms(make, s)


def gpu_latency(spec, n: int, s):
    def make():
        env = gpu_env(spec, n, s)
        first = torch.from_numpy(sampled_actions(spec, env.num_rows)[0]).cuda()
        return env, lambda: env.step(first), lambda r: env.reset(seed=r), torch.cuda.synchronize
    return latency_ms(make, s)


# ---- report ---------------------------------------------------------------------------------
def plot(path: Path, title: str, xlabel: str, series: dict[str, list[tuple[int, float]]]) -> bool:
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    for label, points in series.items():
        if points:
            xs, ys = zip(*points)
            ax.plot(xs, ys, marker="o", label=label)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel("agent-steps/s")
    ax.set_title(title, fontsize=9)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def compare_env(name: str, s, out: Path, log) -> list[str]:
    spec = env_spec(name)
    machine = machine_short()
    lines = [f"## {spec.name} ({spec.agents} agent row{'s' if spec.agents > 1 else ''} per env)", ""]
    png = []

    # 1. raw throughput
    cpu_points = {w: [] for w in worker_counts()}
    for n in cpu_sizes(spec, s.quick):
        for w in cpu_points:
            if w <= n:
                log(f"{name}: CPU pool, {n} envs, {w} workers")
                cpu_points[w].append((n, cpu_throughput(spec, n, w, s)))
    gpu_points = []
    for n in gpu_sizes(spec, s.quick):
        log(f"{name}: GPU, {n} envs")
        gpu_points.append((n, gpu_throughput(spec, n, s)))
    lines += ["### Raw agent-steps/s vs num_envs", "",
              "| backend | " + " | ".join(f"{n} envs" for n in _all_sizes(cpu_points, gpu_points)) + " |",
              "|---|" + "---:|" * len(_all_sizes(cpu_points, gpu_points))]
    sizes = _all_sizes(cpu_points, gpu_points)
    for w, points in cpu_points.items():
        got = dict(points)
        lines.append(f"| CPU pool, {w} worker{'s' if w > 1 else ''} | "
                     + " | ".join(format_rate(got[n]) if n in got else "" for n in sizes) + " |")
    got = dict(gpu_points)
    lines.append("| GPU | " + " | ".join(format_rate(got[n]) if n in got else (NO_GPU if not HAS_GPU else "")
                                        for n in sizes) + " |")
    if gpu_points:
        best = max(gpu_points, key=lambda p: p[1])
        lines += ["", f"GPU best: {format_rate(best[1])} agent-steps/s at {best[0]} envs "
                      f"({format_rate(best[1] / spec.agents)} env-steps/s)."]
    series = {f"CPU pool, {w} worker{'s' if w > 1 else ''}": p for w, p in cpu_points.items()}
    series["GPU"] = gpu_points
    path = out / f"throughput_{name.lower()}.png"
    if plot(path, f"{spec.name}: raw throughput\n{machine}", "num_envs", series):
        png.append(path.name)
    lines.append("")

    # 2. with a policy forward pass
    policy_device = "cuda" if HAS_GPU else "cpu"
    policy_sizes = [n for n in (cpu_sizes(spec, s.quick)) if n >= 64][-2:]
    lines += ["### Agent-steps/s with a policy forward pass every step", "",
              f"MLP {int(np.prod(spec.obs_shape))}-256-256-{sum(spec.action_nvec)} on "
              f"{'the GPU' if HAS_GPU else 'the CPU (no GPU on this machine)'}; CPU path: pool on all "
              f"cores, obs {'via pinned memory (non_blocking)' if HAS_GPU else 'handed to torch on the CPU'}, "
              f"actions back to the host; sync: pool.step "
              f"(the workers idle during the forward pass); async: two batches, one stepping while "
              f"the policy acts on the other.", "",
              "| num_envs | CPU pool sync + policy | CPU pool async + policy | GPU + policy |",
              "|---:|---:|---:|---:|"]
    cpu_policy, cpu_async_policy, gpu_policy = [], [], []
    # the MLP's activations grow with the rows: cap the GPU batch at 2^21 rows
    gpu_policy_sizes = [n for n, _ in gpu_points if n * spec.agents <= POLICY_MAX_ROWS][-2:]
    for n in sorted(set(policy_sizes + gpu_policy_sizes)):
        row = [f"| {n}"]
        if n in policy_sizes:
            log(f"{name}: CPU pool + policy, {n} envs")
            cpu_policy.append((n, cpu_policy_rate(spec, n, s, policy_device)))
            cpu_async_policy.append((n, cpu_policy_rate(spec, n, s, policy_device, batches=2)))
            row += [format_rate(cpu_policy[-1][1]), format_rate(cpu_async_policy[-1][1])]
        else:
            row += ["", ""]
        if HAS_GPU:
            log(f"{name}: GPU + policy, {n} envs")
            gpu_policy.append((n, gpu_policy_rate(spec, n, s)))
            row.append(format_rate(gpu_policy[-1][1]))
        else:
            row.append(NO_GPU)
        lines.append(" | ".join(row) + " |")
    path = out / f"policy_{name.lower()}.png"
    if plot(path, f"{spec.name}: with a policy forward pass\n{machine}", "num_envs",
            {"CPU pool sync + policy": cpu_policy, "CPU pool async + policy": cpu_async_policy,
             "GPU + policy": gpu_policy}):
        png.append(path.name)
    lines.append("")

    # 3. latency
    cpu_top = cpu_sizes(spec, s.quick)[-1]
    gpu_top = gpu_points[-1][0] if gpu_points else None
    batches = sorted({1, 16, 1024 if not s.quick else cpu_top, cpu_top} | ({gpu_top} if gpu_top else set()))
    lines += ["### Latency (ms, median)", "",
              "| batch | CPU reset | CPU step | GPU reset | GPU step |", "|---:|---:|---:|---:|---:|"]
    for n in batches:
        cells = ["", ""]
        if n <= cpu_top:
            log(f"{name}: CPU latency, {n} envs")
            cells = [f"{v:.3f}" for v in cpu_latency(spec, n, s)]
        gcells = [NO_GPU, NO_GPU]
        if HAS_GPU:
            log(f"{name}: GPU latency, {n} envs")
            gcells = [f"{v:.3f}" for v in gpu_latency(spec, n, s)]
        lines.append(f"| {n} | " + " | ".join(cells + gcells) + " |")
    lines.append("")
    if png:
        lines += [f"![{p}]({p})" for p in png] + [""]
    return lines


def _all_sizes(cpu_points, gpu_points) -> list[int]:
    return sorted({n for points in cpu_points.values() for n, _ in points} | {n for n, _ in gpu_points})


def check_arguments(parser: argparse.ArgumentParser, s: argparse.Namespace) -> None:
    """Every argument checked before anything is measured (parser.error: exit 2)."""
    import math

    from shoal.cuda import STEP_KERNELS
    header = env_names("header")

    def header_env(name: str, where: str) -> str:
        try:
            found = env_spec(name).name
        except ValueError as e:
            parser.error(f"{where}: {e}")
        if found not in header:
            parser.error(f"{where}: {found} is not a header env (the CUDA backend runs {', '.join(header)})")
        return found

    for name in s.envs or []:
        header_env(name, f"--envs {name}")
    for item in s.step_kernel:
        env, eq, kind = item.partition("=")
        if not eq or kind not in (*STEP_KERNELS, "auto"):
            parser.error(f"--step-kernel {item}: expected ENV=KIND, KIND one of "
                         f"{', '.join(STEP_KERNELS)} or auto")
        header_env(env, f"--step-kernel {item}")
    if s.seconds is not None and not (math.isfinite(s.seconds) and s.seconds > 0):
        parser.error(f"--seconds {s.seconds}: expected a finite number > 0")
    if s.repeats is not None and s.repeats < 1:
        parser.error(f"--repeats {s.repeats}: expected an integer >= 1")
    if s.workers:
        try:
            if min(int(w) for w in s.workers.split(",")) < 1:
                raise ValueError
        except ValueError:
            parser.error(f"--workers {s.workers}: expected comma-separated integers >= 1")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, required=True, help="folder for results.md and the PNGs")
    parser.add_argument("--envs", nargs="+", default=None, help=f"default: all header envs ({', '.join(env_names('header'))})")
    parser.add_argument("--quick", action="store_true", help="few sizes, short runs (a smoke test)")
    parser.add_argument("--seconds", type=float, default=None)
    parser.add_argument("--repeats", type=int, default=None)
    parser.add_argument("--workers", default=None, help="CPU pool worker counts, comma-separated "
                        "(default: powers of two up to the available cores)")
    parser.add_argument("--step-kernel", nargs="+", default=[], metavar="ENV=KIND",
                        help="the CUDA step kernel per env (direct, staged, staged_obs or auto; default auto)")
    s = parser.parse_args(argv)
    check_arguments(parser, s)
    s.seconds = s.seconds or (0.1 if s.quick else 1.0)
    s.repeats = s.repeats or (1 if s.quick else 3)
    s.warmup = 0.05 if s.quick else 0.3
    global WORKERS
    WORKERS = [int(w) for w in s.workers.split(",")] if s.workers else None
    s.step_kernel = {env_spec(k).name: v for k, v in (kv.split("=") for kv in s.step_kernel)}
    s.out.mkdir(parents=True, exist_ok=True)
    if not HAS_GPU:
        torch.set_num_threads(1)   # the policy on the CPU: leave the cores to the pool's workers

    def log(msg):
        print(msg, file=sys.stderr, flush=True)

    lines = ["# shoal: CPU pool vs CUDA backend", "",
             f"- machine: {machine_line()}",
             f"- date: {datetime.datetime.now().astimezone().isoformat(timespec='seconds')}",
             f"- command: `python scripts/compare_cpu_gpu.py {' '.join(argv if argv is not None else sys.argv[1:])}`",
             f"- method: {s.seconds:g} s runs after {s.warmup:g} s warm-up, median of {s.repeats}; "
             f"actions pre-sampled ({TABLE} arrays cycled); GPU synchronized every {GPU_SYNC_EVERY} steps; "
             f"CUDA step kernels: {s.step_kernel or 'auto'}",
             ""]
    if not HAS_GPU:
        lines += [f"No CUDA GPU on this machine: every GPU column is \"{NO_GPU}\".", ""]
    for name in s.envs or env_names("header"):
        lines += compare_env(name, s, s.out, log)
        (s.out / "results.md").write_text("\n".join(lines))   # each env as soon as it is done
    text = "\n".join(lines)
    (s.out / "results.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
