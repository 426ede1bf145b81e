"""shoal train / eval when things go wrong (issue 10): bad values and ini
files, run folders that two runs could share, bad checkpoints, resuming
another policy shape, Ctrl-C during the final save, a dead pool worker."""
import glob
import os
import signal
import subprocess
import sys
import threading
import time
import types

import pytest

torch = pytest.importorskip("torch")

from shoal import cli, config, train  # noqa: E402
from shoal.pool import WorkerError  # noqa: E402

# 2 updates of 8 envs x 16 steps, no evaluation until the (2-episode) final one
TINY = ["--vec.backend", "serial", "--vec.num-envs", "8", "--vec.num-batches", "1",
        "--train.num-steps", "16", "--train.total-timesteps", "256", "--train.dashboard", "none",
        "--train.tensorboard", "false", "--train.checkpoint-interval", "0",
        "--train.eval-interval", "0", "--train.eval-episodes", "2"]
BATCH = 8 * 16


def tiny(*flags):
    return config.load("cartpole", [*TINY, *flags])


def no_temp_files(folder) -> bool:
    return not glob.glob(os.path.join(str(folder), "*.tmp*"))


@pytest.fixture
def sigint_raises():
    """Ctrl-C raises KeyboardInterrupt here, even where the suite runs with SIGINT ignored."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


@pytest.fixture(scope="module")
def run32(tmp_path_factory):
    """A finished tiny run with a non-default policy shape (hidden_size 32)."""
    folder = tmp_path_factory.mktemp("run32")
    return train.train(tiny("--policy.hidden-size", "32"), run_dir=str(folder))


# ---------------------------------------------------------------------------
# 5. Every value checked up front, naming its key
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("flag,value,message", [
    ("--train.num-steps", "0", "[train] num_steps = 0: expected an integer >= 1"),
    ("--train.num-minibatches", "0", "[train] num_minibatches = 0: expected an integer >= 1"),
    ("--train.update-epochs", "0", "[train] update_epochs = 0: expected an integer >= 1"),
    ("--policy.activation", "gelu", "[policy] activation = 'gelu': expected one of tanh, relu"),
    ("--train.device", "tpu", "[train] device = 'tpu': expected one of cpu, cuda, cuda:N, auto"),
    ("--train.dashboard", "fancy", "[train] dashboard = 'fancy': expected one of auto, rich, plain, none"),
    ("--vec.backend", "tpu", "[vec] backend = 'tpu': expected one of serial, multiprocessing, cuda"),
    ("--train.learning-rate", "-1e-3", "[train] learning_rate = -0.001: expected a finite number > 0"),
    ("--train.learning-rate", "inf", "[train] learning_rate = inf: expected a finite number > 0"),
    ("--train.gamma", "nan", "[train] gamma = nan: expected a number in [0, 1]"),
    ("--train.gae-lambda", "1.5", "[train] gae_lambda = 1.5: expected a number in [0, 1]"),
    ("--train.ent-coef", "nan", "[train] ent_coef = nan: expected a finite number >= 0"),
    ("--train.target-return", "nan", "[train] target_return = nan: expected a finite number"),
    ("--policy.hidden-size", "0", "[policy] hidden_size = 0: expected an integer >= 1"),
    ("--policy.num-layers", "0", "[policy] num_layers = 0: expected an integer >= 1"),
    ("--train.eval-episodes", "0", "[train] eval_episodes = 0: expected an integer >= 1"),
    ("--vec.num-envs", "0", "[vec] num_envs = 0: expected an integer >= 1"),
    ("--train.seed", "-1", "[train] seed = -1: expected an integer in [0, 2**32)"),
    ("--train.max-train-seconds", "-5", "[train] max_train_seconds = -5.0: expected a finite number >= 0"),
])
def test_bad_value_is_a_config_error_naming_the_key(flag, value, message):
    with pytest.raises(config.ConfigError) as e:
        config.load("cartpole", [flag, value])
    assert message in str(e.value) and f"flag {flag}" in str(e.value)


@pytest.mark.parametrize("flags,message", [
    (["--vec.num-envs", "8", "--vec.num-batches", "3"],
     "[vec] num_batches = 3: expected a divisor of [vec] num_envs = 8"),
    (["--vec.num-envs", "2", "--train.num-steps", "4", "--train.num-minibatches", "9"],
     "[train] num_minibatches = 9: expected at most the batch size"),
    (["--vec.backend", "multiprocessing", "--vec.num-envs", "4", "--vec.num-workers", "8"],
     "[vec] num_workers = 8 is more than [vec] num_envs = 4: every worker steps at least one env; "
     "set --vec.num-workers 4 or fewer"),
    (["--vec.backend", "multiprocessing", "--vec.num-envs", "4", "--vec.num-workers", "3",
      "--vec.num-batches", "2"],
     "[vec] num_workers = 3: expected a multiple of [vec] num_batches = 2 (each batch has workers of its "
     "own); set --vec.num-workers 2 (0: one per core) or --vec.num-batches 1"),
])
def test_rules_between_keys(flags, message):
    with pytest.raises(config.ConfigError, match=message.replace("[", r"\[").replace("]", r"\]")
                       .replace("(", r"\(").replace(")", r"\)")):
        config.load("cartpole", flags)


def test_a_serial_pool_ignores_num_workers(capsys):
    """[vec] num_workers is the multiprocessing pool's: with backend serial
    no value of it is an error, the pool is made without it, and a note
    says it has no effect."""
    cfg = config.load("cartpole", ["--vec.backend", "serial", "--vec.num-envs", "4",
                                   "--vec.num-workers", "3", "--vec.num-batches", "2"])
    pool = train.make_pool(cfg, "CartPole", seed=0)
    try:
        assert pool.num_envs == 4 and pool.num_batches == 2
    finally:
        pool.close()
    assert "[vec] num_workers = 3 has no effect with backend serial" in capsys.readouterr().err


def test_workers_per_rank_are_checked_against_the_envs_per_rank():
    """[vec] num_workers counts each rank's workers, and num_envs all ranks' envs."""
    cfg = tiny("--vec.backend", "multiprocessing", "--vec.num-envs", "8", "--vec.num-workers", "8")
    assert train.check_world_split(cfg, 1) == (8, None)
    with pytest.raises(config.ConfigError, match=r"\[vec\] num_workers = 8 is more than the 4 envs per rank "
                       r"\(\[vec\] num_envs = 8 over 2 ranks\).* --vec.num-workers 4 or fewer.* "
                       r"--vec.num-envs 16 or more"):
        train.check_world_split(cfg, 2)


def test_every_key_has_a_rule():
    """A new key in default.ini needs a rule in config.RULES (bools and floats have one built in)."""
    for section, keys in config.defaults().items():
        for key, value in keys.items():
            assert isinstance(value, (bool, float)) or (section, key) in config.RULES, (section, key)
    config.validate(config.defaults())  # the defaults pass their own rules
    for env in ("cartpole", "snake", "drive", "explorer"):
        config.load(env)  # and so do the env ini files


@pytest.mark.parametrize("flag,value", [
    ("--train.num-steps", "0"), ("--policy.activation", "gelu"), ("--train.device", "tpu"),
    ("--train.learning-rate", "-1"), ("--train.gamma", "nan"), ("--policy.hidden-size", "0"),
    ("--policy.num-layers", "0"), ("--train.eval-episodes", "0"), ("--train.num-minibatches", "0"),
])
def test_cli_rejects_a_bad_value_before_making_a_run_folder(tmp_path, capsys, flag, value):
    runs = tmp_path / "runs"
    assert cli.main(["train", "cartpole", *TINY, "--train.run-dir", str(runs), flag, value]) == 2
    err = capsys.readouterr().err
    key = flag[2:].split(".")[1].replace("-", "_")
    assert f"shoal train: error: [{flag[2:].split('.')[0]}] {key} = " in err and "Traceback" not in err
    assert not runs.exists()


def test_a_pool_argument_the_pool_refuses_leaves_no_run_folder(tmp_path, capsys):
    """The config's and pool's checks (here: workers per batch) run before the
    folder is made, so the corrected command can use the same --run-dir."""
    run_dir = tmp_path / "r"
    bad = ["--vec.backend", "multiprocessing", "--vec.num-workers", "1", "--vec.num-batches", "2"]
    assert cli.main(["train", "cartpole", *TINY, "--run-dir", str(run_dir), *bad]) == 2
    assert "[vec] num_workers = 1: expected a multiple of [vec] num_batches = 2" in capsys.readouterr().err
    assert not run_dir.exists()
    assert cli.main(["train", "cartpole", *TINY, "--run-dir", str(run_dir), "--vec.backend", "multiprocessing",
                     "--vec.num-workers", "2", "--vec.num-batches", "2"]) == 0
    assert (run_dir / "checkpoint.pt").exists()


def test_train_validates_a_config_built_in_code(tmp_path):
    cfg = tiny()
    cfg["train"]["num_steps"] = 0
    with pytest.raises(config.ConfigError, match=r"\[train\] num_steps = 0"):
        train.train(cfg, run_dir=str(tmp_path / "r"))
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize("text,line,what", [
    ("[train]\nseed = 1\noops\n", 3, "'oops' is neither a [section]"),
    ("seed = 1\n[train]\n", 1, "before any [section] header"),
    ("[train]\nseed = 1\nseed = 2\n", 3, "key 'seed' appears twice"),
    ("[train]\n[policy]\n[train]\n", 3, "section [train] appears twice"),
    # configparser would read 'seed = 7' as a second line of wandb_project's value
    ("[train]\nwandb_project = p\n    seed = 7\n", 3, "'seed = 7' is indented below [train] wandb_project"),
    ("[train]\nseed = 3\n\n    total_timesteps = 512  # a comment\n", 4,
     "'total_timesteps = 512  # a comment' is indented below [train] seed"),
])
def test_malformed_ini_names_the_file_and_line(tmp_path, capsys, text, line, what):
    path = tmp_path / "bad.ini"
    path.write_text(text)
    with pytest.raises(config.ConfigError) as e:
        config.load("cartpole", [], [str(path)])
    assert f"malformed ini file {path}: line {line}: " in str(e.value) and what in str(e.value)
    assert cli.main(["train", "cartpole", "--config", str(path)]) == 2
    assert f"{path}: line {line}" in capsys.readouterr().err


def test_broken_configs_file_names_the_file_and_line(tmp_path, monkeypatch, capsys):
    with open(os.path.join(config.configs_dir(), "default.ini")) as f:
        (tmp_path / "default.ini").write_text(f.read())
    (tmp_path / "cartpole.ini").write_text("[train]\nlearning_rate 3e-3\n")  # no "="
    monkeypatch.setattr(config, "configs_dir", lambda: str(tmp_path))
    with pytest.raises(config.ConfigError, match=r"cartpole.ini: line 2: 'learning_rate 3e-3'"):
        config.load("cartpole")
    assert cli.main(["train", "cartpole"]) == 2
    assert "cartpole.ini: line 2" in capsys.readouterr().err


# ---------------------------------------------------------------------------
# 3. Run folders: never shared, never overwritten
# ---------------------------------------------------------------------------
def test_runs_started_in_the_same_second_get_their_own_folders(tmp_path, monkeypatch):
    monkeypatch.setattr(train.time, "strftime", lambda fmt, *t: "20250101-000000")
    runs = tmp_path / "runs"
    a = train.train(tiny("--train.run-dir", str(runs)))
    b = train.train(tiny("--train.run-dir", str(runs)))
    assert os.path.basename(a["run_dir"]) == "cartpole-s0-20250101-000000"
    assert os.path.basename(b["run_dir"]) == "cartpole-s0-20250101-000000-2"
    for s in (a, b):
        assert train.load_checkpoint(s["checkpoint"])["progress"]["update"] == 2
    # Made atomically: runs starting at once (threads here) all get a folder of their own.
    cfg = tiny("--train.run-dir", str(runs))
    made, start = [], threading.Barrier(8)

    def claim():
        start.wait()
        made.append(train.make_run_dir(cfg, None, None))

    threads = [threading.Thread(target=claim) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(made)) == 8 and all(os.path.isdir(p) for p in made)


def test_run_dir_holding_a_run_is_refused_unless_resumed_there(tmp_path, capsys):
    folder = tmp_path / "r"
    first = train.train(tiny(), run_dir=str(folder))
    before = (folder / "checkpoint.pt").read_bytes()
    with pytest.raises(train.RunError, match=f"run folder {folder} already holds a run"):
        train.train(tiny(), run_dir=str(folder))
    assert cli.main(["train", "cartpole", *TINY, "--run-dir", str(folder)]) == 2
    err = capsys.readouterr().err
    assert f"run folder {folder} already holds a run" in err and "--resume" in err
    assert (folder / "checkpoint.pt").read_bytes() == before
    # An empty folder is fine; a second run claiming it too is refused.
    (tmp_path / "empty").mkdir()
    assert train.make_run_dir(tiny(), str(tmp_path / "empty"), None) == str(tmp_path / "empty")
    with pytest.raises(train.RunError, match="already holds a run"):
        train.make_run_dir(tiny(), str(tmp_path / "empty"), None)
    # Resuming from the folder's own checkpoint goes on in place: the log grows.
    rows = len((folder / "log.csv").read_text().splitlines())
    assert cli.main(["train", "cartpole", *TINY, "--run-dir", str(folder), "--resume",
                     first["checkpoint"], "--train.total-timesteps", "512"]) == 0
    assert train.load_checkpoint(first["checkpoint"])["progress"]["update"] == 4
    assert len((folder / "log.csv").read_text().splitlines()) > rows


# ---------------------------------------------------------------------------
# 6. Checkpoints
# ---------------------------------------------------------------------------
def _damage(good: str, path, kind: str) -> str:
    data = open(good, "rb").read()
    if kind == "truncated":
        path.write_bytes(data[: len(data) // 2])
    elif kind == "corrupt":
        path.write_bytes(bytes(b ^ 0x5A for b in data))
    elif kind == "directory name":   # a byte of an entry's name in the zip's central directory
        data = bytearray(data)
        data[data.rfind(b"PK\x01\x02") + 48] ^= 0xFF
        path.write_bytes(bytes(data))
    elif kind == "empty":
        path.write_bytes(b"")
    elif kind == "not a checkpoint":
        torch.save({"weights": torch.zeros(2)}, str(path))
    elif kind == "no config sections":   # a valid zip with the keys, but not their contents
        torch.save({"policy": {}, "optimizer": {}, "config": {"train": {}}, "progress": {}}, str(path))
    return str(path)


@pytest.mark.parametrize("kind,message", [
    ("truncated", "is truncated or corrupt"),
    ("corrupt", "is truncated or corrupt"),
    ("directory name", "is truncated or corrupt"),   # zipfile's UnicodeDecodeError
    ("empty", "is empty (0 bytes)"),
    ("not a checkpoint", "is not a shoal checkpoint (it has no policy, optimizer, config, progress)"),
    ("no config sections", "is not a shoal checkpoint (its config has no [env] name or [policy]"),
])
def test_bad_checkpoint_is_a_clear_error(run32, tmp_path, capsys, kind, message):
    path = _damage(run32["checkpoint"], tmp_path / "bad.pt", kind)
    with pytest.raises(train.RunError, match="bad.pt"):
        train.load_checkpoint(path)
    runs = tmp_path / "runs"
    assert cli.main(["train", "cartpole", *TINY, "--train.run-dir", str(runs), "--resume", path]) == 2
    assert cli.main(["eval", "cartpole", "--checkpoint", path, "--episodes", "2"]) == 2
    err = capsys.readouterr().err
    assert err.count(path) == 2 and err.count(message) == 2 and "Traceback" not in err
    assert not runs.exists()  # checked before a run folder is made


def test_resume_takes_the_policy_shape_from_the_checkpoint(run32, tmp_path, capsys):
    out = tmp_path / "resumed"
    assert cli.main(["train", "cartpole", *TINY, "--run-dir", str(out), "--resume", run32["checkpoint"],
                     "--train.total-timesteps", "512"]) == 0  # no --policy.hidden-size 32 here
    assert "its [policy] hidden_size = 32 replaces the command line's hidden_size = 64" in capsys.readouterr().err
    ckpt = train.load_checkpoint(str(out / "checkpoint.pt"))
    assert ckpt["config"]["policy"]["hidden_size"] == 32 and ckpt["progress"]["update"] == 4
    assert "hidden_size = 32" in (out / "config.ini").read_text()
    policy, _ = train.policy_from_checkpoint(ckpt)
    assert policy.encoder[0].out_features == 32


def test_failed_save_keeps_the_old_checkpoint(run32, tmp_path, monkeypatch):
    path = str(tmp_path / "checkpoint.pt")
    ckpt = train.load_checkpoint(run32["checkpoint"])
    policy, cfg = train.policy_from_checkpoint(ckpt)
    opt = torch.optim.Adam(policy.parameters())
    train.save_checkpoint(path, policy, opt, cfg, {"update": 1})
    before = open(path, "rb").read()

    def disk_full(obj, f):
        f.write(b"half a checkpoint")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(torch, "save", disk_full)
    with pytest.raises(OSError, match="No space left"):
        train.save_checkpoint(path, policy, opt, cfg, {"update": 2})
    assert open(path, "rb").read() == before and no_temp_files(tmp_path)


def test_a_file_size_limit_midway_is_an_oserror_and_keeps_the_old_checkpoint(run32, tmp_path):
    """A write that fails half way through the checkpoint, as a disk filling
    up does (here RLIMIT_FSIZE at half its size: EFBIG): an OSError, which
    the trainer turns into a warning. torch.save writing to the file itself
    raised its own RuntimeError ("unexpected pos") there instead."""
    import resource
    path = str(tmp_path / "checkpoint.pt")
    _, cfg = train.policy_from_checkpoint(train.load_checkpoint(run32["checkpoint"]))
    policy = torch.nn.Linear(512, 512)   # 1 MB of weights: torch.save writes them in one piece
    opt = torch.optim.Adam(policy.parameters())
    train.save_checkpoint(path, policy, opt, cfg, {"update": 1})
    before = open(path, "rb").read()
    limits = resource.getrlimit(resource.RLIMIT_FSIZE)
    previous = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)   # else the process is killed
    resource.setrlimit(resource.RLIMIT_FSIZE, (len(before) // 2, limits[1]))
    try:
        with pytest.raises(OSError) as failure:
            train.save_checkpoint(path, policy, opt, cfg, {"update": 2})
        with pytest.raises(OSError, match=r"could not write the final checkpoint .*"
                                          r"the last one saved is still at"):
            train.save_final_checkpoint(path, policy, opt, cfg, {"update": 2})
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, limits)
        signal.signal(signal.SIGXFSZ, previous)
    assert failure.value.errno == 27   # EFBIG
    assert open(path, "rb").read() == before and no_temp_files(tmp_path)


@pytest.mark.parametrize("interrupted_before", [True, False])
def test_second_ctrl_c_during_the_final_save(tmp_path, monkeypatch, sigint_raises, interrupted_before):
    """Ctrl-C in the middle of writing the final checkpoint: the save completes,
    no temp file is left, the run ends as interrupted (no final evaluation)."""
    real_update, real_save, updates = train.ppo_update, torch.save, []

    def update(*args):
        updates.append(1)
        if interrupted_before and len(updates) == 2:
            raise KeyboardInterrupt  # the first Ctrl-C
        return real_update(*args)

    def save_then_ctrl_c(obj, f):
        real_save(obj, f)
        os.kill(os.getpid(), signal.SIGINT)  # half way: written, not yet renamed into place

    monkeypatch.setattr(train, "ppo_update", update)
    monkeypatch.setattr(torch, "save", save_then_ctrl_c)
    try:
        summary = train.train(tiny(), run_dir=str(tmp_path))
    except KeyboardInterrupt:  # would stop pytest itself
        pytest.fail("the Ctrl-C during the final save escaped train()")
    assert summary["interrupted"] and "eval_return" not in summary
    monkeypatch.setattr(torch, "save", real_save)
    progress = train.load_checkpoint(str(tmp_path / "checkpoint.pt"))["progress"]
    assert progress["update"] == (1 if interrupted_before else 2)
    assert no_temp_files(tmp_path)
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # restored after the save


def test_more_ctrl_cs_while_the_run_closes_still_return_its_summary(tmp_path, monkeypatch, sigint_raises):
    """A user pressing Ctrl-C again and again (a notebook's interrupt
    button): after the first stopped training, one landing in the pool's
    close is the same stop; train() returns its summary (it raised out of
    train(), the summary and its checkpoint path lost)."""
    from shoal.pool.native import NativePool
    real_update, real_close, updates = train.ppo_update, NativePool.close, []

    def update(*args):
        updates.append(1)
        if len(updates) == 2:
            raise KeyboardInterrupt  # the first Ctrl-C
        return real_update(*args)

    def close_with_a_ctrl_c(self):
        if not self.closed and updates:
            os.kill(os.getpid(), signal.SIGINT)   # the next press, as the run closes
        real_close(self)

    monkeypatch.setattr(train, "ppo_update", update)
    monkeypatch.setattr(NativePool, "close", close_with_a_ctrl_c)
    try:
        summary = train.train(tiny(), run_dir=str(tmp_path))
    except KeyboardInterrupt:
        pytest.fail("a Ctrl-C while the run closed escaped train()")
    assert summary["interrupted"] and summary["checkpoint"] == str(tmp_path / "checkpoint.pt")
    assert train.load_checkpoint(summary["checkpoint"])["progress"]["update"] == 1
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler   # restored


def test_worker_error_saves_the_real_training_time_and_exits_non_zero(tmp_path, monkeypatch, capsys):
    real, calls = train.Rollout.collect, []

    def collect(self):
        calls.append(1)
        if len(calls) == 3:
            raise WorkerError("shoal worker 0 (pid 1, envs 0..7) died (exit code -9)")
        time.sleep(0.05)  # training time worth measuring
        return real(self)

    monkeypatch.setattr(train.Rollout, "collect", collect)
    cfg = tiny("--train.total-timesteps", "1024")
    with pytest.raises(WorkerError) as e:
        train.train(cfg, run_dir=str(tmp_path / "a"))
    assert any(str(tmp_path / "a" / "checkpoint.pt") in n for n in e.value.__notes__)
    progress = train.load_checkpoint(str(tmp_path / "a" / "checkpoint.pt"))["progress"]
    assert progress["update"] == 2 and progress["global_step"] == 2 * BATCH
    assert progress["train_seconds"] >= 0.1
    calls.clear()
    assert cli.main(["train", "cartpole", *TINY, "--train.total-timesteps", "1024",
                     "--run-dir", str(tmp_path / "b")]) == 1
    err = capsys.readouterr().err
    assert "shoal train: error: shoal worker 0" in err and str(tmp_path / "b" / "checkpoint.pt") in err
    assert os.path.exists(tmp_path / "b" / "checkpoint.pt") and no_temp_files(tmp_path / "b")


CHILD = """
import signal, sys, time
signal.signal(signal.SIGINT, signal.default_int_handler)  # a background job may start with SIGINT ignored
import torch
real_save = torch.save

