"""NativeVectorEnv and the gymnasium registration against gymnasium's own
SyncVectorEnv over gymnasium.make("shoal/CartPole-v0") envs, step by step."""
import subprocess
import sys
import warnings

import gymnasium
import numpy as np
import pytest
from gymnasium.error import ClosedEnvironmentError, ResetNeeded
from gymnasium.utils.env_checker import check_env
from gymnasium.vector import AutoresetMode, SyncVectorEnv
from gymnasium.wrappers import vector as vector_wrappers

import shoal
import shoal.envs
from shoal.pool.gym_vector import NativeVectorEnv
from shoal.registration import register_envs

from helpers import assert_same

ENV_ID = "shoal/CartPole-v0"
NUM_ENVS = 4
STEPS = 600  # past 500, so the balanced env 0 is truncated once


def make_native(mode, backend="serial", num_envs=NUM_ENVS, **kwargs):
    kwargs.setdefault("num_workers", 2)
    return gymnasium.make_vec(ENV_ID, num_envs=num_envs, vectorization_mode="vector_entry_point",
                              autoreset_mode=mode, backend=backend, **kwargs)


def make_sync(mode, num_envs=NUM_ENVS):
    return gymnasium.make_vec(ENV_ID, num_envs=num_envs, vectorization_mode="sync",
                              vector_kwargs={"autoreset_mode": mode})


def actions_for(obs, rng):
    """Random actions, except env 0 balances the pole so that it reaches the
    500-step truncation; the random envs end by termination every ~20 steps."""
    actions = rng.integers(0, 2, size=len(obs))
    actions[0] = int(obs[0, 2] + 0.5 * obs[0, 3] > 0)
    return actions


def run_side_by_side(native, sync, mode, seed, steps=STEPS):
    """Step both with the same actions; returns how many episodes ended by
    termination and by truncation."""
    rng = np.random.default_rng(0)
    obs, info = native.reset(seed=seed)
    ref_obs, ref_info = sync.reset(seed=seed)
    assert_same((obs, info), (ref_obs, ref_info), "reset")
    ended = np.zeros(2, dtype=int)
    for t in range(steps):
        actions = actions_for(ref_obs, rng)
        result = native.step(actions)
        reference = sync.step(actions)
        assert_same(result, reference, f"step {t}")
        ref_obs, _, terminations, truncations, _ = reference
        ended += terminations.sum(), truncations.sum()
        done = terminations | truncations
        if mode == AutoresetMode.DISABLED and done.any():
            # A user of DISABLED resets the ended envs before stepping on.
            obs, info = native.reset(options={"reset_mask": done.copy()})
            ref_obs, ref_info = sync.reset(options={"reset_mask": done.copy()})
            assert_same((obs, info), (ref_obs, ref_info), f"reset_mask after step {t}")
    return ended


@pytest.mark.parametrize("mode", list(AutoresetMode))
# (A None in a seed list means "unseeded": it cannot match another process's envs.)
@pytest.mark.parametrize("seed", [3, [101, 7, 0, 2**40]])
def test_native_equals_sync_step_by_step(mode, seed):
    native, sync = make_native(mode), make_sync(mode)
    try:
        assert isinstance(native.unwrapped, NativeVectorEnv)
        terminated, truncated = run_side_by_side(native, sync, mode, seed)
        assert terminated > 20 and truncated >= 1, (terminated, truncated)
    finally:
        native.close()
        sync.close()


@pytest.mark.parametrize("mode", [AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP])
def test_multiprocessing_equals_sync(mode, no_leaks):
    native, sync = make_native(mode, backend="multiprocessing"), make_sync(mode)
    try:
        run_side_by_side(native, sync, mode, seed=11, steps=300)
    finally:
        native.close()
        sync.close()


