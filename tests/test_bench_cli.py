"""The benchmark's smoke mode runs end to end through the CLI."""
import subprocess
import sys


def test_shoal_bench_quick_prints_a_table():
    out = subprocess.run([sys.executable, "-m", "shoal", "bench", "--quick",
                          "--contenders", "c_loop,serial,sync,async"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "| C loop |" in out.stdout
    assert "shoal Serial" in out.stdout and "shoal processes sync" in out.stdout
    assert "CPU:" in out.stdout


def test_unknown_command_is_an_error():
    out = subprocess.run([sys.executable, "-m", "shoal", "frobnicate"], capture_output=True, text=True)
    assert out.returncode != 0 and "invalid choice" in out.stderr
