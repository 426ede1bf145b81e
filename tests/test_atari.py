"""shoal's native Atari envs: frame for frame gymnasium's ALE v5 +
AtariPreprocessing + FrameStackObservation (sticky actions off and on, lives,
truncation, RGB and other sizes), the options gymnasium has not (EnvPool's
episodic_life, use_fire_reset, reward_clip), the game list, the pools and
ids, loud env failures, and life without ale-py."""
import subprocess
import sys

import numpy as np
import pytest

ale_py = pytest.importorskip("ale_py", reason="Atari envs need the atari extra")
pytest.importorskip("cv2", reason="Atari envs need the atari extra (opencv-python-headless)")
gymnasium = pytest.importorskip("gymnasium")

from gymnasium.wrappers import AtariPreprocessing, FrameStackObservation, TimeLimit  # noqa: E402

import shoal  # noqa: E402
from shoal.envs.atari import DEFAULT_KWARGS, MINIMAL_ACTIONS, SPECS  # noqa: E402
from shoal.envs.atari.games import GAMES, MULTIPLAYER_ONLY, generate_rows  # noqa: E402
from shoal.pool.native import Multiprocessing, Serial  # noqa: E402
from shoal.pool.workers import WorkerError  # noqa: E402

gymnasium.register_envs(ale_py)
ATARI = [spec.name for spec in SPECS]


def reference(game: str, **kwargs):
    """gymnasium's own stack for shoal env `game` with shoal's options."""
    kw = {**DEFAULT_KWARGS, **kwargs}
    env = gymnasium.make(f"ALE/{game}-v5", frameskip=1,
                         repeat_action_probability=kw["repeat_action_probability"],
                         full_action_space=kw["full_action_space"],
                         max_num_frames_per_episode=kw["max_num_frames_per_episode"],
                         mode=kw["mode"], difficulty=kw["difficulty"])
    env = AtariPreprocessing(env, frame_skip=kw["frameskip"], noop_max=kw["noop_max"],
                             terminal_on_life_loss=kw["terminal_on_life_loss"],
                             screen_size=(kw["img_width"], kw["img_height"]),
                             grayscale_obs=kw["gray_scale"])
    env = FrameStackObservation(env, kw["stack_num"])
    return env if kw["max_episode_steps"] is None else TimeLimit(env, kw["max_episode_steps"])


def compare_with_gymnasium(game: str, steps: int, seed: int, **kwargs) -> int:
    """Step a Serial pool of one env (NEXT_STEP autoreset) and gymnasium's
    stack (reset by hand after an episode) with the same seed and random
    actions; every obs, reward, flag and info value must be equal, and so
    must the console's RAM (EnvPool's info["ram"]). Returns the number of
    episodes that ended."""
    ref = reference(game, **kwargs)
    pool = Serial(game, 1, seed=seed, env_kwargs=kwargs)
    binding = pool.spec.load_binding()
    clip = pool.spec.env_kwargs["reward_clip"]
    ends, ref_done = 0, False
    try:
        obs, info = pool.reset(seed=seed)
        ref_obs, ref_info = ref.reset(seed=seed)
        assert obs.shape[1:] == ref_obs.shape == pool.spec.obs_shape
        np.testing.assert_array_equal(obs[0], ref_obs, err_msg=f"{game}: first reset")
        ram_of = binding.info(pool.env_states, keys=("ram",))["ram"]
        np.testing.assert_array_equal(ram_of[0], ref.unwrapped.ale.getRAM(), err_msg=f"{game}: reset RAM")
        # the reset info: gymnasium's keys (less ale-py's "seeds") and values,
        # and the pool's own env_id and elapsed_step
        assert info.pop("env_id").tolist() == [0] and info.pop("elapsed_step").tolist() == [0]
        assert {key: int(values[0]) for key, values in info.items()} == \
            {key: value for key, value in ref_info.items() if key != "seeds"}, f"{game}: reset info"
        rng = np.random.default_rng(seed)
        for t in range(steps):
            action = int(rng.integers(pool.spec.action_nvec[0]))
            obs, rew, term, trunc, _ = pool.step(np.array([action]))
            if ref_done:   # the pool's NEXT_STEP reset step: reward 0, flags false
                (ref_obs, ref_info), ref_rew, ref_term, ref_trunc = ref.reset(), 0.0, False, False
            else:
                ref_obs, ref_rew, ref_term, ref_trunc, ref_info = ref.step(action)
            ref_done = ref_term or ref_trunc
            ends += ref_done
            where = f"{game} {kwargs} step {t}"
            np.testing.assert_array_equal(obs[0], ref_obs, err_msg=where)
            assert rew[0] == (np.sign(ref_rew) if clip else ref_rew), where
            assert (term[0], trunc[0]) == (ref_term, ref_trunc), where
            info = binding.info(pool.env_states)
            assert {key: int(values[0]) for key, values in info.items()} == \
                {key: ref_info[key] for key in info}, where
            np.testing.assert_array_equal(ram_of[0], ref.unwrapped.ale.getRAM(), err_msg=f"{where}: RAM")
    finally:
        pool.close()
        ref.close()
    return ends


