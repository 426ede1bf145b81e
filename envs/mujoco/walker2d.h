/* Walker2d-v5 (gymnasium), over MuJoCo's C API.
 *
 * Model: gymnasium's walker2d_v5.xml: a planar two-legged walker, 9 qpos
 * (rootx, rootz, rooty, 3 right-leg joints, 3 left-leg joints), 9 qvel,
 * 6 actuators in [-1, 1].
 * Observation (17 doubles): qpos[1:] then clip(qvel, -10, 10) (18 with
 *     exclude_current_positions_from_observation=False: qpos[0] too).
 * Reward: forward_reward + healthy_reward - ctrl_cost, with
 *     forward_reward = forward_reward_weight * x_velocity,
 *         x_velocity = (qpos[0] after - qpos[0] before) / dt, dt = timestep * frame_skip;
 *     healthy_reward = healthy_reward (the parameter) while healthy, else 0;
 *     ctrl_cost = ctrl_cost_weight * sum(action^2), float32 as numpy computes
 *         it on the float32 action.
 * Healthy (bounds strict, on the state after the step): z = qpos[1] inside
 *     healthy_z_range and angle = qpos[2] inside healthy_angle_range.
 * Termination: unhealthy, when terminate_when_unhealthy.
 * Reset noise: qpos = qpos0 + U(-s, s), qvel = U(-s, s), s = reset_noise_scale.
 * Info slots: reward_forward, reward_ctrl, reward_survive, x_position,
 *     z_distance_from_origin (qpos[1] - qpos0[1]), x_velocity.
 */
#ifndef SHOAL_MUJOCO_WALKER2D_H
#define SHOAL_MUJOCO_WALKER2D_H

#include "shoal_mujoco.h"

/* env->cfg, in the order of envs/mujoco/__init__.py's Walker2d params. */
enum { WALKER2D_FORWARD_REWARD_WEIGHT, WALKER2D_CTRL_COST_WEIGHT, WALKER2D_HEALTHY_REWARD,
       WALKER2D_TERMINATE_WHEN_UNHEALTHY, WALKER2D_Z_LOW, WALKER2D_Z_HIGH,
       WALKER2D_ANGLE_LOW, WALKER2D_ANGLE_HIGH, WALKER2D_RESET_NOISE_SCALE,
       WALKER2D_EXCLUDE_X };

/* gymnasium clips the observed velocities (not the state it checks). */
#define WALKER2D_OBS_VELOCITY_LIMIT 10.0

static int walker2d_obs_size(const mjModel* m, const double* cfg) {
    return m->nq + m->nv - (cfg[WALKER2D_EXCLUDE_X] != 0.0);
}

static void walker2d_observe(const mujoco_env* env, double* obs) {
    const mjData* d = env->d;
    const int skip = env->cfg[WALKER2D_EXCLUDE_X] != 0.0;
    int k = 0;
    for (int i = skip; i < env->m->nq; i++) obs[k++] = d->qpos[i];
    for (int i = 0; i < env->m->nv; i++) {
        double v = d->qvel[i];
        /* as np.clip: the comparisons leave NaN as it is */
        if (v < -WALKER2D_OBS_VELOCITY_LIMIT) v = -WALKER2D_OBS_VELOCITY_LIMIT;
        if (v > WALKER2D_OBS_VELOCITY_LIMIT) v = WALKER2D_OBS_VELOCITY_LIMIT;
        obs[k++] = v;
    }
}

static int walker2d_is_healthy(const mujoco_env* env) {
    const double* cfg = env->cfg;
    const double z = env->d->qpos[1], angle = env->d->qpos[2];
    return cfg[WALKER2D_Z_LOW] < z && z < cfg[WALKER2D_Z_HIGH]
        && cfg[WALKER2D_ANGLE_LOW] < angle && angle < cfg[WALKER2D_ANGLE_HIGH];
}

/* Info slots 3, 4: x_position, z_distance_from_origin (also gymnasium's
 * whole reset info). */
static void walker2d_positions(const mujoco_env* env, double* info) {
    info[3] = env->d->qpos[0];
    info[4] = env->d->qpos[1] - env->m->qpos0[1];
}

static int walker2d_step(mujoco_env* env, const float* action, double* obs, double* reward) {
    const double* cfg = env->cfg;
    const double x_before = env->d->qpos[0];
    mujoco_simulate(env, action);
    const double x_after = env->d->qpos[0];
    const double x_velocity = (x_after - x_before) / env->dt;
    const int healthy = walker2d_is_healthy(env);
    const double forward = cfg[WALKER2D_FORWARD_REWARD_WEIGHT] * x_velocity;
    const double survive = healthy ? cfg[WALKER2D_HEALTHY_REWARD] : 0.0;
    const double ctrl = mujoco_ctrl_cost(cfg[WALKER2D_CTRL_COST_WEIGHT], action, env->m->nu);
    *reward = (forward + survive) - ctrl;
    double* info = env->state->info;
    info[0] = forward;
    info[1] = -ctrl;
    info[2] = survive;
    walker2d_positions(env, info);
    info[5] = x_velocity;
    walker2d_observe(env, obs);
    return !healthy && cfg[WALKER2D_TERMINATE_WHEN_UNHEALTHY] != 0.0;
}

static void walker2d_reset_model(mujoco_env* env) {
    mujoco_reset_noise(env, env->cfg[WALKER2D_RESET_NOISE_SCALE], 0);
}

static const mujoco_kind walker2d_kind = {
    "Walker2d", walker2d_observe, walker2d_step, walker2d_reset_model, walker2d_obs_size, 0,
    walker2d_positions,
};

#endif
