/* Pusher-v5 (gymnasium), over MuJoCo's C API.
 *
 * Model: gymnasium's pusher_v5.xml: a 7-joint arm, a cylinder ("object") on
 * the table and a goal, 11 qpos (7 arm joints, object x, y, goal x, y),
 * 11 qvel, 7 actuators in [-2, 2].
 * Observation (23 doubles): qpos[0:7], qvel[0:7], then the body positions
 *     (xpos) of tips_arm, object and goal.
 * Reward: reward_dist + reward_ctrl + reward_near, from the state after the step:
 *     reward_near = -|object - tips_arm| * reward_near_weight,
 *     reward_dist = -|object - goal| * reward_dist_weight,
 *     reward_ctrl = -sum(action^2) * reward_control_weight (float32, as numpy
 *     computes it on the float32 action).
 * Termination: never (episodes end by truncation at max_episode_steps, 100).
 * Reset noise, in this order: the object, (U(-0.3, 0), U(-0.2, 0.2)) drawn
 *     again until it is more than 0.17 from the goal (0, 0); qpos = qpos0 with
 *     the object and goal in qpos[-4:]; qvel = U(-0.005, 0.005) with
 *     qvel[-4:] = 0. The arm's qpos gets no noise.
 * Info slots: reward_dist, reward_ctrl, reward_near.
 */
#ifndef SHOAL_MUJOCO_PUSHER_H
#define SHOAL_MUJOCO_PUSHER_H

#include "shoal_mujoco.h"

/* env->cfg, in the order of envs/mujoco/__init__.py's Pusher params. */
enum { PUSHER_REWARD_NEAR_WEIGHT, PUSHER_REWARD_DIST_WEIGHT, PUSHER_REWARD_CONTROL_WEIGHT };

enum { PUSHER_ARM_JOINTS = 7 };

static int pusher_obs_size(const mjModel* m, const double* cfg) {
    (void)cfg;
    /* -1 (a model this env cannot step) where a body it reads is missing */
    if (mj_name2id(m, mjOBJ_BODY, "tips_arm") < 0 || mj_name2id(m, mjOBJ_BODY, "object") < 0
        || mj_name2id(m, mjOBJ_BODY, "goal") < 0)
        return -1;
    return 2 * PUSHER_ARM_JOINTS + 3 * 3;
}

/* A body's frame position (gymnasium's get_body_com). */
static const double* pusher_body_pos(const mujoco_env* env, const char* name) {
    return env->d->xpos + 3 * mj_name2id(env->m, mjOBJ_BODY, name);
}

static double pusher_distance(const double* a, const double* b) {
    const double dx = a[0] - b[0], dy = a[1] - b[1], dz = a[2] - b[2];
    return sqrt(dx * dx + dy * dy + dz * dz);
}

static void pusher_observe(const mujoco_env* env, double* obs) {
    const mjData* d = env->d;
    const double* tips_arm = pusher_body_pos(env, "tips_arm");
    const double* object = pusher_body_pos(env, "object");
    const double* goal = pusher_body_pos(env, "goal");
    int k = 0;
    for (int i = 0; i < PUSHER_ARM_JOINTS; i++) obs[k++] = d->qpos[i];
    for (int i = 0; i < PUSHER_ARM_JOINTS; i++) obs[k++] = d->qvel[i];
    for (int j = 0; j < 3; j++) obs[k++] = tips_arm[j];
    for (int j = 0; j < 3; j++) obs[k++] = object[j];
    for (int j = 0; j < 3; j++) obs[k++] = goal[j];
}

static int pusher_step(mujoco_env* env, const float* action, double* obs, double* reward) {
    const double* cfg = env->cfg;
    mujoco_simulate(env, action);
    const double* tips_arm = pusher_body_pos(env, "tips_arm");
    const double* object = pusher_body_pos(env, "object");
    const double* goal = pusher_body_pos(env, "goal");
    const double reward_near = -pusher_distance(object, tips_arm) * cfg[PUSHER_REWARD_NEAR_WEIGHT];
    const double reward_dist = -pusher_distance(object, goal) * cfg[PUSHER_REWARD_DIST_WEIGHT];
    const double reward_ctrl = -mujoco_ctrl_cost(cfg[PUSHER_REWARD_CONTROL_WEIGHT], action,
                                                 env->m->nu);
    *reward = reward_dist + reward_ctrl + reward_near;   /* gymnasium's order of the sum */
    double* info = env->state->info;
    info[0] = reward_dist;
    info[1] = reward_ctrl;
    info[2] = reward_near;
    pusher_observe(env, obs);
    return 0;
}

static void pusher_reset_model(mujoco_env* env) {
    const mjModel* m = env->m;
    shoal_rng* rng = &env->state->rng;
    const double goal_x = 0.0, goal_y = 0.0;
    double object_x, object_y;
    do {   /* keep the object off the goal */
        object_x = mujoco_uniform(rng, -0.3, 0.0);
        object_y = mujoco_uniform(rng, -0.2, 0.2);
    } while (!(sqrt((object_x - goal_x) * (object_x - goal_x)
                    + (object_y - goal_y) * (object_y - goal_y)) > 0.17));
    double qpos[64], qvel[64];
    for (int i = 0; i < m->nq; i++) qpos[i] = m->qpos0[i];
    qpos[m->nq - 4] = object_x;
    qpos[m->nq - 3] = object_y;
    qpos[m->nq - 2] = goal_x;
    qpos[m->nq - 1] = goal_y;
    for (int i = 0; i < m->nv; i++) qvel[i] = mujoco_uniform(rng, -0.005, 0.005);
    for (int i = m->nv - 4; i < m->nv; i++) qvel[i] = 0.0;   /* object and goal start at rest */
    mujoco_set_state(env, qpos, qvel);
}

static const mujoco_kind pusher_kind = {
    "Pusher", pusher_observe, pusher_step, pusher_reset_model, pusher_obs_size, 0,
};

#endif
