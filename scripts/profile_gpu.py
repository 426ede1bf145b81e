#!/usr/bin/env python
"""Where the CUDA backend's time goes: per-env kernel time, memory traffic, profiles.

    python scripts/profile_gpu.py --out results/profile [--envs Drive Explorer] [--log2-envs 20]

For each env: the step kernel's time per launch (CUDA events, 50 launches,
after warm-up), agent-steps/s, and the bytes a step must move at least (each
env struct read and written, obs and flags written, actions read) over that
time: the kernel's effective bandwidth, to hold against the GPU's peak. Then
torch's profiler over 20 steps of the slowest env (CPU launch time vs GPU
kernel time), and, where Nsight Compute (`ncu`) is installed and allowed,
its Speed-of-Light, occupancy and launch sections for each env's step
kernel. Writes OUT/profile.md (also printed) and OUT/ncu_<env>.txt.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import torch

from shoal.cuda import CudaVecEnv
from shoal.envs import names as env_names, spec as env_spec


def actions_for(env, seed=0):
    rng = np.random.default_rng(seed)
    nvec = np.asarray(env.spec.action_nvec)
    a = rng.integers(0, nvec, size=(env.num_rows, len(nvec))).astype(np.int32)
    a = a[:, 0] if tuple(env.actions.shape) == (env.num_rows,) else a
    return torch.from_numpy(a).cuda()


def min_bytes_per_step(env) -> int:
    spec = env.spec
    binding = spec.load_binding()
    obs = int(np.prod(spec.obs_shape)) * np.dtype(spec.obs_dtype).itemsize
    act = 4 * env.actions[0].numel()
    per_env = 2 * binding.ENV_BYTES + 2 * 40 + spec.agents * (obs + act + 4 + 3)
    return per_env * env.num_envs


def kernel_ms(env, actions, launches=50) -> float:
    for _ in range(5):
        env.step(actions)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    start.record()
    for _ in range(launches):
        env.step(actions)
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / launches


def variant_sweep(name: str, n: int) -> list[tuple[str, int, float, float]]:
    """(step_kernel, threads, ms per step, live row fraction) of every kernel variant."""
    out = []
    for kind, threads in [("direct", 128)] + [(k, t) for k in ("staged", "staged_obs") for t in (32, 64, 128)]:
        try:
            env = CudaVecEnv(name, n, device="cuda", seed=0, check_actions=False, step_kernel=kind,
                             threads_per_block=None if kind == "direct" else threads)
        except ValueError:  # the stage does not fit at this block size
            continue
        a = actions_for(env)
        ms = kernel_ms(env, a)
        out.append((kind, threads, ms, float(env.masks.float().mean())))
        env.close()
        del env, a
        torch.cuda.empty_cache()
    return out


def parity_errors(name: str, kind: str, steps: int = 200, num_envs: int = 256) -> dict:
    """CPU vs GPU from identical states each step (as the parity test): the
    largest obs / reward differences seen and how many rows differ at all."""
    cpu = CudaVecEnv(name, num_envs, device="cpu", seed=2)
    gpu = CudaVecEnv(name, num_envs, device="cuda", seed=2, step_kernel=kind)
    cpu.reset(seed=9)
    rng = np.random.default_rng(2)
    worst = {"obs_abs": 0.0, "obs_rel": 0.0, "rew_abs": 0.0, "rows": 0, "rows_differ": 0, "flags_differ": 0}
    for _ in range(steps):
        gpu.env_states.copy_(cpu.env_states)
        gpu.episodes.copy_(cpu.episodes)
        nvec = np.asarray(cpu.spec.action_nvec)
        a = rng.integers(0, nvec, size=(cpu.num_rows, len(nvec))).astype(np.int32)
        a = a[:, 0] if tuple(cpu.actions.shape) == (cpu.num_rows,) else a
        oc, rc, tc, uc, _ = cpu.step(torch.from_numpy(a))
        og, rg, tg, ug, _ = gpu.step(torch.from_numpy(a).cuda())
        og, rg = og.cpu().float(), rg.cpu()
        flags = (tg.cpu() != tc) | (ug.cpu() != uc) | (gpu.masks.cpu() != cpu.masks)
        ok = ~flags
        d = (og - oc.float()).abs()
        worst["obs_abs"] = max(worst["obs_abs"], float(d[ok].max()) if ok.any() else 0.0)
        rel = d / oc.float().abs().clamp(min=1e-3)
        worst["obs_rel"] = max(worst["obs_rel"], float(rel[ok].max()) if ok.any() else 0.0)
        worst["rew_abs"] = max(worst["rew_abs"], float((rg - rc).abs()[ok].max()) if ok.any() else 0.0)
        worst["rows"] += int(ok.numel())
        worst["rows_differ"] += int(((d.flatten(1).max(dim=1).values > 0) | flags | (rg != rc)).sum())
        worst["flags_differ"] += int(flags.sum())
    cpu.close()
    gpu.close()
    return worst


def ncu_child(name: str, log2: int, kernel: str) -> None:
    """Run under ncu: a few steps of one env."""
    env = CudaVecEnv(name, 1 << log2, device="cuda", seed=0, check_actions=False, step_kernel=kernel)
    a = actions_for(env)
    for _ in range(8):
        env.step(a)
    torch.cuda.synchronize()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--envs", nargs="+", default=env_names("header"))
    parser.add_argument("--log2-envs", type=int, default=20, help="envs per env kind: 2^this (default 20)")
    parser.add_argument("--sweep-log2-envs", type=int, default=18, help="envs in the kernel-variant sweep")
    parser.add_argument("--ncu-child", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--ncu-kernel", default="direct", help="step_kernel profiled by torch's profiler")
    parser.add_argument("--ncu-kernels", nargs="+", default=["direct"], help="step_kernels profiled by ncu")
    parser.add_argument("--no-ncu", action="store_true")
    parser.add_argument("--ncu-envs", nargs="+", default=None, help="envs profiled by ncu (default: --envs)")
    s = parser.parse_args(argv)
    if s.ncu_child:
        ncu_child(s.ncu_child, s.log2_envs, s.ncu_kernel)
        return 0
    if not torch.cuda.is_available():
        parser.error("no CUDA GPU here (torch.cuda.is_available() is False): this script profiles the "
                     "CUDA kernels on a GPU; scripts/compare_cpu_gpu.py runs without one")
    s.out.mkdir(parents=True, exist_ok=True)
    props = torch.cuda.get_device_properties(0)
    lines = ["# CUDA backend profile", "",
             f"- GPU: {props.name}, {props.multi_processor_count} SMs, {props.total_memory / 2**30:.0f} GiB",
             f"- command: `python scripts/profile_gpu.py {' '.join(argv if argv is not None else sys.argv[1:])}`", "",
             "| env | envs | rows | step kernel ms | agent-steps/s | min bytes/step | effective GB/s |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    def flush():  # the report so far: a run cut short still leaves its sections
        (s.out / "profile.md").write_text("\n".join(lines) + "\n")

    timings, sizes = {}, {}
    for name in s.envs:
        spec = env_spec(name)
        n = 1 << s.log2_envs
        free, _ = torch.cuda.mem_get_info()
        while n > 1024 and n * (spec.load_binding().ENV_BYTES + 64 * spec.agents * 8) > 0.5 * free:
            n //= 2
        sizes[name] = n
        env = CudaVecEnv(name, n, device="cuda", seed=0, check_actions=False, step_kernel="direct")
        a = actions_for(env)
        ms = kernel_ms(env, a)
        nbytes = min_bytes_per_step(env)
        timings[name] = ms / env.num_rows
        lines.append(f"| {spec.name} | {n} | {env.num_rows} | {ms:.3f} | {env.num_rows / ms * 1e3:.3e} | "
                     f"{nbytes / 2**20:.1f} MiB | {nbytes / ms / 1e6:.0f} |")
        env.close()
        del env, a
        torch.cuda.empty_cache()
    lines += ["", f"## Step kernel variants (ms per step at up to 2^{s.sweep_log2_envs} envs; live = rows with mask true)", "",
              "| env | step_kernel | threads | ms | agent-steps/s | live agent-steps/s | vs direct |",
              "|---|---|---:|---:|---:|---:|---:|"]
    best = {}
    for name in s.envs:
        n = min(sizes[name], 1 << s.sweep_log2_envs)
        rows = n * env_spec(name).agents
        sweep = variant_sweep(name, n)
        direct = sweep[0][2]
        best[env_spec(name).name] = min(sweep, key=lambda v: v[2])[0]
        for kind, threads, ms, live in sweep:
            lines.append(f"| {env_spec(name).name} | {kind} | {threads} | {ms:.3f} | {rows / ms * 1e3:.3e} | "
                         f"{live * rows / ms * 1e3:.3e} | {direct / ms:.2f}x |")
        flush()
    (s.out / "best_kernels.json").write_text(json.dumps(best))
    lines += ["", f"Fastest step_kernel per env: {best}"]
    lines += ["", "## CPU vs GPU from identical states (200 steps x 256 envs, random actions)", "",
              "Largest differences over rows whose flags agree; rows_differ counts rows with any "
              "difference at all (obs, reward or flags).", "",
              "| env | step_kernel | max obs abs | max obs rel | max reward abs | rows | rows differ | flags differ |",
              "|---|---|---:|---:|---:|---:|---:|---:|"]
    for name in s.envs:
        for kind in ("direct", "staged"):
            w = parity_errors(name, kind)
            lines.append(f"| {env_spec(name).name} | {kind} | {w['obs_abs']:.3g} | {w['obs_rel']:.3g} | "
                         f"{w['rew_abs']:.3g} | {w['rows']} | {w['rows_differ']} | {w['flags_differ']} |")
            flush()
    slowest = max(timings, key=timings.get)
    lines += ["", f"Slowest per agent-step: {slowest}.", "", f"## torch profiler: 20 steps of {slowest}", "", "```"]
    env = CudaVecEnv(slowest, 1 << min(s.log2_envs, 18), device="cuda", seed=0, check_actions=False,
                     step_kernel=s.ncu_kernel)
    a = actions_for(env)
    for _ in range(5):
        env.step(a)
    torch.cuda.synchronize()
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(20):
            env.step(a)
        torch.cuda.synchronize()
    try:
        table = prof.key_averages().table(sort_by="device_time_total", row_limit=12)
    except (AttributeError, KeyError):  # older torch names it cuda_time_total
        table = prof.key_averages().table(sort_by="cuda_time_total", row_limit=12)
    lines += [table, "```", ""]
    env.close()

    ncu = shutil.which("ncu") or (os.path.join(os.environ.get("CUDA_HOME", "/usr/local/cuda"), "bin", "ncu"))
    if s.no_ncu:
        pass
    elif ncu and os.path.exists(ncu):
        lines += ["## Nsight Compute", ""]
        for name, kernel in [(e, k) for e in (s.ncu_envs or s.envs) for k in s.ncu_kernels]:
            path = s.out / f"ncu_{name.lower()}_{kernel}.txt"
            cmd = [ncu, "--kernel-name", "regex:step.*kernel", "--launch-skip", "3", "--launch-count", "1",
                   "--section", "SpeedOfLight", "--section", "Occupancy", "--section", "LaunchStats",
                   "--section", "MemoryWorkloadAnalysis", "--section", "WarpStateStats",
                   sys.executable, __file__, "--out", str(s.out), "--ncu-child", name,
                   "--log2-envs", str(min(s.log2_envs, 18)), "--ncu-kernel", kernel]
            try:
                p = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
                path.write_text(p.stdout + p.stderr)
                lines.append(f"- {name} ({kernel}): rc {p.returncode}, {path.name}")
                flush()
            except subprocess.TimeoutExpired:
                lines.append(f"- {name}: ncu timed out")
    else:
        lines.append("Nsight Compute (ncu) is not installed here.")
    text = "\n".join(lines) + "\n"
    (s.out / "profile.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
