"""The `shoal` command line.

    shoal bench [--quick] [...]      CartPole steps/s: shoal vs gymnasium vs EnvPool
                                     vs a plain C loop (see shoal.bench)
    shoal play ENV --out F.gif       a GIF of ENV played by a random or heuristic policy
    shoal train ENV [--section.key V]  PPO on ENV, configured by configs/*.ini (see shoal.train)
    shoal eval ENV --checkpoint P    mean return of a trained checkpoint; --gif renders a rollout

Each subcommand's own options follow its name; `shoal bench --help` lists them.
"""
from __future__ import annotations

import argparse
import signal
import os
import sys

from shoal.progress import print_out

# Subcommands that are planned but not implemented yet.
_PLANNED: dict[str, str] = {}


def _bench(args: list[str]) -> int:
    from shoal import bench

    return bench.main(args)


def env_families(width: int = 79) -> str:
    """The first-party envs as help text: those with an envs/ folder of
    their own first, then each family (a folder of several envs: mujoco,
    atari) as a wrapped paragraph. Usage lines and errors say ENV instead
    (with every name, they ran to one line of over a hundred)."""
    import textwrap

    import shoal.envs

    families: dict[str, list[str]] = {}
    for name in shoal.envs.names():
        where = (shoal.envs.spec(name).binding or "").split(".")   # shoal.envs.<folder>.binding
        families.setdefault(where[2] if where[:2] == ["shoal", "envs"] and len(where) > 2 else name,
                            []).append(name)
    standalone = sorted(n for names in families.values() if len(names) == 1 for n in names)
    groups = [("standalone", standalone)] + sorted(((f, names) for f, names in families.items() if len(names) > 1),
                                                   key=lambda group: len(group[1]))
    lines = [f"envs ({sum(len(names) for _, names in groups)}; any case, \"_\" and \"-\" ignored):"]
    for family, names in groups:
        lines += textwrap.wrap(", ".join(names), width, initial_indent=f"  {family + f' ({len(names)}):':<16}",
                               subsequent_indent=" " * 18, break_on_hyphens=False)
    return "\n".join(lines)


def _env_spec(name: str, command: str):
    """shoal.envs.spec(name); for an unknown env a ValueError that points to
    `shoal COMMAND --help`'s list of the envs in place of listing them all."""
    import shoal.envs

    try:
        return shoal.envs.spec(name)
    except ValueError as e:
        message, listed, _ = str(e).partition(" shoal has: ")
        if not listed:
            raise
        raise ValueError(f"{message} `shoal {command} --help` lists them by family.") from None


