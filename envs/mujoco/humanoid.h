/* Humanoid-v5 (gymnasium), over MuJoCo's C API.
 *
 * Model: gymnasium's humanoid.xml: a 3D humanoid, 24 qpos (free root joint:
 * x, y, z, quaternion; 17 hinges), 23 qvel, 14 bodies (the world included),
 * 17 actuators in [-0.4, 0.4].
 * Observation (348 doubles with the defaults), in this order:
 *     qpos[2:] (all of qpos with exclude_current_positions_from_observation=False),
 *     qvel,
 *     cinert[1:]         13 x 10, if include_cinert_in_observation,
 *     cvel[1:]           13 x 6,  if include_cvel_in_observation,
 *     qfrc_actuator[6:]  17,      if include_qfrc_actuator_in_observation,
 *     cfrc_ext[1:]       13 x 6,  if include_cfrc_ext_in_observation
 *     (the [1:] drop the world body; [6:] the free joint's dofs).
 * Reward: healthy_reward + forward_reward - (ctrl_cost + contact_cost), with
 *     forward_reward = forward_reward_weight * x_velocity, x_velocity the x
 *         of (mass_center after - mass_center before) / dt, dt = timestep *
 *         frame_skip, mass_center = sum(body_mass * xipos) / sum(body_mass);
 *     healthy_reward = healthy_reward (the parameter) while healthy, else 0;
 *     ctrl_cost = ctrl_cost_weight * sum(ctrl^2), float64: gymnasium reads
 *         data.ctrl, not the float32 action;
 *     contact_cost = clip(contact_cost_weight * sum(cfrc_ext^2), contact_cost_range),
 *         over all bodies, the world's included.
 * Healthy (on the state after the step): healthy_z_range[0] < qpos[2] <
 *     healthy_z_range[1] (bounds strict).
 * Termination: unhealthy, when terminate_when_unhealthy.
 * Reset noise: qpos = qpos0 + U(-s, s), qvel = U(-s, s), s = reset_noise_scale.
 * Info slots: reward_survive, reward_forward, reward_ctrl, reward_contact,
 *     x_position (qpos[0]), y_position (qpos[1]), distance_from_origin
 *     (|qpos[0:2]|), x_velocity. gymnasium's y_velocity has no slot (8 at
 *     most), nor its tendon_length and tendon_velocity (arrays, 2 tendons).
 */
#ifndef SHOAL_MUJOCO_HUMANOID_H
#define SHOAL_MUJOCO_HUMANOID_H

#include "shoal_mujoco.h"

/* env->cfg, in the order of envs/mujoco/__init__.py's Humanoid params (each
 * range takes two slots: low, high). */
enum { HUMANOID_FORWARD_REWARD_WEIGHT, HUMANOID_CTRL_COST_WEIGHT, HUMANOID_CONTACT_COST_WEIGHT,
       HUMANOID_CONTACT_COST_LOW, HUMANOID_CONTACT_COST_HIGH, HUMANOID_HEALTHY_REWARD,
       HUMANOID_TERMINATE_WHEN_UNHEALTHY, HUMANOID_Z_LOW, HUMANOID_Z_HIGH,
       HUMANOID_RESET_NOISE_SCALE, HUMANOID_EXCLUDE_XY, HUMANOID_INCLUDE_CINERT,
       HUMANOID_INCLUDE_CVEL, HUMANOID_INCLUDE_QFRC_ACTUATOR, HUMANOID_INCLUDE_CFRC_EXT };

enum { HUMANOID_ROOT_DOFS = 6 };   /* the free joint's qvel entries */

static int humanoid_obs_size(const mjModel* m, const double* cfg) {
    const int bodies = m->nbody - 1;   /* without the world body */
    return m->nq - 2 * (cfg[HUMANOID_EXCLUDE_XY] != 0.0) + m->nv
        + 10 * bodies * (cfg[HUMANOID_INCLUDE_CINERT] != 0.0)
        + 6 * bodies * (cfg[HUMANOID_INCLUDE_CVEL] != 0.0)
        + (m->nv - HUMANOID_ROOT_DOFS) * (cfg[HUMANOID_INCLUDE_QFRC_ACTUATOR] != 0.0)
        + 6 * bodies * (cfg[HUMANOID_INCLUDE_CFRC_EXT] != 0.0);
}

static void humanoid_observe(const mujoco_env* env, double* obs) {
    const mjModel* m = env->m;
    const mjData* d = env->d;
    const double* cfg = env->cfg;
    int k = 0;
    for (int i = 2 * (cfg[HUMANOID_EXCLUDE_XY] != 0.0); i < m->nq; i++) obs[k++] = d->qpos[i];
    for (int i = 0; i < m->nv; i++) obs[k++] = d->qvel[i];
    /* per-body rows start at body 1: no world body */
    if (cfg[HUMANOID_INCLUDE_CINERT] != 0.0)
        for (int i = 10; i < 10 * m->nbody; i++) obs[k++] = d->cinert[i];
    if (cfg[HUMANOID_INCLUDE_CVEL] != 0.0)
        for (int i = 6; i < 6 * m->nbody; i++) obs[k++] = d->cvel[i];
    if (cfg[HUMANOID_INCLUDE_QFRC_ACTUATOR] != 0.0)
        for (int i = HUMANOID_ROOT_DOFS; i < m->nv; i++) obs[k++] = d->qfrc_actuator[i];
    if (cfg[HUMANOID_INCLUDE_CFRC_EXT] != 0.0)
        for (int i = 6; i < 6 * m->nbody; i++) obs[k++] = d->cfrc_ext[i];
}