# ---- alignment ---------------------------------------------------------------------

@pytest.mark.parametrize("game, steps, seed, kwargs, min_ends", [
    # Truncation by the frame limit, twice.
    ("Pong", 260, 1, dict(repeat_action_probability=0.0, max_num_frames_per_episode=500), 2),
    # A step limit (gymnasium's TimeLimit, EnvPool's max_episode_steps), twice.
    ("Pong", 90, 7, dict(repeat_action_probability=0.0, max_episode_steps=40), 2),
    # Lives: every lost life ends an episode, the game restarts.
    ("Breakout", 400, 2, dict(repeat_action_probability=0.0, terminal_on_life_loss=True), 4),
    # gymnasium's v5 defaults: sticky actions on (the same emulator seed), 30 no-ops.
    ("Breakout", 250, 3, dict(), 0),
    # RGB, another stack and a non-square size.
    ("SpaceInvaders", 150, 4, dict(gray_scale=False, img_height=72, img_width=96, stack_num=3,
                                   repeat_action_probability=0.0), 0),
    # Full action space, another frame skip, few no-ops, clipped rewards.
    ("MsPacman", 150, 5, dict(full_action_space=True, frameskip=3, noop_max=5, reward_clip=True,
                              repeat_action_probability=0.0), 0),
    # Another game mode and difficulty (ALE's, set after each ROM load).
    ("Pong", 150, 8, dict(mode=1, difficulty=1, repeat_action_probability=0.0), 0),
    # No frame skip (nothing to max-pool), no frame stack.
    ("Seaquest", 150, 6, dict(frameskip=1, stack_num=1, noop_max=0), 0),
])
def test_matches_gymnasium_frame_for_frame(game, steps, seed, kwargs, min_ends):
    assert compare_with_gymnasium(game, steps, seed, **kwargs) >= min_ends


def test_rgb_frames_are_the_emulators_screen():
    env = gymnasium.make("shoal/Pong-v5", render_mode="rgb_array", repeat_action_probability=0.0)
    ref = gymnasium.make("ALE/Pong-v5", frameskip=1, repeat_action_probability=0.0, render_mode="rgb_array")
    ref = AtariPreprocessing(ref, noop_max=30)
    env.reset(seed=9)
    ref.reset(seed=9)
    for action in [0, 2, 2, 3, 1]:
        _, _, _, _, info = env.step(action)
        _, _, _, _, ref_info = ref.step(action)
    assert info == {key: float(ref_info[key]) for key in info}
    frame = env.render()
    assert frame.shape == (210, 160, 3) and frame.dtype == np.uint8
    np.testing.assert_array_equal(frame, ref.render())
    assert env.metadata["render_modes"] == ["rgb_array"] and env.metadata["render_fps"] == 15
    env.close()
    ref.close()
    with Multiprocessing("Pong", 2, seed=0) as pool:
        from shoal.pool import render
        with pytest.raises(ValueError, match="backend='serial'"):
            render.frame(pool, 0)


# ---- what gymnasium's stack has not --------------------------------------------------