def slow_save(obj, f):  # a slow disk: the second Ctrl-C lands inside the final save
    print("saving", file=sys.stderr, flush=True)
    time.sleep(0.5)
    real_save(obj, f)

torch.save = slow_save
from shoal import cli
sys.exit(cli.main(sys.argv[1:]))
"""


def test_ctrl_c_twice_in_a_real_run(tmp_path):
    """`shoal train` in its own process, Ctrl-C'd while training, then again during
    its final save: exit status 130, a loadable checkpoint with consistent
    counters, no temp file, no traceback."""
    folder = tmp_path / "r"
    cmd = [sys.executable, "-P", "-c", CHILD, "train", "cartpole", *TINY, "--train.total-timesteps", "100000000",
           "--train.max-train-seconds", "0", "--train.log-interval", "0", "--run-dir", str(folder)]
    child = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             start_new_session=True)
    err_lines = []
    reader = threading.Thread(target=lambda: err_lines.extend(child.stderr), daemon=True)
    reader.start()

    def wait_for(ready, what):
        deadline = time.monotonic() + 60
        while not ready():
            assert child.poll() is None, (what, child.returncode, "".join(err_lines))
            assert time.monotonic() < deadline, (what, "".join(err_lines))
            time.sleep(0.02)

    try:
        log = folder / "log.csv"
        wait_for(lambda: log.exists() and len(log.read_text().splitlines()) >= 3, "training under way")
        child.send_signal(signal.SIGINT)
        wait_for(lambda: "saving\n" in err_lines, "the final save")
        child.send_signal(signal.SIGINT)
        child.wait(timeout=60)
        reader.join(timeout=10)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
        child.stdout.close()
    err = "".join(err_lines)
    assert child.returncode == 130, err
    assert "Traceback" not in err and err.count("saving") == 1, err
    progress = train.load_checkpoint(str(folder / "checkpoint.pt"))["progress"]
    assert progress["update"] >= 2 and progress["global_step"] == BATCH * progress["update"]
    assert progress["train_seconds"] > 0
    assert no_temp_files(folder)


# ---------------------------------------------------------------------------
# Resuming, evaluating and saving as a researcher's runs need (second pass)
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("num_envs", ["4", "16"])
def test_resume_with_another_batch_stops_at_total_timesteps(run32, tmp_path, num_envs):
    """The run32 checkpoint has 256 steps (2 updates of 8 envs x 16); resumed
    with 4 or 16 envs and total_timesteps 1024, it trains the 768 steps left."""
    out = tmp_path / "resumed"
    summary = train.train(tiny("--vec.num-envs", num_envs, "--train.total-timesteps", "1024"),
                          resume=run32["checkpoint"], run_dir=str(out))
    assert summary["global_step"] == 1024
    assert summary["update"] == 2 + 768 // (int(num_envs) * 16)


def test_sampled_evaluation_is_reproducible_and_leaves_the_training_rng(run32):
    policy, cfg = train.policy_from_checkpoint(train.load_checkpoint(run32["checkpoint"]))
    before = torch.get_rng_state()
    runs = [train.evaluate(policy, "cartpole", 4, seed=3, deterministic=False)["returns"] for _ in range(2)]
    assert torch.equal(torch.get_rng_state(), before)   # training samples as if nothing happened
    assert list(runs[0]) == list(runs[1])
    frames = [train.rollout_frames(policy, "cartpole", 20, seed=3, deterministic=False) for _ in range(2)]
    assert all((a == b).all() for a, b in zip(*frames))


def test_a_damaged_tensor_fails_the_checkpoints_crc(run32, tmp_path):
    """Bytes flipped inside a stored tensor: torch.load reads them as
    weights; the zip's CRC says the file is damaged."""
    import zipfile

    data = bytearray(open(run32["checkpoint"], "rb").read())
    with zipfile.ZipFile(run32["checkpoint"]) as archive:
        entry = max(archive.infolist(), key=lambda i: i.file_size)   # the largest tensor
    header = entry.header_offset
    name_len, extra_len = int.from_bytes(data[header + 26:header + 28], "little"), \
        int.from_bytes(data[header + 28:header + 30], "little")
    start = header + 30 + name_len + extra_len + entry.file_size // 2
    data[start:start + 8] = bytes(b ^ 0xFF for b in data[start:start + 8])
    path = tmp_path / "flipped.pt"
    path.write_bytes(bytes(data))
    with pytest.raises(train.RunError, match="fails its CRC check"):
        train.load_checkpoint(str(path))


