/* Swimmer-v5 (gymnasium), over MuJoCo's C API.
 *
 * Model: gymnasium's swimmer.xml: a three-link swimmer in a viscous fluid,
 * 5 qpos (slider x, slider y, free rotation, 2 joints), 5 qvel, 2 actuators
 * in [-1, 1].
 * Observation (8 doubles): qpos[2:] then qvel (10 with
 *     exclude_current_positions_from_observation=False: qpos[0:2] too).
 * Reward: forward_reward_weight * x_velocity - ctrl_cost_weight * sum(action^2),
 *     x_velocity = (x after - x before) / dt, dt = timestep * frame_skip;
 *     the control cost is float32, as numpy computes it on the float32 action.
 * Termination: never (episodes end by truncation at max_episode_steps).
 * Reset noise: qpos = qpos0 + U(-s, s), qvel = U(-s, s), s = reset_noise_scale.
 * Info slots: reward_forward, reward_ctrl, x_position, y_position,
 *     distance_from_origin, x_velocity, y_velocity.
 */
#ifndef SHOAL_MUJOCO_SWIMMER_H
#define SHOAL_MUJOCO_SWIMMER_H

#include "shoal_mujoco.h"

/* env->cfg, in the order of envs/mujoco/__init__.py's Swimmer params. */
enum { SWIMMER_FORWARD_REWARD_WEIGHT, SWIMMER_CTRL_COST_WEIGHT, SWIMMER_RESET_NOISE_SCALE,
       SWIMMER_EXCLUDE_XY };

static int swimmer_obs_size(const mjModel* m, const double* cfg) {
    return m->nq + m->nv - 2 * (cfg[SWIMMER_EXCLUDE_XY] != 0.0);
}

static void swimmer_observe(const mujoco_env* env, double* obs) {
    const mjData* d = env->d;
    const int skip = 2 * (env->cfg[SWIMMER_EXCLUDE_XY] != 0.0);
    int k = 0;
    for (int i = skip; i < env->m->nq; i++) obs[k++] = d->qpos[i];
    for (int i = 0; i < env->m->nv; i++) obs[k++] = d->qvel[i];
}

/* Info slots 2-4: x_position, y_position, distance_from_origin (also
 * gymnasium's whole reset info). */
static void swimmer_positions(const mujoco_env* env, double* info) {
    const double* qpos = env->d->qpos;
    info[2] = qpos[0];
    info[3] = qpos[1];
    info[4] = sqrt(qpos[0] * qpos[0] + qpos[1] * qpos[1]);
}

static int swimmer_step(mujoco_env* env, const float* action, double* obs, double* reward) {
    const double* cfg = env->cfg;
    const double x_before = env->d->qpos[0], y_before = env->d->qpos[1];
    mujoco_simulate(env, action);
    const double x_after = env->d->qpos[0], y_after = env->d->qpos[1];
    const double x_velocity = (x_after - x_before) / env->dt;
    const double y_velocity = (y_after - y_before) / env->dt;
    const double forward = cfg[SWIMMER_FORWARD_REWARD_WEIGHT] * x_velocity;
    const double ctrl = mujoco_ctrl_cost(cfg[SWIMMER_CTRL_COST_WEIGHT], action, env->m->nu);
    *reward = forward - ctrl;
    double* info = env->state->info;
    info[0] = forward;
    info[1] = -ctrl;
    swimmer_positions(env, info);
    info[5] = x_velocity;
    info[6] = y_velocity;
    swimmer_observe(env, obs);
    return 0;
}

static void swimmer_reset_model(mujoco_env* env) {
    mujoco_reset_noise(env, env->cfg[SWIMMER_RESET_NOISE_SCALE], 0);
}

static const mujoco_kind swimmer_kind = {
    "Swimmer", swimmer_observe, swimmer_step, swimmer_reset_model, swimmer_obs_size, 0,
    swimmer_positions,
};

#endif
