"""shoal.train on pixels: the Nature CNN encoder ([policy] encoder), env keyword
arguments from the config ([env] kwargs) and evaluation without the training-only
ones ([env] train_only), the Atari configs, a Breakout run end to end."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")

import shoal  # noqa: E402
from shoal import cli, config, envs, train  # noqa: E402
from shoal.pool.contract import GameScores  # noqa: E402


@pytest.fixture(autouse=True)
def one_torch_thread():
    """As the Atari configs' [train] torch_threads: 1 (on a loaded 2-core machine, 2 threads
    spin against the load: a Nature CNN's orthogonal init then takes a second, not 0.1 s)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def atari_policy(game="Breakout", **kw):
    return train.policy_from_config(envs.spec(game), {**config.load(game.lower())["policy"], **kw})


# ---------------------------------------------------------------------------
# The encoder (the specs need no ale-py)
# ---------------------------------------------------------------------------
def test_nature_cnn_shapes_and_uint8_frames_scaled_in_the_network():
    torch.manual_seed(0)
    policy = atari_policy()
    assert policy.cnn and policy.obs_rms is None
    convs = [m for m in policy.encoder if isinstance(m, torch.nn.Conv2d)]
    assert [(c.in_channels, c.out_channels, c.kernel_size, c.stride) for c in convs] == [
        (4, 32, (8, 8), (4, 4)), (32, 64, (4, 4), (2, 2)), (64, 64, (3, 3), (1, 1))]
    assert policy.encoder[-2].in_features == 64 * 7 * 7 and policy.encoder[-2].out_features == 512
    assert policy.actor.in_features == 512 and policy.actor.out_features == 4  # Breakout's minimal set
    assert policy.critic.in_features == 512
    # Orthogonal init: sqrt(2) for the encoder, 0.01 for the actor, 1 for the critic (as CleanRL's).
    for layer, gain in ((convs[0], 2 ** 0.5), (policy.actor, 0.01), (policy.critic, 1.0)):
        w = layer.weight.detach().flatten(1)
        rows = min(w.shape)
        gram = w @ w.T if w.shape[0] <= w.shape[1] else w.T @ w
        torch.testing.assert_close(gram / gain ** 2, torch.eye(rows), atol=1e-4, rtol=1e-4)

    obs = torch.randint(0, 256, (5, 4, 84, 84), dtype=torch.uint8)
    head, value, state = policy(obs)
    assert head.shape == (5, 4) and value.shape == (5,) and state is None
    assert policy.encoder(policy.inputs(obs)).shape == (5, 512)
    # uint8 frames are divided by 255 inside the network: 255s are 1.0 floats.
    with torch.no_grad():
        full = torch.full((2, 4, 84, 84), 255, dtype=torch.uint8)
        torch.testing.assert_close(policy(full)[0], policy(torch.ones(2, 4, 84, 84))[0])
        torch.testing.assert_close(policy(obs)[1], policy(obs.float() / 255)[1])
        assert not torch.allclose(policy(obs.float())[1], policy(obs)[1])  # floats are not scaled again


def test_cnn_with_rgb_frames_lstm_and_separate_critic():
    rgb = envs.spec("Breakout", gray_scale=False)  # (4, 84, 84, 3): 12 channels
    assert config.image_shape(rgb) == (12, 84, 84)
    policy = train.Policy(rgb)
    assert policy.cnn and policy.encoder[0].in_channels == 12
    obs = torch.randint(0, 256, (3, 4, 84, 84, 3), dtype=torch.uint8)
    assert policy(obs)[0].shape == (3, 4)
    # frame k's red channel is input channel 3 k
    x = policy.inputs(obs)
    assert x.shape == (3, 12, 84, 84) and torch.equal(x[:, 3], obs[:, 1, :, :, 0].float() / 255)

    lstm = atari_policy(lstm=True)
    state = lstm.initial_state(3, "cpu")
    head, value, state = lstm(torch.zeros(3, 4, 84, 84, dtype=torch.uint8), state, torch.zeros(3))
    assert head.shape == (3, 4) and state[0].shape == (1, 3, 512)
    critic = atari_policy(separate_critic=True)
    assert isinstance(critic.critic_encoder[0], torch.nn.Conv2d)