@pytest.mark.parametrize("mode", ["next_step", "same_step"])
def test_channels_first_rgb_is_the_same_frames_as_planes(mode):
    """channels_first=True (EnvPool's RGB layout, and SB3's image space):
    obs (3 * stack, H, W), frame k's R, G, B planes at 3k..3k+2, the same
    pixels as the default (stack, H, W, 3) rows (final_obs too); grayscale
    stacks are unchanged by it."""
    kwargs = dict(gray_scale=False, stack_num=3, img_height=50, img_width=40,
                  repeat_action_probability=0.0, autoreset_mode=mode)
    with shoal.make("Breakout", 2, backend="serial", seed=3, **kwargs) as hwc, \
            shoal.make("Breakout", 2, backend="serial", seed=3, channels_first=True, **kwargs) as planar:
        assert planar.single_observation_space.shape == (9, 50, 40)
        as_planes = lambda x: x.transpose(0, 1, 4, 2, 3).reshape(len(x), 9, 50, 40)   # noqa: E731
        np.testing.assert_array_equal(as_planes(hwc.reset()[0]), planar.reset()[0])
        rng = np.random.default_rng(0)
        ends = 0
        for _ in range(250):
            actions = rng.integers(0, 4, 2)
            ours, theirs = planar.step(actions), hwc.step(actions)
            np.testing.assert_array_equal(ours[0], as_planes(theirs[0]))
            for a, b in zip(ours[1:4], theirs[1:4]):
                np.testing.assert_array_equal(a, b)
            if mode == "same_step":
                np.testing.assert_array_equal(ours[4]["final_obs"], as_planes(theirs[4]["final_obs"]))
            ends += int((ours[2] | ours[3]).sum())
        assert ends > 0
    assert shoal.envs.spec("Pong", channels_first=True).obs_shape == (4, 84, 84)   # gray: as before
    sb3 = pytest.importorskip("stable_baselines3.common.preprocessing")
    assert sb3.is_image_space(shoal.envs.spec("Pong", gray_scale=False, channels_first=True)
                              .single_observation_space)


def test_episodic_life_ends_episodes_on_lost_lives_and_the_game_goes_on():
    """EnvPool's episodic_life (its AtariEnv Step / Reset): a step that loses
    a life plays all its frames, as without the option (the same obs and
    rewards as a twin without it, up to that step), and ends the episode;
    the reset after it continues the game: one life fewer, the frame stack
    goes on (one new frame joins the last three) and so does the game's step
    count (info["elapsed_step"], and the step limit: a game truncated at 90
    steps over its lives restarts with 5). Checked step for step against
    EnvPool 1.2.5 outside the suite (the commit says how)."""
    kwargs = dict(repeat_action_probability=0.0, noop_max=0)
    with Serial("Breakout", 1, seed=0, env_kwargs=dict(episodic_life=True, **kwargs)) as pool, \
            Serial("Breakout", 1, seed=0, env_kwargs=dict(**kwargs)) as twin:
        pool.reset(), twin.reset()
        rng = np.random.default_rng(0)
        lives_after_resets, first_end_seen = [], False
        for t in range(700):
            action = np.array([rng.integers(4)])
            obs, rew, term, trunc, info = pool.step(action)
            if not first_end_seen:
                twin_obs, twin_rew, _, _, _ = twin.step(action)
                np.testing.assert_array_equal(obs, twin_obs)
                assert rew[0] == twin_rew[0]
            if term[0]:
                first_end_seen = True
                ended, count = obs.copy(), int(info["elapsed_step"][0])
                obs, _, _, _, info = pool.step(action)              # the autoreset step
                lives = int(info["lives"][0])
                lives_after_resets.append(lives)
                if lives < 5:                                        # a lost life, not a game over
                    np.testing.assert_array_equal(obs[0, :3], ended[0, 1:])
                    assert int(info["elapsed_step"][0]) == count
                else:
                    assert int(info["elapsed_step"][0]) == 0
                    assert (obs[0] == obs[0, :1]).all()              # a new game: a stack of one frame
    # 5 lives: four continued episodes, then a game over restarts with 5.
    assert lives_after_resets[:5] == [4, 3, 2, 1, 5], lives_after_resets
    with Serial("Breakout", 1, seed=0, env_kwargs=dict(episodic_life=True, max_episode_steps=90,
                                                      use_fire_reset=True, **kwargs)) as pool:
        pool.reset()
        rng = np.random.default_rng(1)
        before, ended, truncations = 0, False, 0
        for t in range(400):
            *_, term, trunc, info = pool.step(rng.integers(0, 4, 1))
            count, lives = int(info["elapsed_step"][0]), int(info["lives"][0])
            if not ended:
                assert count == before + 1                        # a step of the game
            elif lives < 5 and before < 90:
                assert count == before                            # a life goes on: no step played
            else:
                assert count == 0 and lives == 5                  # game over or step limit: a new game
            if trunc[0]:
                truncations += 1
                assert count == 90 and lives > 0
            before, ended = count, bool(term[0] or trunc[0])
        assert truncations >= 2


