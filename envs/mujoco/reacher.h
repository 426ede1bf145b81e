/* Reacher-v5 (gymnasium), over MuJoCo's C API.
 *
 * Model: gymnasium's reacher.xml: a two-link arm in the plane and a target,
 * 4 qpos (2 arm joints, target x, target y), 4 qvel, 2 actuators in [-1, 1].
 * Observation (10 doubles): cos(qpos[0:2]), sin(qpos[0:2]), qpos[2:] (the
 *     target), qvel[0:2], (fingertip - target)[0:2] (body positions xpos).
 * Reward: reward_dist + reward_ctrl, both from the state after the step:
 *     reward_dist = -|fingertip - target| * reward_dist_weight,
 *     reward_ctrl = -sum(action^2) * reward_control_weight (float32, as numpy
 *     computes it on the float32 action).
 * Termination: never (episodes end by truncation at max_episode_steps, 50).
 * Reset noise, in this order: qpos = qpos0 + U(-0.1, 0.1); the goal, (U(-0.2, 0.2),
 *     U(-0.2, 0.2)) drawn again until its norm is < 0.2, into qpos[-2:];
 *     qvel = U(-0.005, 0.005) with qvel[-2:] = 0 (the target does not move).
 * Info slots: reward_dist, reward_ctrl.
 */
#ifndef SHOAL_MUJOCO_REACHER_H
#define SHOAL_MUJOCO_REACHER_H

#include "shoal_mujoco.h"

/* env->cfg, in the order of envs/mujoco/__init__.py's Reacher params. */
enum { REACHER_REWARD_DIST_WEIGHT, REACHER_REWARD_CONTROL_WEIGHT };

static int reacher_obs_size(const mjModel* m, const double* cfg) {
    (void)cfg;
    /* -1 (a model this env cannot step) where a body it reads is missing */
    if (mj_name2id(m, mjOBJ_BODY, "fingertip") < 0 || mj_name2id(m, mjOBJ_BODY, "target") < 0)
        return -1;
    return m->nq + 6;
}

/* fingertip - target, from the bodies' frame positions (gymnasium's get_body_com). */
static void reacher_fingertip_to_target(const mujoco_env* env, double* vec) {
    const int fingertip = mj_name2id(env->m, mjOBJ_BODY, "fingertip");
    const int target = mj_name2id(env->m, mjOBJ_BODY, "target");
    for (int j = 0; j < 3; j++) vec[j] = env->d->xpos[3 * fingertip + j] - env->d->xpos[3 * target + j];
}

static void reacher_observe(const mujoco_env* env, double* obs) {
    const mjData* d = env->d;
    double vec[3];
    reacher_fingertip_to_target(env, vec);
    int k = 0;
    obs[k++] = cos(d->qpos[0]);
    obs[k++] = cos(d->qpos[1]);
    obs[k++] = sin(d->qpos[0]);
    obs[k++] = sin(d->qpos[1]);
    for (int i = 2; i < env->m->nq; i++) obs[k++] = d->qpos[i];
    obs[k++] = d->qvel[0];
    obs[k++] = d->qvel[1];
    obs[k++] = vec[0];
    obs[k++] = vec[1];
}

static int reacher_step(mujoco_env* env, const float* action, double* obs, double* reward) {
    const double* cfg = env->cfg;
    mujoco_simulate(env, action);
    double vec[3];
    reacher_fingertip_to_target(env, vec);
    const double distance = sqrt(vec[0] * vec[0] + vec[1] * vec[1] + vec[2] * vec[2]);
    const double reward_dist = -distance * cfg[REACHER_REWARD_DIST_WEIGHT];
    const double reward_ctrl = -mujoco_ctrl_cost(cfg[REACHER_REWARD_CONTROL_WEIGHT], action,
                                                 env->m->nu);
    *reward = reward_dist + reward_ctrl;
    env->state->info[0] = reward_dist;
    env->state->info[1] = reward_ctrl;
    reacher_observe(env, obs);
    return 0;
}

static void reacher_reset_model(mujoco_env* env) {
    const mjModel* m = env->m;
    shoal_rng* rng = &env->state->rng;
    double qpos[64], qvel[64];
    for (int i = 0; i < m->nq; i++) qpos[i] = mujoco_uniform(rng, -0.1, 0.1) + m->qpos0[i];
    double goal_x, goal_y;
    do {   /* uniform in the disc of radius 0.2, by rejection */
        goal_x = mujoco_uniform(rng, -0.2, 0.2);
        goal_y = mujoco_uniform(rng, -0.2, 0.2);
    } while (!(sqrt(goal_x * goal_x + goal_y * goal_y) < 0.2));
    qpos[m->nq - 2] = goal_x;
    qpos[m->nq - 1] = goal_y;
    for (int i = 0; i < m->nv; i++) qvel[i] = mujoco_uniform(rng, -0.005, 0.005);
    qvel[m->nv - 2] = 0.0;
    qvel[m->nv - 1] = 0.0;
    mujoco_set_state(env, qpos, qvel);
}

static const mujoco_kind reacher_kind = {
    "Reacher", reacher_observe, reacher_step, reacher_reset_model, reacher_obs_size, 0,
};

#endif
