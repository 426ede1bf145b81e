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
