"""shoal's Atari episodic_life against EnvPool's, step for step (needs envpool).

    python -P scripts/envpool_episodic_life.py Breakout [MAX_EPISODE_STEPS] [STEPS]
    EPISODIC=0 python -P scripts/envpool_episodic_life.py Pong     # the option off

One env each, the same random actions, no sticky actions and noop_max=1 (so
both draw the same start), fire start, reward_clip. Prints the steps whose
obs, reward, flags, elapsed_step or lives differ, and how many of them are
not game-over steps (whose last frame shoal takes as gymnasium's frame loop
does, EnvPool otherwise).
"""
import os
import sys

import envpool
import numpy as np

import shoal

if any(arg in ("-h", "--help") for arg in sys.argv[1:]):
    print(__doc__)
    sys.exit(0)
game = sys.argv[1] if len(sys.argv) > 1 else "Breakout"
limit = int(sys.argv[2]) if len(sys.argv) > 2 else 27000
steps = int(sys.argv[3]) if len(sys.argv) > 3 else 3000
options = dict(episodic_life=os.environ.get("EPISODIC", "1") == "1", noop_max=1,
               repeat_action_probability=0.0, use_fire_reset=True, reward_clip=True,
               max_episode_steps=limit)
theirs = envpool.make_gymnasium(f"{game}-v5", num_envs=1, seed=0, **options)
ours = shoal.make(game, 1, backend="serial", seed=0, **options)
assert (theirs.reset()[0] == ours.reset()[0]).all(), "the first obs differ"
rng = np.random.default_rng(0)
differing = not_game_over = lives_lost = games = truncations = 0
for t in range(steps):
    action = rng.integers(0, theirs.action_space.n, 1)
    o1, r1, te1, tr1, i1 = theirs.step(action)
    o2, r2, te2, tr2, i2 = ours.step(action)
    same = ((o1 == o2).all() and r1[0] == r2[0] and te1[0] == te2[0] and tr1[0] == tr2[0]
            and i1["elapsed_step"][0] == i2["elapsed_step"][0] and i1["lives"][0] == i2["lives"][0])
    lives_lost += int(te1[0] and not i1["terminated"][0])
    games += int(i1["terminated"][0])
    truncations += int(tr1[0])
    if not same:
        differing += 1
        not_game_over += int(not i1["terminated"][0])
        print(f"step {t}: frames differing per stack slot "
              f"{[int((o1[0, k] != o2[0, k]).sum()) for k in range(o1.shape[1])]}, reward {r1[0]} / {r2[0]}, "
              f"terminated {te1[0]} / {te2[0]}, truncated {tr1[0]} / {tr2[0]}, elapsed_step "
              f"{i1['elapsed_step'][0]} / {i2['elapsed_step'][0]}, lives {i1['lives'][0]} / {i2['lives'][0]} "
              f"(EnvPool / shoal)")
print(f"{game}, episodic_life={options['episodic_life']}, max_episode_steps {limit}: {steps} steps, "
      f"{differing} differ ({not_game_over} not at a game over); {lives_lost} lives lost, {games} games, "
      f"{truncations} truncations")
ours.close()
theirs.close()
