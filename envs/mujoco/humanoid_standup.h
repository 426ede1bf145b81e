/* HumanoidStandup-v5 (gymnasium), over MuJoCo's C API.
 *
 * Model: gymnasium's humanoidstandup.xml: the 3D humanoid lying on the
 * ground, 24 qpos (free root joint: x, y, z, quaternion; 17 hinges), 23 qvel,
 * 14 bodies (the world included), 17 actuators in [-0.4, 0.4].
 * Observation (348 doubles with the defaults), in this order:
 *     qpos[2:] (qpos with exclude_current_positions_from_observation=False),
 *     qvel,
 *     cinert[1:]         13 x 10, if include_cinert_in_observation,
 *     cvel[1:]           13 x 6,  if include_cvel_in_observation,
 *     qfrc_actuator[6:]  17,      if include_qfrc_actuator_in_observation,
 *     cfrc_ext[1:]       13 x 6,  if include_cfrc_ext_in_observation
 *     (the [1:] drop the world body; [6:] the free joint's dofs).
 * Reward: uph_cost - quad_ctrl_cost - quad_impact_cost + 1, from the state
 *     after the step:
 *     uph_cost = qpos[2] / timestep (the model's timestep, not dt),
 *     quad_ctrl_cost = ctrl_cost_weight * sum(ctrl^2) (float64: gymnasium
 *         reads data.ctrl, not the float32 action),
 *     quad_impact_cost = clip(impact_cost_weight * sum(cfrc_ext^2),
 *         impact_cost_range), all bodies, the world's (zero) included.
 *     uph_cost_weight is accepted and unused, as in gymnasium v5.
 * Termination: never (episodes end by truncation at max_episode_steps).
 * Reset noise: qpos = qpos0 + U(-s, s), qvel = U(-s, s), s = reset_noise_scale.
 * Info slots: reward_linup, reward_quadctrl, reward_impact, x_position,
 *     y_position, z_distance_from_origin (qpos[2] - qpos0[2]). gymnasium's
 *     tendon_length and tendon_velocity are arrays (2 tendons) and have no slot.
 */
#ifndef SHOAL_MUJOCO_HUMANOID_STANDUP_H
#define SHOAL_MUJOCO_HUMANOID_STANDUP_H

#include "shoal_mujoco.h"

/* env->cfg, in the order of envs/mujoco/__init__.py's HumanoidStandup params
 * (impact_cost_range takes two slots: low, high). */
enum { HUMANOID_STANDUP_UPH_COST_WEIGHT, HUMANOID_STANDUP_CTRL_COST_WEIGHT,
       HUMANOID_STANDUP_IMPACT_COST_WEIGHT, HUMANOID_STANDUP_IMPACT_COST_LOW,
       HUMANOID_STANDUP_IMPACT_COST_HIGH, HUMANOID_STANDUP_RESET_NOISE_SCALE,
       HUMANOID_STANDUP_EXCLUDE_XY, HUMANOID_STANDUP_INCLUDE_CINERT,
       HUMANOID_STANDUP_INCLUDE_CVEL, HUMANOID_STANDUP_INCLUDE_QFRC_ACTUATOR,
       HUMANOID_STANDUP_INCLUDE_CFRC_EXT };

enum { HUMANOID_STANDUP_ROOT_DOFS = 6 };   /* the free joint's qvel entries */

static int humanoid_standup_obs_size(const mjModel* m, const double* cfg) {
    const int bodies = m->nbody - 1;   /* without the world body */
    return m->nq - 2 * (cfg[HUMANOID_STANDUP_EXCLUDE_XY] != 0.0) + m->nv
        + 10 * bodies * (cfg[HUMANOID_STANDUP_INCLUDE_CINERT] != 0.0)
        + 6 * bodies * (cfg[HUMANOID_STANDUP_INCLUDE_CVEL] != 0.0)
        + (m->nv - HUMANOID_STANDUP_ROOT_DOFS) * (cfg[HUMANOID_STANDUP_INCLUDE_QFRC_ACTUATOR] != 0.0)
        + 6 * bodies * (cfg[HUMANOID_STANDUP_INCLUDE_CFRC_EXT] != 0.0);
}

