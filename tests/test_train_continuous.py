"""shoal.train on Box actions (MuJoCo): the Gaussian head, actions clipped at the env
boundary, running obs normalisation and reward scaling (saved, restored, used by eval)."""
import dataclasses
import os
import re

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from shoal import cli, config, envs, train  # noqa: E402

LOCOMOTION = ["halfcheetah", "hopper", "walker2d", "ant", "humanoid"]


def tiny(env="halfcheetah", *flags):
    """2 updates of 4 serial envs x 16 steps, a 2-episode final evaluation."""
    return config.load(env, ["--vec.backend", "serial", "--vec.num-envs", "4", "--vec.num-batches", "2",
                             "--train.num-steps", "16", "--train.total-timesteps", "128",
                             "--train.max-train-seconds", "0", "--train.dashboard", "none",
                             "--train.tensorboard", "false", "--train.checkpoint-interval", "0",
                             "--train.eval-interval", "0", "--train.eval-episodes", "2", *flags])


def box_spec(low, high):
    """HalfCheetah's spec with other action bounds (no MuJoCo needed)."""
    return dataclasses.replace(envs.spec("HalfCheetah"), action_low=np.array(low, np.float32),
                               action_high=np.array(high, np.float32))


def continuous_policy(spec=None, **kw):
    spec = spec or envs.spec("HalfCheetah")
    return train.policy_from_config(spec, {**config.load("halfcheetah")["policy"], **kw})


