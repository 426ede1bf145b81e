/* shoal_mujoco.h — what every MuJoCo env of shoal shares.
 *
 * MuJoCo envs are shoal's second kind of env (docs/design.md, "Library-backed
 * envs"). A header env keeps its whole state in a pointer-free struct in the
 * pool's shared memory and compiles for the GPU too. A MuJoCo env cannot: its
 * state is an mjData, full of pointers, made by libmujoco. So:
 *
 *   shared memory  `mujoco_state`: the env's RNG, step count and last step's
 *                  info values (reward terms, positions; after a reset,
 *                  the positions alone, zeros elsewhere). Pointer-free, in
 *                  the pool's env_states buffer like any env struct.
 *   the worker     `mujoco_env`: the env's mjData, the worker's one mjModel
 *                  (loaded once, shared by every env of its block), the
 *                  env's parameters and a pointer to its mujoco_state.
 *
 * Everything else is the header-env contract: shoal_vec.h (included by
 * library.c) runs autoreset and episode bookkeeping through the three
 * functions it asks of an env (mujoco_seed, mujoco_reset, mujoco_step),
 * so the seed rule, autoreset modes and episode statistics are the same
 * code as for CartPole. There is no CUDA kernel.
 *
 * An env (half_cheetah.h, hopper.h, ...) is a `mujoco_kind`: its observation,
 * its step (physics through mujoco_simulate, then reward and termination)
 * and its reset noise, reading its parameters from env->cfg in the order
 * its Python spec lists them (envs/mujoco/__init__.py).
 */
#ifndef SHOAL_MUJOCO_H
#define SHOAL_MUJOCO_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include <mujoco/mujoco.h>

#include "shoal_env.h"

/* Info values per env: the most any kind writes (Humanoid: 9 numbers and
 * its 2 tendons' lengths and velocities). */
#define MUJOCO_INFO_SLOTS 13
#define MUJOCO_INFO_TENDONS 2

/* One env's part of the pool's shared memory (the env_states buffer). */
typedef struct {
    shoal_rng rng;
    int32_t elapsed_steps;                 /* steps of the episode in progress */
    int32_t pad_;
    double info[MUJOCO_INFO_SLOTS];        /* the last step's info values, named per env in Python */
    double final_info[MUJOCO_INFO_SLOTS];  /* info when the last reset began: in SAME_STEP, the
                                              ended step's (the pool's final_info) */
} mujoco_state;

struct mujoco_kind;

/* One env as its worker holds it. */
typedef struct {
    const mjModel* m;                      /* the worker's model, shared by its block */
    mjData* d;                             /* this env's physics state */
    mujoco_state* state;                   /* this env's slot in shared memory */
    const struct mujoco_kind* kind;
    const double* cfg;                     /* parameters, in the kind's order */
    int obs_size, act_size;
    int frame_skip, max_steps;             /* max_steps <= 0: no truncation */
    double dt;                             /* timestep * frame_skip */
} mujoco_env;

typedef struct mujoco_kind {
    const char* name;
    /* Writes the observation of the current state. */
    void (*observe)(const mujoco_env* env, double* obs);
    /* Applies the action (through mujoco_simulate), writes obs, returns the
     * reward through *reward and whether the episode terminated. */
    int (*step)(mujoco_env* env, const float* action, double* obs, double* reward);
    /* After mj_resetData: sets the initial qpos/qvel with reset noise drawn
     * from env->state->rng (through mujoco_set_state). */
    void (*reset_model)(mujoco_env* env);
    /* Observation size for this model and parameters. */
    int (*obs_size)(const mjModel* m, const double* cfg);
    int needs_rne_post_constraint;         /* the obs reads cfrc_ext / cacc */
    /* Writes the position info slots (x_position, ...) of the current state:
     * after a step, and after a reset, whose info gymnasium gives as these
     * positions alone. NULL where gymnasium's reset info is empty. */
    void (*positions)(const mujoco_env* env, double* info);
} mujoco_kind;