def test_a_run_folder_in_use_is_refused(tmp_path, capsys):
    """A run holds its folder (a flock) while it runs: resuming in place of
    a run still going is refused, and works once it has ended."""
    folder = tmp_path / "r"
    train.train(tiny(), run_dir=str(folder))
    ckpt = str(folder / "checkpoint.pt")
    held = train.lock_run_dir(str(folder))   # as the still-running run would
    try:
        assert cli.main(["train", "cartpole", *TINY, "--resume", ckpt, "--run-dir", str(folder),
                         "--train.total-timesteps", "512"]) == 2
        assert f"is in use: another process holds its lock (the last run there wrote pid {os.getpid()})" \
            in capsys.readouterr().err
    finally:
        held.close()
    assert cli.main(["train", "cartpole", *TINY, "--resume", ckpt, "--run-dir", str(folder),
                     "--train.total-timesteps", "512"]) == 0


def test_resume_drops_log_rows_written_after_the_checkpoint(tmp_path):
    """A run killed after logging past its last save: on resume those rows
    go (their steps are trained again), so global_step only increases; a
    save's stale temp file (its process gone) is removed."""
    folder = tmp_path / "r"
    train.train(tiny("--train.log-interval", "0"), run_dir=str(folder))
    log = folder / "log.csv"
    lines = log.read_text().splitlines()
    log.write_text("\n".join([*lines, lines[-1].replace(f",{2 * BATCH},", f",{3 * BATCH},", 1)]) + "\n")
    ended = subprocess.Popen(["true"])
    ended.wait()   # a pid whose process has ended (and been reaped)
    stale = folder / f"checkpoint.pt.tmp{ended.pid}"
    stale.write_bytes(b"half")
    train.train(tiny("--train.log-interval", "0", "--train.total-timesteps", "512"),
                resume=str(folder / "checkpoint.pt"), run_dir=str(folder))
    import csv
    steps = [int(row["global_step"]) for row in csv.DictReader(log.open())]
    assert steps == sorted(steps) and len(steps) == len(set(steps)) and steps[-1] == 512
    assert not stale.exists()