def test_episodic_life_the_users_reset_starts_a_new_game_where_the_pool_autoresets():
    """After a lost life (episodic_life), a reset the pool's user asks for
    starts a new game in a pool with autoreset, as EnvPool's reset(env_ids)
    does (its autoreset goes on with the game: the test above); in a
    DISABLED pool, whose user resets each finished env (SingleEnv, pettingzoo,
    gymnasium's DISABLED mode), that reset goes on with the game."""
    from gymnasium.vector import AutoresetMode
    kwargs = dict(episodic_life=True, repeat_action_probability=0.0, noop_max=1, use_fire_reset=True)
    for mode, new_game in ((AutoresetMode.NEXT_STEP, True), (AutoresetMode.SAME_STEP, True),
                           (AutoresetMode.DISABLED, False)):
        with Serial("Breakout", 2, seed=0, autoreset_mode=mode, env_kwargs=kwargs) as pool:
            pool.reset()
            rng = np.random.default_rng(0)
            for _ in range(400):
                *_, term, _, info = pool.step(rng.integers(0, 4, 2).astype(np.int32))
                if term[0]:
                    break
            assert term[0] and info["lives"][0] == 4, mode
            count = int(info["elapsed_step"][0])
            if mode == AutoresetMode.SAME_STEP:   # already reset (autoreset): the next life goes on
                assert info["lives"][0] == 4 and count > 0
            info = pool.reset(env_id=[0])[1] if mode != AutoresetMode.DISABLED else \
                pool.reset(options={"reset_mask": np.array([True, False])})[1]
            lives, elapsed = int(info["lives"][0]), int(info["elapsed_step"][0])
            assert (lives, elapsed == 0) == ((5, True) if new_game else (4, False)), (mode, lives, elapsed)
    env = gymnasium.make("shoal/Breakout-v5", **kwargs)
    env.reset(seed=0)
    rng = np.random.default_rng(0)
    while not env.step(int(rng.integers(4)))[2]:
        pass
    assert env.reset()[1]["lives"] == 4   # SingleEnv: the next life
    env.close()


def test_pool_info_has_envpools_unclipped_reward_and_game_over():
    """A pool's step info adds EnvPool's "reward" (before reward_clip) and
    "terminated" (the game is over: with episodic_life, the last life lost,
    not every lost life), so whole games' real scores can be summed; the
    gymnasium views (SingleEnv, make_vec, SB3) keep gymnasium's keys, but
    for an env whose episodes are lives or whose rewards are clipped (a game
    score is then in no other key), where they have the two game keys too."""
    kwargs = dict(episodic_life=True, use_fire_reset=True, repeat_action_probability=0.0)
    actions = np.random.default_rng(0).integers(0, 4, (1000, 2)).astype(np.int32)
    with Serial("Breakout", 2, seed=0, env_kwargs=dict(reward_clip=True, **kwargs)) as clipped, \
            Serial("Breakout", 2, seed=0, env_kwargs=dict(reward_clip=False, **kwargs)) as raw:
        games = lives_lost = 0
        for a in actions:
            _, rew, term, _, info = clipped.step(a)
            _, raw_rew, raw_term, _, raw_info = raw.step(a)   # clipping changes no dynamics
            np.testing.assert_array_equal(info["reward"], raw_rew)
            np.testing.assert_array_equal(rew, np.sign(raw_rew))
            np.testing.assert_array_equal(info["terminated"], raw_info["terminated"])
            game_over = info["terminated"].astype(bool)
            assert (term[game_over]).all() and (info["lives"][game_over] == 0).all()
            games += game_over.sum()
            lives_lost += (term & ~game_over).sum()
        assert games >= 2 and lives_lost >= 4 * games, (games, lives_lost)
    single = gymnasium.make("shoal/Breakout-v5")
    gym_keys = {"lives", "episode_frame_number", "frame_number"}
    for info in (single.reset(seed=0)[1], single.step(0)[4]):   # ints, as ale-py's AtariEnv gives
        assert set(info) == gym_keys and all(type(v) is int for v in info.values()), info
    single.close()
    # lives as episodes, clipped rewards: a CleanRL-style logger sums the real
    # score from "reward" up to "terminated", as over EnvPool
    single = gymnasium.make("shoal/Breakout-v5", reward_clip=True, **kwargs)
    single.reset(seed=0)
    score, scores, episodes = 0.0, [], 0
    for a in actions[:, 0]:
        _, rew, term, trunc, info = single.step(a)
        assert set(info) == gym_keys | {"reward", "terminated"} and rew == np.sign(info["reward"])
        score += info["reward"]
        if info["terminated"]:
            assert term and info["lives"] == 0
            scores.append(score)
            score = 0.0
        if term or trunc:
            episodes += 1
            single.reset()
    single.close()
    assert len(scores) >= 1 and episodes >= 5 * len(scores), (scores, episodes)
    pytest.importorskip("stable_baselines3")
    from stable_baselines3.common.vec_env import DummyVecEnv

    from shoal.sb3 import ShoalVecEnv
    venv = ShoalVecEnv("Breakout", 2, backend="serial")
    try:
        venv.reset()
        assert set(venv.step(np.zeros(2, np.int64))[3][0]) == {"TimeLimit.truncated", "lives",
                                                              "episode_frame_number", "frame_number"}
    finally:
        venv.close()
    # and SB3's two routes give the same infos with the game keys
    ours = ShoalVecEnv("Breakout", 2, backend="serial", reward_clip=True, **kwargs)
    ref = DummyVecEnv([lambda: gymnasium.make("shoal/Breakout-v5", reward_clip=True, **kwargs)] * 2)

    def step_keys(infos):   # (terminal_observation: arrays; episode: ShoalVecEnv's Monitor-style games)
        return [{k: v for k, v in i.items() if k not in ("terminal_observation", "episode")} for i in infos]
    try:
        ours.seed(3)
        ref.seed(3)
        ours.reset()
        ref.reset()
        for a in actions[:300]:
            assert step_keys(ours.step(a)[3]) == step_keys(ref.step(a)[3])
    finally:
        ours.close()
        ref.close()


