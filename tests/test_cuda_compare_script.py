"""scripts/compare_cpu_gpu.py --quick runs end to end (CPU-only where there is no GPU)."""
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "compare_cpu_gpu.py"


def test_quick_run_writes_markdown_naming_the_machine(tmp_path):
    out = subprocess.run([sys.executable, "-P", str(SCRIPT), "--quick", "--envs", "CartPole", "Snake",
                          "--out", str(tmp_path)], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    text = (tmp_path / "results.md").read_text()
    assert text == out.stdout.rstrip("\n") or text in out.stdout
    assert "CPU:" in text and "cores" in text and "GPU:" in text
    for section in ("Raw agent-steps/s", "policy forward pass", "Latency"):
        assert text.count(section) == 2
    import torch
    if not torch.cuda.is_available():
        assert "not measured: no GPU" in text
        assert "pinned" not in text   # (no pinned memory without a GPU)
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return
    assert (tmp_path / "throughput_cartpole.png").stat().st_size > 0
    assert (tmp_path / "policy_snake.png").stat().st_size > 0


@pytest.mark.parametrize("args,expected", [
    (["--envs", "HalfCheetah"], "HalfCheetah is not a header env"),
    (["--step-kernel", "bogus"], "expected ENV=KIND"),
    (["--step-kernel", "CartPole=bogus"], "expected ENV=KIND, KIND one of direct, staged, staged_obs or auto"),
    (["--step-kernel", "CartPole=auto", "--envs", "HalfCheetah"], "HalfCheetah is not a header env"),  # auto taken
    (["--repeats", "-1"], "--repeats -1: expected an integer >= 1"),
    (["--seconds", "0"], "expected a finite number > 0"),
])
def test_bad_arguments_are_refused_before_measuring(tmp_path, args, expected):
    """Each was a traceback after the CPU measurements ran, or accepted
    silently (a step kernel ignored without a GPU, --seconds 0 the default)."""
    out = subprocess.run([sys.executable, "-P", str(SCRIPT), "--out", str(tmp_path / "out"), *args],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and expected in out.stderr, out.stderr[-2000:]
    assert not (tmp_path / "out").exists()
