/* InvertedDoublePendulum-v5 (gymnasium), over MuJoCo's C API.
 *
 * Model: gymnasium's inverted_double_pendulum.xml: a cart with two poles
 * chained on it, 3 qpos (cart slider, 2 hinges), 3 qvel, 1 actuator in
 * [-1, 1], and one site ("tip") at the end of the second pole.
 * Observation (9 doubles): qpos[0], sin(qpos[1:3]), cos(qpos[1:3]),
 *     clip(qvel, -10, 10), clip(qfrc_constraint[0], -10, 10).
 * Reward: healthy_reward * (not terminated) - distance_penalty - velocity_penalty,
 *     with (x, _, y) the tip site's position:
 *     distance_penalty = 0.01 * x^2 + (y - 2)^2,
 *     velocity_penalty = 1e-3 * qvel[1]^2 + 5e-3 * qvel[2]^2.
 * Termination: tip height y <= 1.
 * Reset noise: qpos = qpos0 + U(-s, s), qvel = s * N(0, 1), s = reset_noise_scale.
 * Info slots: reward_survive, distance_penalty, velocity_penalty (the last two
 *     negated, as gymnasium reports them).
 */
#ifndef SHOAL_MUJOCO_INVERTED_DOUBLE_PENDULUM_H
#define SHOAL_MUJOCO_INVERTED_DOUBLE_PENDULUM_H

#include "shoal_mujoco.h"

/* env->cfg, in the order of envs/mujoco/__init__.py's InvertedDoublePendulum params. */
enum { INVERTED_DOUBLE_PENDULUM_HEALTHY_REWARD, INVERTED_DOUBLE_PENDULUM_RESET_NOISE_SCALE };

static int inverted_double_pendulum_obs_size(const mjModel* m, const double* cfg) {
    (void)cfg;
    return 1 + 2 * (m->nq - 1) + m->nv + 1;
}

static void inverted_double_pendulum_observe(const mujoco_env* env, double* obs) {
    const mjModel* m = env->m;
    const mjData* d = env->d;
    int k = 0;
    obs[k++] = d->qpos[0];                                  /* cart position */
    for (int i = 1; i < m->nq; i++) obs[k++] = sin(d->qpos[i]);   /* link angles */
    for (int i = 1; i < m->nq; i++) obs[k++] = cos(d->qpos[i]);
    for (int i = 0; i < m->nv; i++) obs[k++] = mujoco_clip(d->qvel[i], -10.0, 10.0);
    obs[k++] = mujoco_clip(d->qfrc_constraint[0], -10.0, 10.0);
}

/* v ** 2 as Python evaluates it on gymnasium's numpy float64 scalars: libm's
 * pow, which is not always the correctly rounded v * v (1 ulp off at times).
 * The volatile exponent keeps the compiler from folding pow(v, 2.0) into v * v. */
static double inverted_double_pendulum_squared(double v) {
    volatile double two = 2.0;
    return pow(v, two);
}

static int inverted_double_pendulum_step(mujoco_env* env, const float* action, double* obs,
                                         double* reward) {
    mujoco_simulate(env, action);
    const mjData* d = env->d;
    const double x = d->site_xpos[0], y = d->site_xpos[2];   /* the pole tip */
    const int terminated = y <= 1.0;
    const double v1 = d->qvel[1], v2 = d->qvel[2];
    const double distance_penalty = 0.01 * inverted_double_pendulum_squared(x)
                                    + inverted_double_pendulum_squared(y - 2.0);
    const double velocity_penalty = 1e-3 * inverted_double_pendulum_squared(v1)
                                    + 5e-3 * inverted_double_pendulum_squared(v2);
    const double alive_bonus = env->cfg[INVERTED_DOUBLE_PENDULUM_HEALTHY_REWARD] * !terminated;
    *reward = alive_bonus - distance_penalty - velocity_penalty;
    double* info = env->state->info;
    info[0] = alive_bonus;
    info[1] = -distance_penalty;
    info[2] = -velocity_penalty;
    inverted_double_pendulum_observe(env, obs);
    return terminated;
}

static void inverted_double_pendulum_reset_model(mujoco_env* env) {
    mujoco_reset_noise(env, env->cfg[INVERTED_DOUBLE_PENDULUM_RESET_NOISE_SCALE], 1);
}

static const mujoco_kind inverted_double_pendulum_kind = {
    "InvertedDoublePendulum", inverted_double_pendulum_observe, inverted_double_pendulum_step,
    inverted_double_pendulum_reset_model, inverted_double_pendulum_obs_size, 0,
};

#endif