def test_with_terminal_on_life_loss_a_lost_life_ends_the_game_in_the_info():
    """terminal_on_life_loss restarts the game at the next reset, so the
    lost life's step ends the game: info["terminated"] is 1 there, and the
    EnvPool-style loop that counts whole games (and shoal train's games
    column) sees every one (it never did: no game reached game over)."""
    actions = np.random.default_rng(0).integers(0, 4, (600, 2)).astype(np.int32)
    with Serial("Breakout", 2, seed=0, env_kwargs=dict(terminal_on_life_loss=True, use_fire_reset=True,
                                                       repeat_action_probability=0.0)) as pool:
        pool.reset()
        ends = 0
        for a in actions:
            _, _, term, trunc, info = pool.step(a)
            np.testing.assert_array_equal(info["terminated"].astype(bool), term)
            assert (info["lives"][term] == 4).all()   # the first life of a fresh game lost
            ends += term.sum()
        assert ends >= 4


def test_fire_reset_launches_the_ball_where_the_game_has_fire():
    """use_fire_reset (EnvPool's fire start): the last start frame is FIRE.
    Breakout's ball then flies without the agent firing, so doing nothing
    loses a life; without it, doing nothing never does. A game without FIRE
    (Freeway) is unchanged."""
    kwargs = dict(repeat_action_probability=0.0, noop_max=0)
    for fire, life_lost in ((True, True), (False, False)):
        with Serial("Breakout", 1, seed=0, env_kwargs=dict(use_fire_reset=fire, **kwargs)) as pool:
            info = pool.spec.load_binding().info
            assert info(pool.env_states)["episode_frame_number"][0] == (1 if fire else 0)
            for _ in range(150):
                pool.step(np.zeros(1, np.int64))
            assert (info(pool.env_states)["lives"][0] < 5) == life_lost
    runs = []
    for fire in (True, False):
        with Serial("Freeway", 1, seed=0, env_kwargs=dict(use_fire_reset=fire)) as pool:
            runs.append([pool.obs.copy()] + [pool.step(np.ones(1, np.int64))[0].copy() for _ in range(20)])
    np.testing.assert_array_equal(runs[0], runs[1])


def test_noop_starts_are_uniform_in_one_to_noop_max():
    with Serial("Pong", 1, seed=0, env_kwargs=dict(noop_max=30)) as pool:
        info = pool.spec.load_binding().info
        starts = []
        for _ in range(120):
            pool.reset()                         # continues the env's no-op RNG
            starts.append(int(info(pool.env_states)["episode_frame_number"][0]))
    assert min(starts) >= 1 and max(starts) <= 30
    assert len(set(starts)) >= 25                 # 120 draws of 30 values: all but a few seen


# ---- games, specs, options -------------------------------------------------------------

def test_games_are_ale_pys_v5_set_under_gymnasiums_names():
    roms = set(ale_py.roms.get_all_rom_ids())
    assert {rom for _, rom, _ in GAMES} == roms - MULTIPLAYER_ONLY
    v5 = sorted(env_id[4:-3] for env_id in gymnasium.registry if env_id.startswith("ALE/") and
                env_id.endswith("-v5"))
    assert sorted(ATARI) == v5
    others = [name for name in shoal.envs.names() if name not in ATARI]
    key = lambda name: name.lower().replace("_", "").replace("-", "")   # noqa: E731 (the lookup's rule)
    assert not {key(n) for n in ATARI} & {key(n) for n in others}, "an Atari name shadows another env"
    assert len({key(n) for n in ATARI}) == len(ATARI)
    for name in ATARI:
        spec = shoal.envs.spec(name)
        assert spec.name == name and spec.kind == "worker"
        assert shoal.registration.gym_id(name) == f"shoal/{name}-v5" and f"shoal/{name}-v5" in gymnasium.registry
    assert shoal.envs.spec("montezuma_revenge").name == "MontezumaRevenge"