def test_a_run_killed_in_its_first_save_leaves_no_temp_file_behind(run32, tmp_path, capsys):
    """A run killed (SIGKILL) while writing its first checkpoint leaves
    config.ini, log.csv and that save's temp file, but no checkpoint: a
    later run in that folder, fresh or resumed, is refused (nothing of it
    to resume), and removes the temp file on the way, unless its writer
    is alive or a run holds the folder."""
    folder = tmp_path / "r"
    train.train(tiny(), run_dir=str(folder))
    (folder / "checkpoint.pt").unlink()   # as if its first save never finished
    ended = subprocess.Popen(["true"])
    ended.wait()   # a pid whose process has ended (and been reaped)
    stale = folder / f"checkpoint.pt.tmp{ended.pid}"
    alive = subprocess.Popen(["sleep", "60"])
    try:
        writing = folder / f"checkpoint.pt.tmp{alive.pid}"   # a live process's save in progress
        writing.write_bytes(b"half")
        stale.write_bytes(b"half")
        held = train.lock_run_dir(str(folder))   # as a run still going there would
        try:
            assert cli.main(["train", "cartpole", *TINY, "--run-dir", str(folder)]) == 2
        finally:
            held.close()
        assert stale.exists()   # the folder's run may be on another machine: its pids mean nothing here
        assert cli.main(["train", "cartpole", *TINY, "--run-dir", str(folder)]) == 2
        assert "already holds a run" in capsys.readouterr().err
        assert not stale.exists() and writing.exists()
        stale.write_bytes(b"half")
        assert cli.main(["train", "cartpole", *TINY, "--run-dir", str(folder), "--resume", run32["checkpoint"],
                         "--train.total-timesteps", "512"]) == 2
        assert not stale.exists() and writing.exists()
        assert (folder / "config.ini").exists() and (folder / "log.csv").exists()   # the refused folder kept
    finally:
        alive.kill()
        alive.wait()


