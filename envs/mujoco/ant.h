/* Ant-v5 (gymnasium), over MuJoCo's C API.
 *
 * Model: gymnasium's ant.xml: a 3D four-legged ant, 15 qpos (free root
 * joint: x, y, z, quaternion; 8 hinges), 14 qvel, 14 bodies (the world
 * included), 8 actuators in [-1, 1].
 * Observation (105 doubles with the defaults), in this order:
 *     qpos[2:] (all of qpos with exclude_current_positions_from_observation=False),
 *     qvel,
 *     clip(cfrc_ext, contact_force_range)[1:]  13 x 6, if include_cfrc_ext_in_observation
 *     (the [1:] drops the world body).
 * Reward: forward_reward + healthy_reward - (ctrl_cost + contact_cost), with
 *     forward_reward = forward_reward_weight * x_velocity, x_velocity the
 *         x of (xpos[main_body] after - xpos[main_body] before) / dt,
 *         dt = timestep * frame_skip (main_body is a body index);
 *     healthy_reward = healthy_reward (the parameter) while healthy, else 0;
 *     ctrl_cost = ctrl_cost_weight * sum(action^2), float32 as numpy computes
 *         it on the float32 action;
 *     contact_cost = contact_cost_weight * sum(clip(cfrc_ext, contact_force_range)^2)
 *         over all bodies, the world's included, in float64.
 * Healthy (on the state after the step): every qpos and qvel finite and
 *     healthy_z_range[0] <= qpos[2] <= healthy_z_range[1] (bounds included).
 * Termination: unhealthy, when terminate_when_unhealthy.
 * Reset noise: qpos = qpos0 + U(-s, s), qvel = s * N(0, 1), s = reset_noise_scale.
 * Info slots: reward_forward, reward_ctrl, reward_contact, reward_survive,
 *     x_position (qpos[0]), y_position (qpos[1]), distance_from_origin
 *     (|qpos[0:2]|), x_velocity. gymnasium's y_velocity has no slot (8 at most).
 */
#ifndef SHOAL_MUJOCO_ANT_H
#define SHOAL_MUJOCO_ANT_H

#include "shoal_mujoco.h"

/* env->cfg, in the order of envs/mujoco/__init__.py's Ant params (each
 * range takes two slots: low, high). */
enum { ANT_FORWARD_REWARD_WEIGHT, ANT_CTRL_COST_WEIGHT, ANT_CONTACT_COST_WEIGHT,
       ANT_HEALTHY_REWARD, ANT_MAIN_BODY, ANT_TERMINATE_WHEN_UNHEALTHY,
       ANT_Z_LOW, ANT_Z_HIGH, ANT_CONTACT_FORCE_LOW, ANT_CONTACT_FORCE_HIGH,
       ANT_RESET_NOISE_SCALE, ANT_EXCLUDE_XY, ANT_INCLUDE_CFRC_EXT };

static int ant_obs_size(const mjModel* m, const double* cfg) {
    /* A main_body the model does not have cannot be stepped: the size -1
     * makes the binding refuse the env (its spec's obs size disagrees). */
    if (cfg[ANT_MAIN_BODY] < 0 || cfg[ANT_MAIN_BODY] >= m->nbody) return -1;
    return m->nq - 2 * (cfg[ANT_EXCLUDE_XY] != 0.0) + m->nv
        + 6 * (m->nbody - 1) * (cfg[ANT_INCLUDE_CFRC_EXT] != 0.0);
}

static void ant_observe(const mujoco_env* env, double* obs) {
    const mjModel* m = env->m;
    const mjData* d = env->d;
    const double* cfg = env->cfg;
    int k = 0;
    for (int i = 2 * (cfg[ANT_EXCLUDE_XY] != 0.0); i < m->nq; i++) obs[k++] = d->qpos[i];
    for (int i = 0; i < m->nv; i++) obs[k++] = d->qvel[i];
    if (cfg[ANT_INCLUDE_CFRC_EXT] != 0.0)
        for (int i = 6; i < 6 * m->nbody; i++)   /* from body 1: no world body */
            obs[k++] = mujoco_clip(d->cfrc_ext[i], cfg[ANT_CONTACT_FORCE_LOW],
                                   cfg[ANT_CONTACT_FORCE_HIGH]);
}

static int ant_is_healthy(const mujoco_env* env) {
    const mjData* d = env->d;
    for (int i = 0; i < env->m->nq; i++) if (!isfinite(d->qpos[i])) return 0;
    for (int i = 0; i < env->m->nv; i++) if (!isfinite(d->qvel[i])) return 0;
    const double z = d->qpos[2];
    return env->cfg[ANT_Z_LOW] <= z && z <= env->cfg[ANT_Z_HIGH];
}

/* Info slots 4-6: x_position, y_position, distance_from_origin (also
 * gymnasium's reset info). */
static void ant_positions(const mujoco_env* env, double* info) {
    const double* qpos = env->d->qpos;
    info[4] = qpos[0];
    info[5] = qpos[1];
    info[6] = sqrt(qpos[0] * qpos[0] + qpos[1] * qpos[1]);
}

static int ant_step(mujoco_env* env, const float* action, double* obs, double* reward) {
    const mjModel* m = env->m;
    const double* cfg = env->cfg;
    /* gymnasium's data.body(main_body).xpos: as mj_step left it, i.e. the
     * kinematics of the last substep's start, which is what it reads too. */
    const double* main_xpos = env->d->xpos + 3 * (int)cfg[ANT_MAIN_BODY];
    const double x_before = main_xpos[0], y_before = main_xpos[1];
    mujoco_simulate(env, action);
    const mjData* d = env->d;
    const double x_velocity = (main_xpos[0] - x_before) / env->dt;
    const double y_velocity = (main_xpos[1] - y_before) / env->dt;
    const int healthy = ant_is_healthy(env);
    const double forward = x_velocity * cfg[ANT_FORWARD_REWARD_WEIGHT];
    const double survive = healthy ? cfg[ANT_HEALTHY_REWARD] : 0.0;
    const double ctrl = mujoco_ctrl_cost(cfg[ANT_CTRL_COST_WEIGHT], action, m->nu);
    const double contact = cfg[ANT_CONTACT_COST_WEIGHT] * mujoco_sum_clipped_squares_f64(
        d->cfrc_ext, 6 * m->nbody, cfg[ANT_CONTACT_FORCE_LOW], cfg[ANT_CONTACT_FORCE_HIGH]);
    *reward = (forward + survive) - (ctrl + contact);
    double* info = env->state->info;
    info[0] = forward;
    info[1] = -ctrl;
    info[2] = -contact;
    info[3] = survive;
    ant_positions(env, info);
    info[7] = x_velocity;
    info[8] = y_velocity;
    ant_observe(env, obs);
    return !healthy && cfg[ANT_TERMINATE_WHEN_UNHEALTHY] != 0.0;
}

static void ant_reset_model(mujoco_env* env) {
    mujoco_reset_noise(env, env->cfg[ANT_RESET_NOISE_SCALE], 1);
}

/* cfrc_ext (obs and contact cost) is filled by mj_rnePostConstraint. */
static const mujoco_kind ant_kind = {
    "Ant", ant_observe, ant_step, ant_reset_model, ant_obs_size, 1,
    ant_positions,
};

#endif