def test_same_step_infos_have_syncs_structure():
    env = NativeVectorEnv("CartPole", 3, backend="serial", autoreset_mode="same_step")
    env.reset(seed=0)
    seen_final = False
    kept = []  # (final_obs array handed out, its value then): must not change later
    for _ in range(100):
        obs, _, term, trunc, infos = env.step(np.ones(3, dtype=np.int64))  # falls over fast
        done = term | trunc
        if not done.any():
            assert infos == {}
            continue
        seen_final = True
        assert set(infos) == {"final_obs", "_final_obs", "final_info", "_final_info"}
        assert infos["final_obs"].dtype == object and infos["final_info"] == {}
        np.testing.assert_array_equal(infos["_final_obs"], done)
        np.testing.assert_array_equal(infos["_final_info"], done)
        for i in range(3):
            final = infos["final_obs"][i]
            assert (final is None) == (not done[i])
            if done[i]:  # the last obs of the ended episode, not the new first one
                assert final.dtype == np.float32 and final.shape == (4,)
                assert abs(final[0]) > 2.4 or abs(final[2]) > 12 * 2 * np.pi / 360
                assert abs(obs[i, 2]) <= 0.05
                kept.append((final, final.copy()))
    env.close()
    assert seen_final and len(kept) > 3
    for handed_out, value in kept:
        np.testing.assert_array_equal(handed_out, value)


# ---- gymnasium vector wrappers -----------------------------------------------------
def without_times(infos):
    """RecordEpisodeStatistics' "t" is wall-clock time: it cannot match."""
    infos = dict(infos)
    if "episode" in infos:
        infos["episode"] = {k: v for k, v in infos["episode"].items() if k != "t"}
    return infos


@pytest.mark.parametrize("mode", list(AutoresetMode))
def test_record_episode_statistics_matches_sync(mode):
    native = vector_wrappers.RecordEpisodeStatistics(make_native(mode))
    sync = vector_wrappers.RecordEpisodeStatistics(make_sync(mode))
    rng = np.random.default_rng(1)
    native.reset(seed=5)
    ref_obs, _ = sync.reset(seed=5)
    episodes_reported = 0
    for t in range(200):
        actions = rng.integers(0, 2, size=NUM_ENVS)
        obs, rew, term, trunc, infos = native.step(actions)
        ref_obs, ref_rew, ref_term, ref_trunc, ref_infos = sync.step(actions)
        assert_same((obs, rew, term, trunc, without_times(infos)),
                    (ref_obs, ref_rew, ref_term, ref_trunc, without_times(ref_infos)), f"step {t}")
        done = term | trunc
        if done.any():
            np.testing.assert_array_equal(infos["_episode"], done)
            assert (infos["episode"]["l"][done] > 0).all()
            episodes_reported += done.sum()
            if mode == AutoresetMode.DISABLED:
                native.reset(options={"reset_mask": done.copy()})
                sync.reset(options={"reset_mask": done.copy()})
    assert episodes_reported > 10
    assert list(native.return_queue) == list(sync.return_queue)
    assert list(native.length_queue) == list(sync.length_queue)
    native.close()
    sync.close()


# ClipAction and RescaleAction need Box actions; CartPole's are Discrete, so
# they do not apply. These are the wrappers that do:
OBS_AND_REWARD_WRAPPERS = [
    lambda env: vector_wrappers.NormalizeObservation(env),
    lambda env: vector_wrappers.NormalizeReward(env, gamma=0.99),
    lambda env: vector_wrappers.ClipReward(env, min_reward=0.0, max_reward=0.5),
    lambda env: vector_wrappers.TransformObservation(env, lambda obs: obs * 2.0),
    lambda env: vector_wrappers.DtypeObservation(env, np.float64),
    lambda env: vector_wrappers.DictInfoToList(vector_wrappers.RecordEpisodeStatistics(env)),
]


