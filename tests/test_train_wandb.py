"""The W&B logger: [train] wandb = true writes an offline W&B run holding the
trainer's rows (skipped when wandb is not installed); without wandb the key
is a clear error before any run folder is made."""
import glob
import importlib.util
import os

import pytest

pytest.importorskip("torch")
from shoal import config, train  # noqa: E402


def cfg_with_wandb():
    return config.load("cartpole", ["--train.dashboard", "none", "--train.tensorboard", "false",
                                    "--train.eval-interval", "0", "--train.eval-episodes", "4",
                                    "--train.total-timesteps", "4096", "--train.log-interval", "0",
                                    "--train.wandb", "true", "--train.wandb-project", "shoal-test"])


@pytest.mark.skipif(importlib.util.find_spec("wandb") is None, reason="wandb is not installed")
def test_wandb_offline_run_holds_the_rows(tmp_path, monkeypatch):
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    summary = train.train(cfg_with_wandb(), run_dir=str(tmp_path / "run"))
    # run.finish() returns before W&B's service process has closed the run
    # file (seen on a loaded machine: the file was its 7-byte header); it is
    # whole once the service stops, which process exit does and teardown() here.
    import wandb
    wandb.teardown()
    runs = glob.glob(str(tmp_path / "run" / "wandb" / "offline-run-*"))
    assert len(runs) == 1, os.listdir(tmp_path / "run")
    assert (tmp_path / "run" / "wandb_id.txt").read_text().strip() in runs[0]
    # The offline run file (W&B's records, protobuf): every logged key, the
    # final step's value and the project are in it, once per row at least.
    (record_file,) = glob.glob(os.path.join(runs[0], "run-*.wandb"))
    with open(record_file, "rb") as f:
        records = f.read()
    with open(tmp_path / "run" / "log.csv") as f:
        rows = len(f.readlines()) - 1
    assert rows >= 2
    for key in (b"global_step", b"sps", b"v_loss", b"entropy", b"mean_return"):
        assert records.count(key) >= rows, key
    assert str(summary["global_step"]).encode() in records
    assert b"shoal-test" in records

def test_wandb_missing_is_a_clear_error_before_the_run_folder(tmp_path, monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "wandb" else real(name, *a))
    with pytest.raises(config.ConfigError, match=r"wandb = true: wandb is not installed"):
        train.train(cfg_with_wandb(), run_dir=str(tmp_path / "run"))
    assert not (tmp_path / "run").exists()


@pytest.mark.skipif(importlib.util.find_spec("wandb") is None, reason="wandb is not installed")
def test_wandb_without_a_key_is_a_clear_error_before_the_run_folder(tmp_path, monkeypatch):
    """Online W&B with no API key (no WANDB_API_KEY, no ~/.netrc, no
    settings): the error says how to log in or go offline, before the run
    folder exists (wandb.init's own error came after it)."""
    monkeypatch.delenv("WANDB_MODE", raising=False)
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("NETRC", str(tmp_path / "home" / ".netrc"))
    monkeypatch.setenv("WANDB_CONFIG_DIR", str(tmp_path / "home" / "wandb"))
    with pytest.raises(config.ConfigError, match=r"no API key here; run `wandb login`.*WANDB_MODE=offline"):
        train.train(cfg_with_wandb(), run_dir=str(tmp_path / "run"))
    assert not (tmp_path / "run").exists()