@pytest.mark.parametrize("game", ["Pong", "Breakout", "Seaquest", "MontezumaRevenge", "Freeway", "Tetris"])
def test_minimal_action_counts_match_the_emulator(game):
    binding = shoal.envs.spec(game).load_binding()        # checks the count (SpecMismatchError)
    assert len(binding.action_set) == MINIMAL_ACTIONS[game]
    assert shoal.envs.spec(game, full_action_space=True).load_binding().action_set[0] == ale_py.Action.NOOP


@pytest.mark.slow
def test_the_whole_games_table_matches_ale_py():
    assert generate_rows() == list(GAMES)


def test_spaces_and_options():
    spec = shoal.envs.spec("Pong")
    assert spec.single_action_space == gymnasium.spaces.Discrete(6)
    assert spec.single_observation_space == gymnasium.spaces.Box(0, 255, (4, 84, 84), np.uint8)
    assert spec.env_kwargs == DEFAULT_KWARGS and spec.max_episode_steps is None
    assert shoal.envs.spec("Pong", full_action_space=True).single_action_space.n == 18
    assert shoal.envs.spec("Pong", gray_scale=False, stack_num=2, img_height=64, img_width=48).obs_shape \
        == (2, 64, 48, 3)
    assert shoal.envs.spec("Pong", max_num_frames_per_episode=None).env_kwargs["max_num_frames_per_episode"] == 0
    with pytest.raises(TypeError, match="unexpected keyword argument .*it takes"):
        shoal.envs.spec("Pong", screen_size=84)
    # EnvPool's spellings: shoal's name in the error (and Python's wording, which TorchRL matches)
    with pytest.raises(TypeError, match="unexpected keyword argument 'frame_skip'.*take gymnasium's frameskip"):
        shoal.envs.spec("Pong", frame_skip=4)
    with pytest.raises(TypeError, match="num_threads: shoal's workers are processes, set by num_workers"):
        shoal.make("Pong", 2, num_threads=2)
    for bad in (dict(frameskip=0), dict(noop_max=-1), dict(img_height=2.5), dict(gray_scale="yes"),
                dict(repeat_action_probability=1.5), dict(stack_num=True)):
        with pytest.raises(ValueError):
            shoal.envs.spec("Pong", **bad)
    with pytest.raises(ValueError, match="exclude each other"):
        shoal.envs.spec("Breakout", episodic_life=True, terminal_on_life_loss=True)
    for bad in (dict(mode=-1), dict(difficulty=1.0), dict(mode="1")):
        with pytest.raises(ValueError, match="must be an int >= 0"):
            shoal.envs.spec("Pong", **bad)
    # held in C ints: past 2**31 - 1 an error naming the key (was an OverflowError in the binding)
    for key in ("max_episode_steps", "stack_num", "noop_max"):
        with pytest.raises(ValueError, match=rf"Pong: {key} must be at most 2\*\*31 - 1"):
            shoal.envs.spec("Pong", **{key: 2**31})
    # 0 / 1 for the bool options, as EnvPool and ale-py take them
    assert shoal.envs.spec("Pong", gray_scale=0).env_kwargs["gray_scale"] is False
    with pytest.raises(ValueError, match="gray_scale must be a bool \\(or 0 / 1\\), got 2"):
        shoal.envs.spec("Pong", gray_scale=2)
    with pytest.raises(ValueError, match=r"Pong: mode=99 is not one of the game's modes \[0, 1\]"):
        shoal.make("Pong", 1, backend="serial", mode=99)
    with pytest.raises(ValueError, match=r"Pong: difficulty=5 is not one of the game's difficulties \[0, 1, 2, 3\]"):
        shoal.make("Pong", 1, backend="serial", difficulty=5)


# ---- pools, ids ----------------------------------------------------------------------------