@pytest.mark.parametrize("wrap", OBS_AND_REWARD_WRAPPERS)
def test_vector_wrappers_give_syncs_results(wrap):
    mode = AutoresetMode.NEXT_STEP
    native, sync = wrap(make_native(mode)), wrap(make_sync(mode))
    rng = np.random.default_rng(2)
    obs, _ = native.reset(seed=9)
    ref_obs, _ = sync.reset(seed=9)
    np.testing.assert_array_equal(obs, ref_obs)
    for t in range(150):
        actions = rng.integers(0, 2, size=NUM_ENVS)
        obs, rew, term, trunc, infos = native.step(actions)
        ref_obs, ref_rew, ref_term, ref_trunc, ref_infos = sync.step(actions)
        assert obs.dtype == ref_obs.dtype and rew.dtype == ref_rew.dtype
        np.testing.assert_array_equal(obs, ref_obs, err_msg=f"step {t}")
        np.testing.assert_array_equal(rew, ref_rew, err_msg=f"step {t}")
        np.testing.assert_array_equal(term, ref_term)
        np.testing.assert_array_equal(trunc, ref_trunc)
        if isinstance(infos, list):  # DictInfoToList
            assert [{k: v for k, v in i.get("episode", {}).items() if k != "t"} for i in infos] == \
                   [{k: v for k, v in i.get("episode", {}).items() if k != "t"} for i in ref_infos]
    native.close()
    sync.close()


# ---- the single env and the registration -----------------------------------------------
def test_check_env_passes_on_the_made_env():
    # Allowed remarks: make() wrapped the env (OrderEnforcing, PassiveEnvChecker),
    # and the velocity bounds are infinite, as in gymnasium's CartPole-v1 space.
    allowed = ("different from the unwrapped", "is -infinity", "is infinity")
    env = gymnasium.make(ENV_ID)
    for checked in (env, env.unwrapped):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            check_env(checked)
        unexpected = [str(w.message) for w in caught if not any(a in str(w.message) for a in allowed)]
        assert unexpected == []
    env.close()


def test_made_env_behaves_like_cartpole_v1_step_by_step():
    """Same wrapper semantics as gymnasium.make("CartPole-v1"): reward 1 per
    step, the same terminations, and truncation exactly at step 500 (the C
    env's limit, registered as the id's, so a TimeLimit ends the same step,
    and wrappers that need one find it). gymnasium's env is put in our state
    each step (their RNGs differ, and CartPole is chaotic over hundreds of steps)."""
    ours = gymnasium.make(ENV_ID)
    theirs = gymnasium.make("CartPole-v1")
    assert ours.spec.max_episode_steps == theirs.spec.max_episode_steps == 500
    assert "TimeLimit" in str(ours) and "TimeLimit" in str(theirs)
    gymnasium.wrappers.TimeAwareObservation(ours)   # needs a TimeLimit below it
    rng = np.random.default_rng(3)
    for seed, balance in [(1, True), (2, False)]:
        obs, info = ours.reset(seed=seed)
        theirs.reset(seed=seed)
        assert info == {}
        for t in range(1, 501):
            action = int(obs[2] + 0.5 * obs[3] > 0) if balance else int(rng.integers(0, 2))
            theirs.unwrapped.state = obs.astype(np.float64)
            obs, rew, term, trunc, _ = ours.step(action)
            ref_obs, ref_rew, ref_term, ref_trunc, _ = theirs.step(action)
            np.testing.assert_allclose(obs, ref_obs, rtol=1e-5, atol=1e-6)
            assert (type(rew), rew, term, trunc) == (type(ref_rew), ref_rew, ref_term, ref_trunc)
            if term or trunc:
                break
        if balance:
            assert t == 500 and trunc and not term
        else:
            assert t < 500 and term and not trunc
    ours.close()
    theirs.close()


