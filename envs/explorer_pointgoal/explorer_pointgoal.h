/* explorer_pointgoal.h — Explorer's PointGoal task under its own env name.
 *
 * The env is envs/explorer/explorer.h compiled with EXPLORER_TASK set to
 * PointGoal (see that header for the rules, obs layout, actions and
 * rewards). Envs are registered per folder and every backend looks up
 * <folder>/<folder>.h with the <folder>_ prefix, so this file only picks the
 * task and renames the entry points; there is no second copy of the env.
 */
#ifndef SHOAL_EXPLORER_POINTGOAL_H
#define SHOAL_EXPLORER_POINTGOAL_H

#define EXPLORER_TASK EXPLORER_TASK_POINTGOAL
#include "../explorer/explorer.h"

typedef explorer_env explorer_pointgoal_env;
typedef explorer_obs_t explorer_pointgoal_obs_t;
typedef explorer_act_t explorer_pointgoal_act_t;
enum {
    explorer_pointgoal_agents = explorer_agents,
    explorer_pointgoal_obs_size = explorer_obs_size,
    explorer_pointgoal_act_size = explorer_act_size,
    explorer_pointgoal_max_steps = explorer_max_steps
};
#define explorer_pointgoal_obs_low explorer_obs_low
#define explorer_pointgoal_obs_high explorer_obs_high
#define explorer_pointgoal_act_nvec explorer_act_nvec

SHOAL_FN void explorer_pointgoal_seed(explorer_env* env, uint64_t seed) {
    explorer_seed(env, seed);
}

SHOAL_FN void explorer_pointgoal_reset(explorer_env* env, float* obs, uint8_t* mask) {
    explorer_reset(env, obs, mask);
}

SHOAL_FN int explorer_pointgoal_step(explorer_env* env, const int32_t* act, float* obs, float* rew,
                                     uint8_t* term, uint8_t* trunc, uint8_t* mask) {
    return explorer_step(env, act, obs, rew, term, trunc, mask);
}

#endif /* SHOAL_EXPLORER_POINTGOAL_H */