/* sum(x) of n float64 values as numpy computes it (pairwise summation, as
 * mujoco_sum_clipped_squares_f64), for body_mass.sum(). */
static double humanoid_pairwise_sum(const double* x, int n) {
    if (n < 8) {
        double s = 0.0;
        for (int i = 0; i < n; i++) s += x[i];
        return s;
    }
    if (n <= 128) {
        double r[8];
        for (int j = 0; j < 8; j++) r[j] = x[j];
        int i = 8;
        for (; i < n - (n % 8); i += 8)
            for (int j = 0; j < 8; j++) r[j] += x[i + j];
        double s = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
        for (; i < n; i++) s += x[i];
        return s;
    }
    int half = n / 2;
    half -= half % 8;
    return humanoid_pairwise_sum(x, half) + humanoid_pairwise_sum(x + half, n - half);
}

/* x of gymnasium's mass_center: einsum("b,bj->j", body_mass, xipos) (a
 * running sum over the bodies in order) over body_mass.sum(). xipos is as
 * mj_step left it, the last substep's start, which gymnasium reads too. */
static double humanoid_mass_center(const mujoco_env* env, int axis) {
    const mjModel* m = env->m;
    double weighted = 0.0;
    for (int b = 0; b < m->nbody; b++) weighted += m->body_mass[b] * env->d->xipos[3 * b + axis];
    return weighted / humanoid_pairwise_sum(m->body_mass, m->nbody);
}

static int humanoid_is_healthy(const mujoco_env* env) {
    const double z = env->d->qpos[2];
    return env->cfg[HUMANOID_Z_LOW] < z && z < env->cfg[HUMANOID_Z_HIGH];
}

/* Info slots 4-6: x_position, y_position, distance_from_origin; 9-12: the
 * tendon arrays (together gymnasium's reset info). */
static void humanoid_positions(const mujoco_env* env, double* info) {
    const double* qpos = env->d->qpos;
    info[4] = qpos[0];
    info[5] = qpos[1];
    info[6] = sqrt(qpos[0] * qpos[0] + qpos[1] * qpos[1]);
    mujoco_tendon_info(env, info, 9);
}

static int humanoid_step(mujoco_env* env, const float* action, double* obs, double* reward) {
    const mjModel* m = env->m;
    const double* cfg = env->cfg;
    const double x_before = humanoid_mass_center(env, 0), y_before = humanoid_mass_center(env, 1);
    mujoco_simulate(env, action);
    const mjData* d = env->d;
    const double x_velocity = (humanoid_mass_center(env, 0) - x_before) / env->dt;
    const double y_velocity = (humanoid_mass_center(env, 1) - y_before) / env->dt;
    const int healthy = humanoid_is_healthy(env);
    const double forward = cfg[HUMANOID_FORWARD_REWARD_WEIGHT] * x_velocity;
    const double survive = healthy ? cfg[HUMANOID_HEALTHY_REWARD] : 0.0;
    const double ctrl = cfg[HUMANOID_CTRL_COST_WEIGHT]
        * mujoco_sum_clipped_squares_f64(d->ctrl, m->nu, -INFINITY, INFINITY);
    const double contact = mujoco_clip(
        cfg[HUMANOID_CONTACT_COST_WEIGHT]
            * mujoco_sum_clipped_squares_f64(d->cfrc_ext, 6 * m->nbody, -INFINITY, INFINITY),
        cfg[HUMANOID_CONTACT_COST_LOW], cfg[HUMANOID_CONTACT_COST_HIGH]);
    *reward = (forward + survive) - (ctrl + contact);
    double* info = env->state->info;
    info[0] = survive;
    info[1] = forward;
    info[2] = -ctrl;
    info[3] = -contact;
    humanoid_positions(env, info);
    info[7] = x_velocity;
    info[8] = y_velocity;
    humanoid_observe(env, obs);
    return !healthy && cfg[HUMANOID_TERMINATE_WHEN_UNHEALTHY] != 0.0;
}

static void humanoid_reset_model(mujoco_env* env) {
    mujoco_reset_noise(env, env->cfg[HUMANOID_RESET_NOISE_SCALE], 0);
}

/* cfrc_ext (obs and contact cost) is filled by mj_rnePostConstraint. */
static const mujoco_kind humanoid_kind = {
    "Humanoid", humanoid_observe, humanoid_step, humanoid_reset_model, humanoid_obs_size, 1,
    humanoid_positions,
};

#endif