def test_steps_after_the_pole_fell_pay_what_cartpole_v1s_pay():
    """Stepping on after terminated=True without a reset: gymnasium's
    CartPole-v1 keeps the fall's reward, then pays 0.0 while the pole is
    down and warns once per episode; a reset starts the count again."""
    ours = gymnasium.make(ENV_ID, disable_env_checker=True)
    theirs = gymnasium.make("CartPole-v1", disable_env_checker=True)
    for seed in (0, 1):
        paid = []
        for env in (ours, theirs):
            env.reset(seed=seed)
            while not env.step(1)[2]:
                pass
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                after = [env.step(1)[1:3] for _ in range(3)]
            paid.append((after, [str(w.message).count("already returned terminated = True") for w in caught]))
        assert paid[0] == paid[1] == ([(0.0, True)] * 3, [1]), paid
    ours.close()
    theirs.close()


def test_render_without_a_render_mode_warns_and_returns_none_as_cartpole_v1s():
    for env_id in (ENV_ID, "CartPole-v1"):
        env = gymnasium.make(env_id, disable_env_checker=True)
        env.reset(seed=0)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            assert env.render() is None
        assert [str(w.message).count("without specifying any render mode") for w in caught] == [1], env_id
        env.close()
    from shoal.single import SingleEnv
    for name, env_id in [("CartPole", ENV_ID), ("Hopper", "shoal/Hopper-v5")]:   # made directly: no spec
        with SingleEnv(name) as env, warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            env.render()
        assert f'gym.make("{env_id}", render_mode="rgb_array")' in str(caught[0].message)


@pytest.mark.parametrize("env_id", [ENV_ID, "shoal/Corridor-v0"])
def test_deepcopy_goes_on_from_the_same_state_as_cartpole_v1s(env_id):
    """copy.deepcopy of a made header env (wrappers and all) continues from
    the original's state, step for step and across resets (the C struct's
    RNG is copied too), as a deepcopy of gymnasium's CartPole-v1 does."""
    import copy
    env = gymnasium.make(env_id)
    env.reset(seed=0)
    for _ in range(5):
        env.step(1)
    reset_at_once = copy.deepcopy(env)   # resets from the env's RNG, not from the clone's own seed
    assert np.array_equal(reset_at_once.reset()[0], env.reset()[0])
    assert np.array_equal(reset_at_once.step(0)[0], env.step(0)[0])
    reset_at_once.close()
    for _ in range(5):
        env.step(1)
    twin = copy.deepcopy(env)
    rng = np.random.default_rng(0)
    for t in range(300):
        action = int(rng.integers(2))
        ours, theirs = env.step(action), twin.step(action)
        for a, b in zip(ours[:4], theirs[:4]):
            assert np.array_equal(a, b), t
        if ours[2] or ours[3]:
            assert np.array_equal(env.reset()[0], twin.reset()[0])
    env.close()
    twin.close()


def test_a_fresh_or_rebuilt_env_refuses_step_before_reset():
    """gymnasium's envs assert a reset before the first step; so does the
    bare env here, and a pickled or MuJoCo deep copy (a fresh env: its
    state is in the library) must be reset first."""
    import copy
    import pickle
    bare = gymnasium.make(ENV_ID).unwrapped
    with pytest.raises(ResetNeeded):
        bare.step(0)
    bare.reset(seed=0)
    bare.step(0)
    for fresh in (pickle.loads(pickle.dumps(bare)), copy.copy(bare)):
        with pytest.raises(ResetNeeded):
            fresh.step(0)
        fresh.close()
    bare.close()


def test_registration_is_idempotent_and_make_vec_modes():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ids = register_envs()
        assert ENV_ID in ids and ids == [f"shoal/{n}-v{shoal.envs.spec(n).version}" for n in shoal.envs.names()]
        assert register_envs() == ids
    spec = gymnasium.spec(ENV_ID)
    assert spec.reward_threshold == 475.0 and spec.max_episode_steps == 500   # CartPole-v1's
    default = gymnasium.make_vec(ENV_ID, num_envs=2, backend="serial")
    assert isinstance(default, NativeVectorEnv)  # the vector entry point is the default
    assert default.spec.id == ENV_ID and default.spec.kwargs["num_envs"] == 2
    default.close()
    sync = gymnasium.make_vec(ENV_ID, num_envs=2, vectorization_mode="sync")
    assert isinstance(sync, SyncVectorEnv) and isinstance(sync.envs[0].unwrapped, shoal.single.SingleEnv)
    sync.close()


