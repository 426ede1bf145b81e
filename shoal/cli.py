"""The `shoal` command line.

    shoal bench [--quick] [...]      CartPole steps/s: shoal vs gymnasium vs EnvPool
                                     vs a plain C loop (see shoal.bench)
    shoal play ENV --out F.gif       a GIF of ENV played by a random or heuristic policy
    shoal train ENV / shoal eval     not yet available

Each subcommand's own options follow its name; `shoal bench --help` lists them.
"""
from __future__ import annotations

import argparse
import sys

# Subcommands that are planned but not implemented yet.
_PLANNED = {
    "train": "train an agent with PPO on an env, configured by ini files",
    "eval": "evaluate a trained checkpoint (and render GIFs)",
}


def _bench(args: list[str]) -> int:
    from shoal import bench

    return bench.main(args)


def _play(args: list[str]) -> int:
    import shoal.envs
    from shoal import render

    p = argparse.ArgumentParser(prog="shoal play", description="Write a GIF of a first-party env "
                                "played by a random or heuristic policy (env 0 of a 1-env pool).")
    p.add_argument("env", choices=[n.lower() for n in shoal.envs.names()], type=str.lower)
    p.add_argument("--out", default=None, help="GIF path (default: ENV.gif)")
    p.add_argument("--steps", type=int, default=200, help="steps to play (default 200)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--policy", choices=["random", "heuristic"], default="random")
    p.add_argument("--fps", type=int, default=None, help="default: the env's render_fps, else 20")
    a = p.parse_args(args)
    if a.steps < 1:
        p.error("--steps must be at least 1")
    spec = shoal.envs.spec(a.env)
    try:
        frames = render.play(a.env, steps=a.steps, seed=a.seed, policy=a.policy)
    except ValueError as e:
        p.error(str(e))
    out = a.out or f"{a.env}.gif"
    render.write_gif(frames, out, fps=a.fps or spec.metadata.get("render_fps", 20))
    print(f"wrote {out}: {len(frames)} frames of {spec.name} ({a.policy} policy, seed {a.seed})")
    return 0


_COMMANDS = {"bench": _bench, "play": _play}


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="shoal", description="shoal: a fast vectorized RL env pool.")
    commands = p.add_subparsers(dest="command", metavar="COMMAND", required=True)
    # add_help=False: `shoal bench --help` reaches the benchmark's own parser.
    commands.add_parser("bench", add_help=False,
                        help="CartPole steps/s: shoal vs gymnasium vs EnvPool vs a C loop "
                             "(`shoal bench --help` for options)")
    commands.add_parser("play", add_help=False,
                        help="write a GIF of an env played by a random or heuristic policy "
                             "(`shoal play --help` for options)")
    for name, what in _PLANNED.items():
        commands.add_parser(name, add_help=False, help=f"{what} (not yet available)")
    return p


def main(argv: list[str] | None = None) -> int:
    p = parser()
    args, rest = p.parse_known_args(sys.argv[1:] if argv is None else argv)
    if args.command in _PLANNED:
        print(f"shoal {args.command}: not yet available in shoal's current version", file=sys.stderr)
        return 2
    return _COMMANDS[args.command](rest)


if __name__ == "__main__":
    sys.exit(main())
