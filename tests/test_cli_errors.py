"""The CLI's clear errors: a bad argument to shoal play / train / eval is one
line naming it and exit status 2, found before anything runs (no traceback,
no evaluation thrown away); `shoal play` of a Box-action env; `--nproc` runs
checked before torchrun starts, and torchrun's outcome as shoal's exit status."""
import configparser
import importlib.util
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

import shoal.envs
from shoal import cli, config, render

# 2 updates of 8 envs x 16 steps, no evaluation until the (2-episode) final one
TINY = ["--vec.backend", "serial", "--vec.num-envs", "8", "--vec.num-batches", "1",
        "--train.num-steps", "16", "--train.total-timesteps", "256", "--train.dashboard", "none",
        "--train.tensorboard", "false", "--train.checkpoint-interval", "0",
        "--train.eval-interval", "0", "--train.eval-episodes", "2"]


def refused(capsys, args) -> str:
    """stderr of a shoal command that must stop with exit status 2 (returned,
    or argparse's SystemExit), with no traceback."""
    try:
        status = cli.main(args)
    except SystemExit as e:
        status = e.code
    assert status == 2, f"shoal {' '.join(args)}: exit status {status}"
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return err


def shoal_cmd(*args: str) -> list[str]:
    return [sys.executable, "-P", "-m", "shoal", *args]   # -P: the installed shoal, not the checkout's folder


# ---- shoal play: Box actions --------------------------------------------------
def test_random_actions_for_box_envs_lie_within_the_bounds_and_follow_the_seed():
    for name in ("HalfCheetah", "InvertedPendulum"):  # bounds +-1 and +-3
        spec = shoal.envs.spec(name)
        assert spec.continuous_action and len(spec.action_nvec) == 0  # no nvec to sample from
        a = render.random_actions(spec, np.random.default_rng(3), 200)
        assert a.shape == (200, spec.action_size)
        assert (a >= spec.action_low).all() and (a <= spec.action_high).all()
        assert a.min() < spec.action_low.max() / 2 and a.max() > spec.action_high.min() / 2  # spread over them
        np.testing.assert_array_equal(a, render.random_actions(spec, np.random.default_rng(3), 200))
        assert not np.array_equal(a, render.random_actions(spec, np.random.default_rng(4), 200))


def test_random_actions_for_discrete_envs_are_as_before():
    """Discrete envs draw the same integers as before Box actions were handled: same GIFs."""
    for name in ("CartPole", "Snake", "Explorer"):
        spec = shoal.envs.spec(name)
        nvec = np.asarray(spec.action_nvec)
        rows = spec.agents
        got = render.random_actions(spec, np.random.default_rng(5), rows)
        np.testing.assert_array_equal(got, np.random.default_rng(5).integers(0, nvec, size=(rows, len(nvec))))


def test_shoal_play_a_mujoco_env(tmp_path):
    # In its own process: there mujoco is not imported before the first frame,
    # so the env can pick EGL where there is no display (a pytest process has
    # imported mujoco while collecting the MuJoCo tests).
    if importlib.util.find_spec("mujoco") is None:
        pytest.skip("MuJoCo envs need the mujoco extra")
    pytest.importorskip("PIL", reason="GIFs need pillow (pip install 'shoal[render]')")
    out = tmp_path / "halfcheetah.gif"
    done = subprocess.run(shoal_cmd("play", "halfcheetah", "--steps", "3", "--out", str(out), "--progress",
                                    "none"), capture_output=True, text=True, timeout=120)
    if done.returncode != 0 and "MUJOCO_GL" in done.stderr:   # no OpenGL at all: the error says what to do
        pytest.skip(f"no OpenGL context for MuJoCo here: {done.stderr.strip()[-300:]}")
    assert done.returncode == 0, done.stderr
    assert "wrote" in done.stdout
    from PIL import Image
    with Image.open(out) as gif:
        assert gif.n_frames == 4  # the reset's frame, then one per step


