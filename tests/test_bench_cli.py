"""The benchmark's smoke mode runs end to end through the CLI.

Run from a temporary folder so that `-m shoal` imports the installed package,
not the repository's source folder."""
import subprocess
import sys


def test_shoal_bench_quick_prints_a_table(tmp_path):
    out = subprocess.run([sys.executable, "-m", "shoal", "bench", "--quick",
                          "--contenders", "c_loop,serial,sync,async"],
                         capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "| C loop |" in out.stdout
    assert "shoal Serial" in out.stdout and "shoal processes sync" in out.stdout
    assert "CPU:" in out.stdout


def test_unknown_command_is_an_error(tmp_path):
    out = subprocess.run([sys.executable, "-m", "shoal", "frobnicate"], capture_output=True, text=True, cwd=tmp_path)
    assert out.returncode != 0 and "invalid choice" in out.stderr


def test_shoal_bench_python_section_quick(tmp_path):
    """The Python-env section alone: its table, every vectorizer, the ratios
    against their targets, and no main table (no C loop)."""
    out = subprocess.run([sys.executable, "-m", "shoal", "bench", "--quick", "--contenders", "python",
                          "--python-num-envs", "16", "--python-rounds", "2",
                          "--python-seconds", "0.02", "--warmup", "0.01"],
                         capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    text = out.stdout
    assert "## Python env: gymnasium CartPole-v1" in text
    for row in ("| 16 | shoal.pool.AsyncVectorEnv |", "| 16 | gymnasium SyncVectorEnv | 1 |",
                "| 16 | gymnasium AsyncVectorEnv | 16 |"):
        assert row in text
    assert "us per step on one core" in text
    assert "| shoal / gymnasium AsyncVectorEnv | 16 | >= 8x |" in text
    assert "| shoal / gymnasium SyncVectorEnv | 16 | >= 1.3x |" in text
    assert "| C loop |" not in text


def test_shoal_bench_envs_section_quick(tmp_path):
    """The first-party envs section: a row per env with its agents, rates and targets."""
    import shoal.envs

    out = subprocess.run([sys.executable, "-m", "shoal", "bench", "--quick", "--contenders", "envs",
                          "--seconds", "0.03", "--warmup", "0.01"],
                         capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "## First-party envs: agent-steps/s" in out.stdout
    for name in shoal.envs.names():
        assert f"| {name} |" in out.stdout
    assert "| C loop |" not in out.stdout, "the main table is not run"