def test_async_mode_wraps_single_envs(no_leaks):
    env = gymnasium.make_vec(ENV_ID, num_envs=2, vectorization_mode="async")
    sync = make_sync(AutoresetMode.NEXT_STEP, num_envs=2)
    assert type(env).__name__ == "AsyncVectorEnv"
    assert_same(env.reset(seed=4), sync.reset(seed=4))
    for _ in range(30):
        actions = np.array([0, 1])
        assert_same(env.step(actions), sync.step(actions))
    env.close()
    sync.close()


def test_module_syntax_makes_ids_without_importing_shoal():
    code = ("import sys, gymnasium\n"
            "assert 'shoal' not in sys.modules\n"
            "env = gymnasium.make('shoal:shoal/CartPole-v0'); env.reset(seed=0); env.close()\n"
            "v = gymnasium.make_vec('shoal:shoal/CartPole-v0', num_envs=2, backend='serial')\n"
            "print(type(v).__name__); v.close()\n")
    out = subprocess.run([sys.executable, "-P", "-c", code], capture_output=True, text=True,
                         timeout=60, check=False)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "NativeVectorEnv"


# ---- the VectorEnv surface ------------------------------------------------------------------
def test_attributes_match_sync():
    native = make_native("same_step")
    sync = make_sync(AutoresetMode.SAME_STEP)
    assert native.metadata["autoreset_mode"] is AutoresetMode.SAME_STEP
    assert native.metadata == sync.metadata
    for name in ("num_envs", "observation_space", "action_space", "single_observation_space",
                 "single_action_space", "render_mode"):
        assert getattr(native, name) == getattr(sync, name), name
    native.reset(seed=[5, None, 6, 8])
    sync.reset(seed=[5, None, 6, 8])
    assert native.np_random_seed[0::2] == sync.np_random_seed[0::2] == (5, 6)
    native.reset(seed=20)
    sync.reset(seed=20)
    assert native.np_random_seed == sync.np_random_seed == (20, 21, 22, 23)
    for name in ("observation_space", "action_space", "render_mode", "metadata"):
        assert native.get_attr(name) == sync.get_attr(name), name
    assert native.call("action_space") == sync.call("action_space")
    assert native.get_attr("spec")[0].id == sync.get_attr("spec")[0].id == ENV_ID
    assert native.render() == sync.render() == (None,) * 4
    # skrl's wrapper renders through call("render"); wrappers read get_wrapper_attr
    assert native.call("render") == sync.call("render") == (None,) * 4
    assert native.call("get_wrapper_attr", "render_mode") == sync.call("get_wrapper_attr", "render_mode")
    with pytest.raises(AttributeError, match="C envs"):
        native.get_attr("gravity")
    with pytest.raises(AttributeError, match="C envs"):
        native.set_attr("gravity", 1.0)
    native.close()
    sync.close()


def test_copy_semantics():
    env = NativeVectorEnv("CartPole", 2, backend="serial")
    first, _ = env.reset(seed=0)
    second, rewards, *_ = env.step(np.zeros(2, dtype=np.int64))
    assert not np.shares_memory(first, second) and not np.array_equal(first, second)
    assert rewards.dtype == np.float64
    env.copy = False
    view, *_ = env.step(np.zeros(2, dtype=np.int64))
    again, *_ = env.step(np.zeros(2, dtype=np.int64))
    assert np.shares_memory(view, again)  # the pool's buffer, overwritten in place
    env.close()