# ---- shoal play / eval: arguments checked before anything runs ---------------
@pytest.mark.parametrize("flags,expected", [
    (["--fps", "-3"], "--fps must be at least 1"),
    (["--fps", "0"], "--fps must be at least 1"),
    (["--out", "/nonexistent/x.gif"], "--out /nonexistent/x.gif: folder /nonexistent does not exist"),
])
def test_play_refuses_bad_arguments(tmp_path, monkeypatch, capsys, flags, expected):
    monkeypatch.chdir(tmp_path)  # where the default --out would go
    assert expected in refused(capsys, ["play", "cartpole", "--steps", "2", "--progress", "none", *flags])


def test_play_refuses_a_folder_as_out(tmp_path, capsys):
    assert f"--out {tmp_path}: is a folder" in refused(capsys, ["play", "cartpole", "--out", str(tmp_path)])


def test_eval_says_when_episodes_were_cut_off(checkpoint, monkeypatch, capsys):
    """Episodes still running at the evaluation's step cap count their
    return so far: shoal eval says how many, not a bare "mean length nan"."""
    from shoal import train
    real = train.evaluate
    monkeypatch.setattr(train, "evaluate", lambda *a, **k: real(*a, **{**k, "max_steps": 3}))
    assert cli.main(["eval", "cartpole", "--checkpoint", checkpoint, "--episodes", "2"]) == 0
    out = capsys.readouterr().out
    assert "2 of the 2 episodes had not ended after 3 steps" in out


def test_play_without_pillow_says_so_before_playing(tmp_path, capsys, monkeypatch):
    """pillow (the [render] extra) is checked with the GIF's path, before
    the play or evaluation runs, not as a traceback at the end."""
    import importlib.util
    find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "PIL" else find_spec(name, *a))
    out = tmp_path / "x.gif"
    assert 'writing GIFs needs pillow: pip install "shoal[render]"' in \
        refused(capsys, ["play", "cartpole", "--out", str(out)])
    assert not out.exists()


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    pytest.importorskip("torch")
    from shoal import train

    summary = train.train(config.load("cartpole", TINY), run_dir=str(tmp_path_factory.mktemp("run")))
    return summary["checkpoint"]


def test_eval_acts_as_the_runs_own_evaluations_unless_told(checkpoint, monkeypatch, capsys):
    """shoal eval's actions default to the checkpoint's [train]
    eval_deterministic (Atari's configs sample: an argmax policy can stall),
    so it replays final_eval.json; --argmax / --sample override it."""
    from shoal import train
    seen = []
    real_evaluate, real_policy = train.evaluate, train.policy_from_checkpoint
    monkeypatch.setattr(train, "evaluate", lambda *a, **k: seen.append(k["deterministic"]) or real_evaluate(*a, **k))
    for run_samples in (False, True):
        def policy_from_checkpoint(*a, run_samples=run_samples):
            policy, cfg = real_policy(*a)
            cfg = {**cfg, "train": {**cfg["train"], "eval_deterministic": not run_samples}}
            return policy, cfg
        monkeypatch.setattr(train, "policy_from_checkpoint", policy_from_checkpoint)
        for flags in ([], ["--argmax"], ["--sample"]):
            assert cli.main(["eval", "cartpole", "--checkpoint", checkpoint, "--episodes", "1", *flags]) == 0
    assert seen == [True, True, False, False, True, False]
    assert "sampled actions" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        cli.main(["eval", "cartpole", "--checkpoint", checkpoint, "--argmax", "--sample"])