def test_pools_agree_and_follow_the_seed_rule():
    """Serial and Multiprocessing pools (SAME_STEP, final obs) step alike; env
    i of a pool reset with seed s is gymnasium.make's env reset with s + i."""
    n, steps = 3, 60
    kwargs = dict(max_num_frames_per_episode=120, stack_num=2)
    actions = np.random.default_rng(0).integers(0, 6, (steps, n))
    runs = []
    for make in (lambda: Serial("Pong", n, seed=0, autoreset_mode="same_step", env_kwargs=kwargs),
                 lambda: Multiprocessing("Pong", n, num_workers=2, seed=0, autoreset_mode="same_step",
                                         env_kwargs=kwargs)):
        with make() as pool:
            trace = [pool.reset(seed=7)[0].copy()]
            for t in range(steps):
                obs, rew, term, trunc, info = pool.step(actions[t])
                trace.append(np.concatenate([obs.ravel(), rew, term, trunc]))
                if info["_final_obs"].any():
                    trace.append(info["final_obs"][info["_final_obs"]].ravel())
            runs.append(trace)
    assert len(runs[0]) > steps + 1, "no episode ended: SAME_STEP's final obs untested"
    for a, b in zip(*runs, strict=True):
        np.testing.assert_array_equal(a, b)
    single = gymnasium.make("shoal/Pong-v5", **kwargs)
    first, _ = single.reset(seed=7 + 2)
    np.testing.assert_array_equal(first, runs[0][0][2])
    single.close()


@pytest.mark.parametrize("mode", ["next_step", "same_step"])
def test_writing_into_returned_obs_changes_nothing_later(mode):
    """The frame stack is the env's own, not the obs row it writes: a caller
    that zeroes the rows it was given (EnvPool hands out fresh arrays)
    still gets the same later obs as one that does not."""
    n, steps = 2, 40
    kwargs = dict(max_num_frames_per_episode=100)          # ends (and resets) every 25 steps
    actions = np.random.default_rng(1).integers(0, 6, (steps, n))
    traces = []
    for scribble in (False, True):
        with Serial("Pong", n, seed=0, autoreset_mode=mode, env_kwargs=kwargs) as pool:
            obs, _ = pool.reset(seed=3)
            trace = [obs.copy()]
            for t in range(steps):
                if scribble:
                    obs[:] = 255
                obs, *_, info = pool.step(actions[t])
                trace.append(obs.copy())
                if mode == "same_step" and info["_final_obs"].any():
                    trace.append(info["final_obs"][info["_final_obs"]].copy())
                    if scribble:
                        info["final_obs"][:] = 255
            traces.append(trace)
    assert len(traces[0]) > steps + 1 or mode == "next_step"
    assert not (traces[0][-1] == 255).all()
    for t, (clean, scribbled) in enumerate(zip(*traces, strict=True)):
        np.testing.assert_array_equal(clean, scribbled, err_msg=f"entry {t}")


def test_single_env_action_meanings_are_ale_pys():
    ours = gymnasium.make("shoal/Breakout-v5")
    theirs = gymnasium.make("ALE/Breakout-v5")
    assert ours.unwrapped.get_action_meanings() == theirs.unwrapped.get_action_meanings() \
        == ["NOOP", "FIRE", "RIGHT", "LEFT"]
    ours.close()
    theirs.close()
    cartpole = gymnasium.make("shoal/CartPole-v0")
    with pytest.raises(AttributeError, match="CartPole has no action meanings"):
        cartpole.unwrapped.get_action_meanings()
    cartpole.close()


def test_make_and_make_vec():
    envs = gymnasium.make_vec("shoal/Breakout-v5", num_envs=2, vectorization_mode="vector_entry_point",
                              num_workers=2, stack_num=2, reward_clip=True)
    assert envs.single_observation_space.shape == (2, 84, 84)
    assert envs.single_action_space == gymnasium.spaces.Discrete(4)
    obs, _ = envs.reset(seed=0)
    obs, rewards, *_ = envs.step(envs.action_space.sample())
    assert obs.shape == (2, 2, 84, 84) and obs.dtype == np.uint8 and set(rewards) <= {-1.0, 0.0, 1.0}
    envs.close()
    with shoal.make("Pong", 2, backend="serial", gray_scale=False, seed=0) as pool:
        assert pool.obs.shape == (2, 4, 84, 84, 3)
        pool.step(np.zeros(2, np.int64))


def test_cuda_backend_refuses_atari():
    cuda = pytest.importorskip("shoal.cuda")
    with pytest.raises(ValueError, match="library-backed env.*no CUDA kernel"):
        cuda.CudaVecEnv("Pong", 4)


# ---- failures ------------------------------------------------------------------------------

