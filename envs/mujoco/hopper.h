/* Hopper-v5 (gymnasium), over MuJoCo's C API.
 *
 * Model: gymnasium's hopper.xml: a planar one-legged hopper, 6 qpos
 * (rootx, rootz, rooty, thigh, leg, foot), 6 qvel, 3 actuators in [-1, 1].
 * Observation (11 doubles): qpos[1:] then clip(qvel, -10, 10) (12 with
 *     exclude_current_positions_from_observation=False: qpos[0] too).
 * Reward: forward_reward + healthy_reward - ctrl_cost, with
 *     forward_reward = forward_reward_weight * x_velocity,
 *         x_velocity = (qpos[0] after - qpos[0] before) / dt, dt = timestep * frame_skip;
 *     healthy_reward = healthy_reward (the parameter) while healthy, else 0;
 *     ctrl_cost = ctrl_cost_weight * sum(action^2), float32 as numpy computes
 *         it on the float32 action.
 * Healthy (all bounds strict, on the state after the step): every value of
 *     (qpos[2:], qvel) inside healthy_state_range, z = qpos[1] inside
 *     healthy_z_range, angle = qpos[2] inside healthy_angle_range.
 * Termination: unhealthy, when terminate_when_unhealthy.
 * Reset noise: qpos = qpos0 + U(-s, s), qvel = U(-s, s), s = reset_noise_scale.
 * Info slots: reward_forward, reward_ctrl, reward_survive, x_position,
 *     z_distance_from_origin (qpos[1] - qpos0[1]), x_velocity.
 */
#ifndef SHOAL_MUJOCO_HOPPER_H
#define SHOAL_MUJOCO_HOPPER_H

#include "shoal_mujoco.h"

/* env->cfg, in the order of envs/mujoco/__init__.py's Hopper params. */
enum { HOPPER_FORWARD_REWARD_WEIGHT, HOPPER_CTRL_COST_WEIGHT, HOPPER_HEALTHY_REWARD,
       HOPPER_TERMINATE_WHEN_UNHEALTHY, HOPPER_STATE_LOW, HOPPER_STATE_HIGH,
       HOPPER_Z_LOW, HOPPER_Z_HIGH, HOPPER_ANGLE_LOW, HOPPER_ANGLE_HIGH,
       HOPPER_RESET_NOISE_SCALE, HOPPER_EXCLUDE_X };

/* gymnasium clips the observed velocities (not the state it checks). */
#define HOPPER_OBS_VELOCITY_LIMIT 10.0

static int hopper_obs_size(const mjModel* m, const double* cfg) {
    return m->nq + m->nv - (cfg[HOPPER_EXCLUDE_X] != 0.0);
}

static void hopper_observe(const mujoco_env* env, double* obs) {
    const mjData* d = env->d;
    const int skip = env->cfg[HOPPER_EXCLUDE_X] != 0.0;
    int k = 0;
    for (int i = skip; i < env->m->nq; i++) obs[k++] = d->qpos[i];
    for (int i = 0; i < env->m->nv; i++) {
        double v = d->qvel[i];
        /* as np.clip: the comparisons leave NaN as it is */
        if (v < -HOPPER_OBS_VELOCITY_LIMIT) v = -HOPPER_OBS_VELOCITY_LIMIT;
        if (v > HOPPER_OBS_VELOCITY_LIMIT) v = HOPPER_OBS_VELOCITY_LIMIT;
        obs[k++] = v;
    }
}

static int hopper_is_healthy(const mujoco_env* env) {
    const double* cfg = env->cfg;
    const mjData* d = env->d;
    const double low = cfg[HOPPER_STATE_LOW], high = cfg[HOPPER_STATE_HIGH];
    /* gymnasium's state_vector()[2:]: qpos[2:] then all of qvel. Written as
     * !(low < x && x < high) so that NaN counts as unhealthy, as in numpy. */
    for (int i = 2; i < env->m->nq; i++)
        if (!(low < d->qpos[i] && d->qpos[i] < high)) return 0;
    for (int i = 0; i < env->m->nv; i++)
        if (!(low < d->qvel[i] && d->qvel[i] < high)) return 0;
    const double z = d->qpos[1], angle = d->qpos[2];
    return cfg[HOPPER_Z_LOW] < z && z < cfg[HOPPER_Z_HIGH]
        && cfg[HOPPER_ANGLE_LOW] < angle && angle < cfg[HOPPER_ANGLE_HIGH];
}

/* Info slots 3, 4: x_position, z_distance_from_origin (also gymnasium's
 * whole reset info). */
static void hopper_positions(const mujoco_env* env, double* info) {
    info[3] = env->d->qpos[0];
    info[4] = env->d->qpos[1] - env->m->qpos0[1];
}

static int hopper_step(mujoco_env* env, const float* action, double* obs, double* reward) {
    const double* cfg = env->cfg;
    const double x_before = env->d->qpos[0];
    mujoco_simulate(env, action);
    const double x_after = env->d->qpos[0];
    const double x_velocity = (x_after - x_before) / env->dt;
    const int healthy = hopper_is_healthy(env);
    const double forward = cfg[HOPPER_FORWARD_REWARD_WEIGHT] * x_velocity;
    const double survive = healthy ? cfg[HOPPER_HEALTHY_REWARD] : 0.0;
    const double ctrl = mujoco_ctrl_cost(cfg[HOPPER_CTRL_COST_WEIGHT], action, env->m->nu);
    *reward = (forward + survive) - ctrl;
    double* info = env->state->info;
    info[0] = forward;
    info[1] = -ctrl;
    info[2] = survive;
    hopper_positions(env, info);
    info[5] = x_velocity;
    hopper_observe(env, obs);
    return !healthy && cfg[HOPPER_TERMINATE_WHEN_UNHEALTHY] != 0.0;
}

static void hopper_reset_model(mujoco_env* env) {
    mujoco_reset_noise(env, env->cfg[HOPPER_RESET_NOISE_SCALE], 0);
}

static const mujoco_kind hopper_kind = {
    "Hopper", hopper_observe, hopper_step, hopper_reset_model, hopper_obs_size, 0,
    hopper_positions,
};

#endif