static void humanoid_standup_observe(const mujoco_env* env, double* obs) {
    const mjModel* m = env->m;
    const mjData* d = env->d;
    const double* cfg = env->cfg;
    int k = 0;
    for (int i = 2 * (cfg[HUMANOID_STANDUP_EXCLUDE_XY] != 0.0); i < m->nq; i++) obs[k++] = d->qpos[i];
    for (int i = 0; i < m->nv; i++) obs[k++] = d->qvel[i];
    if (cfg[HUMANOID_STANDUP_INCLUDE_CINERT] != 0.0)
        for (int i = 10; i < 10 * m->nbody; i++) obs[k++] = d->cinert[i];
    if (cfg[HUMANOID_STANDUP_INCLUDE_CVEL] != 0.0)
        for (int i = 6; i < 6 * m->nbody; i++) obs[k++] = d->cvel[i];
    if (cfg[HUMANOID_STANDUP_INCLUDE_QFRC_ACTUATOR] != 0.0)
        for (int i = HUMANOID_STANDUP_ROOT_DOFS; i < m->nv; i++) obs[k++] = d->qfrc_actuator[i];
    if (cfg[HUMANOID_STANDUP_INCLUDE_CFRC_EXT] != 0.0)
        for (int i = 6; i < 6 * m->nbody; i++) obs[k++] = d->cfrc_ext[i];
}

/* Info slots 3-5: x_position, y_position, z_distance_from_origin; 6-9: the
 * tendon arrays (together gymnasium's reset info). */
static void humanoid_standup_positions(const mujoco_env* env, double* info) {
    const double* qpos = env->d->qpos;
    info[3] = qpos[0];
    info[4] = qpos[1];
    info[5] = qpos[2] - env->m->qpos0[2];
    mujoco_tendon_info(env, info, 6);
}

static int humanoid_standup_step(mujoco_env* env, const float* action, double* obs,
                                 double* reward) {
    const mjModel* m = env->m;
    const double* cfg = env->cfg;
    mujoco_simulate(env, action);
    const mjData* d = env->d;
    const double uph_cost = (d->qpos[2] - 0.0) / m->opt.timestep;
    /* float64 sums of squares, pairwise as numpy sums them. */
    const double quad_ctrl_cost = cfg[HUMANOID_STANDUP_CTRL_COST_WEIGHT]
        * mujoco_sum_clipped_squares_f64(d->ctrl, m->nu, -INFINITY, INFINITY);
    const double quad_impact_cost = mujoco_clip(
        cfg[HUMANOID_STANDUP_IMPACT_COST_WEIGHT]
            * mujoco_sum_clipped_squares_f64(d->cfrc_ext, 6 * m->nbody, -INFINITY, INFINITY),
        cfg[HUMANOID_STANDUP_IMPACT_COST_LOW], cfg[HUMANOID_STANDUP_IMPACT_COST_HIGH]);
    *reward = uph_cost - quad_ctrl_cost - quad_impact_cost + 1.0;
    double* info = env->state->info;
    info[0] = uph_cost;
    info[1] = -quad_ctrl_cost;
    info[2] = -quad_impact_cost;
    humanoid_standup_positions(env, info);
    humanoid_standup_observe(env, obs);
    return 0;
}

static void humanoid_standup_reset_model(mujoco_env* env) {
    mujoco_reset_noise(env, env->cfg[HUMANOID_STANDUP_RESET_NOISE_SCALE], 0);
}

static const mujoco_kind humanoid_standup_kind = {
    "HumanoidStandup", humanoid_standup_observe, humanoid_standup_step,
    humanoid_standup_reset_model, humanoid_standup_obs_size, 1, humanoid_standup_positions,
};

#endif