/* The names shoal_vec.h asks of an env with prefix `mujoco`. */
typedef double mujoco_obs_t;
typedef float mujoco_act_t;
enum { mujoco_agents = 1 };

/* ---- random numbers for reset noise (from the env's shoal_rng) ---------- */

/* Uniform double in [lo, hi): 53 random bits. */
static inline double mujoco_uniform(shoal_rng* rng, double lo, double hi) {
    double unit = (double)(shoal_rng_u64(rng) >> 11) * (1.0 / 9007199254740992.0);
    return lo + (hi - lo) * unit;
}

/* Standard normal (Box-Muller; one draw per call, so the stream position
 * never depends on a cached second value). */
static inline double mujoco_normal(shoal_rng* rng) {
    double u1 = 1.0 - mujoco_uniform(rng, 0.0, 1.0);   /* (0, 1]: log is finite */
    double u2 = mujoco_uniform(rng, 0.0, 1.0);
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

/* ---- helpers the envs share --------------------------------------------- */

/* Sets qpos / qvel and recomputes the derived quantities, as gymnasium's
 * MujocoEnv.set_state (mj_forward). */
static inline void mujoco_set_state(mujoco_env* env, const double* qpos, const double* qvel) {
    memcpy(env->d->qpos, qpos, sizeof(double) * env->m->nq);
    memcpy(env->d->qvel, qvel, sizeof(double) * env->m->nv);
    mj_forward(env->m, env->d);
}

/* The ctrl, frame_skip mj_steps, and (where the obs reads contact forces)
 * mj_rnePostConstraint: gymnasium's MujocoEnv.do_simulation. gymnasium calls
 * mj_rnePostConstraint after every step; it only fills cacc / cfrc_int /
 * cfrc_ext, which no later mj_step reads, so envs that never observe them
 * skip it with identical results. */
static inline void mujoco_simulate(mujoco_env* env, const float* action) {
    const mjModel* m = env->m;
    mjData* d = env->d;
    for (int j = 0; j < m->nu; j++) d->ctrl[j] = (double)action[j];
    for (int k = 0; k < env->frame_skip; k++) mj_step(m, d);
    if (env->kind->needs_rne_post_constraint) mj_rnePostConstraint(m, d);
}

/* sum(action ** 2) as numpy computes it for gymnasium's float32 actions
 * (float32 squares, float32 pairwise sum: eight running sums for n >= 8),
 * so control costs match gymnasium's to the last bit. */
static inline float mujoco_sum_squares_f32(const float* a, int n) {
    if (n < 8) {
        float s = 0.0f;   /* numpy starts from -0.0; equal for sums of squares */
        for (int i = 0; i < n; i++) s += a[i] * a[i];
        return s;
    }
    float r[8];
    for (int j = 0; j < 8; j++) r[j] = a[j] * a[j];
    int i = 8;
    for (; i < n - (n % 8); i += 8)
        for (int j = 0; j < 8; j++) r[j] += a[i + j] * a[i + j];
    float s = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
    for (; i < n; i++) s += a[i] * a[i];
    return s;
}

/* weight * sum(action ** 2) as gymnasium computes it: numpy (NEP 50) keeps
 * a Python float times a float32 in float32. */
static inline double mujoco_ctrl_cost(double weight, const float* action, int n) {
    return (double)((float)weight * mujoco_sum_squares_f32(action, n));
}

/* Adds uniform noise in [-scale, scale) to the model's initial qpos and, with
 * `normal_qvel`, scale * N(0, 1) (else the same uniform noise) to zero qvel:
 * the two reset-noise shapes gymnasium's locomotion envs use. */
static inline void mujoco_reset_noise(mujoco_env* env, double scale, int normal_qvel) {
    const mjModel* m = env->m;
    double qpos[64], qvel[64];   /* nq, nv <= 64 is checked when the block is made */
    shoal_rng* rng = &env->state->rng;
    for (int i = 0; i < m->nq; i++) qpos[i] = m->qpos0[i] + mujoco_uniform(rng, -scale, scale);
    for (int i = 0; i < m->nv; i++)
        qvel[i] = normal_qvel ? scale * mujoco_normal(rng) : mujoco_uniform(rng, -scale, scale);
    mujoco_set_state(env, qpos, qvel);
}

/* ---- the three functions shoal_vec.h asks of an env --------------------- */

static inline void mujoco_seed(mujoco_env* env, uint64_t seed) {
    shoal_rng_seed(&env->state->rng, seed);
}

static inline void mujoco_reset(mujoco_env* env, double* obs, uint8_t* mask) {
    mj_resetData(env->m, env->d);
    env->kind->reset_model(env);
    env->state->elapsed_steps = 0;
    for (int k = 0; k < MUJOCO_INFO_SLOTS; k++) {
        env->state->final_info[k] = env->state->info[k];
        env->state->info[k] = 0.0;
    }
    if (env->kind->positions) env->kind->positions(env, env->state->info);
    env->kind->observe(env, obs);
    mask[0] = 1;
}

static inline int mujoco_step(mujoco_env* env, const float* action, double* obs, float* rew,
                              uint8_t* term, uint8_t* trunc, uint8_t* mask) {
    double reward = 0.0;
    int terminated = env->kind->step(env, action, obs, &reward);
    env->state->elapsed_steps += 1;
    /* gymnasium's TimeLimit: truncated once the limit is reached, whether or
     * not the episode also terminated on that step. */
    int truncated = env->max_steps > 0 && env->state->elapsed_steps >= env->max_steps;
    rew[0] = (float)reward;
    term[0] = (uint8_t)terminated;
    trunc[0] = (uint8_t)truncated;
    mask[0] = 1;
    return terminated || truncated;
}

/* gymnasium's tendon_length and tendon_velocity info arrays (the Humanoids'
 * hip-to-knee tendons), from info slot `first`: n lengths, then n velocities,
 * n = the model's tendons. A model with more than MUJOCO_INFO_TENDONS has no
 * room for them; Python then leaves both keys out. */
static void mujoco_tendon_info(const mujoco_env* env, double* info, int first) {
    const int n = env->m->ntendon;
    if (n > MUJOCO_INFO_TENDONS) return;
    for (int t = 0; t < n; t++) {
        info[first + t] = env->d->ten_length[t];
        info[first + n + t] = env->d->ten_velocity[t];
    }
}

/* ---- float64 sums as numpy computes them -------------------------------- */

/* np.clip(v, low, high), i.e. minimum(maximum(v, low), high): NaN stays NaN. */
static inline double mujoco_clip(double v, double low, double high) {
    v = v < low ? low : v;
    return v > high ? high : v;
}

/* sum(clip(x, low, high) ** 2) of n float64 values as numpy computes it:
 * pairwise summation (eight running sums per block of up to 128 values,
 * longer arrays halved recursively), so contact and control costs computed
 * on float64 data match gymnasium's to the last bit. Pass -INFINITY,
 * INFINITY for no clipping. */
static double mujoco_sum_clipped_squares_f64(const double* x, int n, double low, double high) {
    if (n < 8) {
        double s = 0.0;
        for (int i = 0; i < n; i++) {
            const double c = mujoco_clip(x[i], low, high);
            s += c * c;
        }
        return s;
    }
    if (n <= 128) {
        double r[8];
        for (int j = 0; j < 8; j++) {
            const double c = mujoco_clip(x[j], low, high);
            r[j] = c * c;
        }
        int i = 8;
        for (; i < n - (n % 8); i += 8)
            for (int j = 0; j < 8; j++) {
                const double c = mujoco_clip(x[i + j], low, high);
                r[j] += c * c;
            }
        double s = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
        for (; i < n; i++) {
            const double c = mujoco_clip(x[i], low, high);
            s += c * c;
        }
        return s;
    }
    int half = n / 2;
    half -= half % 8;
    return mujoco_sum_clipped_squares_f64(x, half, low, high)
         + mujoco_sum_clipped_squares_f64(x + half, n - half, low, high);
}

#endif /* SHOAL_MUJOCO_H */