def test_copy_true_hands_out_fresh_arrays_every_step():
    """copy=True: nothing step() returns (obs, rewards, flags, SAME_STEP
    final_obs rows and masks) shares memory with the pool's buffers or with
    another step's results, and a caller writing into one env's final obs
    changes no other env's."""
    env = NativeVectorEnv("CartPole", 32, backend="serial", autoreset_mode="same_step")
    env.reset(seed=1)
    b = env.pool._buffers
    pool_arrays = [b.obs, b.rewards, b.terminals, b.truncations, b.final_obs]
    previous, several_ended = None, 0
    for _ in range(60):
        obs, rewards, term, trunc, infos = env.step(np.ones(32, dtype=np.int64))
        handed = [obs, rewards, term, trunc]
        ended = np.flatnonzero(term | trunc)
        if ended.size:
            finals = [infos["final_obs"][i] for i in ended]
            handed += finals + [infos["_final_obs"], infos["_final_info"]]
            if ended.size > 1:
                several_ended += 1
                before = finals[1].copy()
                finals[0][:] = 99.0
                np.testing.assert_array_equal(finals[1], before)
        for a in handed:
            assert not any(np.shares_memory(a, p) for p in pool_arrays)
            if previous is not None:
                assert not any(np.shares_memory(a, p) for p in previous)
        previous = handed
    assert several_ended > 0
    env.close()


def test_reset_mask_errors_match_sync():
    native, sync = make_native("disabled"), make_sync(AutoresetMode.DISABLED)
    native.reset(seed=0)
    sync.reset(seed=0)
    bad_masks = [[True] * NUM_ENVS, np.ones(NUM_ENVS + 1, dtype=bool),
                 np.ones(NUM_ENVS, dtype=np.int64), np.zeros(NUM_ENVS, dtype=bool)]
    for mask in bad_masks:
        with pytest.raises((TypeError, ValueError)) as ours:
            native.reset(options={"reset_mask": mask})
        with pytest.raises((TypeError, ValueError)) as reference:
            sync.reset(options={"reset_mask": mask})
        assert (ours.type, str(ours.value)) == (reference.type, str(reference.value))
    with pytest.raises(ValueError, match="length must match"):
        native.reset(seed=[1, 2])
    options = {"reset_mask": np.array([True, False, False, True]), "other": 1}
    before, _ = native.reset()
    after, _ = native.reset(options=options)
    assert options == {"other": 1}  # popped, as SyncVectorEnv does
    np.testing.assert_array_equal(after[1:3], before[1:3])
    assert not np.array_equal(after[0], before[0])
    native.close()
    sync.close()


def test_step_before_reset_and_after_close(no_leaks):
    env = make_native(AutoresetMode.NEXT_STEP, backend="multiprocessing")
    with pytest.raises(ResetNeeded):
        env.step(np.zeros(NUM_ENVS, dtype=np.int64))
    env.reset(seed=0)
    env.close()
    env.close()  # idempotent
    assert env.closed and env.unwrapped.pool.closed
    with pytest.raises(ClosedEnvironmentError):
        env.step(np.zeros(NUM_ENVS, dtype=np.int64))
    with pytest.raises(ClosedEnvironmentError):
        env.reset()


def test_unsupported_arguments_are_rejected(no_leaks):
    with pytest.raises(ValueError, match=r"\[1, 500\].*not lengthen them"):
        gymnasium.make_vec(ENV_ID, num_envs=2, max_episode_steps=501)
    with pytest.raises(ValueError, match="render_mode"):
        gymnasium.make_vec(ENV_ID, num_envs=2, render_mode="human")
    with pytest.raises(TypeError, match="batch_size"):
        NativeVectorEnv("CartPole", 4, batch_size=2)
    ok = gymnasium.make_vec(ENV_ID, num_envs=2, max_episode_steps=500, backend="serial")
    ok.close()