def _play(args: list[str]) -> int:
    import shoal.envs
    from shoal import progress, render

    p = argparse.ArgumentParser(prog="shoal play", description="Write a GIF of a first-party env "
                                "played by a random or heuristic policy (env 0 of a 1-env pool). "
                                "Every env below draws itself but Corridor.",
                                epilog=env_families(), formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("env", metavar="ENV", type=str.lower,
                   help="a first-party env (listed below), e.g. cartpole, pong, halfcheetah")
    p.add_argument("--out", default=None, help="GIF path (default: ENV.gif)")
    p.add_argument("--steps", type=int, default=200, help="steps to play (default 200)")
    p.add_argument("--seed", type=int, default=0, help="the env's seed (default 0)")
    p.add_argument("--policy", choices=["random", "heuristic"], default="random",
                   help="random (default) or heuristic: a scripted policy, for Snake, Drive, Explorer "
                        "and ExplorerPointGoal")
    p.add_argument("--fps", type=int, default=None, help="default: the env's render_fps, else 20")
    progress.add_argument(p, "the play (frames rendered)")
    a = p.parse_args(args)
    if a.steps < 1:
        p.error("--steps must be at least 1")
    if a.fps is not None and a.fps < 1:
        p.error(f"--fps must be at least 1, got {a.fps}")
    try:
        spec = _env_spec(a.env, "play")
    except (ValueError, shoal.envs.BindingNotBuiltError) as e:
        p.error(str(e))
    out = a.out or f"{a.env}.gif"
    problem = _gif_path_problem(out)
    if problem:  # before playing, not after
        p.error(f"--out {out}: {problem}")
    with progress.Progress(a.progress) as shown:
        shown.task(f"play {spec.name}", a.steps + 1, unit="frames")
        try:
            frames = render.play(a.env, steps=a.steps, seed=a.seed, policy=a.policy, on_frame=shown.advance)
        except ValueError as e:
            shown.close()
            p.error(str(e))
        shown.log(f"writing {out}")
        try:
            render.write_gif(frames, out, fps=a.fps or spec.metadata.get("render_fps", 20))
        except OSError as e:  # checked above, but the disk may still be full or the folder gone
            shown.close()
            p.error(f"--out {out}: cannot write the GIF: {e.strerror or e}")
    print_out(f"wrote {out}: {len(frames)} frames of {spec.name} ({a.policy} policy, seed {a.seed})")
    return 0


def _gif_path_problem(path: str) -> str | None:
    """Why no GIF can be written at `path`, or None: checked before the play
    or the evaluation runs."""
    import importlib.util

    from shoal import config
    problem = config.output_file_problem(path, example="play.gif")
    if problem is None and importlib.util.find_spec("PIL") is None:
        problem = 'writing GIFs needs pillow: pip install "shoal[render]"'
    return problem


def _env_index(args: list[str]) -> int | None:
    """Where the env is in `shoal train`'s arguments: the first that is
    neither an option nor an option's value (every option but -h / --help
    takes one, as `--key value` or `--key=value`), so flags may come first."""
    i = 0
    while i < len(args):
        a = args[i]
        if not a.startswith("-"):
            return i
        if a not in ("-h", "--help") and "=" not in a:
            i += 1   # skip its value
        i += 1
    return None


def _import_train():
    """shoal.train (torch is imported there only), or None after a clear error."""
    try:
        import torch  # noqa: F401
    except ImportError:
        print("shoal train / eval need torch: pip install torch (CPU: torch==2.13.0)", file=sys.stderr)
        return None
    from shoal import train
    return train


def _one_of_several_ranks() -> bool:
    """torchrun's WORLD_SIZE says this process is one rank of several (read
    without importing torch: shoal.distributed's planned_world_size checks it)."""
    return os.environ.get("WORLD_SIZE", "1").strip() not in ("", "0", "1")


def _train(args: list[str]) -> int:
    if "TORCHELASTIC_RUN_ID" in os.environ and _one_of_several_ranks():
        from shoal.rank_watch import end_with_launcher
        end_with_launcher()   # first, before the slow imports: see rank_watch
    from shoal import config

    at = _env_index(args)
    env = None if at is None else args[at]
    usage = ("shoal train ENV [--config FILE.ini] [--resume CHECKPOINT] [--run-dir DIR] [--nproc N] "
             "[--section.key VALUE ...]")
    if "-h" in args or "--help" in args:
        try:
            if env is not None:
                _env_spec(env, "train")  # an unknown env: the same error as without --help
            cfg = config.load(env)
        except (config.ConfigError, ValueError) as e:
            print(f"shoal train: error: {e}", file=sys.stderr)
            return 2
        ini = os.path.basename(config.env_ini(env)) if env else None
        where = ("default.ini" if ini is None else f"default.ini + {ini}" if os.path.exists(config.env_ini(env))
                 else f"default.ini, no {ini}")
        print_out(f"usage: {usage}\n\nTrain a PPO agent on ENV, a first-party env (listed below the options).\n"
                  f"Config: configs/default.ini, then configs/ENV.ini, then --config files, then flags.\n\n"
                  f"Every value is checked (range, choices) before anything runs: a bad one is an\n"
                  f"error naming its key (exit status 2).\n\n"
                  f"options:\n  --config FILE        an extra ini file (repeatable)\n"
                  f"  --resume CHECKPOINT  continue from a checkpoint.pt: its [env] and [policy]\n"
                  f"                       settings are used (the weights fix the policy's shape),\n"
                  f"                       [vec] and [train] come from the command line as usual\n"
                  f"  --run-dir DIR        write logs and checkpoints here (default: a new folder\n"
                  f"                       [train] run_dir/ENV-sSEED-TIME[-N]). DIR may be new or\n"
                  f"                       empty; a DIR holding a run (config.ini, log.csv or\n"
                  f"                       checkpoint.pt) is refused, unless --resume names the\n"
                  f"                       checkpoint in DIR: then the run goes on there\n"
                  f"  --nproc N            train data-parallel over N processes on this machine:\n"
                  f"                       shorthand for torchrun --standalone --nproc-per-node N\n"
                  f"                       -m shoal train ... (README: Scaling out; [dist] keys)\n\n"
                  f"{env_families()}\n\n"
                  f"keys ({where}; flag, default, type):\n{config.help_text(cfg)}")
        return 0
    if env is None:
        print(f"usage: {usage}\nshoal train: error: the env is required, e.g. cartpole "
              f"(`shoal train --help` lists the envs by family)", file=sys.stderr)
        return 2
    rest = args[:at] + args[at + 1:]
    extra, resume, run_dir, nproc, flags = [], None, None, None, []
    i = 0
    while i < len(rest):
        a = rest[i]
        name, eq, value = a.partition("=")
        if name in ("--config", "--resume", "--run-dir", "--nproc"):
            if not eq:
                if i + 1 >= len(rest):
                    print(f"shoal train: error: {name} needs a value", file=sys.stderr)
                    return 2
                value = rest[i + 1]
                i += 1
            if not value.strip():
                print(f"shoal train: error: {name} needs a value, got an empty string", file=sys.stderr)
                return 2
            if name == "--config":
                extra.append(value)
            elif name == "--resume":
                resume = value
            elif name == "--nproc":
                nproc = value
            else:
                run_dir = value
        else:
            flags.append(a)
        i += 1
    ranks = None
    if nproc is not None:
        ranks = _nproc_count(nproc)
        if ranks is None:
            return 2
    # Everything checkable is checked here, once, before any run starts: with
    # --nproc, before torchrun (else each rank would report it, then torchrun).
    try:
        _env_spec(env, "train")
        cfg = config.load(env, flags, extra)
        blocked = config.not_a_folder(run_dir) if run_dir is not None else None
        if blocked:
            raise config.ConfigError(f"--run-dir {run_dir}: {blocked} exists and is not a folder")
        train = _import_train()
        if train is None:
            return 2
        if ranks is not None:
            train.check_world_split(cfg, ranks)
            _check_rank_setup(cfg, ranks)
            if resume is not None:   # a missing, corrupt or other env's one: its error, not every rank's
                train.check_checkpoint_env(train.load_checkpoint(resume), cfg, resume)
    except (config.ConfigError, ValueError, FileNotFoundError) as e:  # train.RunError too
        print(f"shoal train: error: {e}", file=sys.stderr)
        return 2
    if ranks is not None:
        return _torchrun(ranks, args)
    try:
        summary = train.train(cfg, resume=resume, run_dir=run_dir)
    except (config.ConfigError, ValueError, FileNotFoundError) as e:  # train.RunError too
        print(f"shoal train: error: {e}", file=sys.stderr)
        return 2
    except Exception as e:  # a pool worker died (WorkerError): the checkpoint was saved, its note says where
        from shoal.distributed import DistError   # (or a rank cannot join or lost a peer: one line per rank)
        from shoal.pool import WorkerError  # imported by then: training uses the pool
        # OSError: a final save on a full disk; MemoryError: a pool too big for memory
        lost_peer = _lost_a_peer(e)
        if not (lost_peer or isinstance(e, (WorkerError, DistError, OSError, MemoryError))):
            raise
        message = e.strerror if isinstance(e, train.CheckpointError) else str(e)   # (its errno prefix dropped)
        if lost_peer:
            message = (f"a collective over the ranks failed: another rank left or stopped answering "
                       f"({message.strip().splitlines()[0] if message.strip() else type(e).__name__})")
        notes = list(getattr(e, "__notes__", []))
        rank = os.environ.get("RANK")
        if rank is not None and _one_of_several_ranks() and not any("data-parallel rank" in n for n in notes):
            notes.append(f"in data-parallel rank {rank} of {os.environ['WORLD_SIZE']}")   # (an error before training, as its pool's)
        print("shoal train: error: " + "\n".join([message, *notes]), file=sys.stderr)
        return 1
    except KeyboardInterrupt as e:  # Ctrl-C or SIGTERM (train.Terminated) outside the training loop
        terminated = type(e).__name__ == "Terminated"
        print(f"shoal train: {'terminated' if terminated else 'interrupted'}", file=sys.stderr)
        return 143 if terminated else 130
    # 130 after Ctrl-C, 143 after SIGTERM (train.py's summary["signal"]; older ones: Ctrl-C)
    status = 128 + int(summary.get("signal", 2)) if summary["interrupted"] else 0
    if summary.get("rank", 0) > 0:  # rank 0 reports for the whole data-parallel run
        return status
    solved = summary.get("solved_seconds")
    print_out(f"trained {summary['global_step']:,} steps in {summary['train_seconds']:.1f} s"
              + (f"; reached the target return after {solved:.2f} s" if solved is not None else "")
              + (f" (stopped by [train] max_train_seconds = {summary['max_train_seconds']:g}, which counts "
                 f"the whole run, resumes included)" if summary.get("time_capped") else "")
              + (f"; final eval mean return {summary['eval_return']:.2f}" if "eval_return" in summary else "")
              + f"\ncheckpoint: {summary['checkpoint']}")
    return status


def _lost_a_peer(error: BaseException) -> bool:
    """Whether `error` is torch.distributed's for a collective whose peer
    went away (gloo: a connection reset or refused, a timeout): a rank's
    one-line error, not a Python traceback per rank."""
    torch_dist = sys.modules.get("torch.distributed")
    kinds = tuple(k for k in (getattr(torch_dist, "DistError", None),) if isinstance(k, type))
    return isinstance(error, kinds) or (isinstance(error, RuntimeError) and "gloo" in str(error))


def _check_rank_setup(cfg: dict, ranks: int) -> None:
    """What each of `ranks` local ranks would refuse at setup (a device it
    cannot have, nccl without a GPU), refused once here, before torchrun: a
    ConfigError naming the key."""
    from shoal import config, distributed, train
    train.resolve_device(cfg["train"]["device"])  # cuda without a GPU: a ValueError, reported as a config error
    device = distributed.rank_device(cfg["train"]["device"], 0)
    try:
        distributed.pick_backend(cfg.get("dist", {}).get("backend", "auto"), device, ranks)
    except distributed.DistError as e:
        raise config.ConfigError(str(e)) from None


def _nproc_count(nproc: str) -> int | None:
    """--nproc's number of ranks, or None after a clear error."""
    try:
        n = int(nproc)
    except ValueError:
        n = 0
    if n < 1:
        print(f"shoal train: error: --nproc {nproc}: expected a number of processes >= 1", file=sys.stderr)
        return None
    if "WORLD_SIZE" in os.environ:
        print("shoal train: error: --nproc inside a torchrun job: give the rank count to torchrun "
              "(--nproc-per-node) instead", file=sys.stderr)
        return None
    return n


def _torchrun(n: int, args: list[str]) -> int:
    """`shoal train ... --nproc N` (its arguments checked): torchrun
    --standalone (one node, N ranks) with the same arguments, run in this
    process (torchrun's own code, as `python -m torch.distributed.run` runs
    it) so that its outcome becomes shoal's exit status, not a traceback: 0,
    or the first failed rank's (_torchrun_status), or 128 + N when torchrun
    itself gets signal N (Ctrl-C: 130, after the ranks have saved and exited)."""
    from torch.distributed import run as torchrun
    from torch.distributed.elastic.multiprocessing import SignalException
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError

    i = next(i for i, a in enumerate(args) if a == "--nproc" or a.startswith("--nproc="))
    train_args = args[:i] + args[i + (1 if "=" in args[i] else 2):]  # without --nproc and its value
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        torchrun.run(torchrun.parse_args(["--standalone", f"--nproc-per-node={n}",
                                          "-m", "shoal", "train", *train_args]))
    except ChildFailedError as e:
        return _torchrun_status(e.failures)
    except SignalException as e:  # torchrun passed the signal to the ranks and waited for them
        if e.sigval not in (signal.SIGINT, signal.SIGTERM):  # those two: each rank said it saved
            print(f"shoal train: stopped by {e.sigval.name}", file=sys.stderr)
        return 128 + int(e.sigval)
    except KeyboardInterrupt:  # a Ctrl-C before torchrun set its handlers (no rank running yet)
        print("shoal train: interrupted", file=sys.stderr)
        return 130
    return 0


def _torchrun_status(failures: dict) -> int:
    """shoal's exit status for a torchrun job whose ranks failed
    (ChildFailedError.failures: global rank -> ProcessFailure), with one
    line per rank on stderr in place of torchrun's traceback: the first
    failed rank's own status (2 a bad argument, 1 an error, 130 Ctrl-C, 143
    SIGTERM), or 128 + N for a rank killed by signal N, as a shell reports it."""
    for rank in sorted(failures):
        f = failures[rank]
        if f.exitcode < 0:
            what = f"was killed by {f.signal_name()}"
        elif f.exitcode in (130, 143):  # stopped by Ctrl-C or SIGTERM, its checkpoint saved: not an error
            continue
        else:
            what = f"exited with status {f.exitcode}"
        print(f"shoal train: error: rank {rank} (pid {f.pid}) {what}", file=sys.stderr)
    # torchrun's root cause: the earliest. Its timestamps are whole seconds,
    # so on a tie the rank that failed by itself comes before one that
    # torchrun then stopped with SIGTERM (killed by it, or exiting 143)
    def stopped_by_torchrun(f) -> bool:
        return f.exitcode in (-int(signal.SIGTERM), 128 + int(signal.SIGTERM))
    first = min(failures, key=lambda r: (failures[r].timestamp, stopped_by_torchrun(failures[r]), r))
    code = failures[first].exitcode
    return 128 - code if code < 0 else code


def _eval(args: list[str]) -> int:
    p = argparse.ArgumentParser(prog="shoal eval", description="Evaluate a checkpoint written by "
                                "`shoal train`: the mean return over episodes, and optionally a GIF.",
                                epilog=env_families(), formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("env", metavar="ENV", type=str.lower,
                   help="the checkpoint's env (listed below), e.g. cartpole, halfcheetah")
    p.add_argument("--checkpoint", required=True, help="a checkpoint.pt from shoal train")
    p.add_argument("--episodes", type=int, default=32, help="episodes, one per env (default 32)")
    p.add_argument("--seed", type=int, default=12345,
                   help="episode i runs in an env seeded seed + i (default 12345)")
    how = p.add_mutually_exclusive_group()
    how.add_argument("--sample", action="store_true",
                     help="sample actions (default: as the run evaluated, its [train] eval_deterministic)")
    how.add_argument("--argmax", action="store_true",
                     help="argmax actions (Box actions: the Gaussian's mean)")
    p.add_argument("--gif", default=None, help="also write a GIF of one rollout here")
    p.add_argument("--gif-steps", type=int, default=300, help="steps of the GIF's rollout (default 300)")
    a = p.parse_args(args)
    import shoal.envs
    if a.episodes < 1:
        p.error("--episodes must be at least 1")
    # Checked here, not where the pool or the GIF writer would refuse them: after the evaluation.
    if not 0 <= a.seed <= 2**64 - a.episodes:  # env i is seeded seed + i (a uint64)
        p.error(f"--seed must be an int in [0, 2**64 - episodes], got {a.seed}")
    if a.gif_steps < 1:
        p.error(f"--gif-steps must be at least 1, got {a.gif_steps}")
    problem = _gif_path_problem(a.gif) if a.gif else None
    if problem:
        p.error(f"--gif {a.gif}: {problem}")
    try:
        spec = _env_spec(a.env, "train")
    except ValueError as e:
        p.error(str(e))
    if not os.path.exists(a.checkpoint):
        p.error(f"checkpoint {a.checkpoint!r} does not exist")
    from shoal import config, render

    if a.gif and not render.supports_render(spec):
        p.error(f"--gif: {spec.name} does not render")
    train = _import_train()
    if train is None:
        return 2
    try:
        ckpt = train.load_checkpoint(a.checkpoint)
        saved_train = ckpt["config"].get("train") if isinstance(ckpt["config"], dict) else None
        threads = saved_train.get("torch_threads", 0) if isinstance(saved_train, dict) else 0
        if isinstance(threads, int) and threads > 0:  # as the run trained (on 2 cores, more threads spin)
            train.torch.set_num_threads(threads)
        policy, cfg = train.policy_from_checkpoint(ckpt, a.checkpoint)
    except train.RunError as e:
        print(f"shoal eval: error: {e}", file=sys.stderr)
        return 2
    if shoal.envs.spec(cfg["env"]["name"]).name != spec.name:
        p.error(f"the checkpoint is for {cfg['env']['name']}, not {spec.name}")
    # The checkpoint's [env] kwargs without its training-only ones (reward_clip...): real scores.
    env_kwargs = config.env_kwargs(cfg["env"], evaluation=True)
    # As the run's own evaluations (final_eval.json), unless a flag says
    # otherwise: Atari's configs sample (an argmax policy can stall, never firing)
    run_train = cfg.get("train") if isinstance(cfg.get("train"), dict) else {}
    deterministic = (False if a.sample else True if a.argmax
                     else bool(run_train.get("eval_deterministic", True)))
    r = train.evaluate(policy, spec.name, a.episodes, a.seed, deterministic=deterministic,
                       env_kwargs=env_kwargs)
    mode = "sampled" if not deterministic else "mean" if spec.continuous_action else "argmax"
    shown = ", ".join(f"{k}={v}" for k, v in env_kwargs.items())
    print_out(f"{spec.name}: mean return {r['mean_return']:.2f} over {a.episodes} episodes "
              f"({mode} actions; mean length {r['mean_length']:.1f})" + (f"; env {shown}" if shown else ""))
    if r["cut_off"]:
        print_out(f"{r['cut_off']} of the {a.episodes} episodes had not ended after {r['max_steps']:,} "
                  f"steps: their returns so far are counted, and their lengths are not in the mean")
    if a.gif:
        frames = train.rollout_frames(policy, spec.name, a.gif_steps, a.seed, deterministic=deterministic,
                                      env_kwargs=env_kwargs)
        fps = shoal.envs.spec(spec.name, **env_kwargs).metadata.get("render_fps", 20)  # Atari: by frameskip
        try:
            render.write_gif(frames, a.gif, fps=fps)
        except OSError as e:  # checked above, but the disk may still be full or the folder gone
            p.error(f"--gif {a.gif}: cannot write the GIF: {e.strerror or e}")
        print_out(f"wrote {a.gif}: {len(frames)} frames")
    return 0


_COMMANDS = {"bench": _bench, "play": _play, "train": _train, "eval": _eval}


def parser() -> argparse.ArgumentParser:
    import shoal

    p = argparse.ArgumentParser(prog="shoal", description="shoal: a fast vectorized RL env pool.")
    p.add_argument("--version", action="version", version=f"shoal {shoal.__version__}")
    commands = p.add_subparsers(dest="command", metavar="COMMAND", required=True)
    # add_help=False: `shoal bench --help` reaches the benchmark's own parser.
    commands.add_parser("bench", add_help=False,
                        help="the benchmark: CartPole (shoal vs gymnasium vs EnvPool vs a C loop), then "
                             "the Python-env, first-party-env and MuJoCo sections "
                             "(`shoal bench --help` for options)")
    commands.add_parser("play", add_help=False,
                        help="write a GIF of an env played by a random or heuristic policy "
                             "(`shoal play --help` for options)")
    commands.add_parser("train", add_help=False,
                        help="train a PPO agent on an env, configured by ini files "
                             "(`shoal train --help` lists every key)")
    commands.add_parser("eval", add_help=False,
                        help="evaluate a trained checkpoint (and render a GIF)")
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
