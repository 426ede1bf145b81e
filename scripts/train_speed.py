#!/usr/bin/env python
"""End-to-end `shoal train` on both backends: steps/s, return curves, time to target.

    python scripts/train_speed.py --out results/train [--envs snake cartpole] [--seconds 60]

For each env, two runs of `shoal train` (each its own process, the exact
command printed in the table):

  cpu   the CPU pool (worker processes on all cores; async double buffering
        where SIZES asks for two batches, CartPole one) feeding the learner; learner on the GPU when there is one (pinned
        host buffers, non_blocking copies), else on the CPU;
  cuda  the CUDA backend on the GPU feeding a GPU learner (no host copies);
        skipped, and said so, without a GPU.

Steps are agent-steps (one per agent row per step, what `shoal train`
counts); SPS is steps over training seconds (evaluations excluded). Each run
stops at --seconds of training or at the env's target return (an evaluation
mean return, argmax actions unless the env's config says otherwise). The
sizes per backend are in SIZES below: the CPU pool gets a few envs per core,
the GPU hundreds of thousands of rows.
Writes OUT/train.md (also printed), OUT/<run>/log.csv and a return-curve PNG
per env.
"""
from __future__ import annotations

import argparse
import csv
import datetime
import math
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import torch

import shoal
from shoal.pool import available_cores

HAS_GPU = torch.cuda.is_available()
CORES = available_cores()

# [section.key] overrides per env and backend, on top of configs/<env>.ini.
# cpu: envs a multiple of the cores; cuda: large batches (the GPU's regime).
SIZES = {
    "cartpole": {
        "cpu": {"vec.backend": "multiprocessing", "vec.num_envs": 64, "vec.num_batches": 1},
        "cuda": {"vec.num_envs": 4096, "train.num_steps": 16, "train.num_minibatches": 4,
                 "train.total_timesteps": 10**9},
    },
    "snake": {
        "cpu": {"vec.num_envs": 32 * CORES, "vec.num_batches": 2, "train.total_timesteps": 10**10},
        "cuda": {"vec.num_envs": 4096, "train.total_timesteps": 10**10, "train.num_steps": 64, "train.num_minibatches": 8,
                 "train.update_epochs": 2, "policy.hidden_size": 128},
    },
    "drive": {
        "cpu": {"vec.num_envs": 8 * CORES, "vec.num_batches": 2, "train.total_timesteps": 10**10},
        "cuda": {"vec.num_envs": 2048, "train.total_timesteps": 10**10, "train.num_steps": 64, "train.num_minibatches": 8,
                 "train.update_epochs": 2},
    },
    "explorer": {
        "cpu": {"vec.num_envs": 32 * CORES, "vec.num_batches": 2, "train.total_timesteps": 10**10},
        "cuda": {"vec.num_envs": 16384, "train.total_timesteps": 10**10, "train.num_steps": 64, "train.num_minibatches": 8,
                 "train.update_epochs": 2},
    },
}


def run_flags(env: str, backend: str, seconds: float, target: float | None) -> list[str]:
    over = dict(SIZES.get(env, {}).get(backend, {}))
    device = "cuda" if HAS_GPU else "cpu"
    over.update({"train.device": device, "train.max_train_seconds": seconds, "train.dashboard": "plain",
                 "train.checkpoint_interval": 0, "train.torch_threads": 0 if HAS_GPU else 1})
    if backend == "cuda":
        over["vec.backend"] = "cuda"
    if target is not None:
        over["train.target_return"] = target
    return [f"--{k.replace('_', '-')}={v}" for k, v in over.items()]


def read_log(path: Path) -> list[dict]:
    with open(path) as f:
        return [{k: float(v) if v not in ("", None) else math.nan for k, v in row.items()}
                for row in csv.DictReader(f)]


def train_run(env: str, backend: str, seconds: float, target, out: Path, log) -> dict:
    run_dir = out / f"{env}-{backend}"
    if run_dir.exists():   # a re-run into the same OUT replaces its run (shoal train refuses to reuse one)
        shutil.rmtree(run_dir)
    flags = run_flags(env, backend, seconds, target)
    cmd = [sys.executable, "-m", "shoal", "train", env, *flags, "--run-dir", str(run_dir)]
    shown = "shoal train " + env + " " + " ".join(flags)
    log(f"{env} [{backend}]: {shown}")
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=seconds * 3 + 300)
    wall = time.perf_counter() - t0
    (out / f"{env}-{backend}.out").write_text(proc.stdout + proc.stderr)
    result = {"env": env, "backend": backend, "command": shown, "wall": wall, "rc": proc.returncode}
    if proc.returncode != 0:
        log(f"  failed (rc {proc.returncode}): {proc.stderr[-2000:]}")
        return result
    rows = read_log(run_dir / "log.csv")
    last = rows[-1]
    solved = re.search(r"reached the target return after ([0-9.]+) s", proc.stdout)
    final = re.search(r"final eval mean return (-?[0-9.]+)", proc.stdout)
    # steady-state SPS: the rows after the first (which holds start-up and compilation)
    timed = [r for r in rows if r["global_step"] > 0]
    steady = (timed[-1]["global_step"] - timed[0]["global_step"]) / max(
        timed[-1]["train_seconds"] - timed[0]["train_seconds"], 1e-9) if len(timed) > 1 else math.nan
    result.update(steps=int(last["global_step"]), seconds=last["train_seconds"],
                  sps=last["global_step"] / max(last["train_seconds"], 1e-9), steady_sps=steady,
                  solved=float(solved.group(1)) if solved else None,
                  final_eval=float(final.group(1)) if final else math.nan,
                  curve=[(r["train_seconds"], r["eval_return"]) for r in rows
                         if not math.isnan(r.get("eval_return", math.nan))],
                  split={k: last[f"t_{k}"] for k in ("env", "copy", "forward", "learn")})
    log(f"  {result['steps']:,} steps in {result['seconds']:.1f} s: {result['sps']:,.0f} SPS "
        f"(steady {steady:,.0f}), final eval {result['final_eval']:.2f}"
        + (f", target after {result['solved']:.2f} s" if result["solved"] is not None else ""))
    return result


