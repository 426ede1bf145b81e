/* cartpole.h — CartPole, the whole env: gymnasium's CartPole-v1 dynamics.
 *
 * A pole on a cart; push the cart left (action 0) or right (action 1) by a
 * fixed force. Reward 1 for every step, including the one that ends the
 * episode; stepped on after the pole fell (no reset: autoreset disabled),
 * 0 for every step it is still down, as gymnasium's CartPole-v1 pays. The
 * episode terminates when the cart leaves [-2.4, 2.4] or the
 * pole tilts past 12 degrees, and is truncated after 500 steps (gymnasium's
 * TimeLimit for CartPole-v1). Constants, the Euler integrator and the
 * thresholds are gymnasium's; physics runs in float32 here (gymnasium's in
 * float64), so states agree to float32 tolerance.
 *
 * Observation (float32 x4): cart position, cart velocity, pole angle, pole
 * angular velocity. Reset draws all four uniformly from [-0.05, 0.05).
 */
#ifndef SHOAL_CARTPOLE_H
#define SHOAL_CARTPOLE_H

#include "../shoal_env.h"

#define CARTPOLE_GRAVITY 9.8f
#define CARTPOLE_MASSCART 1.0f
#define CARTPOLE_MASSPOLE 0.1f
#define CARTPOLE_TOTAL_MASS (CARTPOLE_MASSPOLE + CARTPOLE_MASSCART)
#define CARTPOLE_LENGTH 0.5f /* half the pole's length */
#define CARTPOLE_POLEMASS_LENGTH (CARTPOLE_MASSPOLE * CARTPOLE_LENGTH)
#define CARTPOLE_FORCE_MAG 10.0f
#define CARTPOLE_TAU 0.02f /* seconds per step */
#define CARTPOLE_THETA_LIMIT (12.0f * 2.0f * 3.14159265358979323846f / 360.0f)
#define CARTPOLE_X_LIMIT 2.4f
#define CARTPOLE_MAX_STEPS 500

typedef float cartpole_obs_t;
typedef int32_t cartpole_act_t;
enum { cartpole_agents = 1, cartpole_obs_size = 4, cartpole_act_size = 1,
       cartpole_max_steps = CARTPOLE_MAX_STEPS };
/* gymnasium's CartPole-v1 observation space: twice the termination limits. */
static const cartpole_obs_t cartpole_obs_high[] = {2.0f * CARTPOLE_X_LIMIT, INFINITY,
                                                   2.0f * CARTPOLE_THETA_LIMIT, INFINITY};
static const cartpole_obs_t cartpole_obs_low[] = {-2.0f * CARTPOLE_X_LIMIT, -INFINITY,
                                                  -2.0f * CARTPOLE_THETA_LIMIT, -INFINITY};
static const cartpole_act_t cartpole_act_nvec[] = {2}; /* 0 push left, 1 push right */

typedef struct {
    float x, x_dot, theta, theta_dot;
    int32_t steps; /* steps taken in this episode */
    int32_t fell;  /* the pole fell in this episode (gymnasium's steps_beyond_terminated set) */
    shoal_rng rng;
} cartpole_env;

SHOAL_FN void cartpole_write_obs(const cartpole_env* env, float* obs) {
    obs[0] = env->x;
    obs[1] = env->x_dot;
    obs[2] = env->theta;
    obs[3] = env->theta_dot;
}

SHOAL_FN void cartpole_seed(cartpole_env* env, uint64_t seed) {
    shoal_rng_seed(&env->rng, seed);
}

SHOAL_FN void cartpole_reset(cartpole_env* env, float* obs, uint8_t* mask) {
    env->x = shoal_rng_uniform(&env->rng, -0.05f, 0.05f);
    env->x_dot = shoal_rng_uniform(&env->rng, -0.05f, 0.05f);
    env->theta = shoal_rng_uniform(&env->rng, -0.05f, 0.05f);
    env->theta_dot = shoal_rng_uniform(&env->rng, -0.05f, 0.05f);
    env->steps = 0;
    env->fell = 0;
    cartpole_write_obs(env, obs);
    mask[0] = 1;
}

/* Advance the physics one step (gymnasium's "euler" integrator). Returns
 * whether the new state is out of bounds. Split out so tests can drive the
 * dynamics from arbitrary states. */
SHOAL_FN int cartpole_physics(cartpole_env* env, int32_t action) {
    const float force = action == 1 ? CARTPOLE_FORCE_MAG : -CARTPOLE_FORCE_MAG;
    const float costheta = cosf(env->theta);
    const float sintheta = sinf(env->theta);
    const float temp = (force + CARTPOLE_POLEMASS_LENGTH * env->theta_dot *
                                    env->theta_dot * sintheta) /
                       CARTPOLE_TOTAL_MASS;
    const float thetaacc =
        (CARTPOLE_GRAVITY * sintheta - costheta * temp) /
        (CARTPOLE_LENGTH * (4.0f / 3.0f - CARTPOLE_MASSPOLE * costheta *
                                              costheta / CARTPOLE_TOTAL_MASS));
    const float xacc =
        temp - CARTPOLE_POLEMASS_LENGTH * thetaacc * costheta / CARTPOLE_TOTAL_MASS;
    env->x += CARTPOLE_TAU * env->x_dot;
    env->x_dot += CARTPOLE_TAU * xacc;
    env->theta += CARTPOLE_TAU * env->theta_dot;
    env->theta_dot += CARTPOLE_TAU * thetaacc;
    return env->x < -CARTPOLE_X_LIMIT || env->x > CARTPOLE_X_LIMIT ||
           env->theta < -CARTPOLE_THETA_LIMIT || env->theta > CARTPOLE_THETA_LIMIT;
}

SHOAL_FN int cartpole_step(cartpole_env* env, const int32_t* act, float* obs,
                           float* rew, uint8_t* term, uint8_t* trunc,
                           uint8_t* mask) {
    const int terminated = cartpole_physics(env, act[0]);
    env->steps += 1;
    const int truncated = env->steps >= CARTPOLE_MAX_STEPS;
    cartpole_write_obs(env, obs);
    rew[0] = 1.0f;
    if (terminated) { /* rare: the state is only read and written on a fall */
        if (env->fell) rew[0] = 0.0f;
        env->fell = 1;
    }
    term[0] = (uint8_t)terminated;
    trunc[0] = (uint8_t)truncated;
    mask[0] = 1;
    return terminated || truncated;
}

#endif /* SHOAL_CARTPOLE_H */
