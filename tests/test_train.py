"""shoal.train: PPO learns CartPole, checkpoints resume, masks are honoured, every env trains."""
import csv
import glob
import os
import signal
import types

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import shoal  # noqa: E402
from shoal import cli, config, train  # noqa: E402


def small(env="cartpole", *flags):
    return config.load(env, ["--train.dashboard", "none", "--train.tensorboard", "false",
                             "--train.checkpoint-interval", "0", "--train.eval-interval", "0",
                             "--train.eval-episodes", "8", *flags])


def params(policy):
    return {k: v.clone() for k, v in policy.state_dict().items()}


def test_cartpole_return_clearly_improves(tmp_path):
    cfg = small("cartpole", "--train.total-timesteps", "40000", "--train.max-train-seconds", "0")
    spec = train.shoal.env_spec("cartpole")
    torch.manual_seed(0)
    untrained = train.Policy(spec)
    before = train.evaluate(untrained, "cartpole", 8, seed=123)["mean_return"]
    summary = train.train(cfg, run_dir=str(tmp_path))
    assert summary["global_step"] >= 40000
    assert summary["eval_return"] > max(150.0, 5 * before), (before, summary["eval_return"])
    assert os.path.exists(tmp_path / "log.csv") and os.path.exists(tmp_path / "config.ini")
    rows = (tmp_path / "log.csv").read_text().splitlines()
    assert rows[0].startswith("train_seconds,global_step") and len(rows) >= 2


def test_evaluation_counts_an_unfinished_episode_by_its_return_so_far():
    """Episodes cut by max_steps count the return they have so far: CartPole
    pays 1 a step and cannot fall within 5 steps, so each return is 5."""
    torch.manual_seed(0)
    policy = train.Policy(train.shoal.env_spec("cartpole"))
    result = train.evaluate(policy, "cartpole", 4, seed=0, max_steps=5)
    np.testing.assert_array_equal(result["returns"], [5.0] * 4)
    assert np.isnan(result["mean_length"])   # of finished episodes: none
    assert result["cut_off"] == 4 and result["max_steps"] == 5   # said, by shoal eval and final_eval.json


def test_default_eval_steps_wait_for_an_atari_game_to_end_itself():
    """An Atari game has no step limit but a frame limit, where it truncates
    itself: evaluation waits that long (27000 steps at frameskip 4), not the
    1000-step default's 4010 that cut long games short."""
    pytest.importorskip("ale_py", reason="Atari envs need the atari extra")
    assert train.default_eval_steps(shoal.envs.spec("Breakout")) == 27_010
    assert train.default_eval_steps(shoal.envs.spec("Breakout", frameskip=8,
                                                    max_num_frames_per_episode=1000)) == 135
    assert train.default_eval_steps(shoal.envs.spec("CartPole")) == 2010



@pytest.mark.parametrize("flags", [[], ["--policy.lstm", "true"]])
def test_a_checkpoints_policy_acts_in_your_own_loop(tmp_path, flags):
    """train.load_policy + Policy.act (the README's own-loop recipe) play
    the episodes shoal eval plays: the same returns, seed for seed."""
    import gymnasium
    summary = train.train(small("cartpole", "--train.total-timesteps", "2048", *flags),
                          run_dir=str(tmp_path))
    policy, cfg = train.load_policy(summary["checkpoint"])
    assert cfg["env"]["name"] == "cartpole"
    expected = train.evaluate(policy, "cartpole", 3, seed=5)["returns"]
    for k in range(3):
        env = gymnasium.make("shoal/CartPole-v0")
        obs, _ = env.reset(seed=5 + k)   # evaluation env k is seeded seed + k
        total, state, done = 0.0, None, False
        while not done:
            action, state = policy.act(obs[None], state)
            obs, reward, term, trunc, _ = env.step(action[0])
            total, done = total + reward, term or trunc
        env.close()
        assert total == expected[k]
    with pytest.raises(ValueError, match=r"shape \(rows, 4\), got \(4,\) \(one row: obs\[None\]\)"):
        policy.act(obs)   # one row, unbatched: said so (it was torch's IndexError)
    with pytest.raises(train.RunError, match="does not exist"):
        train.load_policy(str(tmp_path / "nothing.pt"))


