"""The bench's Atari section (shoal.bench.atari): its table, ratios and
target lines, from synthetic rates and from tiny real runs, and its command
line. Nothing here depends on how fast anything ran."""
import argparse
import subprocess
import sys

import pytest

pytest.importorskip("ale_py")
pytest.importorskip("cv2")

from shoal.bench import GROUPS, parser  # noqa: E402
from shoal.bench import atari as section  # noqa: E402
from shoal.bench.cartpole import envpool_version  # noqa: E402


def tiny(**kwargs):
    values = dict(games=["Pong"], num_envs=[2], rounds=1, seconds=0.01, warmup=0.0, workers=[],
                  gym_max_envs=0)
    values.update(kwargs)
    return section.AtariSettings(**values)


def table_rows(lines):
    """The main table's rows: the third cell names a contender."""
    return [line for line in lines if line.startswith("| ") and len(line.split(" | ")) > 2
            and line.split(" | ")[2] in section.ORDER]


def synthetic_group(game, n, envpool_best, ale_vec_best, py_shoal):
    Row = section.Row
    return [Row(section.BARE_ALE, n, 1, [100.0, 90.0, 110.0], env=game, batch=n),
            Row(section.C_LOOP, n, 1, [80.0], env=game, batch=n),
            Row(section.SERIAL, n, 1, [75.0], env=game, batch=n),
            Row(section.NATIVE_SYNC, n, 2, [160.0], env=game, batch=n),
            Row(section.NATIVE_ASYNC, n, 2, [150.0], env=game, batch=n // 2),
            Row(section.ENVPOOL_SYNC, n, 1, [60.0], env=game, batch=n),
            Row(section.ENVPOOL_SYNC, n, 2, [envpool_best], env=game, batch=n),
            Row(section.ENVPOOL_ASYNC, n, 2, [90.0], env=game, batch=n // 2),
            Row(section.ALE_VEC_SYNC, n, 2, [ale_vec_best], env=game, batch=n),
            Row(section.ALE_VEC_ASYNC, n, 2, [70.0], env=game, batch=n // 2),
            Row(section.GYM_SYNC, n, 1, [50.0], env=game, batch=n),
            Row(section.GYM_ASYNC, n, n, [40.0], env=game, batch=n),
            Row(section.PY_SHOAL, n, 2, [py_shoal], env=game, batch=n)]


def test_report_ratios_and_targets_from_synthetic_rates():
    """bare ALE 100/s on 2 cores: native best 160 (sync) is 0.80 of the
    limit (met); vs the best of EnvPool (120 on Pong) and AtariVectorEnv (100)
    1.33x (met), vs Breakout's AtariVectorEnv 130: 1.23x (not met);
    shoal.pool.AsyncVectorEnv 90 vs gymnasium Sync 50 x 2 cores: 0.90 (met),
    Breakout's 80: 0.80 (not met); below TARGET_MIN_ENVS all n/a."""
    rows = (synthetic_group("Pong", 8, 120.0, 100.0, 90.0) + synthetic_group("Breakout", 8, 110.0, 130.0, 80.0)
            + synthetic_group("Pong", 4, 120.0, 100.0, 90.0))
    lines = section.report(rows, 2, tiny(games=["Pong", "Breakout"]), None, "ImportError: no vector env")
    text = "\n".join(lines)
    assert text.startswith("## Atari: env-steps/s (4 emulator frames each) of Pong, Breakout")
    assert "EnvPool: not installed" in text and "AtariVectorEnv: cannot be imported (ImportError" in text
    assert "repeat_action_probability=0.25" in text and "differs from its defaults: none" in text
    assert "| game | num_envs | contender | workers / threads | batch | env-steps/s (median) |" in text
    assert len(table_rows(lines)) == 3 * 14   # 13 measured + the computed bare ALE x cores, per group
    assert "| Pong | 8 | bare ALE (ALEInterface.act) | 1 | 8 | 100 | 20% | 1.000 | 0.500 |" in text
    assert "| Pong | 8 | bare ALE x cores (computed) | 2 | 8 | 200 | 20% | 2.000 | 1.000 |" in text
    assert "| Pong | 8 | shoal native sync | 2 | 8 | 160 | 0% | 1.600 | 0.800 |" in text
    assert "| Pong | 8 | shoal native async | 2 | 4 | 150 |" in text
    # Table order: games as given, then num_envs, then contenders in ORDER.
    order = [line.split(" | ")[0][2:] + line.split(" | ")[1] for line in table_rows(lines)]
    assert order == ["Pong4"] * 14 + ["Pong8"] * 14 + ["Breakout8"] * 14
    # Targets: 3 per judged group (Pong 8, Breakout 8); 4 of 6 met; n/a at 4 envs.
    assert "4 of 6 met" in text

    def target(game, n, name):
        found = [line for line in lines if line.startswith(f"| {game} | {n} | {name}")]
        assert len(found) == 1, (game, n, name)
        return found[0]

    line = target("Pong", 8, "native best / best of EnvPool and AtariVectorEnv")
    assert "| >= 1.3x | 1.33x:" in line and "EnvPool sync, 2 threads" in line and line.endswith("| yes |")
    line = target("Breakout", 8, "native best / best of EnvPool and AtariVectorEnv")
    assert "| 1.23x:" in line and "ale-py AtariVectorEnv sync, 2 threads" in line and line.endswith("| **no** |")
    line = target("Pong", 8, "native best / (bare ALE x 2 cores)")
    assert "| >= 0.75 | 0.80: 160 (shoal native sync, 2 workers) / 200 |" in line and line.endswith("| yes |")
    line = target("Pong", 8, "shoal.pool.AsyncVectorEnv / (gymnasium Sync x 2 cores)")
    assert "| >= 0.85 | 0.90:" in line and line.endswith("| yes |")
    assert target("Breakout", 8, "shoal.pool.AsyncVectorEnv /").endswith("| **no** |")
    assert sum(line.startswith("| Pong | 4 |") and line.endswith("| n/a (< 8 envs) |") for line in lines) == 3


def test_targets_need_their_reference_rows():
    """Without EnvPool / AtariVectorEnv rows or gymnasium rows, those targets
    are left out rather than judged; a game outside TARGET_EXTERNAL gets no
    EnvPool target but the limit one."""
    Row = section.Row
    rows = [Row(section.BARE_ALE, 8, 1, [100.0], env="Pong", batch=8),
            Row(section.NATIVE_SYNC, 8, 2, [150.0], env="Pong", batch=8),
            Row(section.BARE_ALE, 8, 1, [100.0], env="Seaquest", batch=8),
            Row(section.NATIVE_SYNC, 8, 2, [150.0], env="Seaquest", batch=8),
            Row(section.ENVPOOL_SYNC, 8, 2, [50.0], env="Seaquest", batch=8)]
    lines, met, judged = section.targets(section.with_computed_limit(rows, 2), 2)
    assert (met, judged) == (2, 2)
    assert [line.split(" | ")[2] for line in lines[2:]] == ["native best / (bare ALE x 2 cores)"] * 2


def test_differences_and_defaults():
    assert section.differences({"a": 1, "b": 2, "c": 3}, {"a": 1, "b": 0}) == "b=2 (default 0)"
    assert section.differences({"a": 1}, {"a": 1}) == "none"
    from shoal.envs.atari import DEFAULT_KWARGS

    assert section.STANDARD == DEFAULT_KWARGS   # shoal's defaults are the standard stack
    if section.ale_vector_available() is None:   # every option passed is one AtariVectorEnv takes
        assert set(section.ALE_VECTOR_KWARGS) <= set(section.ale_vector_defaults())


def test_command_line_settings():
    args = parser().parse_args(["--quick"])
    s = section.settings(args, [1, 2], 0.05, 8)
    assert (s.games, s.num_envs, s.rounds, s.seconds, s.workers) == (["Pong"], [2], 1, 0.05, [])
    args = parser().parse_args(["--atari-games", "pong,BREAKOUT", "--atari-num-envs", "8,16",
                                "--atari-rounds", "3", "--atari-seconds", "0.25"])
    s = section.settings(args, [1, 2], 0.2, 64)
    assert (s.games, s.num_envs, s.rounds, s.seconds, s.workers) == (["Pong", "Breakout"], [8, 16], 3, 0.25, [1, 2])
    s = section.settings(parser().parse_args([]), [1, 2], 0.2, 64)
    assert (s.games, s.num_envs, s.rounds, s.seconds) == (["Pong", "Breakout"], [8, 16], 5, 0.5)
    with pytest.raises(argparse.ArgumentTypeError):
        section.game_list("Pongg")
    assert GROUPS["atari"] == ["Atari section"] and "Atari section" not in GROUPS["all"]


def test_tiny_run_measures_every_contender(monkeypatch):
    """Pong at 2 envs, one round: every contender has a row (EnvPool's if
    installed) and the targets come out, judged (TARGET_MIN_ENVS lowered)."""
    monkeypatch.setattr(section, "TARGET_MIN_ENVS", 1)
    ver = envpool_version()
    lines, errors = section.run(tiny(gym_max_envs=2), 2, ver)
    assert errors == []
    text = "\n".join(lines)
    assert "- load average (1, 5, 15 min) at the start:" in text
    labels = [section.BARE_ALE, section.BARE_ALE_CORES, section.C_LOOP, section.SERIAL, section.NATIVE_SYNC,
              section.NATIVE_ASYNC, section.GYM_SYNC, section.GYM_ASYNC, section.PY_SHOAL]
    if section.ale_vector_available() is None:
        labels += [section.ALE_VEC_SYNC, section.ALE_VEC_ASYNC]
    if ver is not None:
        labels += [section.ENVPOOL_SYNC, section.ENVPOOL_ASYNC]
        assert "differs from its defaults: repeat_action_probability=0.25 (default 0.0)" in text
    for label in labels:
        assert f"| Pong | 2 | {label} |" in text, label
    assert "| Pong | 2 | gymnasium AsyncVectorEnv | 2 | 2 |" in text   # one process per env
    assert "| Pong | 2 | shoal native async | 2 | 1 |" in text        # batch num_envs // 2
    judged = [line for line in lines if line.startswith("| Pong | 2 | ") and " | >= " in line]
    assert len(judged) == (3 if ver is not None or section.ale_vector_available() is None else 2)
    assert all(line.endswith(("| yes |", "| **no** |")) for line in judged)


def test_without_envpool_and_atari_vector_env(monkeypatch):
    """No EnvPool and no AtariVectorEnv: no rows of theirs, a note for each,
    and no target against them; the others are measured."""
    monkeypatch.setattr(section, "ale_vector_available", lambda: "ImportError: not here")
    lines, errors = section.run(tiny(), 2, None)
    text = "\n".join(lines)
    assert errors == []
    assert "EnvPool: not installed" in text and "AtariVectorEnv: cannot be imported (ImportError: not here)" in text
    rows = "\n".join(table_rows(lines))
    assert "EnvPool" not in rows and "AtariVectorEnv" not in rows
    assert "| Pong | 2 | shoal native sync |" in rows and "| Pong | 2 | bare ALE (ALEInterface.act) |" in rows
    assert not any("best of EnvPool" in line for line in lines if line.startswith("| Pong"))


def test_skipped_without_ale_py_or_cv2(monkeypatch):
    real = section.importlib.util.find_spec
    monkeypatch.setattr(section.importlib.util, "find_spec", lambda name: None if name == "cv2" else real(name))
    lines, errors = section.run(tiny(), 2, None)
    assert errors == []
    assert "Skipped: OpenCV (cv2) is not installed" in "\n".join(lines)
    assert "opencv-python-headless" in "\n".join(lines)   # the atari extra alone does not bring it


def test_cli_atari_group(tmp_path):
    """`shoal bench --contenders atari`: the section alone, no CartPole table."""
    out = subprocess.run([sys.executable, "-m", "shoal", "bench", "--quick", "--contenders", "atari",
                          "--atari-seconds", "0.01", "--warmup", "0", "--gym-max-envs", "1"],
                         capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "## Atari: env-steps/s" in out.stdout and "| Pong | 2 | bare ALE (ALEInterface.act) |" in out.stdout
    assert "\n| C loop |" not in out.stdout   # the CartPole table is not run
