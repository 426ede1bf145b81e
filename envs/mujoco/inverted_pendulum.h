/* InvertedPendulum-v5 (gymnasium), over MuJoCo's C API.
 *
 * Model: gymnasium's inverted_pendulum.xml: a cart on a rail with a pole
 * hinged on it, 2 qpos (cart slider, pole hinge), 2 qvel, 1 actuator in [-3, 3].
 * Observation (4 doubles): qpos then qvel.
 * Reward: 1 while the episode goes on, 0 on the step that terminates it
 *     (gymnasium's int(not terminated)).
 * Termination: |pole angle qpos[1]| > 0.2, or a non-finite observation.
 * Reset noise: qpos = qpos0 + U(-s, s), qvel = U(-s, s), s = reset_noise_scale.
 * Info slots: reward_survive.
 */
#ifndef SHOAL_MUJOCO_INVERTED_PENDULUM_H
#define SHOAL_MUJOCO_INVERTED_PENDULUM_H

#include "shoal_mujoco.h"

/* env->cfg, in the order of envs/mujoco/__init__.py's InvertedPendulum params. */
enum { INVERTED_PENDULUM_RESET_NOISE_SCALE };

static int inverted_pendulum_obs_size(const mjModel* m, const double* cfg) {
    (void)cfg;
    return m->nq + m->nv;
}

static void inverted_pendulum_observe(const mujoco_env* env, double* obs) {
    int k = 0;
    for (int i = 0; i < env->m->nq; i++) obs[k++] = env->d->qpos[i];
    for (int i = 0; i < env->m->nv; i++) obs[k++] = env->d->qvel[i];
}

static int inverted_pendulum_step(mujoco_env* env, const float* action, double* obs,
                                  double* reward) {
    mujoco_simulate(env, action);
    inverted_pendulum_observe(env, obs);
    int all_finite = 1;
    for (int i = 0; i < env->obs_size; i++) all_finite &= isfinite(obs[i]) != 0;
    const int terminated = !all_finite || fabs(obs[1]) > 0.2;
    *reward = terminated ? 0.0 : 1.0;
    env->state->info[0] = *reward;
    return terminated;
}

static void inverted_pendulum_reset_model(mujoco_env* env) {
    mujoco_reset_noise(env, env->cfg[INVERTED_PENDULUM_RESET_NOISE_SCALE], 0);
}

static const mujoco_kind inverted_pendulum_kind = {
    "InvertedPendulum", inverted_pendulum_observe, inverted_pendulum_step,
    inverted_pendulum_reset_model, inverted_pendulum_obs_size, 0,
};

#endif
