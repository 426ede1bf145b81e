"""The EnvPool drop-in's speed against EnvPool itself, with the same client
loop: `make_gymnasium(task, num_envs, batch_size, num_threads=2, seed=0)`
from `envpool` and from `shoal.envpool_compat` (which copies every result,
as EnvPool returns new arrays), then `step(actions, info["env_id"])` with
random actions, ROUNDS interleaved rounds of 1 s each.

    python -P scripts/envpool_dropin_speed.py TASK NUM_ENVS BATCH_SIZE [ROUNDS]

Needs EnvPool (`pip install ".[bench]"`).
"""
import sys
import time

import envpool
import numpy as np

import shoal.envpool_compat as compat

ROUND_SECONDS = 1.0


def random_actions(space, rows: int, rng) -> np.ndarray:
    if hasattr(space, "n"):
        return rng.integers(0, space.n, rows)
    return rng.uniform(space.low, space.high, (rows, *space.shape)).astype(space.dtype)


def main() -> None:
    if any(arg in ("-h", "--help") for arg in sys.argv[1:]):
        print(__doc__)
        sys.exit(0)
    if len(sys.argv) < 4:
        sys.exit(f"needs TASK NUM_ENVS BATCH_SIZE [ROUNDS]\n{__doc__}")
    task, num_envs, batch_size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    rounds = int(sys.argv[4]) if len(sys.argv) > 4 else 5
    libraries = {"envpool": envpool, "shoal": compat}
    made, make_seconds, env_ids = {}, {}, {}
    for name, library in libraries.items():
        start = time.perf_counter()
        made[name] = library.make_gymnasium(task, num_envs=num_envs, batch_size=batch_size,
                                            num_threads=2, seed=0)
        make_seconds[name] = time.perf_counter() - start
        env_ids[name] = made[name].reset()[1]["env_id"]
    print("make (s):", {name: round(seconds, 2) for name, seconds in make_seconds.items()})
    rng = np.random.default_rng(0)
    rates: dict = {name: [] for name in libraries}
    for _ in range(rounds):
        for name, envs in made.items():
            ids, steps, start = env_ids[name], 0, time.perf_counter()
            while time.perf_counter() - start < ROUND_SECONDS:
                info = envs.step(random_actions(envs.action_space, len(ids), rng), ids)[4]
                ids = info["env_id"]
                steps += len(ids)
            env_ids[name] = ids
            rates[name].append(steps / (time.perf_counter() - start))
    for name, values in rates.items():
        print(f"{name}: median {np.median(values):.0f} env-steps/s, rounds {[round(v) for v in values]}")
    print(f"shoal / envpool: {np.median(rates['shoal']) / np.median(rates['envpool']):.2f}")
    for envs in made.values():
        envs.close()


if __name__ == "__main__":
    main()
