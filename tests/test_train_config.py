"""shoal.config (ini merging, typed flag overrides, errors) and the train/eval CLI's argument handling."""
import subprocess
import sys

import pytest

from shoal import cli, config


def test_defaults_are_typed():
    d = config.defaults()
    assert {"env", "vec", "train", "policy"} <= set(d)
    assert isinstance(d["train"]["learning_rate"], float)
    assert isinstance(d["vec"]["num_envs"], int)
    assert isinstance(d["train"]["anneal_lr"], bool)
    assert isinstance(d["vec"]["backend"], str)


def test_env_ini_overrides_defaults():
    d = config.defaults()
    c = config.load("cartpole")
    assert c["vec"]["backend"] == "serial" != d["vec"]["backend"]
    assert c["train"]["target_return"] == 475.0
    assert c["train"]["clip_coef"] == d["train"]["clip_coef"]  # untouched keys keep the default
    assert c["env"]["name"] == "cartpole"


def test_flags_override_ini_with_types():
    c = config.load("cartpole", ["--train.learning-rate", "3e-4", "--vec.num_envs=8",
                                 "--train.anneal-lr", "no", "--train.total-timesteps", "1e5",
                                 "--vec.backend", "multiprocessing"])
    assert c["train"]["learning_rate"] == 3e-4
    assert c["vec"]["num_envs"] == 8
    assert c["train"]["anneal_lr"] is False
    assert c["train"]["total_timesteps"] == 100_000
    assert c["vec"]["backend"] == "multiprocessing"


def test_extra_ini_file(tmp_path):
    p = tmp_path / "x.ini"
    p.write_text("[policy]\nhidden_size = 32\n[train]\nseed = 7\n")
    c = config.load("cartpole", ["--train.seed", "9"], [str(p)])
    assert c["policy"]["hidden_size"] == 32
    assert c["train"]["seed"] == 9  # flags come last


def test_unknown_key_names_it_and_suggests():
    with pytest.raises(config.ConfigError, match=r"learning_rat.*did you mean 'train.learning-rate'"):
        config.load("cartpole", ["--train.learning-rat", "1"])


def test_unknown_section_suggests():
    with pytest.raises(config.ConfigError, match=r"unknown section \[trian\].*did you mean 'train'"):
        config.load("cartpole", ["--trian.seed", "1"])


def test_unknown_key_in_ini_file_names_the_file(tmp_path):
    p = tmp_path / "bad.ini"
    p.write_text("[policy]\nhiden_size = 32\n")
    with pytest.raises(config.ConfigError, match=r"hiden_size.*bad.ini.*hidden-size"):
        config.load("cartpole", [], [str(p)])


def test_a_bad_value_in_an_ini_file_names_the_file(tmp_path):
    p = tmp_path / "bad.ini"
    p.write_text("[train]\nseed = abc\n")
    with pytest.raises(config.ConfigError, match=r"\[train\] seed = 'abc' \(in .*bad.ini\): expected an int"):
        config.load("cartpole", [], [str(p)])


@pytest.mark.parametrize("text", [
    "[train]\nlearning_rate = 1e-3\nlearning-rate = 5e-2\n",   # - vs _
    "[train]\nSeed = 1\nseed = 7\n",                           # case
    "[train]\nseed = 1\n[Train]\nseed = 7\n",                 # the section's case
])
def test_one_key_written_twice_in_other_spellings_is_refused(tmp_path, text):
    """configparser refuses a key given twice only when spelt the same; shoal
    reads case and - vs _ as one key, so the second once won silently."""
    p = tmp_path / "twice.ini"
    p.write_text(text)
    with pytest.raises(config.ConfigError, match=r"twice.ini: .* again \(case and - vs _ do not count\)"):
        config.load("cartpole", [], [str(p)])


@pytest.mark.parametrize("flag,value,expected", [
    ("--vec.num-envs", "many", "an int"),
    ("--vec.num-envs", "2.5", "an int"),
    ("--train.learning-rate", "fast", "a float"),
    ("--train.anneal-lr", "maybe", "a bool"),
])
def test_bad_value_names_key_value_and_type(flag, value, expected):
    key = flag.split(".")[1].replace("-", "_")
    with pytest.raises(config.ConfigError) as e:
        config.load("cartpole", [flag, value])
    msg = str(e.value)
    assert key in msg and repr(value) in msg and expected in msg


def test_flag_without_value():
    with pytest.raises(config.ConfigError, match="needs a value"):
        config.load("cartpole", ["--train.seed"])
    # a flag whose value was left out takes no other flag as its value
    with pytest.raises(config.ConfigError, match=r"--train.learning-rate needs a value \(the next argument, "
                                                 r"--train.dashboard, is another flag\)"):
        config.load("cartpole", ["--train.learning-rate", "--train.dashboard", "none"])


def test_a_run_dir_under_home_is_the_home_folders(tmp_path, monkeypatch):
    """~ in [train] run_dir (an ini file, a flag given quoted) is the home
    folder, not a folder named ~ in the working directory."""
    monkeypatch.setenv("HOME", str(tmp_path))
    ini = tmp_path / "mine.ini"
    ini.write_text("[train]\nrun_dir = ~/runs\n")
    assert config.load("cartpole", extra_ini=[str(ini)])["train"]["run_dir"] == str(tmp_path / "runs")
    assert config.load("cartpole", ["--train.run-dir", "~/x"])["train"]["run_dir"] == str(tmp_path / "x")


def test_to_ini_round_trips(tmp_path):
    c = config.load("cartpole", ["--train.seed", "3"])
    p = tmp_path / "c.ini"
    p.write_text(config.to_ini(c))
    assert config.load("cartpole", [], [str(p)]) == c


def test_train_help_lists_keys_with_defaults(capsys):
    assert cli.main(["train", "cartpole", "--help"]) == 0
    out = capsys.readouterr().out
    assert "--train.learning-rate" in out and "--vec.num-workers" in out and "--policy.lstm" in out
    assert "0.003" in out  # cartpole.ini's learning rate, shown as the default


def test_train_cli_errors(capsys):
    assert cli.main(["train", "cartpole", "--train.learning-rat", "1"]) == 2
    assert "did you mean 'train.learning-rate'" in capsys.readouterr().err
    assert cli.main(["train", "cartpole", "--vec.backend", "tpu"]) == 2
    err = capsys.readouterr().err
    assert "expected one of serial, multiprocessing, cuda" in err or "need torch" in err
    assert cli.main(["train", "nosuchenv"]) == 2
    assert "unknown env" in capsys.readouterr().err
    assert cli.main(["train"]) == 2
    for flag in (["--run-dir", ""], ["--resume="], ["--config", " "]):
        assert cli.main(["train", "cartpole", *flag]) == 2
        assert "needs a value, got an empty string" in capsys.readouterr().err


def test_import_shoal_needs_no_torch():
    code = ("import sys, shoal, shoal.cli, shoal.config, shoal.pool, shoal.render\n"
            "assert 'torch' not in sys.modules, 'import shoal pulled in torch'")
    subprocess.run([sys.executable, "-P", "-c", code], check=True)