def plot(path: Path, env: str, results: list[dict], machine: str) -> bool:
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    for r in results:
        if r.get("curve"):
            xs, ys = zip(*r["curve"])
            ax.plot(xs, ys, marker=".", label=f"{r['backend']} ({r['sps'] / 1e6:.2f} M SPS)")
    ax.set_xlabel("training seconds")
    ax.set_ylabel("evaluation mean return")
    ax.set_title(f"shoal train {env}\n{machine}", fontsize=9)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--envs", nargs="+", default=list(SIZES))
    parser.add_argument("--backends", nargs="+", default=["cpu", "cuda"], choices=["cpu", "cuda"])
    parser.add_argument("--seconds", type=float, default=60.0, help="training seconds per run")
    parser.add_argument("--target", action="append", default=[], metavar="ENV=RETURN",
                        help="stop a run at this evaluation return (cartpole: its config's 475)")
    s = parser.parse_args(argv)
    targets = {}
    for item in s.target:
        env, _, value = item.partition("=")
        try:
            targets[env] = float(value)   # (no "=": value "", a ValueError too)
        except ValueError:
            env = ""
        if not env:
            parser.error(f"--target {item}: expected ENV=RETURN (e.g. cartpole=475)")
    s.out.mkdir(parents=True, exist_ok=True)

    def log(msg):
        print(msg, file=sys.stderr, flush=True)

    from shoal.bench import cpu_model
    gpu = torch.cuda.get_device_name(0) if HAS_GPU else "no GPU"
    machine = f"{cpu_model()} ({CORES} cores), {gpu}"
    lines = ["# shoal train: CPU pool vs CUDA backend, end to end", "",
             f"- machine: {machine}; torch {torch.__version__}, shoal {shoal.__version__}",
             f"- date: {datetime.datetime.now().astimezone().isoformat(timespec='seconds')}",
             f"- command: `python scripts/train_speed.py {' '.join(argv if argv is not None else sys.argv[1:])}`",
             "- SPS: agent-steps per training second (evaluations excluded), whole run and after "
             "the first log row (steady); learner on "
             + ("the GPU for both backends" if HAS_GPU else "the CPU (no GPU)"), "",
             "| env | backend | steps | train s | SPS | steady SPS | final eval | target reached after | "
             "time split env/copy/forward/learn s |",
             "|---|---|---:|---:|---:|---:|---:|---:|---|"]
    commands, failed = [], 0
    for env in s.envs:
        results = []
        for backend in s.backends:
            if backend == "cuda" and not HAS_GPU:
                lines.append(f"| {env} | cuda | not measured: no GPU | | | | | | |")
                continue
            r = train_run(env, backend, s.seconds, targets.get(env), s.out, log)
            results.append(r)
            commands.append(f"- {env} [{backend}]: `{r['command']}`")
            if r["rc"] != 0:
                failed += 1
                lines.append(f"| {env} | {backend} | failed (rc {r['rc']}, see {env}-{backend}.out) | | | | | | |")
                continue
            solved = f"{r['solved']:.2f} s" if r["solved"] is not None else "-"
            split = "/".join(f"{v:.1f}" for v in r["split"].values())
            lines.append(f"| {env} | {backend} | {r['steps']:,} | {r['seconds']:.1f} | {r['sps'] / 1e6:.2f} M | "
                         f"{r['steady_sps'] / 1e6:.2f} M | {r['final_eval']:.2f} | {solved} | {split} |")
        measured = [r for r in results if r["rc"] == 0]
        if measured:   # (no empty plot for an env that failed or was not measured)
            plot(s.out / f"train_{env}.png", env, measured, machine)
    lines += ["", "Commands (each with `--run-dir`):", *commands, ""]
    lines += [f"![train_{env}.png](train_{env}.png)" for env in s.envs if (s.out / f"train_{env}.png").exists()]
    text = "\n".join(lines) + "\n"
    (s.out / "train.md").write_text(text)
    print(text)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