def test_auto_picks_the_cnn_for_atari_frames_and_the_mlp_for_snake_and_vectors():
    for game in ("Breakout", "Pong"):
        assert config.resolve_encoder(envs.spec(game), "auto") == "cnn"
        assert config.load(game.lower())["policy"]["encoder"] == "auto"
    # Snake's obs are uint8 cell codes, but a flat (121,) vector: one-hot MLP, as before.
    snake = envs.spec("snake")
    assert np.dtype(snake.obs_dtype) == np.uint8 and snake.obs_shape == (121,)
    assert config.resolve_encoder(snake, "auto") == "mlp"
    policy = train.policy_from_config(snake, config.load("snake")["policy"])
    assert not policy.cnn and policy.classes == 7
    assert set(policy.state_dict()) == {f"{m}.{p}" for m in ("encoder.0", "encoder.2", "actor", "critic")
                                        for p in ("weight", "bias")}
    for name in ("cartpole", "halfcheetah", "drive"):
        assert config.resolve_encoder(envs.spec(name), "auto") == "mlp"
    # Frames smaller than the Nature CNN takes (36 x 36): the MLP; cnn asked for is an error.
    small = envs.spec("Breakout", img_height=32, img_width=32)
    assert config.resolve_encoder(small, "auto") == "mlp"
    with pytest.raises(ValueError, match=r"encoder = cnn: Snake's observations \(uint8 \(121,\)\)"):
        train.Policy(snake, encoder="cnn")
    with pytest.raises(config.ConfigError, match=r"\[policy\] encoder = cnn: Snake"):
        config.load("snake", ["--policy.encoder", "cnn"])
    with pytest.raises(config.ConfigError, match=r"\[policy\] normalize_obs = true: expected false with the cnn"):
        config.load("breakout", ["--policy.normalize-obs", "true"])
    with pytest.raises(config.ConfigError, match=r"expected one of auto, mlp, cnn"):
        config.load("breakout", ["--policy.encoder", "resnet"])
    # mlp on frames stays possible (a flat MLP of the pixels)
    assert not atari_policy(encoder="mlp", hidden_size=8).cnn


def test_checkpoints_without_encoder_or_env_kwargs_load_as_before():
    cfg = config.load("snake")
    policy = train.policy_from_config(envs.spec("snake"), cfg["policy"])
    old_cfg = {s: dict(k) for s, k in cfg.items()}
    del old_cfg["policy"]["encoder"], old_cfg["env"]["kwargs"], old_cfg["env"]["train_only"]
    ckpt = {"config": old_cfg, "policy": policy.state_dict(), "optimizer": {}, "progress": {}}
    loaded, saved = train.policy_from_checkpoint(ckpt, "old.pt")
    assert not loaded.cnn and saved is old_cfg
    assert all(torch.equal(loaded.state_dict()[k], v) for k, v in policy.state_dict().items())
    assert config.env_kwargs(old_cfg["env"]) == {} == config.env_kwargs(old_cfg["env"], evaluation=True)
    assert train.POLICY_PREDATED["encoder"] == "mlp"  # what every policy was before the CNN