@pytest.mark.parametrize("mode", list(AutoresetMode))
@pytest.mark.parametrize("env_id, library, steps, kwargs", [
    ("shoal/Hopper-v5", "mujoco", 150, {}),                                   # falls every ~20 steps
    ("shoal/Humanoid-v5", "mujoco", 50, {"max_episode_steps": 15}),           # array infos: tendons
    ("shoal/Pong-v5", "ale_py", 70, {"max_num_frames_per_episode": 120}),    # truncated every ~30 steps
    ("shoal/Pong-v5", "ale_py", 40, {"max_episode_steps": 12}),               # a TimeLimit in Sync
    ("shoal/Breakout-v5", "ale_py", 150, {"episodic_life": True, "reward_clip": True,   # the game keys
                                          "use_fire_reset": True}),                      # (lives: episodes)
])
def test_library_env_step_infos_equal_syncs(mode, env_id, library, steps, kwargs):
    """Library-backed envs' step info (MuJoCo's reward terms, Atari's lives
    and frame numbers) as SyncVectorEnv gathers it from gymnasium.make's
    envs: float64 or int64 values with "_" masks, on autoreset steps the
    reset info (the positions, the lives) and the rest masked out, and
    in SAME_STEP the ended steps' values in "final_info"."""
    pytest.importorskip(library)
    native = gymnasium.make_vec(env_id, num_envs=3, vectorization_mode="vector_entry_point",
                                autoreset_mode=mode, backend="serial", **kwargs)
    sync = gymnasium.make_vec(env_id, num_envs=3, vectorization_mode="sync",
                              vector_kwargs={"autoreset_mode": mode}, **kwargs)
    try:
        sync.action_space.seed(0)
        assert_same(native.reset(seed=5), sync.reset(seed=5), "reset")
        ends, reported, finals = 0, 0, 0
        for t in range(steps):
            actions = sync.action_space.sample()
            result, reference = native.step(actions), sync.step(actions)
            assert_same(result, reference, f"step {t}")
            reported += any(not k.startswith("_") and k not in ("final_obs", "final_info") for k in result[4])
            finals += bool(result[4].get("final_info"))
            done = reference[2] | reference[3]
            ends += int(done.sum())
            if mode == AutoresetMode.DISABLED and done.any():
                assert_same(native.reset(options={"reset_mask": done.copy()}),
                            sync.reset(options={"reset_mask": done.copy()}), f"reset_mask after step {t}")
        assert ends >= 3 and reported >= steps - ends, (ends, reported)
        assert finals > 0 if mode == AutoresetMode.SAME_STEP else finals == 0
    finally:
        native.close()
        sync.close()


@pytest.mark.parametrize("env_id, kwargs", [
    ("shoal/CartPole-v0", {"max_episode_steps": 50}),
    ("shoal/HalfCheetah-v5", {"ctrl_cost_weight": 0.2, "max_episode_steps": 100}),
])
def test_sub_env_spec_carries_the_pools_kwargs_and_limit(env_id, kwargs):
    """get_attr("spec") is what gymnasium.make(id, **kwargs).spec is in sync
    mode: the pool's keyword arguments and step limit, not the registry's
    defaults (SB3's ShoalVecEnv reports the same)."""
    if "HalfCheetah" in env_id:
        pytest.importorskip("mujoco")
    pytest.importorskip("stable_baselines3", reason="SB3's ShoalVecEnv is compared too")
    from shoal.sb3 import ShoalVecEnv
    native = gymnasium.make_vec(env_id, num_envs=2, vectorization_mode="vector_entry_point",
                                backend="serial", **kwargs)
    sync = gymnasium.make_vec(env_id, num_envs=2, vectorization_mode="sync", **kwargs)
    sb3 = ShoalVecEnv(env_id.split("/")[1].split("-")[0], 2, backend="serial", **kwargs)
    try:
        theirs = sync.get_attr("spec")[0]
        for ours in (native.get_attr("spec")[0], sb3.get_attr("spec")[0]):
            assert (ours.id, ours.max_episode_steps, ours.kwargs) == \
                (theirs.id, theirs.max_episode_steps, theirs.kwargs) == \
                (env_id, kwargs["max_episode_steps"], {**gymnasium.spec(env_id).kwargs, **{
                    k: v for k, v in kwargs.items() if k != "max_episode_steps"}})
            assert gymnasium.make(ours).spec.max_episode_steps == kwargs["max_episode_steps"]
    finally:
        native.close()
        sync.close()
        sb3.close()