@pytest.mark.parametrize("flags,expected", [
    (["--gif", "/nonexistent/dir/x.gif"], "--gif /nonexistent/dir/x.gif: folder /nonexistent/dir does not exist"),
    (["--seed", "-1"], "--seed must be an int in [0, 2**64 - episodes], got -1"),
    (["--seed", str(2**64 - 1)], "--seed must be an int"),  # env 1 of 2 would be seeded 2**64
    (["--gif", "x.gif", "--gif-steps", "-5"], "--gif-steps must be at least 1"),
    (["--gif", "x.gif", "--gif-steps", "0"], "--gif-steps must be at least 1"),
])
def test_eval_refuses_bad_arguments_before_evaluating(checkpoint, tmp_path, monkeypatch, capsys, flags, expected):
    monkeypatch.chdir(tmp_path)
    err = refused(capsys, ["eval", "cartpole", "--checkpoint", checkpoint, "--episodes", "2", *flags])
    assert expected in err
    assert not os.listdir(tmp_path)  # no GIF written
    # ... and the same command with good values runs
    assert cli.main(["eval", "cartpole", "--checkpoint", checkpoint, "--episodes", "2"]) == 0
    assert "mean return" in capsys.readouterr().out


# ---- shoal train: the run folder, [env] name, target_return, [DEFAULT], --help ---------
def test_a_run_dir_that_is_a_file_is_a_clear_error(tmp_path, capsys):
    afile = tmp_path / "afile"
    afile.write_text("not a folder")
    for flags in (["--train.run-dir", str(afile)], ["--train.run-dir", str(afile / "runs")]):
        err = refused(capsys, ["train", "cartpole", *TINY, *flags])
        assert "[train] run_dir = " in err and "not an existing file" in err and "--train.run-dir" in err
    err = refused(capsys, ["train", "cartpole", *TINY, "--run-dir", str(afile / "run")])
    assert f"--run-dir {afile / 'run'}: {afile} exists and is not a folder" in err
    assert afile.read_text() == "not a folder"


def test_env_name_is_the_positional_argument_not_a_key(tmp_path, capsys):
    err = refused(capsys, ["train", "cartpole", "--env.name", "snake"])
    assert "--env.name" in err and "ENV argument" in err
    p = tmp_path / "snake.ini"
    p.write_text("[env]\nname = snake\n")
    with pytest.raises(config.ConfigError, match=r"\[env\] name = 'snake' \(in .*snake.ini\).*ENV argument"):
        config.load("cartpole", [], [str(p)])
    # a run's saved config.ini names its own env: it loads back for that env
    p.write_text("[env]\nname = CartPole\n[train]\nseed = 4\n")
    assert config.load("cartpole", [], [str(p)])["train"]["seed"] == 4
    assert cli.main(["train", "cartpole", "--help"]) == 0
    assert "--env.name" not in capsys.readouterr().out  # listed, it did nothing


def test_an_empty_target_return_means_never(tmp_path):
    assert config.load("cartpole", ["--train.target-return", ""])["train"]["target_return"] == 0.0
    p = tmp_path / "x.ini"
    p.write_text("[train]\ntarget_return =\n")
    assert config.load("cartpole", [], [str(p)])["train"]["target_return"] == 0.0
    with open(os.path.join(config.configs_dir(), "default.ini")) as f:  # as its comment says
        assert "(0 or empty = never)" in f.read()
    with pytest.raises(config.ConfigError, match="expected a float"):  # other float keys still need a number
        config.load("cartpole", ["--train.learning-rate", ""])


@pytest.mark.parametrize("text", ["[DEFAULT]\nseed = 3\n", "[train]\nnum_steps = 8\n\n[DEFAULT]\nseed = 3\n"])
def test_a_default_section_is_refused_naming_the_file(tmp_path, text):
    p = tmp_path / "d.ini"
    p.write_text(text)
    line = text.splitlines().index("[DEFAULT]") + 1
    with pytest.raises(config.ConfigError, match=rf"d.ini: line {line}: section \[DEFAULT\] is not supported"):
        config.load("cartpole", [], [str(p)])


@pytest.mark.parametrize("env,hint", [("foo", ""), ("shoal/CartPole-v0", "did you mean 'CartPole'?")])
def test_train_help_for_an_unknown_env_is_the_unknown_env_error(capsys, env, hint):
    err = refused(capsys, ["train", env, "--help"])
    assert f"shoal train: error: unknown env '{env}'" in err and hint in err
    assert capsys.readouterr().out == ""