def test_resume_carries_the_phase_timers_on(tmp_path):
    """log.csv's t_* columns are seconds over the whole run, as global_step
    counts steps over it: a resume continues them from the checkpoint's (an
    older checkpoint, without them, starts them at 0), and the earlier
    runs' evaluation seconds are not taken off this run's train_seconds."""
    import csv
    columns = ["t_env", "t_copy", "t_forward", "t_learn", "t_eval"]
    folder = tmp_path / "r"
    first = train.train(tiny("--train.log-interval", "0"), run_dir=str(folder))
    saved = train.load_checkpoint(first["checkpoint"])
    assert saved["progress"]["timers"] == first["timers"] and first["timers"]["learn"] > 0
    # 1000 s more of each: the resumed rows can only show it by carrying on from the checkpoint
    saved["progress"]["timers"] = {k: 1000.0 + v for k, v in saved["progress"]["timers"].items()}
    torch.save(saved, first["checkpoint"])
    resumed = train.train(tiny("--train.log-interval", "0", "--train.total-timesteps", "512"),
                          resume=first["checkpoint"], run_dir=str(folder))
    rows = list(csv.DictReader((folder / "log.csv").open()))
    assert [int(row["global_step"]) for row in rows] == [BATCH, 2 * BATCH, 3 * BATCH, 4 * BATCH]
    for column in columns:
        assert float(rows[1][column]) < 100 and all(1000 <= float(row[column]) < 1100 for row in rows[2:]), column
    seconds = [float(row["train_seconds"]) for row in rows]
    assert seconds == sorted(seconds) and resumed["train_seconds"] < 100
    assert train.load_checkpoint(resumed["checkpoint"])["progress"]["timers"]["learn"] > 1000

    older = train.load_checkpoint(first["checkpoint"])
    del older["progress"]["timers"]   # as a checkpoint written before they were saved
    torch.save(older, str(tmp_path / "older.pt"))
    summary = train.train(tiny("--train.log-interval", "0", "--train.total-timesteps", "512"),
                          resume=str(tmp_path / "older.pt"), run_dir=str(tmp_path / "from_older"))
    assert summary["global_step"] == 512
    rows = list(csv.DictReader((tmp_path / "from_older" / "log.csv").open()))
    assert all(float(row[column]) < 100 for row in rows for column in columns)