# ---------------------------------------------------------------------------
# The Gaussian head
# ---------------------------------------------------------------------------
def test_gaussian_logprob_and_entropy_match_torch_distributions():
    g = torch.Generator().manual_seed(0)
    mean = torch.randn(64, 6, generator=g)
    log_std = torch.randn(6, generator=g) * 0.5
    action = mean + torch.randn(64, 6, generator=g) * 2
    normal = torch.distributions.Normal(mean, log_std.exp())
    a, logprob, entropy = train.gaussian(mean, log_std, action=action)
    assert a is action
    torch.testing.assert_close(logprob, normal.log_prob(action).sum(-1), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(entropy, normal.entropy().sum(-1), rtol=1e-6, atol=1e-6)
    # deterministic: the mean; sampled: mean + std * noise, scored like any action
    assert torch.equal(train.gaussian(mean, log_std, deterministic=True)[0], mean)
    torch.manual_seed(1)
    many = train.gaussian(mean[:1].expand(20000, 6), log_std)[0]
    torch.testing.assert_close(many.mean(0), mean[0], atol=0.05 * log_std.exp().max().item(), rtol=0)
    torch.testing.assert_close(many.std(0), log_std.exp(), rtol=0.03, atol=0)



def test_sampling_noise_is_the_draws_sample_makes_and_a_bare_tensor_is_refused():
    """sample(noise=policy.sampling_noise(rows)) draws what sample() would
    draw itself from the same generator state (the rollout cuts a step's
    draws per batch); a bare tensor as noise is a TypeError, not row 0's
    noise for every row."""
    policy = continuous_policy()
    head = torch.zeros(5, policy.action_size)
    torch.manual_seed(3)
    drawn_inside = policy.sample(head)[0]
    torch.manual_seed(3)
    given = policy.sample(head, noise=policy.sampling_noise(5, torch.device("cpu")))[0]
    assert torch.equal(drawn_inside, given) and not torch.equal(given[0], given[1])
    with pytest.raises(TypeError, match="a list of tensors"):
        policy.sample(head, noise=torch.randn(5, policy.action_size))

def test_policy_gaussian_head_for_box_actions_categorical_otherwise():
    policy = continuous_policy()
    assert policy.continuous and policy.action_size == 6 and policy.action_dtype == torch.float32
    assert policy.actor.out_features == 6 and policy.actor_logstd.shape == (6,)
    assert policy.critic_encoder is not None and policy.obs_rms is not None
    with torch.no_grad():
        policy.actor_logstd.fill_(-0.5)
    obs = torch.randn(5, 17, dtype=torch.float64)
    head, value, _ = policy(obs)
    assert head.shape == (5, 6) and value.shape == (5,)
    action, logprob, entropy = policy.sample(head)
    normal = torch.distributions.Normal(head, torch.full((6,), -0.5).exp())
    torch.testing.assert_close(logprob, normal.log_prob(action).sum(-1))
    torch.testing.assert_close(entropy, normal.entropy().sum(-1))
    # Gradients reach the log-std through the log-prob
    policy.sample(head.detach(), action=action)[1].sum().backward()
    assert policy.actor_logstd.grad is not None and policy.actor_logstd.grad.abs().sum() > 0
    # Discrete envs keep their categorical heads and their parameters' names
    cartpole = train.policy_from_config(envs.spec("cartpole"), config.load("cartpole")["policy"])
    assert not cartpole.continuous and cartpole.action_dtype == torch.long
    assert set(cartpole.state_dict()) == {f"{m}.{p}" for m in ("encoder.0", "encoder.2", "actor", "critic")
                                         for p in ("weight", "bias")}


def test_env_actions_are_clipped_to_the_bounds():
    policy = continuous_policy(box_spec([-1.0, -2.0, 0.0, -0.4, -1, -1], [0.5, 3.0, 1.0, 0.4, 1, 1]))
    a = torch.tensor([[-5.0, 5.0, 0.5, 0.0, 2, -2], [0.2, -2.5, -1.0, 0.41, 1, -1]])
    clipped = policy.env_actions(a)
    expected = torch.tensor([[-1.0, 3.0, 0.5, 0.0, 1, -1], [0.2, -2.0, 0.0, 0.4, 1, -1]])
    assert torch.equal(clipped, expected)
    assert "action_low" not in policy.state_dict()  # the spec has the bounds: not saved


# ---------------------------------------------------------------------------
# Running statistics
# ---------------------------------------------------------------------------
def test_running_mean_std_matches_numpy_over_batches():
    rng = np.random.default_rng(0)
    rms = train.RunningMeanStd((3,))
    assert torch.equal(rms.normalize(torch.ones(2, 3), 10.0), torch.ones(2, 3))  # identity before any data
    seen = []
    for n in (1, 7, 100, 2, 513):
        x = rng.normal([3.0, -1.0, 1000.0], [0.1, 5.0, 50.0], size=(n, 3))
        seen.append(x)
        rms.update(torch.from_numpy(x))
        all_x = np.concatenate(seen)
        np.testing.assert_allclose(rms.mean.numpy(), all_x.mean(0), rtol=1e-10)
        np.testing.assert_allclose(rms.var.numpy(), all_x.var(0), rtol=1e-9)
        assert rms.count.item() == len(all_x)
    rms.update(torch.zeros(0, 3))  # an empty batch changes nothing
    assert rms.count.item() == len(all_x)
    x = torch.from_numpy(all_x[:4]).float()
    expected = (all_x[:4] - all_x.mean(0)) / np.sqrt(all_x.var(0) + 1e-8)
    np.testing.assert_allclose(rms.normalize(x, 10.0).numpy(), expected, rtol=1e-4, atol=1e-4)
    far = torch.tensor([[1e6, -1e6, 1000.0]])
    assert rms.normalize(far, 5.0)[0, :2].tolist() == [5.0, -5.0]


@pytest.mark.parametrize("kind", ["numpy", "torch"])
def test_reward_scaler_divides_by_the_std_of_the_discounted_return(kind):
    """The CPU pool's rollout scales numpy rewards, the CUDA backend's tensors: the same numbers."""
    as_kind = (lambda x: np.asarray(x, np.float32)) if kind == "numpy" else \
        (lambda x: torch.as_tensor(x, dtype=torch.float32))
    gamma, rows = 0.9, 3
    scaler = train.RewardScaler(rows, gamma, clip=10.0)
    rng = np.random.default_rng(1)
    returns, seen = np.zeros(rows), []
    for step in range(20):
        rew = rng.normal(5.0, 3.0, rows)
        done = (rng.random(rows) < 0.2).astype(np.float32)
        returns = returns * gamma + rew
        seen.append(returns.copy())
        out = scaler(slice(None), as_kind(rew), as_kind(done))
        assert type(out) is type(as_kind(rew))
        np.testing.assert_allclose(np.asarray(out), np.clip(rew / np.sqrt(np.var(seen) + 1e-8), -10, 10),
                                   rtol=1e-5)
        returns *= 1 - done  # each row's return restarts after its episode ends
    assert scaler.count == 20 * rows
    assert scaler.mean == pytest.approx(np.mean(seen)) and scaler.var == pytest.approx(np.var(seen))
    # Rows of a batch are scaled with their own running returns; the clip holds
    tiny_std = train.RewardScaler(2, 0.99, clip=3.0)
    tiny_std.var = 1e-6
    assert np.asarray(tiny_std(slice(0, 1), as_kind([100.0]), as_kind([0.0]))).tolist() == [3.0]
    assert np.asarray(tiny_std.returns).tolist() == [100.0, 0.0]
    # Its statistics round-trip through a state_dict (the checkpoint's "reward_rms")
    again = train.RewardScaler(rows, gamma, clip=10.0)
    again.load_state_dict(scaler.state_dict())
    assert (again.mean, again.var, again.count) == (scaler.mean, scaler.var, scaler.count)


@pytest.mark.parametrize("kind", ["numpy", "torch"])
def test_reward_scaler_counts_present_rows_only(kind):
    """Absent agent rows (mask 0, reward 0: Drive's cars that left) are not
    rewards: the statistics are those of the present rows alone."""
    as_kind = (lambda x: np.asarray(x, np.float32)) if kind == "numpy" else \
        (lambda x: torch.as_tensor(x, dtype=torch.float32))
    rng = np.random.default_rng(2)
    masked, alone = train.RewardScaler(4, 0.9, clip=10.0), train.RewardScaler(2, 0.9, clip=10.0)
    present = np.array([1.0, 0.0, 1.0, 0.0], np.float32)   # the rollout's float masks
    for _ in range(10):
        rew = rng.normal(3.0, 2.0, 4) * present
        masked(slice(None), as_kind(rew), as_kind(np.zeros(4)), as_kind(present))
        alone(slice(None), as_kind(rew[[0, 2]]), as_kind(np.zeros(2)))
    assert (masked.count, masked.mean, masked.var) == pytest.approx((alone.count, alone.mean, alone.var))


# ---------------------------------------------------------------------------
# Config
# ---------------------------------------------------------------------------
def test_mujoco_configs_load_and_existing_envs_keep_normalisation_off():
    names = {n.lower() for n in envs.names()}
    for ini in os.listdir(config.configs_dir()):
        env = ini[:-4]
        if ini.endswith(".ini") and env != "default":
            assert env in names, f"configs/{ini} names no env"
            config.load(env)
    for env in LOCOMOTION:
        assert os.path.exists(config.env_ini(env)), env
        c = config.load(env)
        assert c["policy"]["normalize_obs"] and c["train"]["normalize_reward"], env
        assert c["policy"]["separate_critic"] and c["train"]["ent_coef"] == 0.0, env
    for env in ("cartpole", "snake", "drive", "explorer"):
        c = config.load(env)
        assert not (c["policy"]["normalize_obs"] or c["train"]["normalize_reward"]
                    or c["policy"]["separate_critic"]), env


def test_cuda_backend_and_separate_critic_lstm_are_config_errors():
    with pytest.raises(config.ConfigError, match=r"\[vec\] backend = cuda: HalfCheetah has no CUDA kernel"
                                                 r".*use backend multiprocessing or serial"):
        config.load("halfcheetah", ["--vec.backend", "cuda"])
    with pytest.raises(config.ConfigError, match=r"separate_critic = true: expected lstm = false"):
        config.load("halfcheetah", ["--policy.lstm", "true"])
    with pytest.raises(config.ConfigError, match=r"obs_clip = 0.0: expected a finite number > 0"):
        config.load("halfcheetah", ["--policy.obs-clip", "0"])


# ---------------------------------------------------------------------------
# Rollouts, training, checkpoints, evaluation (MuJoCo)
# ---------------------------------------------------------------------------
def test_rollout_sends_clipped_actions_and_stores_the_samples():
    pytest.importorskip("mujoco")
    cfg = tiny()
    pool = train.make_pool(cfg, "HalfCheetah", seed=0)
    sent = []
    real_send = pool.send
    pool.send = lambda a: (sent.append(np.array(a)), real_send(a))[1]
    try:
        torch.manual_seed(0)
        policy = train.policy_from_config(pool.spec, cfg["policy"])
        with torch.no_grad():
            policy.actor_logstd.fill_(np.log(2.0))  # most samples fall outside [-1, 1]
        ro = train.Rollout(pool, policy, cfg, torch.device("cpu"), train.Timers())
        ro.collect()
    finally:
        pool.close()
    sent = np.concatenate(sent)
    assert sent.shape == (16 * 4, 6) and sent.dtype == np.float32
    assert sent.min() == -1.0 and sent.max() == 1.0  # at the bounds, never beyond
    stored = ro.actions.flatten(0, 1).numpy()
    assert (np.abs(stored) > 1).mean() > 0.3  # stored as sampled ...
    np.testing.assert_array_equal(np.sort(np.clip(stored, -1, 1), axis=None), np.sort(sent, axis=None))
    # ... and their log-probs are those of the unclipped samples
    with torch.no_grad():
        head, _, _ = policy(ro.obs[:ro.T].flatten(0, 1))
        _, logprob, _ = policy.sample(head, action=ro.actions.flatten(0, 1))
    torch.testing.assert_close(logprob, ro.logprobs.flatten())


def test_halfcheetah_trains_end_to_end_and_the_checkpoint_keeps_the_statistics(tmp_path, capsys):
    pytest.importorskip("mujoco")
    cfg = tiny()
    summary = train.train(cfg, run_dir=str(tmp_path / "a"))
    assert summary["update"] == 2 and summary["global_step"] == 128
    assert summary["losses"] and all(np.isfinite(v) for v in summary["losses"].values())
    assert np.isfinite(summary["eval_return"])
    ckpt = train.load_checkpoint(summary["checkpoint"])
    # The obs statistics are the policy's: every rollout obs taken in once, after its update
    assert ckpt["policy"]["obs_rms.count"].item() == 128
    assert ckpt["policy"]["obs_rms.var"].shape == (17,) and (ckpt["policy"]["obs_rms.var"] != 1).all()
    assert ckpt["reward_rms"]["count"].item() == 128 and ckpt["reward_rms"]["var"].item() != 1.0

    # The checkpoint's policy plays exactly as the run's did in its final evaluation ...
    policy, saved_cfg = train.policy_from_checkpoint(ckpt)
    assert torch.equal(policy.obs_rms.mean, ckpt["policy"]["obs_rms.mean"])
    eval_seed = train.eval_seeds(saved_cfg["train"])[1]
    r = train.evaluate(policy, "HalfCheetah", 2, eval_seed)
    assert r["mean_return"] == summary["eval_return"]
    # ... because it normalises with the saved statistics: without them it plays otherwise
    identity = train.policy_from_checkpoint(ckpt)[0]
    identity.obs_rms.mean.zero_()
    identity.obs_rms.var.fill_(1.0)
    assert train.evaluate(identity, "HalfCheetah", 2, eval_seed)["mean_return"] != r["mean_return"]
    # shoal eval reads them too
    assert cli.main(["eval", "halfcheetah", "--checkpoint", summary["checkpoint"], "--episodes", "2",
                     "--seed", str(eval_seed)]) == 0
    printed = float(re.search(r"mean return (-?[\d.]+)", capsys.readouterr().out).group(1))
    assert printed == pytest.approx(r["mean_return"], abs=0.006)

    # Resuming carries both statistics on (not restarted)
    more = tiny("halfcheetah", "--train.total-timesteps", "256")
    resumed = train.train(more, resume=summary["checkpoint"], run_dir=str(tmp_path / "b"))
    after = train.load_checkpoint(resumed["checkpoint"])
    assert after["policy"]["obs_rms.count"].item() == 256
    assert after["reward_rms"]["count"].item() == 256


def test_checkpoints_from_before_normalisation_still_load_and_resume(tmp_path):
    cfg = config.load("cartpole", ["--vec.num-envs", "8", "--train.num-steps", "16",
                                   "--train.total-timesteps", "128", "--train.dashboard", "none",
                                   "--train.tensorboard", "false", "--train.eval-episodes", "2"])
    first = train.train(cfg, run_dir=str(tmp_path / "a"))
    ckpt = train.load_checkpoint(first["checkpoint"])
    for key in ("separate_critic", "normalize_obs", "obs_clip", "init_log_std"):  # as an older shoal wrote it
        del ckpt["config"]["policy"][key]
    for key in ("normalize_reward", "reward_clip"):
        del ckpt["config"]["train"][key]
    old = str(tmp_path / "old.pt")
    torch.save(ckpt, old)
    policy, _ = train.policy_from_checkpoint(train.load_checkpoint(old), old)
    assert policy.obs_rms is None and policy.critic_encoder is None
    # Resuming it, even asked for normalisation on the command line, keeps the policy as it was
    on = config.load("cartpole", ["--vec.num-envs", "8", "--train.num-steps", "16",
                                  "--train.total-timesteps", "256", "--train.dashboard", "none",
                                  "--train.tensorboard", "false", "--train.eval-episodes", "2",
                                  "--policy.normalize-obs", "true"])
    resumed = train.train(on, resume=old, run_dir=str(tmp_path / "b"))
    assert resumed["update"] == 2
    assert "obs_rms.mean" not in train.load_checkpoint(resumed["checkpoint"])["policy"]


def test_halfcheetah_return_clearly_improves(tmp_path):
    """48 updates of 16 envs x 64 steps (~15 s): the Gaussian policy's mean
    runs forward. Seeds 0-3 reach 800-1500 here; an untrained policy stands still."""
    pytest.importorskip("mujoco")
    cfg = config.load("halfcheetah", [
        "--vec.backend", "serial", "--vec.num-envs", "16", "--vec.num-batches", "1",
        "--train.num-steps", "64", "--train.num-minibatches", "16", "--train.total-timesteps", "49152",
        "--train.max-train-seconds", "0", "--train.dashboard", "none", "--train.tensorboard", "false",
        "--train.checkpoint-interval", "0", "--train.eval-interval", "0", "--train.eval-episodes", "4"])
    torch.manual_seed(0)
    untrained = train.policy_from_config(envs.spec("HalfCheetah"), cfg["policy"])
    before = train.evaluate(untrained, "HalfCheetah", 4, seed=123)["mean_return"]
    summary = train.train(cfg, run_dir=str(tmp_path))
    assert summary["global_step"] == 49152
    assert summary["eval_return"] > max(300.0, before + 300.0), (before, summary["eval_return"])



def test_rollout_rewards_do_not_depend_on_num_batches():
    """A step's rewards come out the same from one batch or two: scaled
    once every row of the step is in (the statistics over all rows at
    once), then the truncation bootstrap added (HalfCheetah cut at 10
    steps here, so episodes are truncated inside the rollouts)."""
    pytest.importorskip("mujoco")
    import shoal
    cfg = tiny("halfcheetah")
    tc = cfg["train"]
    rollouts = []
    for batches in (1, 2):
        pool = shoal.make("HalfCheetah", 8, backend="serial", batch_size=8 // batches, seed=3,
                          autoreset_mode="same_step", max_episode_steps=10)
        torch.manual_seed(0)
        policy = train.policy_from_config(envs.spec("HalfCheetah"), cfg["policy"])
        scaler = train.RewardScaler(pool.num_rows, tc["gamma"], tc["reward_clip"])
        ro = train.Rollout(pool, policy, cfg, torch.device("cpu"), train.Timers(), scaler)
        for _ in range(2):
            ro.collect()
        rollouts.append(ro)
        pool.close()
    one, two = rollouts
    assert one.dones[1:].sum() > 0 and tc["bootstrap_truncation"]   # truncations (every 10 steps)
    for name in ("obs", "rewards", "dones", "actions", "logprobs", "values"):
        torch.testing.assert_close(getattr(one, name), getattr(two, name), rtol=0, atol=0, msg=name)