def test_train_names_the_vec_keys_when_workers_outnumber_envs(tmp_path, capsys):
    """The pool's own error (num_workers=8 exceeds num_envs=4) names no
    config key: shoal train's names them and the flags that fix it."""
    err = refused(capsys, ["train", "cartpole", *TINY, "--run-dir", str(tmp_path / "r"),
                           "--vec.backend", "multiprocessing", "--vec.num-envs", "4", "--vec.num-workers", "8"])
    assert "shoal train: error: [vec] num_workers = 8 is more than [vec] num_envs = 4" in err
    assert "--vec.num-workers 4 or fewer" in err and "--vec.num-envs 8 or more" in err
    assert not (tmp_path / "r").exists()


def test_usage_lines_say_env_and_help_lists_the_envs_by_family(capsys):
    """Usage lines and errors name ENV, not every env (argparse's choices put
    some 120 names on one line): --help lists them, wrapped, by family, and
    an unknown env's error points there."""
    names = shoal.envs.names()
    for args, expected in [(["play"], "the following arguments are required: ENV"),   # argparse's
                           (["play", "nosuchenv"], "unknown env 'nosuchenv'; shoal's envs go by name alone"),
                           (["train"], "the env is required, e.g. cartpole"),
                           (["train", "nosuchenv"], "unknown env 'nosuchenv'; shoal's envs go by name alone")]:
        err = refused(capsys, args)
        assert expected in err and (args == ["play"] or f"`shoal {args[0]} --help` lists" in err), err
        assert sum(name in err for name in names) <= 1, err   # "did you mean" names one at most
    with pytest.raises(SystemExit) as e:
        cli.main(["play", "--help"])
    assert e.value.code == 0
    play_help = capsys.readouterr().out
    with pytest.raises(SystemExit) as e:
        cli.main(["eval", "--help"])
    assert e.value.code == 0
    eval_help = capsys.readouterr().out
    assert cli.main(["train", "--help"]) == 0
    for out in (play_help, eval_help, capsys.readouterr().out):
        envs = out[out.index("\nenvs ("):].split("\n\n")[0].strip().splitlines()
        assert all(len(line) <= 79 for line in envs)
        assert envs[1].startswith("  standalone (6): CartPole,") and any(line.startswith("  atari (") for line in envs)
        assert all(name in out for name in names)


def test_options_may_come_before_the_env(tmp_path, monkeypatch, capsys):
    """The env is the first argument that is not an option's value: flags
    and --config / --run-dir may come first (the value after --config was
    taken for the env), even with a value equal to an env's name."""
    assert cli._env_index(["--config", "x.ini", "--train.seed", "-3", "corridor"]) == 4
    assert cli._env_index(["--run-dir=a", "-h", "corridor"]) == 2
    assert cli._env_index(["--train.seed", "3"]) is None
    extra = tmp_path / "x.ini"
    extra.write_text("[train]\nseed = 7\n")
    assert cli.main(["train", "--config", str(extra), "--help"]) == 0
    assert "usage: shoal train ENV" in capsys.readouterr().out
    pytest.importorskip("torch", reason="the training run below needs torch")
    monkeypatch.chdir(tmp_path)   # --run-dir corridor: a folder here named like the env
    assert cli.main(["train", "--config", str(extra), "--run-dir", "corridor", "corridor", *TINY]) == 0
    saved = configparser.ConfigParser()
    saved.read(tmp_path / "corridor" / "config.ini")
    assert saved["env"]["name"].lower() == "corridor" and saved["train"]["seed"] == "7"


def test_train_help_names_the_env_ini_it_used(capsys):
    assert cli.main(["train", "cart_pole", "--help"]) == 0  # as `shoal train cart_pole` accepts it
    out = capsys.readouterr().out
    assert "keys (default.ini + cartpole.ini;" in out and "0.003" in out  # its learning rate, shown
    assert cli.main(["train", "corridor", "--help"]) == 0
    assert "keys (default.ini, no corridor.ini;" in capsys.readouterr().out