# ---------------------------------------------------------------------------
# [env] kwargs and [env] train_only
# ---------------------------------------------------------------------------
def test_env_kwargs_parse_check_and_round_trip(tmp_path):
    assert config.parse_env_kwargs("") == {}
    assert config.parse_env_kwargs("episodic_life=true, reward_clip=True, noop_max=1_0, p=0.5, "
                                   "f=none, s='a,b', t=(1, 2), mode=rgb_array,") == {
        "episodic_life": True, "reward_clip": True, "noop_max": 10, "p": 0.5, "f": None, "s": "a,b",
        "t": (1, 2), "mode": "rgb_array"}
    for bad in ("episodic_life", "=1", "a=1, a=2", "1x=2"):
        with pytest.raises(config.ConfigError, match=r"\[env\] kwargs = .*expected comma-separated key=value"):
            config.load("breakout", ["--env.kwargs", bad])
    with pytest.raises(config.ConfigError, match=r"\[env\] kwargs = 'bogus=1': Breakout got an unexpected keyword"):
        config.load("breakout", ["--env.kwargs", "bogus=1"])
    with pytest.raises(config.ConfigError, match=r"\[env\] kwargs = 'stack_num=0': Breakout: stack_num"):
        config.load("breakout", ["--env.kwargs", "stack_num=0"])
    with pytest.raises(config.ConfigError, match=r"CartPole got an unexpected keyword argument .*it takes max_episode_steps"):
        config.load("cartpole", ["--env.kwargs", "x=1"])
    # Evaluation may drop only options that leave the spaces as they are.
    with pytest.raises(config.ConfigError, match=r"\[env\] train_only = 'stack_num': evaluation without"):
        config.load("breakout", ["--env.kwargs", "stack_num=2", "--env.train-only", "stack_num"])
    cfg = config.load("breakout", ["--env.kwargs", "stack_num=2, reward_clip=true"])
    assert config.env_kwargs(cfg["env"]) == {"stack_num": 2, "reward_clip": True}
    assert config.env_kwargs(cfg["env"], evaluation=True) == {"stack_num": 2}
    policy = train.policy_from_config(envs.spec("breakout", **config.env_kwargs(cfg["env"])), cfg["policy"])
    assert policy.encoder[0].in_channels == 2
    ini = tmp_path / "run.ini"
    ini.write_text(config.to_ini(cfg))
    assert config.load("breakout", extra_ini=[str(ini)]) == cfg


def test_atari_configs_load_with_cleanrl_hyperparameters():
    for game in ("pong", "breakout"):
        cfg = config.load(game)
        tc, vc = cfg["train"], cfg["vec"]
        assert config.env_kwargs(cfg["env"]) == {"episodic_life": True, "reward_clip": True,
                                                 "use_fire_reset": True}
        assert config.env_kwargs(cfg["env"], evaluation=True) == {"use_fire_reset": True}
        assert vc["num_envs"] == 8 and tc["num_steps"] == 128 and tc["total_timesteps"] == 10_000_000
        assert (tc["learning_rate"], tc["anneal_lr"], tc["gamma"], tc["gae_lambda"]) == (2.5e-4, True, 0.99, 0.95)
        assert (tc["num_minibatches"], tc["update_epochs"], tc["clip_coef"], tc["ent_coef"]) == (4, 4, 0.1, 0.01)
        assert (tc["vf_coef"], tc["max_grad_norm"], tc["normalize_reward"]) == (0.5, 0.5, False)
        assert tc["eval_interval"] == 60.0 and 1 <= tc["eval_episodes"] <= 16
        spec = envs.spec(game, **config.env_kwargs(cfg["env"]))
        assert spec.env_kwargs["repeat_action_probability"] == 0.25  # v5's sticky actions
    for env in ("cartpole", "snake", "drive", "explorer", "halfcheetah"):
        assert config.load(env)["env"]["kwargs"] == ""


