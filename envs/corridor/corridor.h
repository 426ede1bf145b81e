/* corridor.h — Corridor, the whole env: walk to the end of a corridor.
 *
 * shoal's template env: the smallest complete header env (docs/new_env.md).
 * One agent on cells 0..CORRIDOR_LEN-1 starts on a random cell of the first
 * half. Actions: 0 steps left (a wall at cell 0), 1 steps right. Reward
 * -0.01 per step, +1 on reaching the last cell, which terminates the
 * episode; truncated after corridor_max_steps (64) steps. Observation
 * (float32 x2): position / (CORRIDOR_LEN - 1), steps / corridor_max_steps.
 */
#ifndef SHOAL_CORRIDOR_H
#define SHOAL_CORRIDOR_H

#include "../shoal_env.h"

#define CORRIDOR_LEN 16

/* The spaces (envs/shoal_env.h): sizes, step limit, obs bounds (one entry:
 * every element), action component j in [0, nvec[j]). The env's EnvSpec is
 * read off these. */
typedef float corridor_obs_t;
typedef int32_t corridor_act_t;
enum { corridor_agents = 1, corridor_obs_size = 2, corridor_act_size = 1, corridor_max_steps = 64 };
static const corridor_obs_t corridor_obs_low[] = {0.0f}, corridor_obs_high[] = {1.0f};
static const corridor_act_t corridor_act_nvec[] = {2};

typedef struct {
    int32_t pos;
    int32_t steps;
    shoal_rng rng;
} corridor_env;

SHOAL_FN void corridor_write_obs(const corridor_env* env, float* obs) {
    obs[0] = (float)env->pos / (CORRIDOR_LEN - 1);
    obs[1] = (float)env->steps / corridor_max_steps;
}

SHOAL_FN void corridor_seed(corridor_env* env, uint64_t seed) { shoal_rng_seed(&env->rng, seed); }

SHOAL_FN void corridor_reset(corridor_env* env, float* obs, uint8_t* mask) {
    env->pos = (int32_t)shoal_rng_below(&env->rng, CORRIDOR_LEN / 2);
    env->steps = 0;
    corridor_write_obs(env, obs);
    mask[0] = 1;
}

SHOAL_FN int corridor_step(corridor_env* env, const int32_t* act, float* obs, float* rew,
                           uint8_t* term, uint8_t* trunc, uint8_t* mask) {
    env->pos += act[0] == 1 ? 1 : -1;
    if (env->pos < 0) env->pos = 0;
    env->steps += 1;
    const int arrived = env->pos == CORRIDOR_LEN - 1;
    const int out_of_time = env->steps >= corridor_max_steps;
    corridor_write_obs(env, obs);
    rew[0] = arrived ? 1.0f : -0.01f;
    term[0] = (uint8_t)arrived;
    trunc[0] = (uint8_t)out_of_time;   /* as gymnasium's TimeLimit: terminated on that step too or not */
    mask[0] = 1;
    return arrived || out_of_time;
}

#endif /* SHOAL_CORRIDOR_H */