def test_resume_takes_this_runs_learning_rate(tmp_path):
    """Without annealing, the resumed run's [train] learning_rate is the one
    used, not the lr saved in the optimizer state."""
    first = train.train(small("cartpole", "--train.total-timesteps", "1024", "--train.anneal-lr", "false"),
                        run_dir=str(tmp_path / "a"))
    assert train.load_checkpoint(first["checkpoint"])["optimizer"]["param_groups"][0]["lr"] == 3e-3
    resumed = train.train(small("cartpole", "--train.total-timesteps", "2048", "--train.anneal-lr", "false",
                                "--train.learning-rate", "1e-5"),
                          resume=first["checkpoint"], run_dir=str(tmp_path / "b"))
    assert train.load_checkpoint(resumed["checkpoint"])["optimizer"]["param_groups"][0]["lr"] == 1e-5
    with open(tmp_path / "b" / "log.csv") as f:
        assert float(list(csv.DictReader(f))[-1]["learning_rate"]) == 1e-5


def test_log_rows_without_ended_episodes_have_no_mean_return(tmp_path):
    """A row's mean_return / mean_length are those of the episodes ended
    since the row before: NaN where none did, not the last row's again."""
    cfg = small("cartpole", "--vec.num-envs", "1", "--vec.num-batches", "1", "--vec.backend", "serial",
                "--train.num-steps", "8", "--train.num-minibatches", "1", "--train.total-timesteps", "400",
                "--train.log-interval", "0")
    train.train(cfg, run_dir=str(tmp_path))
    with open(tmp_path / "log.csv") as f:
        rows = list(csv.DictReader(f))
    quiet = [r for r in rows if int(r["episodes"]) == 0]
    assert quiet and any(int(r["episodes"]) for r in rows)
    assert all(np.isnan(float(r["mean_return"] or "nan")) and np.isnan(float(r["mean_length"] or "nan"))
               for r in quiet)


def test_same_seed_same_result(tmp_path):
    cfg = small("cartpole", "--train.total-timesteps", "2048")
    a = train.train(cfg, run_dir=str(tmp_path / "a"))
    b = train.train(cfg, run_dir=str(tmp_path / "b"))
    pa = train.load_checkpoint(a["checkpoint"])["policy"]
    pb = train.load_checkpoint(b["checkpoint"])["policy"]
    assert all(torch.equal(pa[k], pb[k]) for k in pa)


@pytest.mark.parametrize("env,flags", [
    ("cartpole", []),      # discrete actions, an MLP
    ("explorer", []),      # MultiDiscrete: a Gumbel draw per component, for every row at once
    ("halfcheetah", []),   # Box actions (the step's Gaussian noise), normalize_reward
    # episodes falling early and cut at 30 steps: the truncated rows' value
    # forward takes the whole step's rows, not a batch's
    ("hopper", ["--env.kwargs", "max_episode_steps=30"]),
    ("breakout", []),      # a CNN
])
def test_num_batches_keeps_the_numbers(tmp_path, env, flags):
    """Double-buffering (num_batches 2) trains the very weights one batch
    does: the workers step half the envs while the policy runs on the other
    half, but the draws and sums are the same (README, "Reproducibility").
    8 envs: batches of 4 rows (torch's CPU kernels block rows by 4 here:
    with 2, 5 or 6 rows a batch the runs part, ~1e-7, README)."""
    pytest.importorskip({"halfcheetah": "mujoco", "hopper": "mujoco", "breakout": "ale_py"}.get(env, "numpy"))
    weights = []
    for num_batches in ("1", "2"):
        cfg = small(env, "--vec.backend", "serial", "--vec.num-envs", "8", "--vec.num-batches", num_batches,
                    "--train.num-steps", "16", "--train.total-timesteps", "256", "--train.max-train-seconds", "0",
                    "--train.eval-episodes", "2", *flags)
        summary = train.train(cfg, run_dir=str(tmp_path / num_batches))
        weights.append(train.load_checkpoint(summary["checkpoint"])["policy"])
    assert weights[0].keys() == weights[1].keys()
    assert all(torch.equal(weights[0][k], weights[1][k]) for k in weights[0]), \
        [k for k in weights[0] if not torch.equal(weights[0][k], weights[1][k])]