# ---------------------------------------------------------------------------
# Breakout, end to end (ale-py)
# ---------------------------------------------------------------------------
def test_breakout_trains_end_to_end_and_evaluates_without_training_only_wrappers(tmp_path, monkeypatch, capsys):
    pytest.importorskip("ale_py")
    made = []
    real_make = shoal.make

    def recording_make(env, num_envs=1, backend="multiprocessing", **kwargs):
        made.append((backend, num_envs, dict(kwargs.get("env_kwargs", {}))))
        return real_make(env, num_envs, backend=backend, **kwargs)

    monkeypatch.setattr(train.shoal, "make", recording_make)
    # 2 updates of 4 serial envs x 16 steps; games cut at 400 frames (100 steps) keep evaluation short.
    cfg = config.load("breakout", [
        "--vec.backend", "serial", "--vec.num-envs", "4", "--vec.num-batches", "2",
        "--train.num-steps", "16", "--train.total-timesteps", "128", "--train.num-minibatches", "2",
        "--train.update-epochs", "2", "--train.dashboard", "none", "--train.tensorboard", "false",
        "--train.checkpoint-interval", "0", "--train.eval-interval", "0", "--train.eval-episodes", "2",
        "--env.kwargs", "episodic_life=true, reward_clip=true, use_fire_reset=true, "
                        "max_num_frames_per_episode=400"])
    summary = train.train(cfg, run_dir=str(tmp_path / "run"))
    assert summary["update"] == 2 and summary["global_step"] == 128
    assert all(np.isfinite(v) for v in summary["losses"].values()), summary["losses"]
    assert np.isfinite(summary["eval_return"]) and summary["eval_return"] >= 0

    train_pools = [m for m in made if m[1] == 4]
    eval_pools = [m for m in made if m[1] == 2]
    assert len(train_pools) == 1 and len(eval_pools) == 1
    assert train_pools[0][2] == {"episodic_life": True, "reward_clip": True, "use_fire_reset": True,
                                 "max_num_frames_per_episode": 400}
    # evaluation: the same env, without reward clipping and lives as episodes
    assert eval_pools[0][2] == {"use_fire_reset": True, "max_num_frames_per_episode": 400}

    ckpt = train.load_checkpoint(summary["checkpoint"])
    policy, saved = train.policy_from_checkpoint(ckpt, summary["checkpoint"])
    assert policy.cnn and saved["env"]["kwargs"] == cfg["env"]["kwargs"]
    assert "encoder.0.weight" in ckpt["policy"] and ckpt["policy"]["encoder.0.weight"].shape == (32, 4, 8, 8)
    made.clear()
    assert cli.main(["eval", "breakout", "--checkpoint", summary["checkpoint"], "--episodes", "1"]) == 0
    out = capsys.readouterr().out
    assert "Breakout: mean return" in out and "max_num_frames_per_episode=400" in out
    assert "reward_clip" not in out and made == [("serial", 1, {"use_fire_reset": True,
                                                               "max_num_frames_per_episode": 400})]


def test_training_pool_gets_the_kwargs_and_evaluation_scores_real_rewards():
    """make_pool's env clips rewards to their sign and ends episodes at lost lives;
    evaluate()'s env, given the evaluation kwargs, does neither."""
    pytest.importorskip("ale_py")
    cfg = config.load("breakout", ["--vec.backend", "serial", "--vec.num-envs", "2", "--vec.num-batches", "1"])
    pool = train.make_pool(cfg, "breakout", seed=0)
    try:
        assert pool.spec.env_kwargs["reward_clip"] and pool.spec.env_kwargs["episodic_life"]
    finally:
        pool.close()
    eval_kwargs = config.env_kwargs(cfg["env"], evaluation=True)
    pool = shoal.make("breakout", 1, backend="serial", seed=0, env_kwargs=eval_kwargs)
    try:
        assert not pool.spec.env_kwargs["reward_clip"] and not pool.spec.env_kwargs["episodic_life"]
    finally:
        pool.close()