def test_every_registered_id_serialises_to_json_and_back():
    """Every shoal id's gymnasium spec (multi-agent ones too: their entry
    point was a Python function, which gymnasium cannot serialise) goes
    through EnvSpec.to_json / from_json unchanged."""
    from gymnasium.envs.registration import EnvSpec

    ids = [env_id for env_id in gymnasium.registry if env_id.startswith("shoal/")]
    assert "shoal/Snake-v0" in ids and "shoal/CartPole-v0" in ids
    for env_id in ids:
        spec = gymnasium.spec(env_id)
        assert EnvSpec.from_json(spec.to_json()) == spec, env_id


def test_editing_a_single_space_leaves_the_batched_spaces_as_syncs():
    """CleanRL's SAC sets `envs.single_observation_space.dtype = np.float32`
    after make_vec; SyncVectorEnv's batched space, built at construction,
    stays float64 (the obs dtype), and so does ours, built on first read."""
    native = gymnasium.make_vec(ENV_ID, num_envs=2, vectorization_mode="vector_entry_point")
    sync = gymnasium.make_vec(ENV_ID, num_envs=2, vectorization_mode="sync")
    try:
        for envs in (native, sync):
            envs.single_observation_space.dtype = np.float16
            envs.single_action_space.n = 7
        assert native.observation_space.dtype == sync.observation_space.dtype == np.float32
        assert native.action_space == sync.action_space == gymnasium.spaces.MultiDiscrete([2, 2])
        obs, _ = native.reset(seed=0)
        assert native.observation_space.contains(obs)
    finally:
        native.close()
        sync.close()



def test_snake_rows_count_every_life_exactly_under_same_step():
    """Snake's snakes respawn within the step that ends their life, so
    under NEXT_STEP (the default, which gymnasium's observation wrappers
    need) the step after a death is a real step, not a reset step. Under
    SAME_STEP gymnasium's RecordEpisodeStatistics counts every life
    exactly (README, "first-party envs")."""
    default = gymnasium.make_vec("shoal/Snake-v0", 2, vectorization_mode="vector_entry_point", backend="serial")
    assert default.metadata["autoreset_mode"] is AutoresetMode.NEXT_STEP
    default.close()
    envs = vector_wrappers.RecordEpisodeStatistics(gymnasium.make_vec(
        "shoal/Snake-v0", 2, vectorization_mode="vector_entry_point", backend="serial", autoreset_mode="same_step"))
    try:
        envs.reset(seed=0)
        envs.action_space.seed(0)
        returns, lengths = np.zeros(envs.num_envs), np.zeros(envs.num_envs, np.int64)
        counted, recorded = [], []
        for _ in range(600):
            _, rewards, terminations, truncations, infos = envs.step(envs.action_space.sample())
            returns += rewards
            lengths += 1
            ended = terminations | truncations
            counted += [(returns[i], lengths[i]) for i in np.flatnonzero(ended)]
            if "episode" in infos:
                recorded += [(infos["episode"]["r"][i], infos["episode"]["l"][i])
                             for i in np.flatnonzero(infos["_episode"])]
            returns[ended], lengths[ended] = 0.0, 0
        assert len(counted) > 50   # deaths: lives end often with random moves
        assert recorded == counted
    finally:
        envs.close()
