"""The `shoal` command line.

    shoal bench [--quick] [...]      CartPole steps/s: shoal vs gymnasium vs EnvPool
                                     vs a plain C loop (see shoal.bench)
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


_COMMANDS = {"bench": _bench}


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="shoal", description="shoal: a fast vectorized RL env pool.")
    commands = p.add_subparsers(dest="command", metavar="COMMAND", required=True)
    # add_help=False: `shoal bench --help` reaches the benchmark's own parser.
    commands.add_parser("bench", add_help=False,
                        help="CartPole steps/s: shoal vs gymnasium vs EnvPool vs a C loop "
                             "(`shoal bench --help` for options)")
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