def test_atari_training_logs_whole_games_real_scores(tmp_path):
    """With lives as episodes and clipped rewards in training, log.csv's
    "games" / "game_return" count whole games (game over, or the frame
    limit) and their unclipped scores, from the pool's EnvPool-style info;
    header envs log neither."""
    pytest.importorskip("ale_py")
    import csv

    cfg = config.load("breakout", [
        "--vec.backend", "serial", "--vec.num-envs", "4", "--vec.num-batches", "2",
        "--train.num-steps", "16", "--train.total-timesteps", "512", "--train.num-minibatches", "2",
        "--train.update-epochs", "1", "--train.dashboard", "none", "--train.tensorboard", "false",
        "--train.checkpoint-interval", "0", "--train.eval-interval", "0", "--train.log-interval", "0",
        "--env.kwargs", "episodic_life=true, reward_clip=true, use_fire_reset=true, "
                        "max_num_frames_per_episode=60"])   # games of <= 15 steps: several per env
    train.train(cfg, run_dir=str(tmp_path / "run"))
    with open(tmp_path / "run" / "log.csv") as f:
        rows = list(csv.DictReader(f))
    games = sum(int(r["games"]) for r in rows if r["games"])
    assert games >= 4 * (512 // 4) // 15, games      # every env's games, cut at 15 steps at most
    scores = [float(r["game_return"]) for r in rows if r["games"]]
    assert all(0 <= g for g in scores) and all(not r["games"] or r["game_return"] for r in rows)
    # episodes are lives (or games cut short): never fewer than the games
    assert sum(int(r["episodes"]) for r in rows) >= games


def test_game_counting_reads_the_ended_step_of_a_same_step_pool():
    """The trainer's pools autoreset in SAME_STEP: on a step that ends a
    life, info's "reward" / "terminated" are the next episode's reset
    values and the ended step's are in info["final_info"]. Games counted
    from a real Breakout pool equal those told by the lives left (0: game
    over) and the unclipped rewards the steps returned."""
    pytest.importorskip("ale_py")
    ro = train.Rollout.__new__(train.Rollout)   # only the counters: no pool, no policy
    ro.game_scores, ro.games = GameScores(2), [0, 0.0]
    games, score, scores = 0, np.zeros(2), 0.0
    rng = np.random.default_rng(0)
    with train.shoal.make("Breakout", 2, backend="serial", seed=1, autoreset_mode="same_step",
                          episodic_life=True) as pool:
        pool.reset(seed=1)
        for _ in range(900):
            _, rew, term, trunc, info = pool.step(rng.integers(0, 4, 2))
            ro._count_games(info, trunc)
            score += rew
            over = (term | trunc) & ((info["final_info"]["lives"] == 0) | trunc)
            games += int(over.sum())
            scores += float(score[over].sum())
            score[over] = 0
    assert games >= 2
    assert ro.take_game_stats() == [games, scores]


def test_game_counting_sums_unclipped_rewards_until_game_over_or_the_frame_limit():
    ro = train.Rollout.__new__(train.Rollout)   # only the counters: no pool, no policy
    ro.game_scores, ro.games = GameScores(4), [0, 0.0]
    ids = np.array([2, 3])
    no = np.zeros(2, bool)
    frames = np.zeros(2, np.int32)   # (the pool's info has them; SB3's adapter reads them)
    ro._count_games({"env_id": ids, "reward": np.array([4.0, 1.0], np.float32),
                     "terminated": np.array([0, 0], np.int32), "episode_frame_number": frames}, no)
    ro._count_games({"env_id": ids, "reward": np.array([7.0, 0.0], np.float32),
                     "terminated": np.array([1, 0], np.int32), "episode_frame_number": frames}, no)   # env 2: over
    ro._count_games({"env_id": ids, "reward": np.array([1.0, 1.0], np.float32),
                     "terminated": np.array([0, 0], np.int32), "episode_frame_number": frames},
                    np.array([False, True]))                                         # env 3: cut
    assert ro.take_game_stats() == [2, 11.0 + 2.0]
    assert ro.take_game_stats() == [0, 0.0] and ro.game_scores.scores.tolist() == [0, 0, 1.0, 0]