def test_checkpoint_save_and_resume(tmp_path, capsys):
    cfg = small("cartpole", "--train.total-timesteps", "2048")  # 2 updates of 64 envs x 16 steps
    first = train.train(cfg, run_dir=str(tmp_path))
    ckpt = train.load_checkpoint(first["checkpoint"])
    assert ckpt["progress"]["global_step"] == 2048 and ckpt["progress"]["update"] == 2
    assert not glob.glob(str(tmp_path / "*.tmp*"))  # written atomically: no temp file left
    # Loading gives back the very same policy.
    policy, saved_cfg = train.policy_from_checkpoint(ckpt)
    assert saved_cfg == cfg
    assert all(torch.equal(policy.state_dict()[k], ckpt["policy"][k]) for k in ckpt["policy"])
    # Resuming continues from the saved step with the saved optimizer state.
    cfg2 = small("cartpole", "--train.total-timesteps", "4096")
    resumed = train.train(cfg2, resume=first["checkpoint"], run_dir=str(tmp_path / "r"))
    assert resumed["global_step"] == 4096 and resumed["update"] == 4
    after = train.load_checkpoint(resumed["checkpoint"])
    assert after["optimizer"]["state"][0]["step"] == 2 * ckpt["optimizer"]["state"][0]["step"]
    # A checkpoint already at its total resumes without training.
    again = train.train(cfg, resume=first["checkpoint"], run_dir=str(tmp_path / "s"))
    again_ckpt = train.load_checkpoint(again["checkpoint"])
    assert all(torch.equal(again_ckpt["policy"][k], ckpt["policy"][k]) for k in ckpt["policy"])
    # The CLI resumes too, and eval reads the checkpoint (with a GIF).
    assert cli.main(["train", "cartpole", "--resume", first["checkpoint"], "--run-dir", str(tmp_path / "c"),
                     "--train.total-timesteps", "3072", "--train.dashboard", "none",
                     "--train.eval-episodes", "4"]) == 0
    gif = tmp_path / "out.gif"
    assert cli.main(["eval", "cartpole", "--checkpoint", first["checkpoint"], "--episodes", "4",
                     "--gif", str(gif), "--gif-steps", "20"]) == 0
    out = capsys.readouterr().out
    assert "mean return" in out and gif.exists()


def test_a_run_ended_by_its_time_cap_says_so(tmp_path, capsys):
    """A run that max_train_seconds stops short of its steps (a resume
    counts the time before it too) says why it trained fewer steps; one that
    reaches its steps says nothing of the cap."""
    assert cli.main(["train", "cartpole", "--run-dir", str(tmp_path / "a"), "--train.total-timesteps", "1e9",
                     "--train.max-train-seconds", "0.5", "--train.target-return", "0",
                     "--train.dashboard", "none", "--train.tensorboard", "false",
                     "--train.eval-episodes", "2", "--train.eval-interval", "0"]) == 0
    assert "stopped by [train] max_train_seconds = 0.5" in capsys.readouterr().out
    assert cli.main(["train", "cartpole", "--run-dir", str(tmp_path / "b"), "--train.total-timesteps", "1024",
                     "--train.dashboard", "none", "--train.tensorboard", "false",
                     "--train.eval-episodes", "2", "--train.eval-interval", "0"]) == 0
    assert "max_train_seconds" not in capsys.readouterr().out


