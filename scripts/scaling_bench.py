"""Data-parallel scaling on one machine: `shoal train ENV` as 1 process vs
N torchrun ranks, the same total num_envs, measured side by side.

    python scripts/scaling_bench.py                       # cartpole and snake, 1 vs 2 ranks, 3 rounds
    python scripts/scaling_bench.py --envs snake --ranks 1 2 4 --rounds 2
    python scripts/scaling_bench.py --envs snake drive --train-flags "--train.device cuda"   # a GPU machine

Two measurements per env and rank count, in interleaved rounds (1 rank,
2 ranks, 1 rank, ... so that a noisy neighbour hits both alike):
- sps: end-to-end env steps per second of training time (pool, policy,
  PPO update, all-reduces; evaluation excluded), from a run with a fixed
  step budget and no evaluation;
- time to target (where the env's config has a target_return): training
  seconds until the first evaluation reaching it, as `shoal train` reports.
Each run is a subprocess (`python -m shoal train ...` or torchrun), so the
ranks' start-up is not timed: only training seconds count. Prints a table
with the median of each and its ratio to 1 rank.
"""
from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile

# Fixed step budgets for the sps runs: long enough to average over many
# updates, short enough for a few rounds on 2 cores.
SPS_STEPS = {"cartpole": 200_000, "snake": 600_000}


def train_command(env: str, ranks: int, run_dir: str, flags: list[str]) -> list[str]:
    base = ["-m", "shoal", "train", env, "--run-dir", run_dir, "--train.dashboard", "none",
            "--train.tensorboard", "false", *flags]
    if ranks == 1:
        return [sys.executable, *base]
    return [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={ranks}", *base]


def run_once(env: str, ranks: int, flags: list[str]) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        p = subprocess.run(train_command(env, ranks, os.path.join(tmp, "run"), flags),
                           capture_output=True, text=True, timeout=900)
    if p.returncode:
        raise RuntimeError(f"{env} on {ranks} ranks failed:\n{p.stdout[-2000:]}\n{p.stderr[-2000:]}")
    m = re.search(r"trained ([\d,]+) steps in ([\d.]+) s", p.stdout)
    solved = re.search(r"reached the target return after ([\d.]+) s", p.stdout)
    steps, seconds = int(m.group(1).replace(",", "")), float(m.group(2))
    return {"sps": steps / seconds, "solved": float(solved.group(1)) if solved else None}


COLLECTIVE_PROBE = """
import time, torch, torch.distributed as d
from shoal.distributed import NodeSum
d.init_process_group("gloo")
world = d.get_world_size()
node = NodeSum.open(d.get_rank(), world, 4 * max({sizes}), timeout_s=60)
for n in ({sizes}):
    x = torch.zeros(n)
    gathered = list(torch.zeros(world, n).unbind(0))
    for name, op in (("all_reduce", lambda: d.all_reduce(x)), ("all_gather", lambda: d.all_gather(gathered, x)),
                     ("node_sum", lambda: node.sum(x))):
        for _ in range(20):
            op()
        d.barrier()
        t = time.perf_counter()
        for _ in range(300):
            op()
        if d.get_rank() == 0:
            print(f"{{name}} {{n}} {{(time.perf_counter() - t) / 300 * 1e6:.0f}}")
d.destroy_process_group()
"""


def collective_latency(ranks: int, sizes: list[int]) -> dict[tuple[str, int], float]:
    """Microseconds per gloo all-reduce, gloo all-gather and shared-memory
    NodeSum of `size` float32s between `ranks` local processes, back to
    back, 300 calls each (the floor of the trainer's per-minibatch cost;
    shoal.distributed sums through NodeSum when every rank is local, else
    small tensors by all-gather)."""
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
        f.write(COLLECTIVE_PROBE.format(sizes=", ".join(map(str, sizes))))
    try:
        p = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone",
                            f"--nproc-per-node={ranks}", f.name], capture_output=True, text=True, timeout=300)
    finally:
        os.unlink(f.name)
    return {(op, int(n)): float(us)
            for op, n, us in re.findall(r"(all_reduce|all_gather|node_sum) (\d+) (\d+)", p.stdout)}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--envs", nargs="+", default=["cartpole", "snake"])
    p.add_argument("--ranks", nargs="+", type=int, default=[1, 2])
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--target", action="store_true", help="also time to target (envs whose config has one)")
    p.add_argument("--probe-only", action="store_true", help="only the latencies of a sum over the ranks")
    p.add_argument("--train-flags", default="",
                   help="extra `shoal train` flags for every run, e.g. \"--train.device cuda\" (the H100 runs: "
                        "ranks then share GPU 0 unless there are more GPUs)")
    args = p.parse_args(argv)
    print(f"# {os.uname().nodename}, {os.cpu_count()} cores; load before: {os.getloadavg()[0]:.2f}")
    for env in [] if args.probe_only else args.envs:
        sps = {n: [] for n in args.ranks}
        solved = {n: [] for n in args.ranks}
        for r in range(args.rounds):
            for n in args.ranks:
                extra = args.train_flags.split()
                res = run_once(env, n, ["--train.total-timesteps", str(SPS_STEPS.get(env, 300_000)),
                                        "--train.eval-interval", "0", "--train.eval-episodes", "1",
                                        "--train.max-train-seconds", "0", "--train.target-return", "0", *extra])
                sps[n].append(res["sps"])
                if args.target:
                    solved[n].append(run_once(env, n, ["--train.max-train-seconds", "120", *extra])["solved"])
                print(f"  {env} round {r + 1}, {n} rank(s): {res['sps']:,.0f} sps"
                      + (f", target after {solved[n][-1]} s" if args.target else ""), file=sys.stderr, flush=True)
        base_ranks = 1 if 1 in args.ranks else min(args.ranks)   # the column's reference
        base = statistics.median(sps[base_ranks])
        print(f"\n{env} (same total num_envs; median of {args.rounds} rounds)")
        print(f"| ranks | end-to-end steps/s | vs {base_ranks} rank{'s' if base_ranks > 1 else ''} "
              f"| time to target (s, each round) |")
        print("|---:|---:|---:|---|")
        for n in args.ranks:
            med = statistics.median(sps[n])
            times = ", ".join("-" if s is None else f"{s:.1f}" for s in solved[n]) if args.target else "not run"
            print(f"| {n} | {med:,.0f} | {med / base:.2f} | {times} |")
    for n in args.ranks:
        if n > 1:
            # the gradient sizes of CartPole's and Snake's default policies
            lat = collective_latency(n, [4_675, 125_701])
            print(f"\nsums between {n} local ranks, back to back (gloo, and shoal's shared memory): "
                  + ", ".join(f"{op} {size:,} floats {us:.0f} us" for (op, size), us in lat.items()))
    print(f"# load after: {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