@pytest.fixture
def broken_binding():
    """A Pong binding (its own options, so that no other test shares it)
    whose frame buffers have the wrong shape: the emulator then refuses to
    fill them, inside the env's first reset."""
    spec = shoal.envs.spec("Pong", noop_max=3, img_height=80)
    binding = spec.load_binding()
    saved = binding.screen_shape
    binding.screen_shape = (10, 10)
    yield spec
    binding.screen_shape = saved


def test_an_env_error_is_raised_in_this_process(broken_binding):
    with pytest.raises(RuntimeError, match="Invalid shape") as raised:
        Serial(broken_binding, 2, seed=0)
    assert "raised by Pong env 0 of the pool" in "".join(raised.value.__notes__)


def test_an_env_error_kills_its_worker_loudly(broken_binding, capfd):
    with pytest.raises(WorkerError, match="died"):
        Multiprocessing(broken_binding, 4, num_workers=2, seed=0, context="fork")
    err = capfd.readouterr().err
    assert "env 0 raised; the worker exits" in err and "Invalid shape" in err


def test_block_run_steps_refuses_an_out_of_range_action():
    with Serial("Pong", 2, seed=0) as pool:
        block = pool._blocks[0][0]
        block.run_steps(np.zeros((3, block.count), np.int32), 5)
        with pytest.raises(ValueError, match=r"action 6 is not in Discrete\(6\)"):
            block.run_steps(np.full((1, block.count), 6, np.int32), 1)


def test_without_ale_py_everything_else_works_and_the_error_names_the_extra(tmp_path):
    code = """
import importlib.abc, sys
class NoAtari(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("ale_py", "cv2"):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
sys.meta_path.insert(0, NoAtari())
import numpy as np, shoal, gymnasium
print(shoal.envs.spec("Pong").single_action_space, shoal.envs.spec("Pong").obs_shape)
with shoal.make("CartPole", 2, backend="serial") as pool:
    pool.step(np.zeros(2, np.int64))
try:
    shoal.make("Pong", 2)
except ImportError as e:
    print("ImportError:", e)
"""
    out = subprocess.run([sys.executable, "-P", "-c", code], cwd=tmp_path, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "Discrete(6) (4, 84, 84)" in out.stdout
    assert 'ImportError: shoal\'s Atari envs need ale-py: pip install "shoal[atari]"' \
        in out.stdout


def test_the_screens_own_size_is_a_copy_without_opencv():
    """img_height / img_width of the screen itself (EnvPool's "no resize")
    is a copy of its rows, so OpenCV is not needed (it
    was asked for, as for a whole-number scale)."""
    from shoal.envs.atari.binding import AreaResize, resize_area
    rng = np.random.default_rng(0)
    for shape in ((210, 160), (210, 160, 3), (250, 160)):
        assert AreaResize(shape[0], shape[1], shape[0], shape[1], 1 if len(shape) == 2 else 3).by_opencv is None
        screen = rng.integers(0, 256, shape).astype(np.uint8)
        np.testing.assert_array_equal(resize_area(screen, shape[0], shape[1]), screen)


def test_area_resize_equals_opencv_byte_for_byte():
    """The binding's INTER_AREA resize (tables built once per env) against
    cv2.resize on random and flat-coloured screens, gray and RGB, several sizes:
    2, 3 and 4 x taps per pixel, and whole-number scales (left to OpenCV)."""
    cv2 = pytest.importorskip("cv2")
    from shoal.envs.atari.binding import AreaResize, resize_area

    rng = np.random.default_rng(0)
    cases = [((210, 160), (84, 84)), ((210, 160, 3), (72, 96)), ((210, 160), (64, 48)), ((250, 160), (84, 84)),
             ((210, 160), (150, 128)), ((210, 160), (31, 20)), ((210, 160), (105, 80)), ((210, 160, 3), (70, 40)),
             ((210, 160), (84, 200))]
    # x taps per pixel: 2, 3, 4 (the one-pass cases) and 8 (the general loop)
    assert [AreaResize(210, 160, h, w).x_src.shape[0] for h, w in ((150, 128), (84, 84), (64, 48), (31, 20))] \
        == [2, 3, 4, 8]
    assert AreaResize(210, 160, 105, 80).by_opencv is cv2 and AreaResize(210, 160, 84, 200).by_opencv is cv2
    assert AreaResize(210, 160, 84, 84).by_opencv is None
    for t in range(160):
        shape, (h, w) = cases[t % len(cases)]
        screen = (rng.integers(0, 256, shape) if t % 3 else rng.integers(0, 5, shape) * 63).astype(np.uint8)
        np.testing.assert_array_equal(resize_area(screen, h, w),
                                      cv2.resize(screen, (w, h), interpolation=cv2.INTER_AREA))
