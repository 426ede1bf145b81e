"""scripts/cleanrl_ppo.py: a CleanRL-style PPO over gymnasium.make_vec("shoal/..."),
the gymnasium path end to end (discrete and, with MuJoCo, Box actions)."""
import importlib.util
import pathlib

import numpy as np
import pytest

pytest.importorskip("torch")
SCRIPT = pathlib.Path(__file__).resolve().parents[1] / "scripts" / "cleanrl_ppo.py"


def load_script():
    spec = importlib.util.spec_from_file_location("cleanrl_ppo", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_cartpole_runs_a_few_updates_and_records_episodes(capsys):
    out = load_script().main(["--total-timesteps", "2048", "--num-envs", "4", "--num-steps", "128"])
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("iteration")]
    assert len(lines) == 4 and lines[-1].startswith("iteration 4/4 step 2048")
    returns = out["episode_returns"]
    assert len(returns) >= 20 and all(1 <= r <= 500 for r in returns)   # CartPole: +1 per step


def test_box_actions_through_make_vec():
    pytest.importorskip("mujoco", reason="MuJoCo envs need the mujoco extra")
    out = load_script().main(["--env-id", "shoal/InvertedPendulum-v5", "--total-timesteps", "1024",
                              "--num-envs", "4", "--num-steps", "128"])
    returns = out["episode_returns"]
    assert returns and all(np.isfinite(returns))
