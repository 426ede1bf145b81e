/* HalfCheetah-v5 (gymnasium), over MuJoCo's C API.
 *
 * Model: gymnasium's half_cheetah.xml: a planar 2D cheetah, 9 qpos
 * (rootx, rootz, rooty, 6 joints), 9 qvel, 6 actuators in [-1, 1].
 * Observation (17 doubles): qpos[1:] then qvel (18 with
 *     exclude_current_positions_from_observation=False: qpos[0] too).
 * Reward: forward_reward_weight * x_velocity - ctrl_cost_weight * sum(action^2),
 *     x_velocity = (x after - x before) / dt, dt = timestep * frame_skip.
 * Termination: never (episodes end by truncation at max_episode_steps).
 * Reset noise: qpos = qpos0 + U(-s, s), qvel = s * N(0, 1), s = reset_noise_scale.
 * Info slots: reward_forward, reward_ctrl, x_position, x_velocity.
 */
#ifndef SHOAL_MUJOCO_HALF_CHEETAH_H
#define SHOAL_MUJOCO_HALF_CHEETAH_H

#include "shoal_mujoco.h"

/* env->cfg, in the order of envs/mujoco/__init__.py's HalfCheetah params. */
enum { HALF_CHEETAH_FORWARD_REWARD_WEIGHT, HALF_CHEETAH_CTRL_COST_WEIGHT,
       HALF_CHEETAH_RESET_NOISE_SCALE, HALF_CHEETAH_EXCLUDE_X };

static int half_cheetah_obs_size(const mjModel* m, const double* cfg) {
    return m->nq + m->nv - (cfg[HALF_CHEETAH_EXCLUDE_X] != 0.0);
}

static void half_cheetah_observe(const mujoco_env* env, double* obs) {
    const mjData* d = env->d;
    const int skip = env->cfg[HALF_CHEETAH_EXCLUDE_X] != 0.0;
    int k = 0;
    for (int i = skip; i < env->m->nq; i++) obs[k++] = d->qpos[i];
    for (int i = 0; i < env->m->nv; i++) obs[k++] = d->qvel[i];
}

/* Info slot 2, x_position (also gymnasium's whole reset info). */
static void half_cheetah_positions(const mujoco_env* env, double* info) {
    info[2] = env->d->qpos[0];
}

static int half_cheetah_step(mujoco_env* env, const float* action, double* obs, double* reward) {
    const double* cfg = env->cfg;
    const double x_before = env->d->qpos[0];
    mujoco_simulate(env, action);
    const double x_after = env->d->qpos[0];
    const double x_velocity = (x_after - x_before) / env->dt;
    const double forward = cfg[HALF_CHEETAH_FORWARD_REWARD_WEIGHT] * x_velocity;
    const double ctrl = mujoco_ctrl_cost(cfg[HALF_CHEETAH_CTRL_COST_WEIGHT], action, env->m->nu);
    *reward = forward - ctrl;
    double* info = env->state->info;
    info[0] = forward;
    info[1] = -ctrl;
    half_cheetah_positions(env, info);
    info[3] = x_velocity;
    half_cheetah_observe(env, obs);
    return 0;
}

static void half_cheetah_reset_model(mujoco_env* env) {
    mujoco_reset_noise(env, env->cfg[HALF_CHEETAH_RESET_NOISE_SCALE], 1);
}

static const mujoco_kind half_cheetah_kind = {
    "HalfCheetah", half_cheetah_observe, half_cheetah_step, half_cheetah_reset_model,
    half_cheetah_obs_size, 0, half_cheetah_positions,
};

#endif