def test_a_failed_periodic_save_warns_and_training_goes_on(tmp_path, monkeypatch, capsys):
    real, calls = train.save_checkpoint, []

    def disk_full_once(*args, **kwargs):
        calls.append(1)
        if len(calls) == 1:
            raise OSError(28, "No space left on device")
        return real(*args, **kwargs)

    monkeypatch.setattr(train, "save_checkpoint", disk_full_once)
    summary = train.train(tiny("--train.checkpoint-interval", "1e-9", "--train.total-timesteps", "512"),
                          run_dir=str(tmp_path))
    assert summary["global_step"] == 512 and len(calls) >= 3
    assert "warning: could not write the checkpoint" in capsys.readouterr().err
    assert train.load_checkpoint(str(tmp_path / "checkpoint.pt"))["progress"]["global_step"] == 512


def test_logs_that_cannot_be_written_are_a_warning_and_training_goes_on(tmp_path, monkeypatch, capsys):
    """log.csv and the TensorBoard events on a full disk (log.csv on
    /dev/full; TensorBoard's writer raising ENOSPC, as its thread does): a
    warning each, once, and the run ends normally with its checkpoint. A
    TensorBoard ENOSPC once ended the run with three tracebacks."""
    pytest.importorskip("tensorboard")
    import csv

    from torch.utils.tensorboard import SummaryWriter
    real_init = train.Logger.__init__

    def csv_on_a_full_disk(self, *args, **kwargs):
        real_init(self, *args, **kwargs)
        self.csv_file.close()
        self.csv_file = open("/dev/full", "w", newline="")
        self.csv = csv.DictWriter(self.csv_file, train.LOG_FIELDS, extrasaction="ignore")

    def disk_full(self, *args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(train.Logger, "__init__", csv_on_a_full_disk)
    monkeypatch.setattr(SummaryWriter, "add_scalar", disk_full)
    printed = []
    monkeypatch.setattr(threading, "excepthook", printed.append)   # what would print a thread's traceback
    summary = train.train(tiny("--train.tensorboard", "true", "--train.log-interval", "0",
                               "--train.total-timesteps", "512"), run_dir=str(tmp_path))
    err = capsys.readouterr().err
    assert summary["global_step"] == 512 and not summary["interrupted"]
    assert err.count("warning: could not write log.csv (No space left on device)") == 1, err
    assert err.count("warning: could not write the TensorBoard events (No space left on device)") == 1, err

    # TensorBoard's writer thread's own traceback is left unprinted (threading.excepthook)
    class _AsyncWriterThread(threading.Thread):   # its class, by name
        pass

    def thread_error(thread):
        return types.SimpleNamespace(thread=thread, exc_type=OSError, exc_traceback=None,
                                     exc_value=OSError(28, "No space left on device"))

    threading.excepthook(thread_error(_AsyncWriterThread()))
    threading.excepthook(thread_error(threading.Thread()))
    assert [type(args.thread).__name__ for args in printed] == ["Thread"]
    assert train.load_checkpoint(str(tmp_path / "checkpoint.pt"))["progress"]["global_step"] == 512


def test_a_resume_after_a_kill_before_the_first_row_keeps_the_log_readable(tmp_path):
    """A run killed before its first log row (after a checkpoint) left an
    empty log.csv (its header unflushed); a resume in place then appended
    rows with no header. The header is flushed at once, and an empty log
    gets one on resume."""
    import csv
    first = train.train(tiny(), run_dir=str(tmp_path))
    with open(tmp_path / "log.csv", newline="") as f:
        assert next(csv.reader(f))[0] == train.LOG_FIELDS[0]
    (tmp_path / "log.csv").write_text("")   # as the kill left it
    train.train(tiny("--train.total-timesteps", "512"), resume=first["checkpoint"], run_dir=str(tmp_path))
    with open(tmp_path / "log.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert rows and int(rows[-1]["global_step"]) == 512


def test_a_run_folder_or_final_save_the_disk_refuses_is_one_error_line(tmp_path, monkeypatch, capsys):
    """A run folder that cannot be made (a read-only file system) is a
    config-style error (exit 2); a final checkpoint that cannot be written
    is one error line naming what is left (exit 1), not a traceback."""
    real_makedirs = os.makedirs

    def read_only(path, *args, **kwargs):
        if "read-only" in str(path):
            raise OSError(30, "Read-only file system")
        return real_makedirs(path, *args, **kwargs)

    monkeypatch.setattr(train.os, "makedirs", read_only)
    assert cli.main(["train", "cartpole", *TINY, "--run-dir", str(tmp_path / "read-only")]) == 2
    assert "cannot make the run folder" in capsys.readouterr().err
    assert cli.main(["train", "cartpole", *TINY, "--train.run-dir", str(tmp_path / "read-only")]) == 2
    assert "cannot make a run folder in [train] run_dir" in capsys.readouterr().err
    # an existing folder on a read-only file system: made, but its config.ini cannot be claimed
    (tmp_path / "existing").mkdir()

    def read_only_files(path, *args, **kwargs):
        if "existing" in str(path):
            raise OSError(30, "Read-only file system")
        return open(path, *args, **kwargs)

    monkeypatch.setattr(train, "open", read_only_files, raising=False)
    assert cli.main(["train", "cartpole", *TINY, "--run-dir", str(tmp_path / "existing")]) == 2
    assert "cannot write in the run folder" in capsys.readouterr().err
    monkeypatch.undo()

    def disk_full(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(train, "lock_run_dir", disk_full)   # the folder made, its first write refused
    assert cli.main(["train", "cartpole", *TINY, "--run-dir", str(tmp_path / "full")]) == 2
    assert f"cannot write in the run folder {tmp_path / 'full'}: No space left on device" in capsys.readouterr().err
    monkeypatch.undo()
    monkeypatch.setattr(train.Logger, "__init__", disk_full)   # log.csv's header refused
    assert cli.main(["train", "cartpole", *TINY, "--run-dir", str(tmp_path / "full2")]) == 2
    assert f"cannot write in the run folder {tmp_path / 'full2'}: No space left" in capsys.readouterr().err
    assert not (tmp_path / "full2").exists()   # given back
    monkeypatch.undo()
    monkeypatch.setattr(train, "save_checkpoint", disk_full)
    assert cli.main(["train", "cartpole", *TINY, "--run-dir", str(tmp_path / "run")]) == 1
    err = capsys.readouterr().err
    assert "shoal train: error: could not write the final checkpoint" in err and "none was saved" in err
    assert "Traceback" not in err


def test_a_run_stopped_in_its_setup_gives_its_folder_back(tmp_path, monkeypatch):
    """Ctrl-C (or an error) after the run folder is made, before training
    starts: there is no checkpoint to resume, so the folder is given back
    (removed if the run made it; else the run's files removed, the user's
    kept). It once kept config.ini and log.csv, and every later run there
    was refused until they were deleted by hand."""
    real_init = train.Logger.__init__

    def interrupted(self, *args, **kwargs):
        real_init(self, *args, **kwargs)   # log.csv and config.ini written
        raise KeyboardInterrupt

    monkeypatch.setattr(train.Logger, "__init__", interrupted)
    with pytest.raises(KeyboardInterrupt):
        train.train(tiny(), run_dir=str(tmp_path / "new"))
    assert not (tmp_path / "new").exists()
    given = tmp_path / "given"
    given.mkdir()
    (given / "notes.txt").write_text("mine")
    with pytest.raises(KeyboardInterrupt):
        train.train(tiny(), run_dir=str(given))
    assert sorted(os.listdir(given)) in (["notes.txt"], [".lock", "notes.txt"])
    with pytest.raises(KeyboardInterrupt):
        train.train(tiny("--train.run-dir", str(tmp_path / "runs")))
    assert os.listdir(tmp_path / "runs") == []
    monkeypatch.setattr(train.Logger, "__init__", real_init)
    summary = train.train(tiny(), run_dir=str(given))   # the folder takes a run again
    assert os.path.exists(summary["checkpoint"])


@pytest.mark.parametrize("stop", [KeyboardInterrupt, WorkerError])
def test_a_run_stopped_before_its_first_update_gives_its_folder_back(tmp_path, monkeypatch, stop):
    """Ctrl-C (or an error) during the first rollout, after the setup: no
    update has run, so there is nothing to keep, and the folder is given
    back as in the setup. It once kept a 0-step checkpoint, and the same
    --run-dir was then refused as holding a run."""
    real = train.Rollout.collect

    def first_rollout_stops(self):
        raise stop("shoal worker 0 (pid 1, envs 0..7) died") if stop is WorkerError else stop()

    monkeypatch.setattr(train.Rollout, "collect", first_rollout_stops)
    with pytest.raises(stop) as raised:
        train.train(tiny(), run_dir=str(tmp_path / "new"))
    assert not (tmp_path / "new").exists()
    if stop is WorkerError:
        assert any("given back" in note for note in raised.value.__notes__)
    monkeypatch.setattr(train.Rollout, "collect", real)
    summary = train.train(tiny(), run_dir=str(tmp_path / "new"))   # the folder takes a run
    assert os.path.exists(summary["checkpoint"])
    calls = []

    def second_rollout_stops(self):   # a resumed run keeps its checkpoint, stopped at once or not
        calls.append(1)
        raise KeyboardInterrupt

    monkeypatch.setattr(train.Rollout, "collect", second_rollout_stops)
    resumed = train.train(tiny("--train.total-timesteps", "4096"), resume=summary["checkpoint"],
                          run_dir=str(tmp_path / "new"))
    assert resumed["interrupted"] and calls and os.path.exists(summary["checkpoint"])


def test_a_resume_with_another_target_return_does_not_report_the_old_one_reached(tmp_path):
    """The checkpoint carries when its run reached its target; a resume with
    another target starts that afresh (it reported "reached the target
    return after 1.1 s" for a target of 1e9 never reached)."""
    first = train.train(tiny("--train.eval-interval", "1e-9", "--train.target-return", "1"),
                        run_dir=str(tmp_path / "a"))
    assert first["solved_seconds"] is not None
    resumed = train.train(tiny("--train.eval-interval", "1e-9", "--train.target-return", "1e9",
                               "--train.total-timesteps", "512"),
                          resume=first["checkpoint"], run_dir=str(tmp_path / "b"))
    assert resumed["solved_seconds"] is None and resumed["global_step"] >= 512


def test_the_final_evaluation_plays_none_of_the_stopping_rules_episodes():
    """Evaluation env i is seeded S + i: the final ("held-out") evaluation's
    seeds share none with the evaluations during training (it was once one
    seed on, replaying all but one of their episodes), and no run seed's
    evaluation seeds meet another run seed's."""
    for episodes in (1, 2, 16):
        taken = set()
        for run_seed in range(6):
            during, final = train.eval_seeds({"seed": run_seed, "eval_episodes": episodes})
            mine = [set(range(during, during + episodes)), set(range(final, final + episodes))]
            assert not mine[0] & mine[1]
            assert not (mine[0] | mine[1]) & taken
            taken |= mine[0] | mine[1]


def test_the_final_evaluation_is_kept_in_the_run_folder(tmp_path):
    import csv
    import json
    summary = train.train(tiny("--train.log-interval", "0", "--train.eval-interval", "1e-9"),
                          run_dir=str(tmp_path))
    final = json.loads((tmp_path / "final_eval.json").read_text())
    assert final["mean_return"] == summary["eval_return"] and final["global_step"] == summary["global_step"]
    assert final["seed"] == train.eval_seeds(tiny()["train"])[1] and len(final["returns"]) == 2
    rows = list(csv.DictReader((tmp_path / "log.csv").open()))
    assert all(row["world_size"] == "1" for row in rows)   # the first (evaluation-only) row too


def test_sigterm_saves_a_checkpoint_and_exits_143(tmp_path):
    """SIGTERM (kill, timeout, a scheduler's preemption) in a real run: the
    final checkpoint is written as for Ctrl-C, and the exit status is 143."""
    folder = tmp_path / "r"
    cmd = [sys.executable, "-P", "-m", "shoal", "train", "cartpole", *TINY, "--train.total-timesteps",
           "100000000", "--train.max-train-seconds", "0", "--train.log-interval", "0",
           "--run-dir", str(folder)]
    child = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                             start_new_session=True)
    try:
        log = folder / "log.csv"
        deadline = time.monotonic() + 60
        while not (log.exists() and len(log.read_text().splitlines()) >= 3):
            assert child.poll() is None and time.monotonic() < deadline, child.stderr.read()
            time.sleep(0.02)
        child.send_signal(signal.SIGTERM)
        _, err = child.communicate(timeout=60)
    finally:
        if child.poll() is None:
            child.kill()
            child.communicate()
    assert child.returncode == 143, err
    assert "terminated: writing a final checkpoint" in err and "Traceback" not in err
    progress = train.load_checkpoint(str(folder / "checkpoint.pt"))["progress"]
    assert progress["update"] >= 2 and progress["global_step"] == BATCH * progress["update"]
    assert no_temp_files(folder)


def test_resume_with_max_train_seconds_spent_trains_nothing_more(run32, tmp_path, capsys):
    out = tmp_path / "resumed"
    summary = train.train(tiny("--train.total-timesteps", "1024", "--train.max-train-seconds", "1e-6"),
                          resume=run32["checkpoint"], run_dir=str(out))
    assert summary["global_step"] == 256 and summary["update"] == 2
    assert "counts the whole run" in capsys.readouterr().err


def test_no_file_locks_is_a_warning_not_a_failure(tmp_path, monkeypatch, capsys):
    import fcntl

    def no_locks(*args):
        raise OSError(37, "No locks available")

    monkeypatch.setattr(fcntl, "flock", no_locks)
    summary = train.train(tiny(), run_dir=str(tmp_path / "r"))
    assert summary["global_step"] == 256
    assert "warning: cannot lock run folder" in capsys.readouterr().err


def test_an_error_inside_an_update_keeps_the_last_whole_checkpoint(tmp_path, monkeypatch):
    """An error in the middle of an update (a rank that left mid-sum, say)
    leaves the weights and Adam state part-way through it: the checkpoint
    saved after the last whole update stays, instead of a final save of the
    half-done one (whose counters would say one update less than its weights)."""
    real_update = train.ppo_update
    after_two = {}

    def failing_update(policy, optimizer, ro, cfg, dist):
        if len(after_two) == 0 and getattr(failing_update, "calls", 0) == 2:
            after_two["policy"] = {k: v.clone() for k, v in policy.state_dict().items()}
            loss = sum(p.sum() for p in policy.parameters())   # one step of a "half" update
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            raise RuntimeError("a peer left in the middle of the update")
        failing_update.calls = getattr(failing_update, "calls", 0) + 1
        return real_update(policy, optimizer, ro, cfg, dist)

    monkeypatch.setattr(train, "ppo_update", failing_update)
    cfg = tiny("--train.total-timesteps", str(8 * BATCH), "--train.checkpoint-interval", "1e-9")
    with pytest.raises(RuntimeError, match="in the middle of the update") as caught:
        train.train(cfg, run_dir=str(tmp_path / "run"))
    assert any("no checkpoint of part of one" in note for note in caught.value.__notes__)
    saved = train.load_checkpoint(str(tmp_path / "run" / "checkpoint.pt"))
    assert saved["progress"]["update"] == 2
    for key, value in after_two["policy"].items():
        assert torch.equal(saved["policy"][key], value), key


def test_a_pool_too_big_for_memory_is_one_error_line(tmp_path, capsys):
    """num_envs whose buffers cannot fit (1e20): the pool's MemoryError,
    which says how much it needs, is one error line (exit 1), not a
    traceback, and no run folder is left."""
    run = tmp_path / "run"
    assert cli.main(["train", "cartpole", *TINY, "--vec.num-envs", "1e20", "--run-dir", str(run)]) == 1
    err = capsys.readouterr().err
    assert "shoal train: error: CartPole with num_envs=100000000000000000000 needs" in err
    assert "Traceback" not in err and not run.exists()
