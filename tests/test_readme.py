"""README's Python examples run, in order, in one namespace (a block may use
objects an earlier one made, and imports its own modules), so they cannot go stale. The CUDA example runs
on the GPU where there is one, else with device="cpu" (the same API over
the Cython loop); num_envs are shrunk to keep the suite fast."""
import re
import textwrap
import types
from pathlib import Path

import pytest

README = Path(__file__).resolve().parent.parent / "README.md"


def python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)


def test_readme_has_examples():
    assert len(python_blocks()) >= 4


def test_readme_examples_run(capsys, tmp_path):
    namespace = {"__name__": "readme"}
    for block in python_blocks():
        code = re.sub(r"num_envs=\d+", "num_envs=16", textwrap.dedent(block))   # same code, smaller pools
        if "load_policy(" in code:   # a checkpoint of a short run stands in for the example's
            pytest.importorskip("torch")
            from shoal import config, train
            cfg = config.load("cartpole", ["--train.total-timesteps", "1024", "--train.dashboard", "none",
                                           "--train.tensorboard", "false", "--train.eval-episodes", "2"])
            checkpoint = train.train(cfg, run_dir=str(tmp_path / "run"))["checkpoint"]
            code = re.sub(r'"runs/[^"]*checkpoint.pt"', repr(checkpoint), code)
        if "CudaVecEnv" in code:
            torch = pytest.importorskip("torch")
            if not torch.cuda.is_available():
                code = code.replace('device="cuda"', 'device="cpu"')
        # a block may use what earlier ones made, but imports its own modules
        # (a reader copies one block: a missing import once passed here)
        for name in [name for name, value in namespace.items() if isinstance(value, types.ModuleType)]:
            del namespace[name]
        exec(compile(code, f"README.md block:\n{block[:60]}", "exec"), namespace)
    for value in namespace.values():   # close what the examples left open
        close = getattr(value, "close", None)
        if callable(close) and hasattr(value, "step") and not isinstance(value, type):
            close()
