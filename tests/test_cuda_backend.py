"""CudaVecEnv: its API on the CPU (everywhere) and CPU-vs-GPU parity (on a GPU).

device="cpu" runs the Cython loop behind torch tensors, so the API is tested
on every machine. The parity tests need a CUDA GPU and skip without one,
saying so: Snake bit-exact; every env per step from identical states within
float32 tolerance (integer obs: exactly); episode statistics of long runs.
Every header env is covered (ENVS below).
"""
import importlib
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import shoal.envs  # noqa: E402
from shoal.cuda import CudaVecEnv  # noqa: E402
from shoal.pool import Serial  # noqa: E402
from shoal.pool.layout import EPISODE_DTYPE  # noqa: E402

# Every header env (a folder under envs/ with a binding.pyx and its own
# <folder>.h, as tests/test_cuda_kernels.py finds them), by spec name: a new
# env is compared with the CPU without an edit here.
ENVS_DIR = Path(shoal.envs.__file__).parent
SPECS = [importlib.import_module(f"shoal.envs.{p.parent.name}").SPEC
         for p in sorted(ENVS_DIR.glob("*/binding.pyx")) if (p.parent / f"{p.parent.name}.h").is_file()]
ENVS = [spec.name for spec in SPECS]
HAS_GPU = torch.cuda.is_available()
needs_gpu = pytest.mark.skipif(not HAS_GPU, reason="no CUDA GPU on this machine")


def random_actions(env, rng):
    nvec = np.asarray(env.spec.action_nvec)
    shape = tuple(env.actions.shape)
    if len(shape) == 1:
        return rng.integers(0, nvec[0], shape).astype(np.int32)
    return rng.integers(0, nvec, shape).astype(np.int32)