def test_ctrl_c_writes_a_final_checkpoint(tmp_path, monkeypatch):
    real = train.ppo_update
    calls = []

    def interrupted(*args):
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(*args)

    monkeypatch.setattr(train, "ppo_update", interrupted)
    cfg = small("cartpole", "--train.total-timesteps", "100000")
    summary = train.train(cfg, run_dir=str(tmp_path))
    assert summary["interrupted"]
    progress = train.load_checkpoint(str(tmp_path / "checkpoint.pt"))["progress"]
    # the interrupted update is not counted: steps and updates agree (issue 10, item 6)
    batch = cfg["train"]["num_steps"] * cfg["vec"]["num_envs"]
    assert progress["update"] == 1 and progress["global_step"] == batch * progress["update"]


@pytest.mark.parametrize("stop", [KeyboardInterrupt, train.Terminated, RuntimeError])
def test_a_stop_between_log_rows_logs_the_updates_since_the_last(tmp_path, monkeypatch, stop):
    """A run stopped (Ctrl-C, SIGTERM, an error in the rollout) between two
    log rows: its last row holds the whole updates done since the one
    before, so log.csv ends where the checkpoint does (it used to lose up
    to log_interval of training)."""
    real = train.Rollout.collect
    calls = []

    def stopped_in_the_fourth(self):
        calls.append(1)
        if len(calls) == 4:
            raise stop("stopped")
        return real(self)

    monkeypatch.setattr(train.Rollout, "collect", stopped_in_the_fourth)
    cfg = small("cartpole", "--train.total-timesteps", "100000", "--train.log-interval", "1000")
    if stop is RuntimeError:
        with pytest.raises(RuntimeError, match="stopped"):
            train.train(cfg, run_dir=str(tmp_path))
    else:
        assert train.train(cfg, run_dir=str(tmp_path))["interrupted"]
    with open(tmp_path / "log.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    batch = cfg["train"]["num_steps"] * cfg["vec"]["num_envs"]
    progress = train.load_checkpoint(str(tmp_path / "checkpoint.pt"))["progress"]
    assert progress["update"] == 3
    assert [int(r["global_step"]) for r in rows] == [3 * batch]
    assert int(rows[0]["episodes"]) > 0 and float(rows[0]["sps"]) > 0


def test_a_ctrl_c_during_an_update_logs_that_updates_episodes(tmp_path, monkeypatch):
    """Ctrl-C lands inside update 2, which finishes and is counted; the last
    row counts the episodes of its rollout too, as a run that ended after 2
    updates does (they were dropped: the stop came before they were read)."""
    cfg = small("cartpole", "--train.log-interval", "1000")
    batch = cfg["train"]["num_steps"] * cfg["vec"]["num_envs"]

    def last_row(run_dir):
        with open(run_dir / "log.csv", newline="") as f:
            return list(csv.DictReader(f))[-1]

    cfg["train"]["total_timesteps"] = 2 * batch
    train.train(cfg, run_dir=str(tmp_path / "whole"))
    real = train.ppo_update
    calls = []

    def ctrl_c_inside(*args):
        calls.append(1)
        if len(calls) == 2:
            os.kill(os.getpid(), signal.SIGINT)
        return real(*args)

    previous = signal.signal(signal.SIGINT, signal.default_int_handler)   # ignored under nohup
    monkeypatch.setattr(train, "ppo_update", ctrl_c_inside)
    try:
        cfg["train"]["total_timesteps"] = 100 * batch
        assert train.train(cfg, run_dir=str(tmp_path / "stopped"))["interrupted"]
    finally:
        signal.signal(signal.SIGINT, previous)
    whole, stopped = last_row(tmp_path / "whole"), last_row(tmp_path / "stopped")
    assert int(stopped["global_step"]) == int(whole["global_step"]) == 2 * batch
    assert int(stopped["episodes"]) == int(whole["episodes"]) > 0
    assert float(stopped["mean_return"]) == pytest.approx(float(whole["mean_return"]))


def test_a_ctrl_c_during_an_evaluation_keeps_the_updates_episodes_in_the_log(tmp_path, monkeypatch):
    """Ctrl-C in the evaluation after update 2: the last row still counts
    update 2's episodes (read before the evaluation), as a run that ended
    after 2 updates (without evaluations) logs them."""
    cfg = small("cartpole", "--train.log-interval", "1000")
    batch = cfg["train"]["num_steps"] * cfg["vec"]["num_envs"]
    cfg["train"]["total_timesteps"] = 2 * batch
    train.train(cfg, run_dir=str(tmp_path / "whole"))
    real = train.evaluate
    calls = []

    def ctrl_c_in_the_third(*args, **kwargs):   # the first one is the curve's starting point
        calls.append(1)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(train, "evaluate", ctrl_c_in_the_third)
    cfg["train"].update(total_timesteps=100 * batch, eval_interval=1e-9, eval_episodes=2)
    assert train.train(cfg, run_dir=str(tmp_path / "stopped"))["interrupted"]
    rows = {}
    for name in ("whole", "stopped"):
        with open(tmp_path / name / "log.csv", newline="") as f:
            rows[name] = [r for r in csv.DictReader(f) if int(r["global_step"]) > 0][-1]
    assert int(rows["stopped"]["global_step"]) == int(rows["whole"]["global_step"]) == 2 * batch
    assert int(rows["stopped"]["episodes"]) == int(rows["whole"]["episodes"]) > 0


def test_ctrl_c_during_an_update_saves_whole_updates(tmp_path, monkeypatch):
    """A real SIGINT arriving while an update runs: the update finishes, is
    counted, and the checkpoint's weights, Adam steps and counters agree."""
    real = train.ppo_update
    calls = []

    def ctrl_c_inside(*args):
        calls.append(1)
        if len(calls) == 2:
            os.kill(os.getpid(), signal.SIGINT)   # lands in the middle of this update
        return real(*args)

    previous = signal.signal(signal.SIGINT, signal.default_int_handler)   # ignored under nohup
    monkeypatch.setattr(train, "ppo_update", ctrl_c_inside)
    try:
        cfg = small("cartpole", "--train.total-timesteps", "100000")
        summary = train.train(cfg, run_dir=str(tmp_path))
    finally:
        signal.signal(signal.SIGINT, previous)
    assert summary["interrupted"] and len(calls) == 2
    ckpt = train.load_checkpoint(str(tmp_path / "checkpoint.pt"))
    tc = cfg["train"]
    assert ckpt["progress"]["update"] == 2
    assert ckpt["optimizer"]["state"][0]["step"] == 2 * tc["update_epochs"] * tc["num_minibatches"]


def fake_rollout(T, R, obs_dim, masks, seed):
    """A rollout whose masked-out rows hold seed-dependent garbage."""
    g = torch.Generator().manual_seed(seed)
    fixed = torch.Generator().manual_seed(0)
    keep = masks.bool()
    def mix(shape, fn):
        a, b = fn(shape, fixed), fn(shape, g)
        k = keep.view(*keep.shape, *([1] * (len(shape) - 2)))[: shape[0]]
        return torch.where(k, a, b)
    obs = mix((T + 1, R, obs_dim), lambda s, gen: torch.randn(s, generator=gen))
    actions = mix((T, R, 1), lambda s, gen: torch.randint(0, 2, s, generator=gen))
    logprobs = mix((T, R), lambda s, gen: -torch.rand(s, generator=gen))
    values = mix((T + 1, R), lambda s, gen: torch.randn(s, generator=gen))
    rewards = mix((T, R), lambda s, gen: torch.randn(s, generator=gen) * 100)
    dones = torch.zeros(T + 1, R)
    return types.SimpleNamespace(T=T, R=R, obs=obs, actions=actions, logprobs=logprobs, values=values,
                                 rewards=rewards, dones=dones, masks=masks, device=torch.device("cpu"),
                                 initial_state=None)


def test_masked_rows_contribute_nothing():
    T, R = 8, 6
    masks = torch.ones(T + 1, R)
    masks[:, 4:] = 0          # two absent rows
    masks[5:, 1] = 0          # an agent that leaves mid-rollout
    cfg = small("cartpole")
    spec = train.shoal.env_spec("cartpole")
    results = []
    for garbage_seed in (1, 2):
        torch.manual_seed(0)
        policy = train.Policy(spec)
        opt = torch.optim.Adam(policy.parameters(), lr=1e-3)
        ro = fake_rollout(T, R, 4, masks, garbage_seed)
        torch.manual_seed(1)
        stats = train.ppo_update(policy, opt, ro, cfg)
        results.append((params(policy), stats))
    (p1, s1), (p2, s2) = results
    assert all(torch.allclose(p1[k], p2[k], atol=1e-6) for k in p1)
    assert s1 == pytest.approx(s2, rel=1e-5)


@pytest.mark.parametrize("num_minibatches,rows", [(30, 48), (48, 48), (4, 6), (7, 6)])
def test_an_update_takes_num_minibatches_optimizer_steps(num_minibatches, rows):
    """One epoch is num_minibatches optimizer steps even where they do not
    split the batch evenly (48 rows in 30: torch.chunk makes 24), and at
    most one per row: T x R rows for the MLP, R whole rows for the LSTM
    (7 asked of 6 gives 6)."""
    T, R = 8, 6
    spec = train.shoal.env_spec("cartpole")
    lstm = rows == R
    cfg = small("cartpole", "--train.num-minibatches", str(num_minibatches), "--train.update-epochs", "1",
                *(["--policy.lstm", "true"] if lstm else []))
    torch.manual_seed(0)
    policy = train.policy_from_config(spec, cfg["policy"])
    opt = torch.optim.Adam(policy.parameters(), lr=1e-3)
    ro = fake_rollout(T, R, 4, torch.ones(T + 1, R), 1)
    if lstm:
        ro.initial_state = policy.initial_state(R, torch.device("cpu"))
    steps = []
    opt.step = lambda *a, _step=opt.step, **k: (steps.append(1), _step(*a, **k))[1]
    train.ppo_update(policy, opt, ro, cfg)
    assert len(steps) == min(num_minibatches, rows)


def test_gae_stops_at_done_and_absent_rows():
    T, R = 3, 2
    rewards = torch.ones(T, R)
    values = torch.zeros(T + 1, R)
    values[T] = 10.0
    dones = torch.zeros(T + 1, R)
    masks = torch.ones(T + 1, R)
    dones[2, 0] = 1           # row 0: episode ends after step 1
    masks[3, 1] = 0           # row 1: absent at the bootstrap obs
    adv, ret = train.gae(rewards, values, dones, masks, gamma=1.0, lam=1.0)
    assert adv[:, 0].tolist() == [2.0, 1.0, 11.0]
    assert adv[:, 1].tolist() == [3.0, 2.0, 1.0]
    assert torch.equal(ret, adv + values[:T])


@pytest.mark.parametrize("env,flags", [
    ("snake", ["--vec.num-envs", "4", "--vec.backend", "multiprocessing", "--vec.num-workers", "2"]),
    ("drive", ["--vec.num-envs", "2", "--vec.num-batches", "1", "--vec.backend", "serial"]),
    ("explorer", ["--vec.num-envs", "4", "--vec.backend", "serial"]),
    ("cartpole", ["--policy.lstm", "true", "--vec.num-envs", "8", "--vec.num-batches", "2"]),
    # the CUDA backend's rollout path, here on CPU tensors ([train] device = cpu)
    ("snake", ["--vec.num-envs", "4", "--vec.backend", "cuda"]),
    ("cartpole", ["--policy.lstm", "true", "--vec.num-envs", "8", "--vec.backend", "cuda"]),
])
def test_every_env_trains(tmp_path, env, flags):
    cfg = small(env, "--train.num-steps", "8", "--train.eval-episodes", "2", *flags)
    cfg["train"]["total_timesteps"] = 2 * 8 * cfg["vec"]["num_envs"] * train.shoal.env_spec(env).agents
    summary = train.train(cfg, run_dir=str(tmp_path))
    assert summary["update"] == 2
    assert np.isfinite(summary["eval_return"])
    assert all(np.isfinite(v) for v in summary["losses"].values())


def _row():
    return {"train_seconds": 1.0, "global_step": 100, "sps": 100.0, "episodes": 3, "mean_return": 5.0,
            "mean_length": 5.0, "eval_return": float("nan"), "pg_loss": 0.1, "v_loss": 0.2, "entropy": 0.6,
            "approx_kl": 0.01, "clipfrac": 0.0, "learning_rate": 1e-3,
            **{f"t_{k}": 0.1 for k in ("env", "copy", "forward", "learn", "eval")}}


def test_dashboard_rich_and_plain_fallback(tmp_path, monkeypatch, capsys):
    cfg = small("cartpole")
    pytest.importorskip("rich")
    cfg["train"]["dashboard"] = "rich"
    log = train.Logger(str(tmp_path), cfg, resume=False)
    assert log.live is not None
    log.log(_row())
    log.close()
    out = capsys.readouterr().out
    assert "mean return" in out and out.endswith("\n")   # (a pipe: what follows starts a line of its own)
    # Without rich: plain printed lines, and the CSV all the same.
    monkeypatch.setitem(__import__("sys").modules, "rich.live", None)
    os.makedirs(tmp_path / "p")
    log = train.Logger(str(tmp_path / "p"), cfg, resume=False)
    assert log.live is None and log.plain
    log.log(_row())
    log.close()
    out = capsys.readouterr().out
    assert "steps" in out and "100" in out
    assert len((tmp_path / "p" / "log.csv").read_text().splitlines()) == 2


def test_rollout_records_the_pool_masks():
    """Drive masks absent and finished cars: the rollout keeps the pool's masks per step."""
    cfg = small("drive", "--vec.backend", "serial", "--vec.num-envs", "2", "--vec.num-batches", "2",
                "--train.num-steps", "16")
    pool = train.make_pool(cfg, "drive", seed=0)
    try:
        torch.manual_seed(0)
        policy = train.Policy(pool.spec)
        ro = train.Rollout(pool, policy, cfg, torch.device("cpu"), train.Timers())
        ro.collect()
        assert torch.equal(ro.masks[ro.T], torch.as_tensor(pool.masks, dtype=torch.float32))
        assert (ro.masks == 0).any() and (ro.masks == 1).any()
        stats = train.ppo_update(policy, torch.optim.Adam(policy.parameters()), ro, cfg)
        assert all(np.isfinite(v) for v in stats.values())
    finally:
        pool.close()


@pytest.mark.parametrize("env", ["cartpole", "drive"])
def test_cuda_backend_rollout_equals_the_cpu_pool_rollout(env):
    """DeviceRollout over the CUDA backend (on CPU tensors here) collects
    exactly what Rollout collects over a Serial pool: same seeds, same
    policy, same sampled actions (CartPole: truncation bootstrap; Drive:
    masks of departed agents)."""
    cfg = small(env, "--vec.num-envs", "4", "--vec.num-batches", "1", "--train.num-steps", "64")
    spec = train.shoal.env_spec(env)
    rollouts = []
    for backend in ("serial", "cuda"):
        cfg["vec"]["backend"] = backend
        pool = train.make_pool(cfg, env, seed=3)
        torch.manual_seed(0)
        policy = train.Policy(spec)
        kind = train.DeviceRollout if backend == "cuda" else train.Rollout
        ro = kind(pool, policy, cfg, torch.device("cpu"), train.Timers())
        for _ in range(3):
            ro.collect()
        rollouts.append(ro)
        pool.close()
    a, b = rollouts
    for name in ("obs", "rewards", "dones", "masks", "actions", "logprobs", "values"):
        torch.testing.assert_close(getattr(a, name), getattr(b, name), rtol=0, atol=0, msg=name)
    assert b.masks.min() == 0 or env == "cartpole", "Drive's agents leave within the rollout"
