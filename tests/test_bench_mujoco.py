"""The bench's MuJoCo section (shoal.bench.mujoco): its table, ratios and
target lines, from synthetic rates and from tiny real runs. Nothing here
depends on how fast anything ran."""
import subprocess
import sys

import pytest

pytest.importorskip("mujoco")

from shoal.bench import mujoco as section  # noqa: E402
from shoal.bench.cartpole import envpool_version  # noqa: E402


def tiny(**kwargs):
    values = dict(envs=["HalfCheetah"], num_envs=[2], rounds=1, seconds=0.01, warmup=0.0, workers=[1],
                  gym_max_envs=0)
    values.update(kwargs)
    return section.MujocoSettings(**values)


def need_native(name="HalfCheetah"):
    why = section.available(name)
    if why is not None:
        pytest.skip(f"native {name} not available: {why}")


def table_rows(lines):
    """The main table's rows: the third cell names a contender."""
    return [line for line in lines if line.startswith("| ") and len(line.split(" | ")) > 2
            and line.split(" | ")[2] in section.ORDER]


def test_report_ratios_and_targets_from_synthetic_rates():
    """C loop 100/s on 2 cores: native 180 is 0.90 of the limit (met), and
    1.20x EnvPool's best (150; met for HalfCheetah's 1.15x, not for Ant at
    envpool 200); below TARGET_MIN_ENVS the targets are n/a."""
    Row = section.Row
    rows = []
    for env, n, envpool_best in (("HalfCheetah", 16, 150.0), ("Ant", 16, 200.0), ("HalfCheetah", 4, 150.0)):
        rows += [Row(section.C_LOOP, n, 1, [100.0, 90.0, 110.0], env=env, batch=n),
                 Row(section.SERIAL, n, 1, [80.0], env=env, batch=n),
                 Row(section.NATIVE_SYNC, n, 2, [180.0], env=env, batch=n),
                 Row(section.NATIVE_ASYNC, n, 2, [170.0], env=env, batch=n // 2),
                 Row(section.ENVPOOL_SYNC, n, 1, [100.0], env=env, batch=n),
                 Row(section.ENVPOOL_SYNC, n, 2, [envpool_best], env=env, batch=n),
                 Row(section.ENVPOOL_ASYNC, n, 2, [120.0], env=env, batch=n // 2)]
    lines = section.report(rows, 2, tiny(), None, skipped=["Humanoid: not implemented"])
    text = "\n".join(lines)
    assert "## MuJoCo" in text and "EnvPool not installed" in text and "- skipped: Humanoid: not implemented" in text
    assert "| env | num_envs | contender | workers / threads | batch | env-steps/s (median) |" in text
    rows_out = table_rows(lines)
    assert len(rows_out) == 3 * 8   # 7 measured + the computed C loop x cores, per group
    assert "| HalfCheetah | 16 | C loop | 1 | 16 | 100 | 20% | 1.000 | 0.500 |" in text
    assert "| HalfCheetah | 16 | C loop x cores (computed) | 2 | 16 | 200 | 20% | 2.000 | 1.000 |" in text
    assert "| HalfCheetah | 16 | shoal native sync | 2 | 16 | 180 | 0% | 1.800 | 0.900 |" in text
    assert "| HalfCheetah | 16 | shoal native async | 2 | 8 | 170 |" in text
    # Targets: 4 judged at 16 envs, 3 met (Ant's 180 / 200 = 0.90x < 1.0x); n/a at 4 envs.
    assert "3 of 4 met" in text
    assert any(line.startswith("| HalfCheetah | 16 | native best / (C loop x 2 cores) | >= 0.85 | 0.90:")
               and line.endswith("| yes |") for line in lines)
    assert any(line.startswith("| HalfCheetah | 16 | native best / EnvPool best | >= 1.15x | 1.20x:")
               and "EnvPool sync, 2 threads" in line and line.endswith("| yes |") for line in lines)
    assert any(line.startswith("| Ant | 16 | native best / EnvPool best | >= 1x | 0.90x:")
               and line.endswith("| **no** |") for line in lines)
    assert sum(line.startswith("| HalfCheetah | 4 | native best") and line.endswith("| n/a (< 16 envs) |")
               for line in lines) == 2


def test_tiny_run_measures_every_contender(monkeypatch):
    """HalfCheetah at 2 envs, one round: every contender has a row (EnvPool's
    if installed) and both targets come out, judged (TARGET_MIN_ENVS lowered)."""
    need_native()
    monkeypatch.setattr(section, "TARGET_MIN_ENVS", 1)
    ver = envpool_version()
    lines, errors = section.run(tiny(gym_max_envs=2), 2, ver)
    assert errors == []
    text = "\n".join(lines)
    labels = [section.C_LOOP, section.C_LOOP_CORES, section.SERIAL, section.NATIVE_SYNC, section.NATIVE_ASYNC,
              section.GYM_SYNC, section.GYM_ASYNC, section.PY_SHOAL]
    if ver is not None:
        labels += [section.ENVPOOL_SYNC, section.ENVPOOL_ASYNC]
        assert "with its own MuJoCo" in text
    for label in labels:
        assert f"| HalfCheetah | 2 | {label} |" in text, label
    assert "| HalfCheetah | 2 | gymnasium AsyncVectorEnv | 2 | 2 |" in text   # one process per env
    assert "| HalfCheetah | 2 | shoal native async | 2 | 1 |" in text        # batch num_envs // 2
    judged = [line for line in lines if line.startswith("| HalfCheetah | 2 | native best")]
    assert len(judged) == (2 if ver is not None else 1)
    assert all(line.endswith(("| yes |", "| **no** |")) for line in judged)


def test_without_envpool_and_with_an_unfinished_env(monkeypatch):
    """No EnvPool: no EnvPool rows and a note; an env whose native version
    cannot be built is skipped with its reason, the others measured."""
    need_native()
    real = section.available
    monkeypatch.setattr(section, "available",
                        lambda name: "RuntimeError: Ant is not implemented" if name == "Ant" else real(name))
    lines, errors = section.run(tiny(envs=["Ant", "HalfCheetah"]), 2, None)
    text = "\n".join(lines)
    assert errors == []
    assert "EnvPool not installed" in text and "EnvPool sync" not in text.split("| env |", 1)[1]
    assert "- skipped: Ant: RuntimeError: Ant is not implemented" in text
    assert "| Ant |" not in text and "| HalfCheetah | 2 | shoal native sync |" in text
    assert not any("native best / EnvPool best" in line for line in lines)


def test_without_imageio_the_gymnasium_rows_are_skipped_not_errors(monkeypatch):
    """gymnasium's own MuJoCo envs import imageio (the bench extra's, not the
    mujoco extra's): without it their rows are a skip note, not errors that
    fail a run which measured everything else."""
    need_native()
    monkeypatch.setattr(section, "have_gymnasium_mujoco", lambda: False)
    lines, errors = section.run(tiny(gym_max_envs=2), 2, None)
    text = "\n".join(lines)
    assert errors == []
    assert "- skipped: gymnasium's rows: its MuJoCo envs need imageio" in text
    assert f"| HalfCheetah | 2 | {section.NATIVE_SYNC} |" in text
    assert f"| HalfCheetah | 2 | {section.GYM_SYNC} |" not in text


def test_skipped_without_mujoco(monkeypatch):
    monkeypatch.setattr(section, "mujoco_version", lambda: None)
    lines, errors = section.run(tiny(), 2, None)
    assert errors == [] and "Skipped: mujoco is not installed" in "\n".join(lines)


def test_cli_mujoco_group(tmp_path):
    """`shoal bench --contenders mujoco`: the section alone, no CartPole table."""
    need_native()
    out = subprocess.run([sys.executable, "-m", "shoal", "bench", "--quick", "--contenders", "mujoco",
                          "--mujoco-num-envs", "2", "--mujoco-seconds", "0.01", "--warmup", "0",
                          "--gym-max-envs", "1"],
                         capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "## MuJoCo: env-steps/s" in out.stdout and "| HalfCheetah | 2 | C loop |" in out.stdout
    assert "\n| C loop |" not in out.stdout   # the CartPole table is not run


def test_physics_build_table_takes_the_builds_ratio_out_of_the_envpool_ratio():
    """EnvPool links its own MuJoCo: with its build 1.25x slower per
    mj_step (synthetic), native best / EnvPool best 1.50 at 16 envs is
    1.20 net of the build; below TARGET_MIN_ENVS no ratio is given; an env
    whose builds were not measured says why."""
    Row = section.Row
    rows = []
    for n in (4, 16):
        rows += [Row(section.NATIVE_SYNC, n, 2, [150.0], env="HalfCheetah", batch=n),
                 Row(section.ENVPOOL_SYNC, n, 2, [100.0], env="HalfCheetah", batch=n)]
    builds = {"HalfCheetah": (1e6 / 5.0, 1e6 / 4.0), "Hopper": "not measured (OSError: no such file)"}
    text = "\n".join(section.report(rows, 2, tiny(), "1.2.5", [], builds))
    assert "| HalfCheetah | 5.00 | 4.00 | 1.25 | 1.50 (16) | 1.20 (16) |" in text
    assert "| Hopper | not measured (OSError: no such file) |" in text


def test_physics_build_rates_of_envpools_mujoco_and_the_wheel():
    """A tiny real measurement: both builds step gymnasium's XML."""
    pytest.importorskip("envpool")
    pytest.importorskip("gymnasium.envs.mujoco")
    envpool_rate, wheel_rate = section.physics_build_rates("HalfCheetah", rounds=1, seconds=0.02, warmup=0.0)
    assert envpool_rate > 0 and wheel_rate > 0