# ---- the API, on the CPU ---------------------------------------------------------
def test_importing_shoal_needs_neither_torch_nor_the_backend():
    code = "import sys, shoal, shoal.pool; print('torch' in sys.modules, 'shoal.cuda' in sys.modules)"
    out = subprocess.run([sys.executable, "-P", "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]


@pytest.mark.parametrize("name", ENVS)
def test_cpu_device_equals_serial_pool_step_by_step(name):
    env = CudaVecEnv(name, 6, device="cpu", seed=5)
    pool = Serial(name, 6, seed=5)
    rng = np.random.default_rng(0)
    obs, _ = env.reset(seed=11)
    ref, _ = pool.reset(seed=11)
    assert isinstance(obs, torch.Tensor) and obs.device.type == "cpu"
    np.testing.assert_array_equal(obs.numpy(), ref)
    for _ in range(60):
        actions = random_actions(env, rng)
        out = env.step(torch.from_numpy(actions))
        expected = pool.step(actions)
        for got, want in zip(out[:4], expected[:4]):
            np.testing.assert_array_equal(got.numpy(), want)
        np.testing.assert_array_equal(env.masks.numpy(), pool.masks)
    assert env.episode_stats().keys() == pool.episode_stats().keys()
    env.close()
    env.close()
    pool.close()


@pytest.mark.parametrize("name", ENVS)
def test_tensor_dtypes_and_shapes(name):
    env = CudaVecEnv(name, 3, device="cpu", seed=0)
    rows = 3 * env.spec.agents
    assert env.obs.shape == (rows, *env.spec.obs_shape)
    assert env.obs.dtype == {np.float32: torch.float32, np.float64: torch.float64, np.uint8: torch.uint8}[env.spec.obs_dtype]
    assert env.rewards.shape == (rows,) and env.rewards.dtype == torch.float32
    for flags in (env.terminals, env.truncations, env.masks):
        assert flags.shape == (rows,) and flags.dtype == torch.bool
    action_dtype = torch.float32 if env.spec.continuous_action else torch.int32
    assert env.actions.dtype == action_dtype and env.actions.shape == env.action_space.shape
    assert env.env_states.dtype == torch.uint8
    assert env.episodes.numel() == 3 * EPISODE_DTYPE.itemsize == 3 * 48


def test_outputs_are_updated_in_place():
    env = CudaVecEnv("CartPole", 4, device="cpu", seed=0)
    obs, _ = env.reset(seed=0)
    before = obs.clone()
    obs2, rewards, *_ = env.step(torch.ones(4, dtype=torch.int32))
    assert obs2.data_ptr() == obs.data_ptr() and not torch.equal(obs, before)
    assert rewards.data_ptr() == env.rewards.data_ptr()


def test_seed_rule_env_i_gets_seed_plus_i():
    many = CudaVecEnv("Snake", 4, device="cpu", seed=0)
    obs, _ = many.reset(seed=100)
    rows = many.spec.agents
    for i in range(4):
        one = CudaVecEnv("Snake", 1, device="cpu", seed=0)
        single, _ = one.reset(seed=100 + i)
        assert torch.equal(obs[i * rows:(i + 1) * rows], single)


def test_reset_mask_resets_only_those_envs():
    env = CudaVecEnv("CartPole", 4, device="cpu", seed=0)
    env.reset(seed=1)
    for _ in range(5):
        env.step(torch.ones(4, dtype=torch.int32))
    before = env.obs.clone()
    mask = torch.tensor([True, False, True, False])
    env.reset(seed=1, options={"reset_mask": mask})
    fresh = CudaVecEnv("CartPole", 4, device="cpu", seed=0)
    fresh.reset(seed=1)
    assert torch.equal(env.obs[mask], fresh.obs[mask])
    assert torch.equal(env.obs[~mask], before[~mask])
    with pytest.raises(ValueError, match="reset_mask"):
        env.reset(options={"reset_mask": torch.ones(3, dtype=torch.bool)})


def test_autoreset_modes():
    same = CudaVecEnv("CartPole", 2, device="cpu", autoreset_mode="same_step", seed=0)
    nxt = CudaVecEnv("CartPole", 2, device="cpu", seed=0)
    off = CudaVecEnv("CartPole", 2, device="cpu", autoreset_mode="disabled", seed=0)
    assert nxt.metadata["autoreset_mode"].name == "NEXT_STEP"
    # final_obs exists in SAME_STEP only, on the CPU as on the GPU (it was the pool's unwritten buffer)
    assert same.final_obs is not None and nxt.final_obs is None and off.final_obs is None
    push = torch.ones(2, dtype=torch.int32)
    ended = False
    for _ in range(200):
        _, _, term, trunc, info = same.step(push)
        assert set(info) == {"final_obs", "_final_obs"}
        if bool((term | trunc).any()):
            ended = True
            done = info["_final_obs"]
            assert torch.equal(done, term | trunc)
            assert info["final_obs"][done].abs().max() > 0.2  # the fallen pole, not a fresh start
            assert same.obs[done].abs().max() < 0.05           # already reset
            break
    assert ended
    for _ in range(30):
        _, _, term, *_ = nxt.step(push)
        if bool(term.any()):
            _, reward, term2, *_ = nxt.step(push)   # the reset step
            assert not bool(term2.any()) and float(reward.sum()) == 0.0
            break
    for _ in range(30):
        off.step(push)   # stepping past a done: no error


def test_bad_actions_are_rejected():
    env = CudaVecEnv("CartPole", 3, device="cpu", seed=0)
    with pytest.raises(ValueError, match="out of range"):
        env.step(torch.tensor([0, 2, 1], dtype=torch.int32))
    with pytest.raises(ValueError, match="shape"):
        env.step(torch.zeros(4, dtype=torch.int32))
    with pytest.raises(ValueError, match="integers"):
        env.step(torch.zeros(3))
    explorer = CudaVecEnv("Explorer", 1, device="cpu", seed=0)
    with pytest.raises(ValueError, match="out of range"):
        explorer.step(torch.tensor([[0, 0], [0, 3], [0, 0], [0, 0]]))


def test_bad_arguments():
    with pytest.raises(ValueError, match="num_envs"):
        CudaVecEnv("CartPole", 0, device="cpu")
    with pytest.raises(ValueError, match="device"):
        CudaVecEnv("CartPole", 2, device="meta")
    with pytest.raises(ValueError, match="threads_per_block must be a positive multiple of 32, got 33"):
        CudaVecEnv("CartPole", 2, device="cpu", threads_per_block=33)   # as on the GPU, where it matters
    env = CudaVecEnv("CartPole", 2, device="cpu", seed=0)
    env.close()
    with pytest.raises(RuntimeError, match="closed"):
        env.step(torch.zeros(2, dtype=torch.int32))


def test_a_pool_that_closed_itself_closes_the_cpu_env():
    """On the CPU, a pool closes itself when an error or a signal handler's
    exception comes inside a call: the CudaVecEnv over it then reads closed,
    and says so in its own name (it read open, and raised the pool's error)."""
    from shoal.pool import PoolClosedError
    env = CudaVecEnv("CartPole", 2, device="cpu", seed=0)
    env._pool.close()   # as the pool does on its own
    assert env.closed and "closed" in repr(env)
    with pytest.raises(PoolClosedError, match="this CudaVecEnv is closed .*closed itself"):
        env.step(torch.zeros(2, dtype=torch.int32))
    env.close()
    env.close()


@pytest.mark.skipif(HAS_GPU, reason="this machine has a CUDA GPU")
def test_cuda_device_without_gpu_says_so():
    with pytest.raises(RuntimeError, match="no CUDA device"):
        CudaVecEnv("CartPole", 2, device="cuda")


def test_missing_nvcc_is_a_clear_error(monkeypatch):
    import shoal.cuda as backend
    monkeypatch.setattr(backend, "find_nvcc", lambda: None)
    monkeypatch.setattr(backend, "_kernels", {})
    with pytest.raises(RuntimeError, match="nvcc"):
        backend.load_kernel("CartPole")


# ---- parity, on a GPU ------------------------------------------------------------
KERNELS = ["direct", "staged", "staged_obs"]


def pair(name, num_envs, step_kernel="auto", **kwargs):
    return (CudaVecEnv(name, num_envs, device="cpu", **kwargs),
            CudaVecEnv(name, num_envs, device="cuda", step_kernel=step_kernel, **kwargs))


def step_both(cpu, gpu, actions, t):
    """Step `pair`'s two envs with the same actions; their obs, rewards and
    flags are equal bit for bit (`t` names the step in a failure)."""
    out_c = cpu.step(torch.from_numpy(actions))
    out_g = gpu.step(torch.from_numpy(actions).cuda())
    for x, y in zip(out_c[:4], out_g[:4]):
        assert torch.equal(x, y.cpu()), f"step {t}"
    return out_c, out_g


@needs_gpu
@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("mode", ["next_step", "same_step"])
def test_snake_is_bit_exact_on_gpu(mode, kernel):
    # 37 envs: the last block of a staged kernel is partly empty
    cpu, gpu = pair("Snake", 37, seed=3, autoreset_mode=mode, step_kernel=kernel, threads_per_block=32
                    if kernel != "direct" else None)
    rng = np.random.default_rng(1)
    a, _ = cpu.reset(seed=7)
    b, _ = gpu.reset(seed=7)
    assert torch.equal(a, b.cpu())
    for t in range(1500):
        out_c, out_g = step_both(cpu, gpu, random_actions(cpu, rng), t)
        assert torch.equal(cpu.masks, gpu.masks.cpu())
        if mode == "same_step":
            assert torch.equal(out_c[4]["final_obs"], out_g[4]["final_obs"].cpu())
    assert torch.equal(cpu.env_states, gpu.env_states.cpu())
    assert cpu.episode_stats() == gpu.episode_stats()


@needs_gpu
@pytest.mark.parametrize("kernel", KERNELS)
def test_a_shorter_step_limit_is_bit_exact_on_gpu(kernel):
    """max_episode_steps (shoal_episode.step_limit, written by the host):
    Snake truncated at 23 steps, equal on both devices, every kernel."""
    cpu, gpu = pair("Snake", 37, seed=5, autoreset_mode="same_step", step_kernel=kernel,
                    env_kwargs={"max_episode_steps": 23})
    rng = np.random.default_rng(2)
    cpu.reset(seed=9)
    gpu.reset(seed=9)
    for t in range(100):
        out_c, out_g = step_both(cpu, gpu, random_actions(cpu, rng), t)
        # the limit ends every env's episode at t = 22, 45, 68, 91, and only then
        at_limit = t % 23 == 22
        assert bool((out_c[2] | out_c[3]).all()) if at_limit else not bool(out_c[3].any()), f"step {t}"
    assert cpu.episode_stats() == gpu.episode_stats()


@needs_gpu
@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("name", ENVS)
def test_envs_agree_per_step_from_identical_states(name, kernel):
    """Each step starts both sides from the same bytes (env structs and
    episode bookkeeping copied CPU -> GPU), so errors cannot compound. Rows
    must agree within 1e-6 (absolute and relative): measured on an H100
    (scripts/profile_gpu.py, 200 steps x 256 envs of each env), the largest
    difference was 2.4e-7 (CartPole, Drive; one float32 ulp of values near
    1, from the GPU's sinf/cosf), Explorer and Snake were exact, rewards
    exact, flags never differed. A row may still differ where a last-ulp
    difference tips a threshold, which must stay rarer than 1 row in 5000."""
    try:
        cpu, gpu = pair(name, 128, seed=2, step_kernel=kernel)
    except ValueError as e:  # only where the stage cannot fit this GPU's shared memory
        assert "does not fit" in str(e)
        from shoal.cuda import load_kernel
        limit = torch.cuda.get_device_properties(0).shared_memory_per_block_optin
        assert load_kernel(name).staged_smem(32, int(kernel == "staged_obs")) > limit
        return
    cpu.reset(seed=9)
    rng = np.random.default_rng(2)
    bad_rows = rows = 0
    for _ in range(200):
        gpu.env_states.copy_(cpu.env_states)     # same state on both sides
        gpu.episodes.copy_(cpu.episodes)
        actions = random_actions(cpu, rng)
        obs_c, rew_c, term_c, trunc_c, _ = cpu.step(torch.from_numpy(actions))
        obs_g, rew_g, term_g, trunc_g, _ = gpu.step(torch.from_numpy(actions).cuda())
        close = torch.isclose(obs_g.cpu().float(), obs_c.float(), atol=1e-6, rtol=1e-6)
        close = close.reshape(len(close), -1).all(dim=1)   # per row, whatever the obs shape
        close &= torch.isclose(rew_g.cpu(), rew_c, atol=1e-6, rtol=1e-6)
        close &= (term_g.cpu() == term_c) & (trunc_g.cpu() == trunc_c) & (gpu.masks.cpu() == cpu.masks)
        bad_rows += int((~close).sum())
        rows += close.numel()
    assert bad_rows <= max(2, rows // 5000), f"{bad_rows} of {rows} rows differ"


@needs_gpu
@pytest.mark.parametrize("name", ENVS)
def test_long_run_episode_statistics_match(name):
    num_envs = 512
    cpu, gpu = pair(name, num_envs, seed=4)
    cpu.reset(seed=4)
    gpu.reset(seed=4)
    rng = np.random.default_rng(4)
    steps = {"CartPole": 3000, "Snake": 2000}.get(name, 1000)
    for _ in range(steps):
        actions = random_actions(cpu, rng)
        cpu.step(torch.from_numpy(actions))
        gpu.step(torch.from_numpy(actions).cuda())
    s_cpu, s_gpu = cpu.episode_stats(), gpu.episode_stats()
    assert s_cpu["episodes"] > 0
    assert abs(s_gpu["episodes"] - s_cpu["episodes"]) <= 0.05 * s_cpu["episodes"] + 2
    # Same seeds and actions: trajectories agree until a last-ulp difference
    # of a GPU math function makes a float env diverge; the statistics of
    # thousands of episodes must still match.
    assert s_gpu["mean_length"] == pytest.approx(s_cpu["mean_length"], rel=0.05)
    assert s_gpu["mean_return"] == pytest.approx(s_cpu["mean_return"], rel=0.1, abs=0.1)


@needs_gpu
def test_gpu_api():
    env = CudaVecEnv("Drive", 8, device="cuda", seed=0)
    obs, _ = env.reset(seed=1)
    assert obs.is_cuda and env.masks.is_cuda and env.masks.any()
    before = obs.clone()
    mask = torch.zeros(8, dtype=torch.bool)
    mask[2] = True
    for _ in range(3):
        env.step(torch.zeros(env.actions.shape, dtype=torch.int64, device="cuda"))
    stepped = env.obs.clone()
    env.reset(seed=1, options={"reset_mask": mask})
    rows = env.spec.agents
    assert torch.equal(env.obs[2 * rows:3 * rows], before[2 * rows:3 * rows])
    assert torch.equal(env.obs[:2 * rows], stepped[:2 * rows])
    with pytest.raises(ValueError, match="out of range"):
        env.step(torch.full(env.actions.shape, 99, dtype=torch.int32, device="cuda"))


@needs_gpu
def test_step_kernel_choice_and_errors():
    from shoal.cuda import STEP_KERNEL_AUTO, STEP_KERNELS
    assert {kind for kind, _ in STEP_KERNEL_AUTO.values()} <= set(STEP_KERNELS)
    env = CudaVecEnv("Snake", 40, device="cuda", seed=0, step_kernel="staged")
    assert env.step_kernel == "staged" and env._threads % 32 == 0 and env._threads > 0
    assert "step_kernel='staged'" in repr(env)
    with pytest.raises(ValueError, match="multiple of 32"):
        CudaVecEnv("Snake", 8, device="cuda", step_kernel="staged", threads_per_block=48)
    with pytest.raises(ValueError, match="shared memory"):   # 1024 * 2.6 KB
        CudaVecEnv("Snake", 8, device="cuda", step_kernel="staged", threads_per_block=1024)
    auto = CudaVecEnv("Snake", 8, device="cuda", seed=0)
    assert (auto.step_kernel, auto._threads) == STEP_KERNEL_AUTO["Snake"]