# ---- shoal train --nproc: checked before torchrun; torchrun's outcome as shoal's status ------
def test_nproc_with_a_bad_value_is_one_error_before_torchrun(tmp_path):
    p = subprocess.run(shoal_cmd("train", "cartpole", "--nproc", "2", "--train.lerning-rate", "1"),
                       capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert p.returncode == 2
    assert p.stderr.count("shoal train: error: unknown key 'lerning_rate'") == 1, p.stderr
    assert "Traceback" not in p.stderr and "torch" not in p.stderr  # torchrun never started


def test_a_ranks_error_before_training_names_the_rank(monkeypatch, capsys):
    """An error of one rank before its training loop (its pool out of file
    descriptors) says which rank it is, as errors inside the loop do."""
    pytest.importorskip("torch")
    from shoal import train

    def no_fds(*args, **kwargs):
        raise OSError(24, "Too many open files")
    monkeypatch.setattr(train, "train", no_fds)
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    assert cli.main(["train", "cartpole"]) == 1
    err = capsys.readouterr().err
    assert err == "shoal train: error: [Errno 24] Too many open files\nin data-parallel rank 1 of 2\n", err


def test_torchrun_failures_become_shoal_exit_statuses(capsys):
    pytest.importorskip("torch")
    from torch.distributed.elastic.multiprocessing.errors import ProcessFailure

    def failures(*codes):
        return {rank: ProcessFailure(local_rank=rank, pid=100 + rank, exitcode=c, error_file="")
                for rank, c in enumerate(codes)}

    assert cli._torchrun_status(failures(2, 2)) == 2  # a bad argument, each rank said which
    assert "rank 0 (pid 100) exited with status 2" in capsys.readouterr().err
    assert cli._torchrun_status(failures(130, 130)) == 130  # Ctrl-C: the checkpoint saved
    assert cli._torchrun_status(failures(143, 143)) == 143  # SIGTERM: the same
    assert capsys.readouterr().err == ""
    assert cli._torchrun_status(failures(-signal.SIGKILL)) == 128 + signal.SIGKILL
    assert "rank 0 (pid 100) was killed by SIGKILL" in capsys.readouterr().err
    # rank 1 fails; torchrun SIGTERMs rank 0 within the same second (its
    # timestamps are whole seconds): the status is rank 1's, not 143
    for stopped in (-signal.SIGTERM, 143):
        same_second = failures(stopped, 1)
        for f in same_second.values():
            f.timestamp = 1_700_000_000
        assert cli._torchrun_status(same_second) == 1


def test_ctrl_c_stops_an_nproc_run_with_status_130(tmp_path):
    pytest.importorskip("torch")
    cmd = shoal_cmd("train", "cartpole", "--nproc", "2", "--run-dir", str(tmp_path / "run"), *TINY,
                    "--train.total-timesteps", "1e9", "--train.max-train-seconds", "0", "--train.target-return", "0",
                    "--train.checkpoint-interval", "0.2")
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True, cwd=tmp_path)
    lines = []
    try:
        for line in proc.stdout:  # both ranks training, then Ctrl-C (to the terminal's process group)
            lines.append(line)
            if sum(f"rank {r} of 2" in x for x in lines for r in (0, 1)) == 2:
                break
        assert proc.poll() is None, "".join(lines)
        # after an update (a periodic checkpoint): stopped before its first,
        # a run gives its folder back, and a loaded machine may take a while
        deadline = time.monotonic() + 90
        while not (tmp_path / "run" / "checkpoint.pt").exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        os.killpg(proc.pid, signal.SIGINT)
        out = "".join(lines) + proc.stdout.read()
        assert proc.wait(timeout=90) == 130, out
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        proc.stdout.close()
    assert "Traceback" not in out and "SignalException" not in out
    assert (tmp_path / "run" / "checkpoint.pt").exists()


def test_version_flag_prints_shoals_version(capsys):
    with pytest.raises(SystemExit) as e:
        cli.main(["--version"])
    assert e.value.code == 0 and capsys.readouterr().out.strip() == f"shoal {shoal.__version__}"
