"""shoal.envpool_compat's xla(): EnvPool's XLA interface (handle, recv,
send, step) inside jax.jit and lax.scan gives what the host calls give.

Run in a subprocess: importing JAX starts its threads, and JAX warns on
every later fork (the rest of the suite forks workers all the time)."""
import importlib.util
import subprocess
import sys
import textwrap

import pytest

# (found, not imported: JAX imported here would be in every later test's forks)
if importlib.util.find_spec("jax") is None:
    pytest.skip("EnvPool's XLA interface needs JAX (in shoal's [test] extra)", allow_module_level=True)

SCRIPT = textwrap.dedent("""
    import sys
    import numpy as np
    import shoal.envpool_compat as envpool
    task, batch_size = sys.argv[1], int(sys.argv[2])
    # pools before JAX: its threads and a fork do not mix (JAX warns)
    envs = envpool.make(task, num_envs=4, batch_size=batch_size, seed=0)
    reference = envpool.make(task, num_envs=4, batch_size=batch_size, seed=0, num_threads=0)
    import jax, jax.numpy as jnp

    handle, recv, send, step = envs.xla()
    box = envs.single_action_space.shape

    def actions(t, env_id):   # a fixed, varied sequence: the same on both sides
        if box:
            return jnp.full((len(env_id),) + box, 0.3, jnp.float32) * jnp.cos(t + env_id)[:, None]
        return (env_id + t) % 2

    @jax.jit
    def rollout(handle):
        def body(carry, t):
            handle, env_id = carry
            handle, (obs, rew, term, trunc, info) = step(handle, actions(t, env_id), env_id)
            return (handle, info["env_id"]), (obs, rew, term, trunc, info["env_id"])
        handle, (obs, rew, term, trunc, info) = recv(handle)   # the first batch of the reset
        return jax.lax.scan(body, (handle, info["env_id"]), jnp.arange(60))[1]

    if batch_size == 4:
        envs.reset()   # sync: step() = send() + recv() right after a host reset
        reference.reset()
        envs.send(np.asarray(actions(0, jnp.arange(4))))   # so that rollout's recv() has a batch
        reference.send(np.asarray(actions(0, jnp.arange(4))))
    else:
        envs.async_reset()
        reference.async_reset()
    out = [np.asarray(x) for x in rollout(handle)]
    ids = reference.recv()[4]["env_id"]
    for t in range(60):
        obs, rew, term, trunc, info = reference.step(np.asarray(actions(t, jnp.asarray(ids))), ids)
        for got, want in zip(out, (obs, rew, term, trunc, info["env_id"])):
            np.testing.assert_allclose(got[t], np.asarray(want).astype(got.dtype), rtol=1e-6, err_msg=f"step {t}")
        ids = info["env_id"]
    assert out[0].dtype == jax.dtypes.canonicalize_dtype(envs.single_observation_space.dtype)
    print("ok", int(out[2].sum() + out[3].sum()))
""")


@pytest.mark.parametrize("task, batch_size", [("CartPole-v1", 4), ("CartPole-v1", 2), ("Hopper-v5", 4)])
def test_xla_rollout_in_jit_equals_host_calls(task, batch_size, tmp_path):
    if task.startswith("Hopper"):
        pytest.importorskip("mujoco", reason="MuJoCo envs need the mujoco extra")
    out = subprocess.run([sys.executable, "-P", "-c", SCRIPT, task, str(batch_size)],
                         capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert out.returncode == 0 and out.stdout.startswith("ok"), out.stderr[-3000:]
    assert int(out.stdout.split()[1]) > 0   # episodes ended inside the jitted loop (autoresets)


def test_xla_without_jax_names_it(tmp_path):
    code = ("import sys\nsys.modules['jax'] = None\nimport shoal.envpool_compat as envpool\n"
            "envpool.make('CartPole-v1', num_envs=2).xla()\n")
    out = subprocess.run([sys.executable, "-P", "-c", code], capture_output=True, text=True, timeout=120,
                         cwd=tmp_path)
    assert out.returncode == 1 and "xla() needs JAX: pip install jax" in out.stderr, out.stderr
